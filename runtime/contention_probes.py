"""Probe for how much slower kernels run after a library call.

A library call (a YNNPACK dot) hands work to threads; when it ends they keep polling for
more work for a while, and on a VM with as many vCPUs as threads the kernels that follow
share the cores with them (a loop kernel XLA:CPU splits over its own pool too, though such
a kernel leaves none polling: `passes.critical_path._contention`). Measured with
runtime/timing.py on the project's 2-vCPU Zen 5 VM (2026-12-02, in a loop, 11 rounds): 8-28
tanh kernels of 8x128 f32 after a 128x256 @ 256x256 dot took 2.1-4.9x their time without
the dot (the dot alone 50-64 us; 8 kernels 9 us alone, 24-44 after it; 24 kernels 38-40
alone, 84-92 after). Programs that interleave dots with short kernels were priced below their measured
time: the zoo's six-layer transformer by a median 19-21%, the MLP gradient 16-20%
(benchmarks/end_to_end.py, 14 saved runs; 1 - predicted / measured).

The cost stops growing once the call's threads stop polling: 12-28 kernels (17-45 us alone)
paid 43-54 us beyond their time after the dot, where 8 paid 15-35. The probe times, inside
loops and in the same rounds, the dot alone, chains of serial kernels alone, and each
chain after the dot: what the short chains (`SHORT`) cost after the dot beyond their own
time, as a fraction of it, is the slowdown; what the long chain (`LONG`) costs beyond its
own time, the cap. Chains of 32 or more kernels ran at their own speed after the dot on
that VM (another execution mode of XLA's thunk executor), so the chains stay below 32.

A loop whose body is a dot and one kernel on its result pays far less than the chains'
fraction of that kernel's time each trip (Xeon VM, 2026-12-06, in loops, three sets of 11
rounds: 20 trips of `0.5 * v + tanh(a @ v)` with `a` 128, 256 and 512 square and `v` of
16 columns paid 27, 56 and 177 us beyond the dots' and the kernels' loops alone, 0.8, 0.9
and 1.4 of the kernels' time, where the pass at the chains' fraction put 74, 169 and 355).
The probe times that loop at 256 (`LOOP_SIDE`), its dots alone and its kernels alone in
the same rounds: `Contention.loop_fraction`, which the critical-path pass charges the
kernels of a while loop's body. Only there: the same 20 steps unrolled (timed as calls)
paid what the loop did, but charging a lone kernel between two dots in straight code the
loop's fraction put the zoo's straight programs (the six-layer transformer, the MLP
gradient) under their measured times, its own-level MAPE 10.9 -> 12.9% on 13 saved runs.

An Eigen convolution (XLA:CPU's for 3 input features: a network's stem) leaves the pool's
threads spinning too, and the YNNPACK convolution after it waits for them: on the Xeon VM
(2026-12-07, in loops) the pair ran ~45 us beyond both alone, an elementwise kernel or a
second Eigen convolution after it next to nothing. `measure_eigen_handoff` times the pair and
its parts: `Contention.eigen_handoff_ns`, which the critical-path pass charges the first
YNNPACK convolution after an Eigen one (`passes.critical_path._eigen_handoffs`). Before it,
the zoo's CNN (that stem, a ReLU, then a YNNPACK convolution) ran 0.76-0.88x its in-loop time.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from stablehlo_perf.analysis.host_params import CONTENTION_KEY as KEY
from stablehlo_perf.runtime import sweeps, timing

__all__ = [
    "HANDOFF_FEATURES",
    "HANDOFF_IMAGES",
    "KEY",
    "LONG",
    "LOOP_SIDE",
    "LOOP_TRIPS",
    "SHORT",
    "Contention",
    "contention_fit",
    "handoff_fit",
    "measure_eigen_handoff",
    "measure_pool_contention",
]

SHORT = (4, 8)
LONG = 24
_DOT = (128, 256, 256)  # M, K, N: a YNNPACK dot long enough for the pool (~60 us)


def _tanh(v: jax.Array, i: int) -> jax.Array:
    return jnp.tanh(v[:8, :128] * 1.0001 + i)


def _row_sum(v: jax.Array, i: int) -> jax.Array:
    return jnp.broadcast_to(jnp.sum(v[:64], axis=1, keepdims=True), (64, 256)) + i


def _transpose(v: jax.Array, i: int) -> jax.Array:
    return v[:64].T.reshape(64, 256) + i


STEPS: dict[str, Callable[[jax.Array, int], jax.Array]] = {
    "tanh": _tanh,
    "row_sum": _row_sum,
    "transpose": _transpose,
}
"""The kinds of serial kernel the short chains are made of (1-2 us each, far below any split
threshold): a transcendental, a reduction and a transpose, as between a transformer's dots.
One kind alone reads its own share of the VM's noise (Zen 5 VM, 2026-12-02, three sets of 31
rounds: after the dot, 4 and 8 tanh kernels of 8x128 paid 0.81 and 1.90 of their time more,
row sums of 64x256 3.32 and 1.67, transposes 2.44 and 2.00); the long chain is of tanh."""


_INT8_DOT = (128, 256, 256)
"""The int8 dot (int32 products) whose short chains give `Contention.int8_fraction`: the f32
dot's shape, which leaves the f32 pool polling on both VMs measured. On the Xeon VM
(2026-12-06, 31 rounds in loops) the chains after int8 dots of M x 256 x 256, M = 128 to
1024 (40-161 us), cost no more than alone (a median -0.13 to -0.72 of their time, the
convert of their input counted), where after f32 dots of 96 and 128 rows they paid 2.7-2.8x
more: with int8 dots charged the f32 fraction, the zoo's int8_bmm was priced at 2-4x its
in-loop time."""


LOOP_SIDE = 256
LOOP_TRIPS = 20
"""The loop probe's body: `0.5 * v + tanh(a @ v)` with `a` LOOP_SIDE square and `v` LOOP_SIDE
x 16, LOOP_TRIPS trips (a recurrence's step: a dot, then one kernel on its result)."""


@dataclass(frozen=True)
class Contention:
    """Kernels after a library call cost `fraction` of their time more, at most `cap_ns` in
    all until the next library call; after an int8 dot `int8_fraction`, and in a while
    loop's body `loop_fraction`; a YNNPACK convolution after an Eigen one `eigen_handoff_ns`
    (NaN: unmeasured)."""

    fraction: float
    cap_ns: float
    int8_fraction: float = math.nan
    loop_fraction: float = math.nan
    eigen_handoff_ns: float = math.nan

    def pairs(self) -> dict[str, float]:
        """The calibration header's `name=value` pairs."""
        out = {"fraction": self.fraction, "cap_ns": self.cap_ns}
        for name in ("int8_fraction", "loop_fraction", "eigen_handoff_ns"):
            if math.isfinite(getattr(self, name)):
                out[name] = getattr(self, name)
        return out


Pairs = Sequence[tuple[Sequence[float], Sequence[float]]]
"""Per-round times (us) of chains as (alone, after a library call)."""


def _extra(pool_us: Sequence[float], alone: Sequence[float], after: Sequence[float]) -> np.ndarray:
    """Per round, what a chain took after the call beyond the call and itself alone (us)."""
    return np.asarray(after, float) - np.asarray(pool_us, float) - np.asarray(alone, float)


def _fraction(pool_us: Sequence[float], short: Pairs) -> float:
    """The median over rounds and chains of what each cost beyond, as a fraction of it alone;
    not below 0."""
    frac = [_extra(pool_us, a, b) / np.maximum(np.asarray(a, float), 1e-9) for a, b in short]
    return max(float(np.median(np.concatenate(frac))), 0.0)


def contention_fit(
    pool_us: Sequence[float],
    short: Pairs,
    long: tuple[Sequence[float], Sequence[float]],
    int8: tuple[Sequence[float], Pairs] | None = None,
    loop: tuple[Sequence[float], Sequence[float], Sequence[float]] | None = None,
) -> Contention:
    """From per-round times (us) of the library call alone, and of each short chain and the
    long one as (alone, after the call): the median over rounds and short chains of
    (after - pool - alone) / alone, and the long chain's median of after - pool - alone (ns);
    neither below 0. `int8`, the int8 dot's rounds and its short chains', gives the same
    fraction after it; `loop`, the loop probe's rounds as (its dots alone, its kernels
    alone, the loop), the fraction its kernels pay."""
    return Contention(
        _fraction(pool_us, short),
        max(float(np.median(_extra(pool_us, *long))), 0.0) * 1e3,
        _fraction(*int8) if int8 else math.nan,
        _fraction(loop[0], [(loop[1], loop[2])]) if loop else math.nan,
    )


def _chain(kind: str, k: int) -> Callable[[jax.Array], jax.Array]:
    """k kernels of a kind, one after another: the barrier keeps XLA from fusing them."""

    def run(v: jax.Array) -> jax.Array:
        for i in range(k):
            v = lax.optimization_barrier(STEPS[kind](v, i))
        return v

    return run


def _program(kind: str, k: int, with_dot: bool) -> Callable[[jax.Array, jax.Array], object]:
    """k kernels of a kind alone (on x), or after the dot x @ w (int32 products of int8
    operands, as f32)."""

    def run(x: jax.Array, w: jax.Array) -> object:
        if not with_dot:
            return _chain(kind, k)(x)
        acc = jnp.int32 if x.dtype == jnp.int8 else None
        y = jnp.matmul(x, w, preferred_element_type=acc).astype(jnp.float32)
        return (y, _chain(kind, k)(y)) if k else y

    return run


def _loop_program(part: str) -> Callable[[jax.Array, jax.Array], jax.Array]:
    """The loop probe (`LOOP_TRIPS` trips on v, with `a`): its body whole ("loop"), its dot
    alone ("dot") or its kernel alone on v ("kernel")."""
    steps: dict[str, Callable[[jax.Array, jax.Array], jax.Array]] = {
        "loop": lambda v, a: 0.5 * v + jnp.tanh(a @ v),
        "dot": lambda v, a: a @ v,
        "kernel": lambda v, a: 0.5 * v + jnp.tanh(v * 1.0001),
    }
    step = steps[part]

    def run(v: jax.Array, a: jax.Array) -> jax.Array:
        return lax.fori_loop(0, LOOP_TRIPS, lambda i, x: step(x, a), v)

    return run


HANDOFF_IMAGES = (2, 32, 32, 3)
"""The handoff probe's input: a stem convolution's (3 features, which XLA:CPU leaves to Eigen:
`analysis.fusion.YNN_CONV_MIN_FEATURES`), 3x3 to `HANDOFF_FEATURES`, 128 KiB out, which a
YNNPACK convolution (3x3, stride 2, 32 out) reads."""
HANDOFF_FEATURES = 16


def handoff_fit(
    eigen_us: Sequence[float], ynn_us: Sequence[float], pair_us: Sequence[float]
) -> float:
    """From per-round times (us) of the Eigen convolution alone, the YNNPACK one alone and
    the two in a row: the median over rounds of what the pair took beyond its parts (ns),
    not below 0."""
    extra = _extra(eigen_us, ynn_us, pair_us)
    return max(float(np.median(extra)), 0.0) * 1e3


def _conv(x: jax.Array, k: jax.Array, stride: int) -> jax.Array:
    return lax.conv_general_dilated(
        x, k, (stride, stride), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")
    )


def measure_eigen_handoff(repeats: int = 31, passes: int = 5, seed: int = 0) -> float:
    """What a YNNPACK convolution costs beyond its time alone right after an Eigen one
    (`HANDOFF_IMAGES`), in loops (ns): the median over `passes` sets of interleaved rounds
    of `handoff_fit` (`Target.eigen_handoff_ns`). On the Xeon VM (2026-12-07) six runs gave
    40-46 us (~2.5 s each); pairs of 1-8 images of 32 or 64 pixels a side paid 19-99 us
    (`passes.critical_path.EIGEN_HANDOFF_MIN_BYTES`)."""
    rng = np.random.default_rng(seed)
    n, h, w, c = HANDOFF_IMAGES

    def arr(*shape: int) -> jax.Array:
        return jnp.asarray(rng.standard_normal(shape), jnp.float32)

    x, k1 = arr(n, h, w, c), arr(3, 3, c, HANDOFF_FEATURES)
    y, k2 = arr(n, h, w, HANDOFF_FEATURES), arr(3, 3, HANDOFF_FEATURES, 32)
    parts: dict[str, tuple[Callable[..., jax.Array], tuple[jax.Array, ...]]] = {
        "eigen": (lambda x, k: _conv(x, k, 1), (x, k1)),
        "ynn": (lambda y, k: _conv(y, k, 2), (y, k2)),
        "pair": (lambda x, k, k2: _conv(_conv(x, k, 1), k2, 2), (x, k1, k2)),
    }
    looped = []
    for name, (fn, args) in parts.items():
        spec = sweeps.Spec(f"eigen_handoff_{name}", "f32", HANDOFF_IMAGES)
        looped.append((spec.key, sweeps.loop_case(spec, fn, args)))
    fits = []
    for p in range(passes):
        out, _, _ = timing.time_in_loop(looped, repeats=repeats, seed=seed + p)
        fits.append(handoff_fit(*(out[key][0].rounds_us for key, _ in looped)))
    return float(np.median(fits))


def measure_pool_contention(
    repeats: int = 51, passes: int = 5, loop_us: float = 4000.0
) -> Contention:
    """This machine's `Contention`: each parameter the median over `passes` passes (~4 s
    each) of `contention_fit` on a pass's rounds, and the handoff probe
    (`measure_eigen_handoff`). One pass reads the VM's state of its seconds: on the Zen 5
    VM (2026-12-02), with chains of tanh alone, single passes put the fraction at 0.32-1.47
    and the cap at 41-45 us."""
    fits = [_one_pass(repeats, seed, loop_us) for seed in range(passes)]
    return Contention(
        float(np.median([f.fraction for f in fits])),
        float(np.median([f.cap_ns for f in fits])),
        float(np.median([f.int8_fraction for f in fits])),
        float(np.median([f.loop_fraction for f in fits])),
        measure_eigen_handoff(),
    )


def _one_pass(repeats: int, seed: int, loop_us: float) -> Contention:
    """`contention_fit` of one set of interleaved rounds: the f32 dot alone and before each
    chain, each chain alone, the int8 dot (`_INT8_DOT`) alone and before each short chain,
    and the loop probe (`_loop_program`) whole and in its parts."""
    rng = np.random.default_rng(seed)

    def operands(dtype: str, shape: tuple[int, int, int]) -> tuple[jax.Array, jax.Array]:
        m, k, n = shape
        if dtype == "i8":
            return tuple(
                jnp.asarray(rng.integers(-127, 128, s), jnp.int8) for s in ((m, k), (k, n))
            )
        x = jnp.asarray(rng.standard_normal((m, k)), jnp.float32)
        return x, jnp.asarray(rng.standard_normal((k, n)) * 0.05, jnp.float32)

    f32, i8 = operands("f32", _DOT), operands("i8", _INT8_DOT)
    chains = [(kind, steps) for kind in STEPS for steps in SHORT] + [("tanh", LONG)]
    cases = [("tanh", 0, True, "f32")]
    cases += [(c, s, d, "f32") for c, s in chains for d in (False, True)]
    cases += [("tanh", 0, True, "i8")] + [(c, s, True, "i8") for c, s in chains[:-1]]
    looped = []
    for kind, steps, with_dot, dtype in cases:
        args = i8 if dtype == "i8" else f32
        spec = sweeps.Spec(f"pool_contention_{kind}", dtype, (steps, int(with_dot)))
        looped.append((spec.key, sweeps.loop_case(spec, _program(kind, steps, with_dot), args)))
    v = jnp.asarray(rng.standard_normal((LOOP_SIDE, 16)), jnp.float32)
    a = jnp.asarray(rng.standard_normal((LOOP_SIDE, LOOP_SIDE)) * 0.01, jnp.float32)
    parts = ("dot", "kernel", "loop")
    for part in parts:
        spec = sweeps.Spec(f"pool_contention_loop_{part}", "f32", (LOOP_SIDE, LOOP_TRIPS))
        looped.append((spec.key, sweeps.loop_case(spec, _loop_program(part), (v, a))))
    out, _, _ = timing.time_in_loop(looped, repeats=repeats, seed=seed, loop_us=loop_us)
    rounds = [out[key][0].rounds_us for key, _ in looped]
    pairs = [(rounds[1 + 2 * i], rounds[2 + 2 * i]) for i in range(len(chains))]
    at = 1 + 2 * len(chains)
    int8 = [(pairs[i][0], rounds[at + 1 + i]) for i in range(len(chains) - 1)]
    loop = rounds[-len(parts) :]
    return contention_fit(rounds[0], pairs[:-1], pairs[-1], (rounds[at], int8), tuple(loop))
