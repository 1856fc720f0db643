"""End-to-end speed: parse + every pass + report + print, against XLA compiling the same function.

Lowers an unrolled deep transformer (≥ 3,000 and ≥ 30,000 StableHLO ops),
times our whole pipeline (median of repeats) and `jax.jit(f).lower(...).compile()`
in the same run, and prints ops/s and the ratio. Targets (issue 2):
≥ 20,000 ops/s and analysis time ≤ 10% of XLA's compile time.

    python benchmarks/speed.py [--sizes 3000 30000] [--repeats 3] [--target tpu-v5e]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import jax
from _corpus import corpus_programs
from stablehlo_perf.analysis.targets import load_target
from stablehlo_perf.passes.api import module_text, run_passes
from stablehlo_perf.passes.ir import make_context, parse_module
from stablehlo_perf.passes.pipeline import default_pipeline, parse_pipeline
from stablehlo_perf.passes.report import collect_report


def analyse_once(text: str, target: str) -> tuple[float, int, dict[str, float]]:
    """Seconds for parse + passes + report + print, the op count, and the phase split."""
    phases: dict[str, float] = {}
    t0 = time.perf_counter()
    ctx = make_context()
    with ctx:
        module = parse_module(text, "<bench>", ctx)
        t1 = time.perf_counter()
        passes = parse_pipeline(default_pipeline(target))
        cache = run_passes(module, passes, "<bench>")
        t2 = time.perf_counter()
        report = collect_report(cache.view(module.operation), cache, load_target(target))
        report.to_json()
        t3 = time.perf_counter()
        module_text(module)
        t4 = time.perf_counter()
    phases = {"parse": t1 - t0, "passes": t2 - t1, "report": t3 - t2, "print": t4 - t3}
    return t4 - t0, len(report.ops), phases


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[3000, 30000])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--target", default="tpu-v5e")
    args = ap.parse_args(argv)
    programs = corpus_programs()
    print(f"{'layers':>6s} {'ops':>7s} {'ours s':>8s} {'spread':>7s} {'ops/s':>8s} "
          f"{'XLA s':>7s} {'ours/XLA':>8s}  phases (parse/passes/report/print s)")  # fmt: skip
    for size in args.sizes:
        layers = programs.deep_transformer_layers_for(size)
        fn, fargs = programs.deep_transformer(layers)
        text = jax.jit(fn).lower(*fargs).as_text(debug_info=True)
        runs = [analyse_once(text, args.target) for _ in range(args.repeats)]
        times = sorted(r[0] for r in runs)
        ours = statistics.median(times)
        spread = (times[-1] - times[0]) / ours
        n_ops = runs[0][1]
        phases = runs[len(runs) // 2][2]
        t0 = time.perf_counter()
        jax.jit(fn).lower(*fargs).compile()
        xla = time.perf_counter() - t0
        print(f"{layers:6d} {n_ops:7d} {ours:8.3f} {spread:6.0%} {n_ops / ours:8.0f} "
              f"{xla:7.2f} {ours / xla:8.1%}  "
              + "/".join(f"{phases[k]:.3f}" for k in ("parse", "passes", "report", "print")))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
