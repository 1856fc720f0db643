"""CC4CS on the live backend: executed-op features of an analysed module, the module-level
LASSO cross-check, and the host per-op sweep that characterises target `host`.

The LASSO features (`analysis.cc4cs.module_features`) are executed op counts
(`passes.executed.executed_ops`), as CC4CS counts executed statements (paper §3, N_k^st).

Usage (writes `analysis/data/cc4cs_host.json` and the raw sweep beside it)::

    python -m stablehlo_perf.runtime.cc4cs_host --out analysis/data
"""

from __future__ import annotations

import argparse
import csv
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from stablehlo_perf.analysis.cc4cs import (
    MeasuredOp,
    ModuleEstimate,
    characterise,
    load_module_lasso,
    module_features,
    op_work,
)
from stablehlo_perf.analysis.opinfo import OpInfo
from stablehlo_perf.analysis.targets import load_target
from stablehlo_perf.passes.executed import executed_ops
from stablehlo_perf.passes.extract import view_module
from stablehlo_perf.runtime.jit_hook import measure_callable

__all__ = ["host_sweep", "module_estimate", "result_features"]


def result_features(result: Any) -> dict[str, float]:
    """LASSO features (executed count and work per class) of an `AnalysisResult`."""
    view = view_module(result.module, "<features>")
    return module_features(executed_ops(view))


def module_estimate(result: Any, target: str) -> ModuleEstimate | None:
    """The stored module-level LASSO's estimate for this module, None if `target` has none."""
    lasso = load_module_lasso(target)
    if lasso is None:
        return None
    return lasso.estimate(result_features(result))


# One op per program, in the op's class; sizes span the floor-bound to the work-bound regime.
_SIZES = (1024, 4096, 16384, 32768, 65536, 131072, 262144, 524288, 1048576, 2097152)
_MATMUL = ((16, 16, 16), (64, 64, 64), (128, 128, 128), (256, 256, 256), (128, 512, 256),
           (512, 512, 512), (32, 1024, 256), (1024, 64, 512))  # fmt: skip
_ELEMENTWISE: dict[str, tuple[str, Callable[..., Any], int]] = {
    "add": ("binary", jnp.add, 2),
    "multiply": ("binary", jnp.multiply, 2),
    "maximum": ("compare_select", jnp.maximum, 2),
    "negate": ("unary", jnp.negative, 1),
    "exponential": ("transcendental", jnp.exp, 1),
    "tanh": ("transcendental", jnp.tanh, 1),
    "convert": ("convert", lambda x: x.astype(jnp.bfloat16), 1),
    "transpose": ("movement", lambda x: x.reshape(-1, 64).T, 1),
    "reduce": ("reduction", lambda x: jnp.sum(x.reshape(-1, 64), axis=1), 1),
}


def _program_ops(fn: Callable[..., Any], args: tuple[Any, ...]) -> list[OpInfo]:
    from stablehlo_perf.passes.api import analyze

    res = analyze(jax.jit(fn).lower(*args), target="host")
    view = view_module(res.module, "<sweep>")
    return [r.info for r in view.records if op_work(r.info) > 0]


def host_sweep(repeats: int = 10, rounds: int = 3) -> tuple[list[MeasuredOp], float]:
    """Measure single-op programs on the local backend; an op's latency is its program's
    time minus the dispatch floor (a one-element add). All programs, the floor
    included, are timed in interleaved rounds, so load from other processes hits
    them alike. Returns the ops and the dispatch floor (ns)."""
    key = jax.random.key(0)
    cases: list[tuple[str, Callable[..., Any], tuple[Any, ...]]] = [
        ("floor", lambda a: a + 1.0, (jnp.ones(1),))
    ]
    for name, (_, fn, arity) in _ELEMENTWISE.items():
        for n in _SIZES:
            args = tuple(jax.random.normal(k, (n,)) for k in jax.random.split(key, arity))
            cases.append((name, fn, args))
    for m, n, k in _MATMUL:
        a, b = jax.random.normal(key, (m, k)), jax.random.normal(key, (k, n))
        cases.append(("dot_general", jnp.matmul, (a, b)))
    ops: list[OpInfo | None] = [None]
    for name, fn, args in cases[1:]:
        found = [o for o in _program_ops(fn, args) if name in o.name]
        ops.append(found[0] if len(found) == 1 else None)
    jitted = [jax.jit(fn) for _, fn, _ in cases]
    net, dispatch = _time_net_of_dispatch(jitted, [c[2] for c in cases], repeats, rounds)
    out = []
    for (name, _, _), op, t in zip(cases[1:], ops[1:], net[1:], strict=True):
        if op is not None and t > 0:
            out.append(MeasuredOp("host", op.op_class, op_work(op), t, f"sweep:{name}"))
    return out, dispatch


def _time_net_of_dispatch(
    fns: list[Callable[..., Any]], args: list[tuple[Any, ...]], repeats: int, rounds: int
) -> tuple[list[float], float]:
    """Per-program time net of dispatch (ns) and the dispatch floor, `fns[0]` being the floor
    program: by the runtime timing harness where installed, else by interleaved
    `measure_callable` rounds here."""
    try:
        from stablehlo_perf.runtime.timing import Case, time_cases
    except ImportError:
        samples: list[list[float]] = [[] for _ in fns]
        for _ in range(rounds):
            for i, (fn, a) in enumerate(zip(fns, args, strict=True)):
                samples[i].extend(measure_callable(fn, a, repeats=repeats).samples_ns)
        floor = float(np.median(samples[0]))
        return [float(np.median(ts)) - floor for ts in samples], floor
    timings, dispatch = time_cases(
        [Case(str(i), fn, a) for i, (fn, a) in enumerate(zip(fns, args, strict=True))],
        repeats=max(rounds, 5),
    )
    return [timings[str(i)].median_us * 1e3 for i in range(len(fns))], dispatch.median_us * 1e3


def main(argv: list[str] | None = None) -> None:
    """Measure the host sweep, characterise it and write `cc4cs_host.json` and the raw CSV."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=Path("analysis/data"))
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--rounds", type=int, default=3)
    a = p.parse_args(argv)
    records, dispatch = host_sweep(a.repeats, a.rounds)
    with open(a.out / "cc4cs_host_ops.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["target", "op_class", "work", "latency_ns", "source"])
        for r in records:
            w.writerow([r.target, r.op_class, r.work, f"{r.latency_ns:.1f}", r.source])
    tgt = load_target("host")
    ch = characterise(
        records,
        "host",
        tgt.clock_ghz,
        f"runtime/cc4cs_host.py sweep on {jax.devices()[0].device_kind}, "
        "program time net of the dispatch floor (runtime/timing.py where installed)",
        min_samples=5,
        program_floor_ns=dispatch,
    )
    (a.out / "cc4cs_host.json").write_text(ch.to_json() + "\n")
    for cls, d in ch.classes.items():
        print(
            f"{cls:15s} {d.family:12s} n={d.n:3d} floor={d.floor_cycles:9.0f} cyc params={d.params}"
        )


if __name__ == "__main__":
    main()
