"""The Python entry point, the JSON contract, pipelines and packaging, over the whole corpus."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest
import stablehlo_perf as sp
from conftest import ROOT, corpus_files
from jaxlib.mlir import ir
from stablehlo_perf.analysis.targets import list_targets
from stablehlo_perf.passes.ir import InputError, parse_module
from stablehlo_perf.passes.pipeline import PipelineError, default_pipeline, parse_pipeline
from stablehlo_perf.passes.registry import PASSES, describe_passes, pass_class

OP_KEYS = {"id", "name", "loc", "cycles", "latency_ns", "flops", "bytes", "dram_bytes", "model",
           "critical", "slack_ns"}  # fmt: skip


@pytest.mark.parametrize("path", corpus_files(), ids=lambda p: p.stem)
def test_corpus_module_annotates_reparses_and_reports(path: Path, ctx):
    res = sp.analyze(path.read_text(), target="tpu-v4", filename=str(path))
    report = json.loads(res.to_json())
    assert report["target"] == "tpu-v4"
    assert report["total_latency_ns"] > 0
    assert 0 < report["critical_path_ns"] <= report["work_ns"] + 1e-6
    assert report["critical_path"], "every module has a critical path"
    ids = {op["id"] for op in report["ops"]}
    assert set(report["critical_path"]) <= ids
    for op in report["ops"]:
        assert OP_KEYS <= set(op)
        assert op["model"], op
    with ctx:
        again = parse_module(res.annotated_ir, "annotated", ctx)
        assert again.operation.verify()
        annotated = [o for o in _walk(again.operation) if "perf.model" in o.attributes]
    assert len(annotated) == len(report["ops"])


def _walk(op):
    for region in op.regions:
        for block in region.blocks:
            for child in block.operations:
                yield child.operation
                yield from _walk(child.operation)


def test_scan_trip_count_multiplies_body():
    text = (ROOT / "test_ir/corpus/scan.mlir").read_text()
    res = sp.analyze(text, target="tpu-v5e")
    (loop,) = [o for o in res.report.ops if o.name == "stablehlo.while"]
    assert loop.model == "while(x8, copies: 1 a trip, 2 before)"  # as XLA inserts them
    body = [o for o in res.report.ops if o.func == "main" and o.id > loop.id and not o.top_level]
    assert body, "the loop body ops are annotated too"


def test_dynamic_trip_count_is_a_caveat():
    res = sp.analyze((ROOT / "test_ir/corpus/while_dynamic.mlir").read_text(), target="h100")
    assert any("trip count not static" in c for c in res.report.caveats)


def test_module_input_is_cloned_not_mutated(ctx):
    text = (ROOT / "test_ir/corpus/mlp.mlir").read_text()
    with ctx:
        module = ir.Module.parse(text)
        before = str(module)
        res = sp.analyze(module, target="tpu-v5e")
        assert str(module) == before
    assert "perf.latency_ns" in res.annotated_ir


def test_jax_lowered_input():
    lowered = jax.jit(lambda a, b: jnp.tanh(a @ b)).lower(jnp.ones((8, 16)), jnp.ones((16, 4)))
    res = sp.analyze(lowered, target="h100")
    dot = next(o for o in res.report.ops if o.name == "stablehlo.dot_general")
    assert dot.flops == 2 * 8 * 4 * 16
    assert res.report.target == "h100"


def test_report_totals_are_entry_function_sums():
    # Without perf-inline-calls, so the calls stay and carry their callees' costs.
    pipeline = default_pipeline("tpu-v5e").replace("perf-inline-calls,", "")
    res = sp.analyze(
        (ROOT / "test_ir/corpus/nested_call.mlir").read_text(), target="tpu-v5e", pipeline=pipeline
    )
    top = [o for o in res.report.ops if o.top_level]
    assert res.report.work_ns == pytest.approx(sum(o.latency_ns for o in top))
    calls = [o for o in top if o.name == "func.call"]
    assert calls and all(o.model.startswith("call(@") for o in calls)


def test_markdown_report_sections():
    md = sp.analyze((ROOT / "test_ir/corpus/attention.mlir").read_text()).to_markdown()
    assert "## Top" in md and "## Critical path" in md
    assert "tpu-v5e" in md and "datasheet roofline" in md


def test_bad_input_raises_input_error():
    with pytest.raises(InputError) as e:
        sp.analyze("func.func @f( {", filename="bad.mlir")
    assert str(e.value).startswith("bad.mlir:1:")


def test_pipeline_parsing():
    passes = parse_pipeline(
        "builtin.module(perf-op-info, perf-annotate-cycles{target=h100}, perf-critical-path)"
    )
    assert [p.name for p in passes] == [
        "perf-op-info",
        "perf-annotate-cycles",
        "perf-critical-path",
    ]
    assert passes[1].target == "h100"
    with pytest.raises(PipelineError, match="malformed pass pipeline"):
        parse_pipeline("builtin.module(perf-op-info")
    with pytest.raises(PipelineError, match="unsupported anchor"):
        parse_pipeline("gpu.module(perf-op-info)")


def test_a_pass_that_fails_to_import_is_no_malformed_pipeline(monkeypatch) -> None:
    """A pass whose module fails to import (a new module missing from an install) raises that
    error, not a "malformed pass pipeline" that blames the text."""
    from stablehlo_perf.passes import pipeline

    def broken(name: str):
        raise ModuleNotFoundError("No module named 'stablehlo_perf.analysis.missing'")

    monkeypatch.setattr(pipeline, "pass_class", broken)
    with pytest.raises(ModuleNotFoundError, match="analysis.missing"):
        parse_pipeline("builtin.module(perf-op-info)")


def test_registry_names_match_passes():
    for name in PASSES:
        assert pass_class(name).name == name
    docs = {d.name: d for d in describe_passes()}
    assert docs["perf-annotate-cycles"].options[0][0] == "target"


def test_packages_list_matches_folders():
    """Every code and data folder is installed (setuptools needs an explicit list)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    mapping = config["package-dir"]
    found = {"stablehlo_perf"}
    for top in ("passes", "analysis", "runtime"):
        for init in (ROOT / top).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT).parts
            found.add(".".join(("stablehlo_perf", *rel)))
    assert found <= listed
    for pkg in listed:
        assert (
            ROOT / mapping.get(pkg, pkg.replace("stablehlo_perf.", "").replace(".", "/"))
        ).is_dir()


def test_cli_writes_trace_and_plot(tmp_path):
    from stablehlo_perf.passes.cli import main

    trace, plot = tmp_path / "t.json", tmp_path / "p.png"
    src = str(ROOT / "test_ir/corpus/attention.mlir")
    assert (
        main([src, "-o", str(tmp_path / "o.mlir"), "--trace", str(trace), "--plot", str(plot)]) == 0
    )
    events = json.loads(trace.read_text())["traceEvents"]
    tracks = {e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    assert {"main: mxu", "main: vpu"} <= tracks, "one track per TPU unit"
    slices = [e for e in events if e["ph"] == "X"]
    assert slices and all(e["dur"] > 0 for e in slices)
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o.mlir", "p.png", "t.json"]


def test_terminal_summary_names_totals_and_models():
    import io

    from stablehlo_perf.analysis.terminal import print_summary

    res = sp.analyze((ROOT / "test_ir/corpus/scan.mlir").read_text(), target="h100")
    out = io.StringIO()
    print_summary(res.report, file=out)
    text = out.getvalue()
    assert "h100" in text and "while(x8," in text and "critical path (" in text


def test_calibrated_targets_get_intervals_and_the_lasso_cross_check():
    text = (ROOT / "test_ir/corpus/mlp.mlir").read_text()
    v4 = sp.analyze(text, target="tpu-v4").report
    dots = [o for o in v4.ops if o.name == "stablehlo.dot_general"]
    assert all(o.latency_p10_ns < o.latency_ns < o.latency_p90_ns for o in dots)
    assert v4.module_estimate is None, "no whole-program TPU v4 measurements to train a LASSO on"
    host = json.loads(sp.analyze(text, target="host").to_json())
    assert host["module_estimate"]["model"] == "cc4cs-lasso"
    assert "measured on this host" in host["module_estimate"]["trained_on"]


@pytest.mark.parametrize("target", list_targets())
def test_every_target_analyses_conv_and_loop_programs(target: str):
    """Each target's default pipeline on programs with a convolution and a while loop:
    every op annotated, a positive total (GPU targets once failed on convolutions)."""
    for name in ("conv_net", "scan"):
        text = (ROOT / f"test_ir/corpus/{name}.mlir").read_text()
        res = sp.analyze(text, target=target)
        assert res.report.total_latency_ns > 0
        assert all(o.model for o in res.report.ops)
