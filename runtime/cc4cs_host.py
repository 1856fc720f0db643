"""CC4CS on the live backend: executed-op features of an analysed module, the module-level
LASSO cross-check, and the host per-op sweep that characterises target `host`.

The LASSO features (`passes.executed.lasso_features`) are executed op counts per class
(`passes.executed.executed_ops`), as CC4CS counts executed statements (paper §3, N_k^st).

The host characterisation comes from the host calibration (each op's cost inside a
program); usage (writes `analysis/data/cc4cs_host.json` and the records beside it)::

    python -m stablehlo_perf.runtime.cc4cs_host --out analysis/data [--calibration CSV] [--tag T]

A reference calibration of another machine gets `--tag` (`cc4cs_host_T.json`): the
characterisation records the machine, and `analysis.cc4cs.load_characterisation` takes the
one measured on the machine it runs on.
"""

from __future__ import annotations

import argparse
import csv
import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jax
from jaxlib.mlir import ir
from stablehlo_perf.analysis.cc4cs import (
    MeasuredOp,
    ModuleEstimate,
    characterise,
    load_module_lasso,
    metric_class,
    op_work,
)
from stablehlo_perf.analysis.opinfo import OpInfo, TensorType, element_bytes
from stablehlo_perf.analysis.targets import load_target
from stablehlo_perf.passes.executed import lasso_features
from stablehlo_perf.passes.extract import view_module
from stablehlo_perf.passes.ir import make_context, parse_module

if TYPE_CHECKING:
    from stablehlo_perf.analysis.elementwise import Measurement

__all__ = ["calibration_records", "module_estimate", "result_features"]


def result_features(result: Any) -> dict[str, float]:
    """LASSO features (executed count and work per class) of an `AnalysisResult`."""
    view = view_module(result.module, "<features>")
    return lasso_features(view, result.report.one_kernel_loops)


def module_estimate(result: Any, target: str) -> ModuleEstimate | None:
    """The stored module-level LASSO's estimate for this module, None if `target` has none."""
    lasso = load_module_lasso(target)
    if lasso is None:
        return None
    return lasso.estimate(result_features(result))


def _program_ops(
    fn: Callable[..., Any], args: tuple[Any, ...], context: ir.Context
) -> list[OpInfo]:
    """The ops with work of `fn` lowered by JAX for `args` (arrays or their shapes), as the
    analysis reads them: parsed and viewed, no pass run. The ops are the same as after the
    pipeline; the pipeline and the random inputs, each run for every one of a reference's
    ~4,100 rows, had taken the characterisation 7-8.5 min."""
    text = jax.jit(fn).lower(*args).as_text()
    with context:
        view = view_module(parse_module(text, "<sweep>", context), "<sweep>")
    return [r.info for r in view.records if op_work(r.info) > 0]


def calibration_records(rows: Sequence[Measurement]) -> list[MeasuredOp]:
    """The rows of a host calibration (`stablehlo-perf-calibrate`: each op's cost inside a
    program, timed in a loop; `elementwise.load_measurements`) as CC4CS records: every row's
    op is lowered by JAX once to read the class and work `analysis.cc4cs.op_work` sees in a
    real module (64-bit rows need JAX's x64 mode)."""
    from stablehlo_perf.analysis.elementwise import ROW_OPS
    from stablehlo_perf.runtime import sweeps

    out = []
    context = make_context()
    for m in rows:
        fn, args = sweeps.op_and_shapes(sweeps.Spec(m.op, m.dtype, m.shape))
        name = ROW_OPS.get(m.op, m.op)
        found = [o for o in _program_ops(fn, args, context) if o.short_name == name]
        if m.op == "copy":  # the identity lowers to no op: XLA runs it as a copy kernel
            t = TensorType(m.shape, m.dtype)
            found = [OpInfo.build(0, "stablehlo.copy", [t], [t])]
        if len(found) == 1 and m.latency_us > 0:
            op = found[0]
            out.append(
                MeasuredOp(
                    "host", metric_class(op), op_work(op), m.latency_us * 1e3, f"calibration:{m.op}"
                )
            )
    return out


def main(argv: list[str] | None = None) -> None:
    """Characterise the host from its calibration; write `cc4cs_host.json` and the records."""
    from stablehlo_perf.analysis.calibration_files import header_value, training_files
    from stablehlo_perf.analysis.elementwise import load_measurements
    from stablehlo_perf.analysis.host_params import HOST_PARAMS_KEY, HostParams

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=Path("analysis/data"))
    p.add_argument(
        "--calibration", type=Path, help="host calibration CSV (default: the one in use)"
    )
    p.add_argument(
        "--tag",
        default="",
        help="name the outputs cc4cs_host_TAG.json and cc4cs_host_ops_TAG.csv (a reference "
        "calibration of another machine)",
    )
    a = p.parse_args(argv)
    suffix = f"_{a.tag}" if a.tag else ""
    path = a.calibration or (training_files("host") or (None,))[0]
    if path is None:
        raise SystemExit("no host calibration: run stablehlo-perf-calibrate --target host")
    rows = load_measurements(path)
    if any(element_bytes(m.dtype) == 8 for m in rows):
        jax.config.update("jax_enable_x64", True)  # else JAX lowers f64 rows in f32
    records = calibration_records(rows)
    with open(a.out / f"cc4cs_host_ops{suffix}.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["target", "op_class", "work", "latency_ns", "source"])
        for r in records:
            w.writerow([r.target, r.op_class, r.work, f"{r.latency_ns:.1f}", r.source])
    params = HostParams.parse(header_value(path, HOST_PARAMS_KEY))
    floor = (
        params.program_overhead_ns if params and math.isfinite(params.program_overhead_ns) else 0.0
    )
    ch = characterise(
        records,
        "host",
        load_target("host").clock_ghz,
        f"{path.name} ({header_value(path, 'date')}, {header_value(path, 'machine')}): "
        "each op's cost inside a program (runtime/timing.py time_in_loop)",
        min_samples=5,
        program_floor_ns=floor,
    )
    ch = replace(ch, machine=header_value(path, "machine"))
    (a.out / f"cc4cs_host{suffix}.json").write_text(ch.to_json() + "\n")
    for cls, d in ch.classes.items():
        print(
            f"{cls:15s} {d.family:12s} n={d.n:3d} floor={d.floor_cycles:9.0f} cyc params={d.params}"
        )


if __name__ == "__main__":
    main()
