"""Probes for what ops cost inside fused loops on the host: bf16 arithmetic, and a transpose
with elementwise work.

XLA:CPU has no bf16 arithmetic: in a fused bf16 loop every op widens its operands to
f32 and rounds its result back to bf16 before the next op, so each member costs a
fraction of a ns per element that a standalone bf16 op hides under its memory traffic
(measured with runtime/timing.py on the project's 2-vCPU VM, 2026-12-01, in a loop:
8 steps of `x = x * b + a` over 1M bf16 elements 2.8-3.3 ms, one step 0.27-0.37 ms,
about 0.18 ns per element per op; in f32 the eight steps cost what one does). The probe
times such chains of 1 and `STEPS` steps inside a loop and keeps the difference per op
per element.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from stablehlo_perf.runtime import sweeps, timing

__all__ = [
    "ALIASED_KEY",
    "KEY",
    "L2_KEY",
    "STEPS",
    "TRANSPOSE_KEY",
    "l2_case",
    "measure_bf16_fused",
    "measure_transpose_fused",
    "measure_transpose_l2",
]

KEY = "bf16_fused_ns_per_elem"
"""The calibration header line that holds the measurement (`# KEY: value`)."""
STEPS = 9


def _chain(k: int) -> Callable[[jax.Array, jax.Array], jax.Array]:
    """k steps of `x = x * b + a`, starting from a: 2k ops XLA:CPU fuses into one loop."""

    def run(a: jax.Array, b: jax.Array) -> jax.Array:
        x = a
        for _ in range(k):
            x = x * b + a
        return x

    return run


def measure_bf16_fused(
    shape: tuple[int, int] = (256, 1024), repeats: int = 7, seed: int = 0
) -> float:
    """ns per element per op of a fused bf16 loop beyond the loop's one pass over memory:
    (chain of STEPS steps - one step) / (2 ops x (STEPS - 1)) / elements, both in a loop."""
    rng = np.random.default_rng(seed)
    a, b = (jnp.asarray(rng.uniform(0.5, 1.0, shape), jnp.bfloat16) for _ in range(2))
    looped = []
    for k in (1, STEPS):
        spec = sweeps.Spec("bf16_chain", "bf16", (*shape, k))
        looped.append((spec.key, sweeps.loop_case(spec, _chain(k), (a, b))))
    out, _, _ = timing.time_in_loop(looped, repeats=repeats, seed=seed)
    one, many = (out[key][0].median_us for key, _ in looped)
    return max(many - one, 0.0) * 1e3 / (2 * (STEPS - 1)) / (shape[0] * shape[1])


TRANSPOSE_KEY = "transpose_fused_ns_per_elem"
"""The calibration header line that holds the fused-transpose measurement."""
ALIASED_KEY = "transpose_fused_aliased_ns_per_elem"
"""The header line of the fused transposes whose reads alias in the cache
(`analysis.fusion_cost.ALIASED_STRIDE_BYTES`)."""
L2_KEY = "transpose_fused_l2_ns_per_elem"
"""The header line of the fused transpose whose reads miss a core's L2
(`analysis.fusion_cost.transpose_footprint_bytes`, `l2_case`)."""

TRANSPOSE_CASES = (((64, 256, 128), (0, 2, 1)), ((384, 384), (1, 0)), ((1000, 600), (1, 0)))
"""(shape, permutation) of the fused transposes the probe times, their minor axis moved and
their reads 512, 1,536 and 2,400 bytes apart. (A transpose that keeps the minor axis, an
attention layout's heads moved ahead of the sequence, runs as a program in row copies:
8x128x16x64 f32 scaled, 242 us a call, where the probe's flattened loop took 742 us.)"""
ALIASED_CASES = (((512, 512), (1, 0)), ((256, 1024), (1, 0)))
"""Fused transposes whose reads are 2 and 4 KiB apart: a multiple of 2 KiB ran 1.0-2.0 ns
an element where other strides ran 0.5-0.9 (one run each of 512 B to 12 KB strides, f32 in a
loop, the Zen 4 VM, 2026-12-03: 512x512 1.18, 256x1024 1.49, 8x512x512 over its last two
axes 1.03; 1000x1000 0.54, 1024x256 0.80, 384x384 0.58, 64x256x128 0.74)."""


def measure_transpose_fused(repeats: int = 7, seed: int = 0) -> tuple[float, float]:
    """ns per element of a loop kernel that transposes and scales (`transpose(x) * c`), in a
    loop, timed in the same rounds: the median over `TRANSPOSE_CASES` and over
    `ALIASED_CASES`. XLA:CPU runs a lone transpose with a tiled copy but a fused one element
    by element, reading across the input: on the Zen 5 VM (2026-12-03, one run, in a loop)
    512x512 60 us alone and 220 us scaled, 64x256x128 (0, 2, 1) 641 and 1140. The result is
    flattened so the transpose really moves data (`runtime.sweeps`: inside a loop XLA
    otherwise gives the carried result the transposed layout)."""
    rng = np.random.default_rng(seed)
    looped, groups = [], ([], [])
    for group, cases in zip(groups, (TRANSPOSE_CASES, ALIASED_CASES), strict=True):
        for shape, perm in cases:
            x = jnp.asarray(rng.standard_normal(shape), jnp.float32)

            def scaled(v: jax.Array, perm: tuple[int, ...] = perm) -> jax.Array:
                return (jnp.transpose(v, perm) * 0.5).reshape(-1)

            spec = sweeps.Spec("transpose_fused", "f32", shape)
            looped.append((spec.key, sweeps.loop_case(spec, scaled, (x,))))
            group.append((spec.key, x.size))
    out, _, _ = timing.time_in_loop(looped, repeats=repeats, seed=seed)
    strided, aliased = (
        float(np.median([out[k][0].median_us * 1e3 / size for k, size in g])) for g in groups
    )
    return strided, aliased


def l2_case(l2_bytes: float) -> tuple[int, int]:
    """The shape of the f32 matrix whose fused transpose the L2 probe times: rows 4 KiB long
    (reads a page apart) and enough of them that the lines one row of the result reads span
    four times the L2 (`analysis.fusion_cost.transpose_footprint_bytes`): 2048 x 1024 for a
    2 MiB L2."""
    return max(int(4 * l2_bytes) // 4096, 256), 1024


def measure_transpose_l2(l2_bytes: float, repeats: int = 7, seed: int = 0) -> float:
    """ns per element of a fused transpose (`transpose(x) * c`, flattened) of `l2_case`'s
    shape, in a loop: each of its reads misses the L2. On the Xeon VM (2 MiB L2, 2026-12-06,
    in loops) transposes of power-of-two rows ran 0.6-0.7 ns an element up to a footprint of
    1 MiB, 1.2-1.7 at 2 MiB and 2.4-4.0 from 4 MiB, where rows of 1000 stayed at 0.8-0.9."""
    rng = np.random.default_rng(seed)
    shape = l2_case(l2_bytes)
    x = jnp.asarray(rng.standard_normal(shape), jnp.float32)
    spec = sweeps.Spec("transpose_l2", "f32", shape)
    case = sweeps.loop_case(spec, lambda v: (v.T * 0.5).reshape(-1), (x,))
    out, _, _ = timing.time_in_loop([(spec.key, case)], repeats=repeats, seed=seed)
    return out[spec.key][0].median_us * 1e3 / x.size
