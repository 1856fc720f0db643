"""Predicted (target host) vs measured latency of loops over a few numbers, which XLA:CPU
compiles into one kernel (`analysis/small_loops.py`), and of a few loops just too large
for that; bodies other than those the small-loop model was checked on while it was built.

    python benchmarks/small_loops.py [--rounds 7]

Per loop: whether XLA hoisted it (its compiled HLO's `xla_cpu_small_call`) and whether
the analysis says so (`while(xN, one kernel)`), predicted and measured time (runtime
timing harness, interleaved rounds, median net of dispatch), their ratio and the
measurement's spread; then the geometric mean of the error factor max(r, 1/r) over the
hoisted loops and over the rest.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from stablehlo_perf import perf_jit
from stablehlo_perf.runtime.timing import Case, time_cases

TRIPS = 1000


def _loop(step: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda x: lax.fori_loop(0, TRIPS, lambda i, v: step(v), x)


def _newton(x: jax.Array) -> jax.Array:
    """sqrt(2) by Newton's iteration, carried with its target."""
    return lax.fori_loop(0, TRIPS, lambda i, c: (0.5 * (c[0] + c[1] / c[0]), c[1]), (x, x + 1.0))[0]


def _oscillator(x: jax.Array) -> jax.Array:
    """A damped oscillator: position and velocity, Euler steps."""

    def step(i: jax.Array, c: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
        p, v = c
        return p + 0.01 * v, v - 0.01 * (p + 0.1 * v)

    return lax.fori_loop(0, TRIPS, step, (x, jnp.zeros_like(x)))[0]


BODIES: dict[str, Callable[[Any], Any]] = {
    "logistic": _loop(lambda v: jax.nn.sigmoid(v) * 1.5),
    "log1p": _loop(lambda v: jnp.log(v + 1.0) + 0.5),
    "rsqrt": _loop(lambda v: lax.rsqrt(v * v + 1.0) + 0.25),
    "cos": _loop(lambda v: jnp.cos(v) * 0.95),
    "centered": _loop(lambda v: (v - jnp.mean(v)) * 0.9 + 0.1),
    "newton": _newton,
    "oscillator": _oscillator,
}
SIZES = (1, 8, 48, 96, 512)


def programs() -> dict[str, tuple[Callable[..., Any], tuple[jax.Array, ...]]]:
    return {
        f"{name}/{n}": (fn, (jnp.full((n,), 0.7, jnp.float32),))
        for name, fn in BODIES.items()
        for n in SIZES
    }


def geomean_factor(ratios: list[float]) -> float:
    return float(np.exp(np.abs(np.log(ratios)).mean())) if ratios else float("nan")


def main(argv: list[str] | None = None) -> dict[str, float]:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=7, help="interleaved timing rounds")
    a = p.parse_args(argv)
    rows, cases = [], []
    for name, (fn, args) in programs().items():
        step = perf_jit(fn, target="host")
        res = step.analyze(*args)
        loop = next(o for o in res.report.ops if o.name == "stablehlo.while")
        xla = "xla_cpu_small_call" in jax.jit(fn).lower(*args).compile().as_text()
        rows.append((name, xla, loop.model.endswith("one kernel)"), res.predicted_ns))
        jax.block_until_ready(step(*args))
        cases.append(Case(name, step, args))
    timings, _ = time_cases(cases, repeats=a.rounds)
    print(f"{TRIPS}-trip loops; measured: runtime/timing.py, {a.rounds} interleaved rounds\n")
    print("| loop | XLA one kernel | ours | predicted µs | measured µs | ratio | spread |")
    print("|---|---|---|---:|---:|---:|---:|")
    ratios: dict[str, float] = {}
    hoisted: list[float] = []
    thunked: list[float] = []
    for name, xla, ours, pred_ns in rows:
        t = timings[name]
        meas = t.median_us * 1e3
        ratios[name] = pred_ns / meas
        (hoisted if xla else thunked).append(ratios[name])
        print(
            f"| {name} | {'yes' if xla else 'no'} | {'yes' if ours else 'no'} "
            f"| {pred_ns / 1e3:,.1f} | {meas / 1e3:,.1f} | {ratios[name]:.2f} | {t.spread:.2f} |"
        )
    agree = sum(xla == ours for _, xla, ours, _ in rows)
    print(
        f"\nhoisting rule agrees with XLA on {agree}/{len(rows)} loops; error factor "
        f"(geometric mean) {geomean_factor(hoisted):.2f} over {len(hoisted)} hoisted loops, "
        f"{geomean_factor(thunked):.2f} over {len(thunked)} thunked ones"
    )
    return ratios


if __name__ == "__main__":
    main()
