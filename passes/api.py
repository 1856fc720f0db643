"""Python entry point: `analyze(text | ir.Module | jax Lowered, target=...)`."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from jaxlib.mlir import ir, passmanager
from stablehlo_perf.analysis.report import Report
from stablehlo_perf.analysis.targets import DEFAULT_TARGET, load_target
from stablehlo_perf.passes.base import AnalysisCache, PerfPass
from stablehlo_perf.passes.ir import make_context, parse_module
from stablehlo_perf.passes.pipeline import default_pipeline, parse_pipeline
from stablehlo_perf.passes.report import collect_report

__all__ = ["AnalysisResult", "analyze", "module_text", "run_passes"]


@dataclass
class AnalysisResult:
    """The annotated module (a clone: the caller's module is never touched) and its report."""

    module: ir.Module
    report: Report

    @property
    def annotated_ir(self) -> str:
        return module_text(self.module)

    def to_json(self, indent: int | None = 2) -> str:
        return self.report.to_json(indent)

    def to_markdown(self) -> str:
        return self.report.to_markdown()

    def __str__(self) -> str:
        return self.report.to_markdown()


def module_text(module: ir.Module) -> str:
    """Textual IR with location info, so the annotated module keeps source positions."""
    return module.operation.get_asm(enable_debug_info=True, assume_verified=True)


def run_passes(
    module: ir.Module, passes: list[PerfPass], filename: str, timing: bool = False
) -> AnalysisCache:
    """Run Python-defined passes inside one MLIR PassManager (MLIR's own timing and verification)."""
    cache = AnalysisCache(filename=filename)
    with module.context:
        pm = passmanager.PassManager("builtin.module")
        for p in passes:
            pm.add(lambda op, _pass, p=p: p.apply(op, cache), p.name)
        if timing:
            pm.enable_timing()
        pm.run(module.operation)
    return cache


def _target_of(passes: list[PerfPass], fallback: str) -> str:
    for p in passes:
        if hasattr(p, "target"):
            return p.target
    return fallback


def analyze(
    module: Any,
    target: str | None = None,
    pipeline: str | None = None,
    filename: str = "<input>",
    timing: bool = False,
    branches: str | None = None,
) -> AnalysisResult:
    """Annotate a StableHLO module and build its report.

    `module` is StableHLO text, an `ir.Module` (cloned, never mutated) or a
    JAX `Lowered` (from `jax.jit(f).lower(...)`). `branches` sets the branch
    policy (`max` or `mean`) of every pass in the pipeline that has one.
    """
    if hasattr(module, "as_text") and not isinstance(module, (str, ir.Module)):
        text = module.as_text(debug_info=True)
    elif isinstance(module, ir.Module):
        text = module_text(module)
    else:
        text = str(module)
    target_name = target or DEFAULT_TARGET
    passes = parse_pipeline(pipeline or default_pipeline(target_name))
    if branches is not None:
        passes = [
            dataclasses.replace(p, branches=branches) if hasattr(p, "branches") else p
            for p in passes
        ]
    tgt = load_target(_target_of(passes, target_name))
    ctx = make_context()
    with ctx:
        parsed = parse_module(text, filename, ctx)
        cache = run_passes(parsed, passes, filename, timing=timing)
        report = collect_report(cache.view(parsed.operation), cache, tgt)
    return AnalysisResult(module=parsed, report=report)
