"""Probe programs for what a call costs beyond its kernels' in-loop times.

The calibration times each op inside a while loop, where XLA:CPU runs the body's
kernels one after another on one thread. A straight-line program runs its kernels
through the thunk executor instead, and on the project's 2-vCPU VM that costs
more: a chain of two tiny dot+tanh steps takes tens of microseconds longer than one
step, each further kernel a microsecond or more beyond its in-loop time, and more
where independent branches let XLA's executor run kernels concurrently (it does
for a graph of more than 8 kernels that is not a chain; measured with
runtime/timing.py, 2026-11-30: 128 kernels as a chain ~1.1 us each, as 64
branches ~2.9 us). The probes are chains of 1..64 steps of four kinds (one of them,
"gelu", running a kernel XLA splits over its thread pool each step, one, "sums", a YNNPACK
reduce that wakes it) and 1..32
independent branches; each probe's time net of dispatch is fitted as

    call overhead(single kernel, from the sweep) + multi · [kernels >= 2]
    + dispatch · kernels + rewake · (split steps after the first)
    + reduce rewake · [a second waking YNNPACK reduce]
    + offset(kind, split and reduce kinds only) + (the program's in-loop time),

with kernels counted by the pipeline's own fusion plan, so the pass that adds the
overhead counts them the same way. Up to 128 kernels, so the per-kernel slope is
not confused with the one-off step (the first probes stopped at 32 and put 6.2 us
per kernel where the long programs pay 1-3). Probes measured before 2026-12-01 (the
AMD reference's) took steps x one step's in-loop time instead (see `measure_probes`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import jax
import jax.numpy as jnp
import numpy as np
from scipy.optimize import linprog
from stablehlo_perf.runtime import sweeps, timing

__all__ = [
    "PROBE_KEY",
    "Probe",
    "ProbeFit",
    "fit_probes",
    "measure_probes",
    "overhead_ratio",
    "pooled",
]

CHAIN_LENGTHS = (1, 2, 4, 8, 16, 32, 64)
BRANCH_COUNTS = (1, 2, 4, 8, 16, 32)

Step = Callable[[jax.Array, jax.Array], jax.Array]


def _dense(x: jax.Array, w: jax.Array) -> jax.Array:
    return jnp.tanh(x @ w)


def _center(x: jax.Array, w: jax.Array) -> jax.Array:
    return (x - jnp.mean(x, axis=-1, keepdims=True)) * w[0]


def _gelu_block(x: jax.Array, w: jax.Array) -> jax.Array:
    """A transformer's feed-forward half on 16 rows of 64: its GELU on 16x256 (with the bias
    add, 9 FLOPs an element) is the one kernel XLA splits over threads
    (`analysis.host_params.parallel_tasks`); its dots and the centring around it (~10 us on
    the project's VM) leave the pool idle long enough to sleep before the next step's."""
    wide = jnp.tile(w, (1, 4))
    h = x @ wide + 0.1
    h = 0.5 * h * (1.0 + jnp.tanh(0.7978845608 * (h + 0.044715 * h * h * h)))
    y = x + h @ wide.T
    return y - jnp.mean(y, axis=-1, keepdims=True)


def _scaled_sum(x: jax.Array, s: jax.Array) -> jax.Array:
    """The rows of `x` scaled by tanh of the previous sums, summed again: XLA fuses the
    scaling into a YNNPACK reduce of `x` (256 KiB at 64x1000 f32, above the Zen 4 and Zen 5
    references' `reduce_wake_bytes`), with tanh of the 64 sums a kernel of its own."""
    return jnp.sum(x * jnp.tanh(s)[:, None], axis=-1)


def _sums(step: Step, k: int) -> Callable[..., jax.Array]:
    """k dependent row sums of one input: its sum, then `step` k - 1 times."""

    def run(x: jax.Array, _: jax.Array) -> jax.Array:
        s = jnp.sum(x, axis=-1)
        for _ in range(k - 1):
            s = step(x, s)
        return s

    return run


def _branch(x: jax.Array, w: jax.Array) -> jax.Array:
    """One branch of `_branches` and its share of the sum."""
    return x + jnp.tanh((x + 1.0) @ w)


def _chain(step: Step, k: int) -> Callable[..., jax.Array]:
    """`step` applied k times, each to the previous result."""

    def run(x: jax.Array, w: jax.Array) -> jax.Array:
        for _ in range(k):
            x = step(x, w)
        return x

    return run


def _branches(_: Step, k: int) -> Callable[..., jax.Array]:
    """k independent dense steps on shifted inputs, summed: a graph XLA runs concurrently."""

    def run(x: jax.Array, w: jax.Array) -> jax.Array:
        return sum((jnp.tanh((x + float(i)) @ w) for i in range(k)), start=x)

    return run


# kind -> (the step timed in a loop, the program of k steps, the input's shape)
STEPS: dict[str, tuple[Step, Callable[[Step, int], Callable[..., jax.Array]], tuple[int, int]]] = {
    "dense": (_dense, _chain, (16, 64)),
    "center": (_center, _chain, (64, 64)),
    "branches": (_branch, _branches, (16, 64)),
    "gelu": (_gelu_block, _chain, (16, 64)),
    "sums": (_scaled_sum, _sums, (64, 1000)),
}
SPLIT_KINDS = frozenset({"gelu"})
"""Probe kinds each of whose steps runs one split loop kernel that finds the pool asleep (the
first step's wake-up is the call's own, the sweep's single-kernel programs' term)."""
REDUCE_KINDS = frozenset({"sums"})
"""Probe kinds each of whose steps runs a YNNPACK reduce that wakes the pool: a call of two
or more pays `ProbeFit.reduce_rewake_ns` once. Measured call minus in-loop time on the Zen 4
VM (2026-12-06, 64x1000 f32, same rounds): one sum 46-66 us, two dependent sums 88-95 (the
second's kernel 7-14 us), three 92-110, and alike with a tanh, a split multiply or a dot
after the second (18-35 us beyond the overhead predicted without the term)."""
UNFITTED_KINDS = frozenset({"center"})
"""Probe kinds measured but left out of `fit_probes`: each centring step's 64x64 mean is a
YNNPACK reduce, which pays a cost per step that no term of the call overhead models. Fitted,
it went into the per-kernel term and charged every kernel of every program for it: on the
project's Zen 5 VM (2026-12-02) centring chains paid 3.6 us a kernel beyond their in-loop
time where dense chains paid 0.2, the fit put 1.67 us on each kernel, 270 us on the deep
transformer's 162, whose calls paid 181-273 us beyond their kernels in all; left out,
0.22 us, and the zoo's pipeline MAPE on two saved runs 32.1 / 23.1% -> 25.6 / 17.4%
(benchmarks/end_to_end.py --predict-from). The Xeon's fit moves little (multi-kernel
12.4 -> 11.0 us, rewake 39.9 -> 41.3 us, per kernel 0 either way)."""


FITTED_WAKES = 3
"""The most wake-ups after the first (`Probe.later_wakes`) of a probe that `fit_probes`
fits: the GELU chains' wake-ups cost about the same each up to 4 steps and less after, while
programs wake the pool again a few times (the zoo's 6-layer transformer 5 times)."""


PROBE_KEY = "probe"
"""Header key of a measured probe's line in a calibration CSV (`Probe.line`)."""


@dataclass(frozen=True)
class Probe:
    """One measured probe: its step kind, chain length, kernels, time net of dispatch (ns),
    and when it was measured (the calibration keeps earlier measurements: `pooled`)."""

    kind: str
    steps: int
    kernels: int
    program_ns: float
    step_loop_ns: float  # the program's in-loop time / steps (one step's, before 2026-12-01)
    measured: str = ""
    # The calibration's sentinel ops timed around the probes (runtime.calibrate.SENTINELS);
    # NaN for probes measured before sentinels.
    sentinel_us: float = math.nan

    def line(self) -> str:
        """`# probe: ...` header line; `parse` reads it back exactly (times in full
        precision, so a refit from the lines gives what the fit from the measurement gave)."""
        gauge = f" {float(self.sentinel_us)!r}" if math.isfinite(self.sentinel_us) else ""
        return (
            f"# {PROBE_KEY}: {self.measured} {self.kind} {self.steps} {self.kernels} "
            f"{float(self.program_ns)!r} {float(self.step_loop_ns)!r}{gauge}"
        )

    @classmethod
    def parse(cls, line: str) -> Probe | None:
        """The Probe of a `line()`, or None for any other or malformed line."""
        head = f"# {PROBE_KEY}: "
        if not line.startswith(head):
            return None
        try:
            when, kind, steps, kernels, program, step, *gauge = line[len(head) :].split()
            if len(gauge) > 1:
                return None
            sentinel = float(gauge[0]) if gauge else math.nan
            return cls(kind, int(steps), int(kernels), float(program), float(step), when, sentinel)
        except ValueError:
            return None

    @property
    def pool_wakes(self) -> int:
        """Split kernels that wake the thread pool again after the call's first wake-up
        (`SPLIT_KINDS`: one a step after the first)."""
        return self.steps - 1 if self.kind in SPLIT_KINDS else 0

    @property
    def later_wakes(self) -> int:
        """Steps after the first that wake the pool, split loop kernels or YNNPACK reduces
        (`SPLIT_KINDS`, `REDUCE_KINDS`): `fit_probes` leaves out chains of more than
        `FITTED_WAKES`."""
        return self.steps - 1 if self.kind in SPLIT_KINDS | REDUCE_KINDS else 0

    @property
    def reduce_rewakes(self) -> int:
        """1 where a second waking YNNPACK reduce follows the call's first (`REDUCE_KINDS`)."""
        return int(self.kind in REDUCE_KINDS and self.steps >= 2)

    @property
    def overhead_ns(self) -> float:
        """What the call took beyond its steps' in-loop time."""
        return self.program_ns - self.step_loop_ns * self.steps

    def at_speed(self, sentinel_us: float) -> Probe:
        """This probe's times as if measured when the sentinels took `sentinel_us` (itself
        where either is unknown)."""
        if not (math.isfinite(sentinel_us) and math.isfinite(self.sentinel_us)):
            return self
        f = sentinel_us / self.sentinel_us
        return replace(self, program_ns=self.program_ns * f, step_loop_ns=self.step_loop_ns * f)


def pooled(earlier: list[Probe], new: list[Probe], keep: int = 8) -> list[Probe]:
    """`new` with the earlier measurements of the last `keep` - 1 dates. One measurement's
    fit moves with the VM's state over hours (per kernel 1.8-8.3 us on the project's VM,
    2026-11-30); fitted together, the measurements give each a vote."""
    now = {q.measured for q in new}
    dates = sorted({p.measured for p in earlier} - now)
    kept = set(dates[-(keep - 1) :]) if keep > 1 else set()
    return [p for p in earlier if p.measured in kept] + list(new)


def overhead_ratio(then: list[Probe], now: list[Probe], speed_us: float) -> tuple[float, int]:
    """The median over the fitted probes measured both `then` (the latest date's, read at
    `speed_us` as the calibration reads them) and `now` of their overhead now over then, and
    how many there were (NaN, 0 where none). A shared VM's per-call overhead drifts apart from
    its kernels: on the project's Xeon VM (2026-12-06) the probes' overheads ran 0.75-0.77x
    the reference's in two runs of three passes, their in-loop times 0.85x, and the zoo's
    programs (benchmarks/end_to_end.py) fitted as a x kernels + b x overhead gave b/a 0.79
    that day, 0.66-0.90 over 30 saved runs."""
    latest = max((p.measured for p in then), default="")
    was = {
        (p.kind, p.steps): p.at_speed(speed_us)
        for p in then
        if p.measured == latest and p.kind not in UNFITTED_KINDS
    }
    ratios = [
        q.overhead_ns / was[q.kind, q.steps].overhead_ns
        for q in now
        if (q.kind, q.steps) in was and was[q.kind, q.steps].overhead_ns > 0
    ]
    return (float(np.median(ratios)), len(ratios)) if ratios else (math.nan, 0)


@dataclass(frozen=True)
class ProbeFit:
    """Per-call terms beyond the kernels' in-loop times (ns)."""

    base_ns: float
    multi_kernel_ns: float
    kernel_dispatch_ns: float
    rewake_ns: float = math.nan
    reduce_rewake_ns: float = math.nan


def _kernels(fn: Callable[..., jax.Array], args: tuple[jax.Array, ...]) -> int:
    """Kernels of the program as the pipeline's fusion plan on the host counts them."""
    from stablehlo_perf.passes.api import analyze

    rep = analyze(jax.jit(fn).lower(*args), target="host").report
    return sum(1 for g in rep.fusion_groups if g["latency_ns"] > 0)


def measure_probes(repeats: int = 7, passes: int = 5, measured: str = "") -> list[Probe]:
    """Time every probe program as a call and inside a loop, in the same rounds, in `passes`
    independent passes; each probe keeps the median of its passes (the single-pass fits of
    one machine moved the multi-kernel term by 3x). Programs are compiled, and their kernels
    counted, once.

    The in-loop time is the whole program's, not its steps' times added up: XLA recomputes
    a cheap producer in every kernel that reads it, so a chain of `_center` steps runs k
    copies of the first subtract in its last kernel (jax 0.10.2's compiled HLO: each
    subtract_multiply_fusion takes x and every earlier mean), and one step's in-loop time x k
    counted that extra work as per-call cost: 7.4 us per kernel on the project's Xeon VM
    where the other kinds pay 0.02-0.4 (2026-12-01)."""
    key = jax.random.key(0)
    programs, looped, meta = [], [], []
    for kind, (step, build, (m, d)) in STEPS.items():
        x = jax.random.normal(key, (m, d)) * 0.1
        w = jnp.eye(d) + 0.01 * jax.random.normal(key, (d, d))
        for k in BRANCH_COUNTS if build is _branches else CHAIN_LENGTHS:
            fn = build(step, k)
            name = f"{kind}@{k}"
            spec = sweeps.Spec(f"probe-{name}", "f32", (m, d))
            looped.append((name, sweeps.loop_case(spec, fn, (x, w))))
            programs.append(timing.Case(name, jax.jit(fn).lower(x, w).compile(), (x, w)))
            meta.append((kind, k, _kernels(fn, (x, w))))
    program_ns: dict[str, list[float]] = {c.key: [] for c in programs}
    loop_ns: dict[str, list[float]] = {name: [] for name, _ in looped}
    for seed in range(passes):
        per_iter, timed, _ = timing.time_in_loop(looped, repeats=repeats, seed=seed, extra=programs)
        for c in programs:
            program_ns[c.key].append(timed[c.key].median_us * 1e3)
        for name, times in loop_ns.items():
            times.append(per_iter[name][0].median_us * 1e3)
    return [
        Probe(
            kind,
            k,
            n,
            float(np.median(program_ns[f"{kind}@{k}"])),
            float(np.median(loop_ns[f"{kind}@{k}"])) / k,
            measured,
        )
        for kind, k, n in meta
    ]


def fit_probes(
    probes: list[Probe],
    base_ns: float = 0.0,
    long_call: Callable[[float], float] = lambda kernel_ns: 0.0,
) -> ProbeFit:
    """Least absolute deviations, both terms non-negative, of program time minus the steps'
    in-loop time minus `base_ns` (the single-kernel call overhead, fitted from the sweep's
    own programs: every probe runs two kernels or more, so the probes alone cannot tell it
    from the multi-kernel term) and minus `long_call` of the steps' in-loop time (the
    long-call ramp, also the sweep's, on the call's kernels' time as the pass charges it;
    the four shipped references' probes refit to the same terms as with one step's) on
    [kernels >= 2, kernels, split kernels that wake the pool]; `UNFITTED_KINDS` left out.
    Absolute, not squared: the kinds' per-kernel costs differ several-fold (0.7-9 us on the
    project's VM) and squares let the costliest long probe set the slope for all. A split
    probe of more than `FITTED_WAKES` wake-ups is left out: the wake-ups of a long chain
    cost less each (Xeon VM, 2026-12-02: GELU chains of 1-4 steps paid 22-25 us a step, of
    8-64 steps 3-4 us a step beyond the long-call ramp; Zen 5 VM: 8 and 16 steps paid no
    more than 4), where the pass charges each the same. (They were left out where the ramp
    reached them, which took every split probe out of a refit whose ramp started at 28 us.)
    Each split kind has an offset of its own (either sign, not used in predictions): a gelu
    step is more than its split kernel (a YNN mean too, which pays as the centring chains'
    do), and with the offset only the steps after the first set the rewake cost. Fitted
    without it the rewake absorbed a one-step gelu probe's extra cost: 48.0 us on the Zen 5
    VM and 41.3 on the Xeon where their chains add 23-33 us a step (2026-12-02); with it
    23.2 and 27.2 (21.9 and 23.1 since, with `FITTED_WAKES` and the Zen 5 reference's
    re-measured chunks), and the zoo's pipeline MAPE on four saved Zen 5 runs
    22.4 / 13.9 / 16.8 / 21.0% -> 21.8 / 13.7 / 17.3 / 18.2% (benchmarks/end_to_end.py
    --predict-from; the 6-layer transformer's 5 rewakes were charged 240 us where its calls
    paid 138-273 us beyond their kernels in all). A reduce kind (`REDUCE_KINDS`) has an
    offset too (its first sum's wake is the sweep's whole one, not the base), and its chains
    of two to `FITTED_WAKES` + 1 steps set the one-off cost of a second waking reduce: a
    longer chain is a graph of more than 8 kernels that is not a chain (each step reads the
    input), which XLA's executor runs concurrently at a cost of its own (Zen 4 VM,
    2026-12-06: chains of 1 / 2 / 4 / 8 / 16 sums paid 62 / 85 / 90 / 146 / 232 us beyond
    their in-loop time)."""
    probes = [p for p in probes if p.kind not in UNFITTED_KINDS and p.later_wakes <= FITTED_WAKES]
    # The split and reduce kinds' own offsets (either sign).
    offset_kinds = sorted({p.kind for p in probes if p.kind in SPLIT_KINDS | REDUCE_KINDS})
    a = np.array(
        [
            [float(p.kernels >= 2), float(p.kernels), float(p.pool_wakes), p.reduce_rewakes]
            + [float(p.kind == kind) for kind in offset_kinds]
            for p in probes
        ]
    )
    y = np.array(
        [
            p.program_ns - p.steps * p.step_loop_ns - base_ns - long_call(p.steps * p.step_loop_ns)
            for p in probes
        ]
    )
    n, m = a.shape
    # min Σ(u + v) subject to a·coef + u − v = y; coef, u, v >= 0 but the kinds' own
    # offsets, which take either sign.
    res = linprog(
        np.r_[np.zeros(m), np.ones(2 * n)],
        A_eq=np.c_[a, np.eye(n), -np.eye(n)],
        b_eq=y,
        bounds=[(0, None)] * 4 + [(None, None)] * len(offset_kinds) + [(0, None)] * (2 * n),
        method="highs",
    )
    if not res.success:
        raise RuntimeError(f"probe fit failed: {res.message}")
    rewake = float(res.x[2]) if a[:, 2].any() else math.nan
    reduce_rewake = float(res.x[3]) if a[:, 3].any() else math.nan
    return ProbeFit(base_ns, float(res.x[0]), float(res.x[1]), rewake, reduce_rewake)
