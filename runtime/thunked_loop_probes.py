"""Probe for what a kernel costs inside a while loop XLA:CPU runs thunk by thunk.

A loop too large to be hoisted into one kernel (`analysis.small_loops`) runs its body's
kernels one after another, each updating the loop's state in place, with that state in
cache from the trip before. Such a kernel costs far less than a program's kernel of the
same bytes (the project's Xeon VM, 2026-12-01: `v * 0.5 + c` on 1024 f32 carried by a
loop, 70-100 ns a kernel; on 16384, 1.7 us: 77 GB/s; the fused-loop roofline priced them
at 400 ns and 5.8 us from the streaming bandwidth then fitted, 22.7 GB/s, and the
three-thunk floor). The probe times fori_loops carrying k arrays of n f32, each updated
by one kernel a trip, at two trip counts, and fits

    trip(n, k) = base + k * (kernel + 8 n / bandwidth(tier of 8 n)),

with `base` the loop's own kernels (counter, test) and work, `kernel` a thunk's fixed
cost, and one bandwidth per cache tier of a kernel's bytes (a core's L1, its L2).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from stablehlo_perf.analysis.small_loops import THUNKED_KEY as KEY
from stablehlo_perf.runtime import timing

__all__ = ["KEY", "SIZES", "ThunkedLoopFit", "fit_thunked_loops", "measure_thunked_loops"]


# (elements per array, arrays): every loop's kernels move more than XLA:CPU's 1024-byte
# hoisting limit (96 f32 in 2 arrays: 1536 bytes); up to 2048 a kernel's 0.8-16 KB stay in a
# 48 KB L1, from 8192 its 64-256 KB in L2. Outputs stay
# under the 512 KiB accessed from which XLA:CPU splits such a kernel over threads
# (`analysis.host_params.parallel_tasks`): 65536 f32 a trip cost 11-13 us, twice
# 16384's per byte, for the thread pool's hand-off. 48 f32 in 4 and 8 arrays cost 38-46 ns a
# kernel, 96 in 4 25 (the same kernels, 2026-12-01): left out, unexplained.
SIZES = ((96, 2), (96, 4), (150, 2), (150, 4), (300, 1), (300, 2), (300, 4), (600, 1), (600, 2),
         (1024, 1), (1024, 2), (2048, 1), (8192, 1), (16384, 1), (16384, 2), (32768, 1))  # fmt: skip
_TRIPS = (101, 4001)


@dataclass(frozen=True)
class ThunkedLoopFit:
    """ns a trip of the loop itself (`base_ns`) and a kernel's fixed cost (`kernel_ns`),
    and GB/s a kernel's bytes move at within each tier (`l1_gbps`, `l2_gbps`)."""

    base_ns: float
    kernel_ns: float
    l1_gbps: float
    l2_gbps: float

    def at_speed(self, factor: float) -> ThunkedLoopFit:
        """This fit as if measured on a machine whose times are `factor` times these."""
        return ThunkedLoopFit(self.base_ns * factor, self.kernel_ns * factor,
                              self.l1_gbps / factor, self.l2_gbps / factor)  # fmt: skip

    def pairs(self) -> dict[str, float]:
        """The calibration header's `name=value` pairs (`analysis.small_loops.THUNKED_KEY`)."""
        return {"base": self.base_ns, "kernel": self.kernel_ns,
                "l1_gbps": self.l1_gbps, "l2_gbps": self.l2_gbps}  # fmt: skip


def _loop(k: int, trips: int) -> Callable[..., tuple[jax.Array, ...]]:
    """A loop of `trips` trips carrying k arrays, each updated in place by one kernel."""

    def body(i: jax.Array, state: tuple[jax.Array, ...]) -> tuple[jax.Array, ...]:
        return tuple(v * 0.5 + float(j + 1) for j, v in enumerate(state))

    return lambda *xs: lax.fori_loop(0, trips, body, xs)


def fit_thunked_loops(rows: Sequence[tuple[int, int, float]], l1_bytes: float) -> ThunkedLoopFit:
    """Least squares of relative error, trip ns on [1, k, k·bytes in L1, k·bytes past it],
    over (elements, arrays, trip ns) rows of f32 arrays (a kernel reads and writes 8 bytes an
    element). Relative: trips span 40 ns to 4 us, and absolute errors let the largest set
    the fixed costs."""
    a, y = [], []
    for n, k, trip_ns in rows:
        nbytes = 8.0 * n
        in_l1 = nbytes <= l1_bytes
        row = [1.0, k, k * nbytes if in_l1 else 0.0, 0.0 if in_l1 else k * nbytes]
        a.append([v / trip_ns for v in row])
        y.append(1.0)
    coef = np.linalg.lstsq(np.array(a), np.array(y), rcond=None)[0]
    base, kernel, per_l1, per_l2 = (float(c) for c in coef)
    return ThunkedLoopFit(
        max(base, 0.0),
        max(kernel, 0.0),
        1.0 / per_l1 if per_l1 > 0 else float("nan"),
        1.0 / per_l2 if per_l2 > 0 else float("nan"),
    )


def measure_thunked_loops(
    l1_bytes: float, repeats: int = 7, seed: int = 0
) -> tuple[ThunkedLoopFit, list[tuple[int, int, float]]]:
    """The fit, and the (elements, arrays, trip ns) rows it came from: each loop timed at
    two trip counts in interleaved rounds, a trip the difference over the trips between."""
    cases = []
    for n, k in SIZES:
        xs = tuple(jnp.full((n,), 1.0 + j, jnp.float32) for j in range(k))
        for trips in _TRIPS:
            fn = jax.jit(_loop(k, trips)).lower(*xs).compile()
            cases.append(timing.Case(f"{n}x{k}@{trips}", fn, xs))
    timed, _ = timing.time_cases(cases, repeats=repeats, seed=seed)
    low, high = _TRIPS
    rows = [
        (n, k, (timed[f"{n}x{k}@{high}"].median_us - timed[f"{n}x{k}@{low}"].median_us)
         * 1e3 / (high - low))
        for n, k in SIZES
    ]  # fmt: skip
    return fit_thunked_loops(rows, l1_bytes), rows
