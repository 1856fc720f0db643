"""Timing harness: median latency of compiled JAX calls on the default backend.

Each case is compiled once and warmed up; then repeats are *interleaved*: every
round times every case (in a fresh random order) for a batch of back-to-back
calls, each ended by `block_until_ready` and timed on its own (the round keeps
their median, so a call the OS preempts on a shared machine does not count), so drift and neighbours' load hit all
cases alike. A trivial jitted call (one element plus one) is timed in the same
rounds as the per-call dispatch overhead; a case's kernel time in a round is its
per-call time minus that round's dispatch time, and the reported value is the
median over rounds, with the interquartile range over the median as its spread.

The method is wall clock minus dispatch (`METHOD`), and the same code runs unchanged
on GPU and TPU backends. For one op's cost *inside* a program, `time_in_loop` times
the op in a while loop at two trip counts and keeps the difference per iteration
(`LOOP_METHOD`): a single-op program on XLA:CPU also pays per-program work
(argument handling, waking the thread pool) that a kernel inside a larger program
does not. XLA:CPU's profiler does give per-thunk times (`hlo_op` events), but on a
2-core machine tracing slows multi-threaded kernels several-fold, so the harness
does not use it.
"""

from __future__ import annotations

import datetime as dt
import math
import platform
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

import jax
import jax.numpy as jnp
import jaxlib
import numpy as np
from stablehlo_perf.analysis.calibration_files import machine_fingerprint

__all__ = [
    "DISPATCH_KEY",
    "LOOP_METHOD",
    "METHOD",
    "Case",
    "Looped",
    "Timing",
    "device_description",
    "provenance",
    "time_cases",
    "time_in_loop",
]

METHOD = "wall-clock per call (block_until_ready) minus dispatch of a 1-element jitted call"
LOOP_METHOD = (
    "op inside a while loop with a runtime trip count: (time at N trips - time at 1 trip)"
    " / (N - 1), wall clock, per interleaved round"
)
DISPATCH_KEY = "__dispatch__"


@dataclass(frozen=True)
class Case:
    """One compiled call to time: `fn(*args)` with `args` already on the device (its result
    may be a pytree: a call ends when every leaf is ready)."""

    key: str
    fn: Callable[..., jax.Array]
    args: tuple[jax.Array, ...]


@dataclass(frozen=True)
class Timing:
    """Result for one case: kernel time (us) median over rounds, relative spread, raw rounds."""

    key: str
    median_us: float
    spread: float
    call_us: float
    rounds_us: tuple[float, ...]
    iters: int


def _call_us(case: Case, iters: int) -> float:
    """Median of `iters` individually timed calls: a call the OS preempts does not move it."""
    ts = np.empty(iters)
    for i in range(iters):
        t0 = time.perf_counter_ns()
        jax.block_until_ready(case.fn(*case.args))
        ts[i] = time.perf_counter_ns() - t0
    return float(np.median(ts)) / 1e3


def dispatch_case() -> Case:
    """The per-call floor: a jitted one-element add, compiled."""
    x = jnp.ones((1,), jnp.float32)
    return Case(DISPATCH_KEY, jax.jit(lambda a: a + 1).lower(x).compile(), (x,))


def time_cases(
    cases: Sequence[Case],
    repeats: int = 7,
    target_round_us: float = 2000.0,
    max_iters: int = 200,
    warmup: int = 2,
    seed: int = 0,
    round_warmup: int = 0,
) -> tuple[dict[str, Timing], Timing]:
    """Time `cases` in interleaved rounds; returns ({key: kernel Timing}, dispatch Timing).

    Each case runs enough back-to-back calls per round (1..max_iters) to last about
    `target_round_us`, so timer resolution and per-round noise stay small. With
    `round_warmup`, each round first makes that many untimed calls: a round then times the
    program warm, not just after another case ran. The first calls after another program
    run slower on the project's Xeon VM (2026-12-06: the zoo's six-layer transformer at 16
    rows 595, 494, 421 us, then ~385; benchmarks/end_to_end.py with two such calls a round
    measured it 0.76-0.84x, the zoo's other programs of 0.3 ms or more 0.85-0.97x and those
    under 0.2 ms 0.92-1.0x, as 2 ms rounds hold many calls of those); the calibrations
    shipped were measured without.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    all_cases = [dispatch_case(), *cases]
    repeated = sorted(k for k, n in Counter(c.key for c in all_cases).items() if n > 1)
    if repeated:
        raise ValueError(f"timing cases need distinct keys; repeated: {', '.join(repeated)}")
    iters: dict[str, int] = {}
    for case in all_cases:
        for _ in range(warmup):
            jax.block_until_ready(case.fn(*case.args))
        one = _call_us(case, 1)
        iters[case.key] = int(np.clip(target_round_us / max(one, 1e-3), 1, max_iters))
    rng = np.random.default_rng(seed)
    rounds: dict[str, list[float]] = {c.key: [] for c in all_cases}
    for _ in range(repeats):
        for i in rng.permutation(len(all_cases)):
            c = all_cases[i]
            for _ in range(round_warmup):
                jax.block_until_ready(c.fn(*c.args))
            rounds[c.key].append(_call_us(c, iters[c.key]))
    disp = np.array(rounds[DISPATCH_KEY])
    out = {}
    for c in cases:
        call = np.array(rounds[c.key])
        out[c.key] = _summary(c.key, call - disp, call, iters[c.key])
    return out, _summary(DISPATCH_KEY, disp, disp, iters[DISPATCH_KEY])


class Looped(Protocol):
    """An op compiled inside a loop; `at(n)` is the timing case running it n times."""

    def at(self, trips: int) -> Case: ...


def _probe_us(case: Case, calls: int = 3) -> float:
    jax.block_until_ready(case.fn(*case.args))
    return _call_us(case, calls)


def time_in_loop(
    looped: Sequence[tuple[str, Looped]],
    repeats: int = 7,
    loop_us: float = 1000.0,
    max_trips: int = 4096,
    seed: int = 0,
    extra: Sequence[Case] = (),
    round_warmup: int = 0,
) -> tuple[dict[str, tuple[Timing, Timing]], dict[str, Timing], Timing]:
    """Each op's cost per loop iteration, net of the program around it (`LOOP_METHOD`).

    A probe picks the high trip count N so that N iterations last about `loop_us`
    (at least 9); the 1-trip and N-trip programs are then timed in the same
    interleaved rounds, and a round's per-iteration time is their difference over
    N - 1. `extra` cases (e.g. the same ops as standalone programs) are timed in the
    same rounds (`round_warmup`: as `time_cases`). Returns ({key: (per-iteration Timing,
    1-trip program Timing)}, {extra key: Timing net of dispatch}, the dispatch floor's
    Timing).
    """
    plan: list[tuple[str, Case, Case, int]] = []
    for key, lc in looped:
        # Keyed by the caller's key, apart from `extra`: two entries may loop the same op.
        def at(trips: int, key: str = key, lc: Looped = lc) -> Case:
            return replace(lc.at(trips), key=f"{key}@loop{trips}")

        one, nine = at(1), at(9)
        t1, t9 = _probe_us(one), _probe_us(nine)
        per = max((t9 - t1) / 8, 0.25)
        trips = int(np.clip(math.ceil(max(loop_us, 2 * t1) / per), 9, max_trips))
        plan.append((key, one, nine if trips == 9 else at(trips), trips))
    cases = [c for _, one, many, _ in plan for c in (one, many)]
    timed, dispatch = time_cases(
        [*cases, *extra], repeats=repeats, seed=seed, round_warmup=round_warmup
    )
    out = {}
    for key, one, many, trips in plan:
        lo, hi = timed[one.key], timed[many.key]
        per_round = (np.array(hi.rounds_us) - np.array(lo.rounds_us)) / (trips - 1)
        out[key] = (_summary(key, per_round, per_round, trips), lo)
    return out, {c.key: timed[c.key] for c in extra}, dispatch


def _summary(key: str, kernel: np.ndarray, call: np.ndarray, iters: int) -> Timing:
    med = float(np.median(kernel))
    q1, q3 = np.percentile(kernel, [25, 75])
    return Timing(
        key=key,
        median_us=med,
        spread=float((q3 - q1) / abs(med)) if med else float("inf"),
        call_us=float(np.median(call)),
        rounds_us=tuple(float(v) for v in kernel),
        iters=iters,
    )


def device_description() -> str:
    """The default JAX device and backend, e.g. `cpu: TFRT_CPU_0 (cpu)`."""
    d = jax.devices()[0]
    return (
        f"{jax.default_backend()}: {d.device_kind} ({d.platform}, {len(jax.devices())} device(s))"
    )


def provenance() -> list[str]:
    """Header lines naming the machine, device, date and software versions of a measurement."""
    return [
        f"# machine: {machine_fingerprint()}",
        f"# device: {device_description()}",
        f"# date: {dt.datetime.now(dt.UTC).strftime('%Y-%m-%dT%H:%MZ')}",
        (
            f"# versions: python {platform.python_version()}, jax {jax.__version__}, "
            f"jaxlib {jaxlib.__version__}, numpy {np.__version__}"
        ),
    ]
