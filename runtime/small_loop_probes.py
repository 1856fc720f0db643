"""Probe for what one trip of a small while loop costs on the host: its ops' latencies.

XLA:CPU compiles a small loop into one kernel (`analysis.small_loops`), and a loop that
carries its value from trip to trip waits for each op's result before the next starts:
a trip costs the chain's latencies, not the ops' throughput (on the project's Xeon VM,
2026-12-01: tanh of one f32 ~18 ns a trip, of 64 elements ~29 ns, 0.45 ns an element).
The probe times fori_loops of one op on one f32 at two trip counts, and a loop of two
adds, so that the loop's own cost per trip (`base`) and each op's latency come apart:

    trip(op) = base + latency(op),   trip(add, add) - trip(add) = latency(add).

The same loops on `SCALAR_ELEMENTS` elements give each op's cost a trip there (`op@16`),
where LLVM left every body tried as scalar code (Xeon VM, 2026-12-02: a trip of
`v + c * tanh(v) * (1 - v)` on 16 f32 67 ns, 4.2 ns an element, against 27 ns on 32).
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
from jax import lax
from stablehlo_perf.analysis.small_loops import SCALAR_ELEMENTS, sized_key
from stablehlo_perf.runtime import timing

__all__ = ["OPS", "measure_loop_latencies"]

# StableHLO short name -> the loop step (carried value v, and a loop-invariant c near 1).
OPS: dict[str, Callable[[jax.Array, jax.Array], jax.Array]] = {
    "add": lambda v, c: v + c,
    "multiply": lambda v, c: v * c,
    "divide": lambda v, c: v / c,
    "maximum": lambda v, c: jnp.maximum(v, c),
    "sqrt": lambda v, c: jnp.sqrt(v),
    "rsqrt": lambda v, c: lax.rsqrt(v),
    "exponential": lambda v, c: jnp.exp(-v),
    "log": lambda v, c: jnp.log(v + c),
    "tanh": lambda v, c: jnp.tanh(v),
    "logistic": lambda v, c: jax.nn.sigmoid(v),
    "sine": lambda v, c: jnp.sin(v),
    "cosine": lambda v, c: jnp.cos(v),
}
_TRIPS = (200, 2000)


def _loop(
    step: Callable[[jax.Array, jax.Array], jax.Array], trips: int
) -> Callable[..., jax.Array]:
    return lambda v, c: lax.fori_loop(0, trips, lambda i, x: step(x, c), v)


def _trip_costs(timed: dict[str, timing.Timing], n: int) -> tuple[float, dict[str, float]]:
    """The loop's own cost a trip on `n` elements and each op's beyond it (ns)."""
    low, high = _TRIPS
    trip = {
        name: max(timed[f"{name}:{n}@{high}"].median_us - timed[f"{name}:{n}@{low}"].median_us, 0)
        * 1e3
        / (high - low)
        for name in (*OPS, "add+add")
    }
    add = max(trip["add+add"] - trip["add"], 0.0)
    base = max(trip["add"] - add, 0.0)
    return base, {name: max(trip[name] - base, 0.0) for name in OPS}


def measure_loop_latencies(repeats: int = 7, seed: int = 0) -> dict[str, float]:
    """`base` (ns a trip of the loop itself), each op's latency (ns) in a small loop, and
    each op's cost a trip on `SCALAR_ELEMENTS` elements (`name@16`)."""
    steps = {**OPS, "add+add": lambda v, c: (v + c) + c}
    cases = []
    for n in (1, SCALAR_ELEMENTS):
        v = jnp.full((n,), 0.5, jnp.float32)
        c = jnp.full((n,), 1e-3, jnp.float32)
        for name, step in steps.items():
            for trips in _TRIPS:
                fn = jax.jit(_loop(step, trips)).lower(v, c).compile()
                cases.append(timing.Case(f"{name}:{n}@{trips}", fn, (v, c)))
    timed, _ = timing.time_cases(cases, repeats=repeats, seed=seed)
    base, latency = _trip_costs(timed, 1)
    scalar = _trip_costs(timed, SCALAR_ELEMENTS)[1]
    return {
        "base": base,
        **latency,
        **{sized_key(k, SCALAR_ELEMENTS): v for k, v in scalar.items()},
    }
