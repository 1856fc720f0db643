"""The host's roofline parameters, fitted from a loop calibration of this machine.

The `host` target ships placeholders for memory bandwidth, matrix FLOP rate and
per-kernel overhead (a TOML cannot know the machine). A calibration measured with
`stablehlo-perf-calibrate` times every op inside a loop (its cost within a
program), and these follow from it:

- bandwidth: bytes moved / time of the large f32 binary ops (≥ 1M elements;
  two reads and one write per element), median;
- matrix f32 rate: FLOPs / time of the eight f32 dot_general rows with the most
  FLOPs, median;
- kernel overhead: median time of elementwise ops of ≤ 1024 elements, where the
  work itself is a few nanoseconds: on XLA:CPU a kernel inside a loop costs no more than
  the measurement resolves (0.1 us). Rows up to 4096 elements, as first fitted, put
  1.06 us here (2-3 us of tanh or exp work on the largest), which every fused group of a
  loop body or program then paid on top of its work: 20-trip loops of small kernels were
  predicted 35-75% above their in-loop times, a 186-kernel program ~20% above;
- what a call costs beyond its kernels, from the same ops timed as programs of
  their own (overhead = program time − in-loop time, both net of dispatch). On
  XLA:CPU it is a step: a program whose kernels are all short pays a few
  microseconds, one with a kernel long enough for XLA to split it over the
  thread pool, or with a library call (a dot, a convolution, an FFT) of any size, also
  pays for waking the pool (~0.2 ms on a 2-vCPU VM). Fitted as
  overhead = base + wake · [kernel time ≥ threshold], the threshold chosen among
  the measured kernel times by least absolute error (programs writing < 1 MiB), and a
  woken call pays min(slope · kernel time, wake) of the wake (`wake_slope_fit`);
- what a long call pays on top, growing with its kernels' time: on the Xeon VM,
  single-op programs whose in-loop kernel takes under 200 us pay a median 10-17 us
  beyond it, 200-400 us ones 58 us, 400-800 us ones 168 us, 0.8-6.4 ms ones 240-290 us
  (2,500 rows of the Xeon reference of 2026-12-01, medians by doubling of kernel time).
  In a call, the entry's kernels run on the PjRt client thread beside the pool's
  workers (three runnable threads on two vCPUs); in a loop, on a pool thread. Fitted as
  min(slope · max(kernel time − start, 0), cap), by least relative error on what the
  step leaves (programs writing < 1 MiB); the pass applies it to the entry's makespan
  (its kernels' time, each loop trip's counted), which is the row's kernel time for one
  op. On 2026-12-04 it ran on the call's longest kernel instead: chains of f32 dots of 128
  rows (Zen 4 VM, three runs) paid 48-59 us beyond 4 kernels of 90 us, 49-56 beyond 8 of 40
  and 87-93 beyond 16 of 40, where the ramp on their sums charged 100-150, and the zoo's
  four saved runs went 8.2 / 10.5 / 10.7 / 13.5% -> 8.0 / 8.9 / 9.2 / 11.6% MAPE. With the
  per-call terms fitted since (the split wake, rewakes, a second reduce's wake) the sum
  fits better (Zen 4 VM, 2026-12-07): call minus in-loop time of 13 chains and loops (128
  rows @ 256 or 384 square, 4-16 dots; 5-40 steps of 16x512 @ 512x512 and tanh, straight
  or in a fori_loop; 20 trips of 512x512 @ 512x16; medians of 3 passes, which spread
  2-10x) 50-254 us, the terms with the ramp on the sum off by 515 us in all, on the longest
  kernel 1166 (the long chains and loops charged ~60-100 where they paid 150-250); the zoo
  scored against 13 saved runs pooled (benchmarks/end_to_end.py --predict-from, runs of
  2026-12-05 to 07) MAPE 7.3 -> 6.3%, own level 7.0 -> 6.1%, Kendall τ 0.956 -> 0.959
  (each run alone 0.934-0.950 -> 0.936-0.950), the unseen sets' saved runs within ±0.02
  of their error factors (benchmarks/unseen_programs.py --predict-from);
- per MiB of the program's output, what is left of that overhead for the
  elementwise rows writing at least 1 MiB (size-weighted median of residual / MiB):
  a call writes its outputs to freshly allocated buffers, and the first touch of
  new pages costs (x * 2 on 16 MiB of f32: 1.21 ms as a program, 0.45 ms with the
  input donated so the output reuses its buffer; 2026-11-30, this VM).

Three more come from multi-kernel probe programs (`runtime/program_probes.py`):
what a straight-line program pays once for running more than one kernel, per
kernel, beyond the kernels' in-loop times, and per loop kernel XLA splits over the
pool that finds its threads asleep (`REWAKE_GAP_NS`). All are written into the calibration's
header (`# host_params: ...`) and the target loader applies them when the
calibration was measured on this machine, with two constants measured on this project's VM
and not refitted: `REWAKE_GAP_NS` and `HANDOFF_NS_PER_MIB` (a split kernel's output handed to
a YNNPACK kernel, up to `HANDOFF_CAP_BYTES` of it).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, fields

import numpy as np
from stablehlo_perf.analysis.fusion import (
    ELEMENTWISE_CLASSES,
    library_reduce,
    runs_on_eigen,
    ynn_pools,
    ynn_reduces,
)
from stablehlo_perf.analysis.opinfo import (
    HALF_FLOATS,
    SCALAR_LOOPS,
    OpInfo,
    TensorType,
    element_bytes,
    op_class,
)

__all__ = [
    "CONTENTION_KEY",
    "EIGEN_POOL_MNK",
    "FRESH_PAGES_KEY",
    "HANDOFF_CAP_BYTES",
    "HANDOFF_NS_PER_MIB",
    "HOST_PARAMS_KEY",
    "INLINE_FLOPS",
    "REWAKE_GAP_NS",
    "SINGLE_THREADED",
    "UNFITTED_DTYPES",
    "UNFITTED_ROWS",
    "HostParams",
    "eigen_uses_pool",
    "fit_host_params",
    "long_call_ns",
    "parallel_tasks",
    "reduce_wake_fit",
    "reduce_wakes_pool",
    "runs_on_eigen",
    "splits_over_threads",
    "wakes_by_time",
    "wakes_pool",
    "xla_cpu_flops",
]

HOST_PARAMS_KEY = "host_params"
CONTENTION_KEY = "pool_contention"
"""Calibration header line of the contention probe (`runtime/contention_probes.py`):
`fraction=.. cap_ns=..`, read by the host target (`Target.pool_contention`)."""
FRESH_PAGES_KEY = "fresh_pages"
"""Calibration header line of the fresh-pages probe (`runtime/page_probes.py`):
`ns_per_mib=.. faults_per_mib=..`, read by the host target (`Target.fresh_page_ns_per_mib`)."""
_BINARY = ("add", "multiply", "subtract", "divide")

UNFITTED_ROWS = SCALAR_LOOPS | {
    "sine", "cosine", "tan", "negate", "floor", "conv3d", "pool_grad", "cummax", "sum_pool",
    "sum_groups",
}  # fmt: skip
"""Calibration rows `fit_host_params` leaves out: ops that cost 10-100x what XLA:CPU's cost
model counts for them (one FLOP or transcendental an element; `opinfo.SCALAR_LOOPS`, sines,
cosines, tangents), so whether their programs wake the thread pool or
pay the long-call ramp does not follow their kernels' time as the other rows' does (Zen 4
VM: a 1M-element i32 remainder paid 1.0 ms of call overhead beyond its 0.9 ms kernel, a
power of the same size 67 us beyond 2.7 ms). With their 1500 Zen 4 rows in, the fit moved
its wake threshold from 12.9 to 15.7 us and its ramp's start from 84 to 132 us, and priced
an atan of 37x64 (a 15 us kernel that wakes the pool) at 0.30x its time, not 1.06x. The
special functions' rows, which share the trait, stay in the fit the other parameters were
chosen with. The unary rows (negate, floor), added after the parameters were chosen, are
left out too: their 332 Zen 4 rows moved the output cost per MiB from 19.3 to 22.8 us and
the wake threshold from 12.9 to 13.9, and the unseen programs' error factor from 1.31 /
1.31 / 1.27 / 1.29 / 1.35 to 1.33 / 1.33 / 1.28 / 1.30 / 1.34 (saved runs A-D, F). So are
the volumetric convolutions' (conv3d), added later still: their 289 Zen 4 rows (1-23 ms
kernels among them) moved the wake from 58.9 to 63.5 us, the parallel-kernel threshold from
3.9 to 4.4 us and the ramp's cap from 171 to 191 us, for nothing on the zoo's 13 saved runs
(pooled MAPE 6.0% and Kendall tau 0.956 with them, 6.1% and 0.957 without; 2026-12-07).
The max pools' gradients (pool_grad: select_and_scatter, 10 us-40 ms) stay out as well:
their 96 Zen 4 rows moved the ramp's cap from 171 to 211 us and the program overhead from
1.19 to 1.06 us. So do the running maxima (cummax), summing pools (sum_pool) and group
sums (sum_groups), added after the fit was chosen (the 24 Xeon cummax rows moved the output
cost per MiB 32.0 -> 31.5 us)."""
UNFITTED_DTYPES = frozenset({"f64", "f16", "i32"})
"""Element types whose rows `fit_host_params` leaves out: the parameters were chosen on f32 and
bf16 rows (and the dots' i8), and the Zen 4 reference's 1122 f64 rows moved them (the output
cost per MiB 19.3 -> 30.2 us, the wake threshold 12.9 -> 13.5 us) and the zoo's saved runs'
MAPE up by 0.1-0.5 points, the unseen programs' error factor 1.26-1.35 -> 1.29-1.36. Its f16
rows, many of them scalar calls an element (`elementwise._HALF_SLOT`), moved the output cost
per MiB 19.3 -> 21.2 us; its 67 i32 products (`elementwise.dot_code`; the i32 divisions are
`UNFITTED_ROWS` anyway) the program overhead 1.19 -> 1.04 us."""

_SMALL = 1024
_FLOOR_CLASSES = frozenset({"binary", "compare_select", "convert"})
"""Classes whose rows of at most `_SMALL` elements set the per-kernel floor
(`HostParams.kernel_overhead_ns`): their work there is a few nanoseconds, so their in-loop
time is the kernel's and the loop's own two (counter, test). A transcendental's is work
(a cosine of 544 f32: 2.8 us). The floor was the median of every elementwise class's small
rows while the 32-element rows, whose loops XLA hoisted into one kernel, read the 0.1 us
resolution (`runtime.sweeps.LoopCase.hoisted`): 108.6 ns, with 34 of its 39 rows such."""

_IO_BYTES_PER_TASK = 256 * 1024
_COMPUTE_COST_PER_TASK = 100_000
"""XLA:CPU's parallel task assignment (`xla/service/cpu/parallel_task_assignment.cc`, the
default cost model) splits a loop kernel over its thread pool by the kernel's HLO cost: one
whose FLOPs are at most its bytes accessed is I/O-bound and gets bytes / 256 KiB tasks (at
most ceil(sqrt(cores))); any other gets (FLOPs + 2 transcendentals + 10 bytes) / 100,000
tasks (at most cores), 100,000 being "100 us of work on a 2 GHz core" in its comment. Read
off compiled HLO (`outer_dimension_partitions`, jax 0.10.2, 2 vCPUs): `x * 2` of 65,536 f32
(512 KiB accessed) splits in two and of 32,768 not; a GELU `0.5 x (1 + tanh(c (x + 0.044715
x^3))) + 1` (9 FLOPs, 1 transcendental, 8 bytes an element) splits from 3,072 elements
(280,000) and not at 2,048 (186,000); `gelu(x @ w)` on 16x256 (8 FLOPs per 8 bytes, ratio
1.0) does not split, the transformer's GELU with its bias add (9 FLOPs) does: 6 split
kernels in `deep_transformer(6)`, where the output-size rule that stood here (256 KiB)
found none. Rank does not matter (4096 and 4096x1 split alike)."""
REWAKE_GAP_NS = 5000.0
"""How long the thread pool stays awake after a split kernel: a later split kernel (or Eigen
dot on the pool, `eigen_uses_pool`) that starts more than this after every earlier one ended
finds it asleep and pays `HostParams.rewake_ns` in a call (in a loop, where the calibration times
kernels, the pool never sleeps). Measured call minus in-loop time on this project's Xeon
VM (2026-12-02, medians of 5 passes): chains of 16x256 GELU kernels 1-3 us apart (a small
sum between them) paid 16 / 50 / 99 / 109 us for 1 / 2 / 4 / 8 steps, where one split
kernel after another pays a few us each; a 6-layer transformer (64 wide, 16 rows), whose
GELUs are ~40 us apart, paid 229 us against 130 with ReLUs, which no split kernel has.
5 us lies between those gaps; the probes' GELU steps run theirs 15 us apart."""
HANDOFF_NS_PER_MIB = 135_000.0
"""What a call pays per MiB a loop kernel split over the pool writes for a YNNPACK kernel
(a dot, a convolution or a YNN reduce) to read, beyond both kernels' in-loop times. Measured
call minus in-loop time on this project's Xeon VM (2026-12-02, medians of 5 passes):
`(x[:, ::-1, ::-1] * x).sum(1)` on rows x 8 x 128 f32, whose reverse XLA splits and whose
sum is a YNN reduce, paid 56 / 84 / 165 / 316 us for 64 / 128 / 256 / 512 rows (0.25-2 MiB
handed over; 12 us at 16 and 32 rows, where the reverse is not split): 130-145 us a MiB
beyond the 20 us the other terms give. A gather feeding a row sum paid 78-178 us a MiB, the
same reverse feeding a 2048x128 @ 128x16 dot 121. A call whose kernels are long pays it
inside the long-call ramp's cap (`long_call_ns`: the reverse feeding a 2048x128 @ 128x512
dot paid no more than the dot alone), and the zoo's 512x512 layer norm (a YNN mean, then
the split centring handing 1 MiB to the variance's YNN reduce) and embedding gather (1 MiB
of gathered rows to a YNN sum, dot and tanh) paid 20-80 us beyond the other terms on saved
runs: `HANDOFF_CAP_BYTES` bounds what one kernel hands over."""
HANDOFF_CAP_BYTES = 256 * 1024
"""The most bytes of one split kernel's output that `HANDOFF_NS_PER_MIB` charges for. On 11
saved end-to-end runs of the zoo (this project's Xeon VM), what the call paid beyond every
other term, per program handing 0.25 / 0.5 / 1 MiB over (medians): layer norm 32 / 27 /
43 us, embedding gather 44 / 50 / 60, attention 36 at 0.25 and 72 at 1: flat from a quarter
MiB, where the reverse probes pay 36 us too and then grow (145 at 1 MiB; the zoo's split
kernels, a centring and a gather, do not). Caps of 128 / 192 / 256 / 384 / 512 KiB gave a
mean per-program |error| over those runs of 16.5 / 16.2 / 16.0 / 16.1 / 16.4% (17.3% with
none; layer norm and embedding gather at their two larger sizes 29.3 -> 14.4%); on a fresh
run not used to choose it (2026-12-02) the zoo's MAPE went 16.5 -> 13.9%."""
_LOOP_CLASSES = ELEMENTWISE_CLASSES | {"movement", "constant"}


LIBRARY_CALLS = frozenset({"dot_general", "convolution", "fft"})
"""Ops XLA:CPU runs as library calls (jax 0.10's compiled HLO puts a dot in a `__ynn_fusion`,
YNNPACK) handed to its thread pool whatever their size: in the AMD host reference, 58
dot_general rows with in-loop kernels under the wake threshold (down to 1x1x32x32) pay a
median 82 us of call overhead and 74% of them over 50 us, against 4.5 us for binary rows
of the same kernel times; convolution 75 us, fft 62-114 us from its smallest row.
Programs whose only dot is small (a 20-trip fori_loop over a 128x128 @ 128x16 dot, a scan
over 8x128 @ 128x128) paid 145 us more than the pipeline's 4-13 us on five saved
end-to-end runs. The smallest dots (16x64x64, 1x32x32 standalone) wake in some rounds and
not others; the rule follows the reference's majority."""


INLINE_FLOPS = 1000
"""XLA flops (its HLO cost analysis of the compiled module: a while loop's body counted once,
transcendentals not at all) below which the PjRt CPU client runs a program on the calling
thread; from this many it hands the call to its thread pool and the caller waits for it
(`cheap_computation_` in XLA's `pjrt/cpu/cpu_client.cc`, a "crude heuristic" for work under a
thread switch). Measured on this project's Xeon VM (2026-12-05, jax 0.10.2, medians of 300
calls, dispatch of a 1-element add 6.5 us): an f32 add of 999 elements 6.5 us a call, of 1000
34.8; `2x + 1` of 499 6.3, of 500 9.2; a 20-trip loop of `1.01x + 0.5` on 256 (514 flops)
7.9, on 512 (1026) 36.1; an exp of 4096 (0 flops) 8.0; a 6-kernel softmax of 200 (847 flops)
7.7, of 256 (1023) 37.3. On that VM the reference rows' per-call base
(`HostParams.program_overhead_ns`, 31.5 us fitted on handed-over rows) and multi-kernel cost
are paid from there; charged to every call, the base had priced the zoo's small_loop (a
1000-trip loop on 16-64 elements, 70-260 flops) at 1.9-2.2x its time
(benchmarks/end_to_end.py, four saved runs: MAPE 16.2 / 15.9 / 18.3 / 17.6% -> 11.2 / 10.5 /
12.9 / 12.1%). The Zen 4 VM's handoff costs next to nothing (a base of 0-1 us)."""


_EXPANDED_FLOPS = {"logistic": 3}
"""FLOPs an element of the ops XLA:CPU rewrites an op into: 1 / (1 + exp(-x)) for a logistic
(its cost analysis of a compiled f32 logistic of 1024: 3072 flops, 1024 transcendentals).
On 16-bit floats each of those ops and the exp is widened and narrowed on its own (a bf16
logistic of 1024: 11,264)."""


_CHLO_FLOPS = {"digamma": (73, 75), "erf_inv": (38, 43), "erfc": (60, 62), "lgamma": (52, 54)}
"""FLOPs an element XLA's cost analysis counts for the CHLO special functions it expands into
polynomials (f32, and 16-bit floats with their converts): compiled with jax 0.10.2, an f32
digamma of 1024x1024 counts 76,546,048 flops, an erf_inv 39,845,888, an erfc 62,914,560, an
lgamma 54,525,952; in bf16 78,643,200, 45,088,768, 65,011,712 and 56,623,104."""


def xla_cpu_flops(op: OpInfo) -> float:
    """FLOPs XLA's cost analysis counts for this op once XLA:CPU has compiled it (infinity where
    shapes are dynamic): `OpInfo.flops`, and for an elementwise op on 16-bit floats the
    converts XLA:CPU computes it with (each such operand widened to f32, the result narrowed
    back: a bf16 add of 1024 counts 4096, an exp 2048, jax 0.10.2), and the flops of the ops
    XLA expands a logistic (`_EXPANDED_FLOPS`) or a CHLO special function (`_CHLO_FLOPS`)
    into."""
    if op.flops is None:
        return math.inf
    if op.op_class not in ELEMENTWISE_CLASSES or not op.results:
        return float(op.flops)
    if op.short_name in _CHLO_FLOPS:
        out = op.results[0]
        return float(
            _CHLO_FLOPS[op.short_name][out.element_type in HALF_FLOATS] * (out.num_elements or 0)
        )
    expanded = _EXPANDED_FLOPS.get(op.short_name, 0)
    extra = expanded * (op.results[0].num_elements or 0)
    if op.op_class != "convert":
        widened = sum(
            t.num_elements or 0
            for t in (*op.operands, *op.results[:1])
            if t.element_type in HALF_FLOATS
        )
        extra += widened * (expanded + 1)
    return float(op.flops + extra)


SINGLE_THREADED = frozenset({"top_k"})
"""Ops whose kernel runs on the calling thread however long it takes, so that a program of one
never pays the pool's wake by its time (`wakes_by_time`). In the Zen 5 reference, top_k rows
with kernels of 20-100 us paid a median 40 us less call overhead than the wake would have
added (10 rows), from 100 us 57 us less (17 rows); sorts of 100 us and more paid it (85 rows,
+48 us beyond it), as did argmax and cumsum rows."""


def wakes_by_time(op_names: Sequence[str]) -> bool:
    """Whether a kernel of these ops (short names) wakes XLA:CPU's thread pool once it runs
    longer than the target's `parallel_kernel_ns`: every kernel but a `SINGLE_THREADED` one."""
    return not set(op_names) <= SINGLE_THREADED


def parallel_tasks(flops: float, transcendentals: float, bytes_accessed: float, cores: int) -> int:
    """Tasks XLA:CPU splits a loop kernel of this HLO cost into (`_COMPUTE_COST_PER_TASK`)."""
    accessed = max(bytes_accessed, 1.0)
    if flops <= accessed:
        most, tasks = math.ceil(math.sqrt(cores)), accessed // _IO_BYTES_PER_TASK
    else:
        cost = flops + 2 * transcendentals + 10 * accessed
        most, tasks = cores, cost // _COMPUTE_COST_PER_TASK
    return int(min(most, max(1, tasks)))


def splits_over_threads(
    op_classes: Sequence[str],
    flops: float,
    transcendentals: float,
    bytes_accessed: float,
    cores: int,
) -> bool:
    """Whether XLA:CPU splits a kernel of ops of these classes and this HLO cost over its
    thread pool (`parallel_tasks`; elementwise ops and data movement, not reductions or
    library calls)."""
    return (
        set(op_classes) <= _LOOP_CLASSES
        and parallel_tasks(flops, transcendentals, bytes_accessed, cores) > 1
    )


EIGEN_POOL_MNK = 1 << 20
"""Products m·n·k (batch included) from which an Eigen dot (`runs_on_eigen`) hands its work
to the thread pool. Eigen's contraction picks its thread count from its own cost model
(`TensorCostModel::numThreads`) and runs a small one on the calling thread. Measured call
minus in-loop time on this project's Xeon VM (2026-12-02, medians of 5 passes): x^T g dots of
128x128x32 (0.5M) paid what a YNNPACK dot of the same size pays (17 us against 16; chains of
2 and 4 of them between ReLUs 24-29 us, alternating with YNN dots 23-29, where counting them
as pool kernels predicted 62-145), of 256x256x32 and 128x128x128 (2.1M) 52-68 us, of
256x256x128 (8.4M) 104 us. 1M, between them, counts as on the pool (a two-layer MLP's
gradient, whose largest Eigen dot is 128x256x32, paid ~13 us more than its forward pass)."""


def eigen_uses_pool(op: OpInfo, lhs_permutation: Sequence[int] | None = None) -> bool:
    """Whether this dot_general runs on Eigen (`runs_on_eigen`, with the permutation of a
    transpose producing its lhs) and is large enough for Eigen to hand it to the thread pool
    (`EIGEN_POOL_MNK`)."""
    return runs_on_eigen(op, lhs_permutation) and (op.flops or 0) / 2 >= EIGEN_POOL_MNK


def wakes_pool(op_names: Sequence[str], split: bool, library_reduce: bool = False) -> bool:
    """Whether a kernel of these ops (short names, e.g. `dot_general`) wakes XLA:CPU's thread
    pool whatever its time: a library call (`LIBRARY_CALLS`, or with `library_reduce` a
    reduction XLA:CPU hands to YNNPACK: `fusion.cpu_reduce_mode`) or a loop kernel `split`
    over threads (`splits_over_threads`).

    YNNPACK reductions pay the wake as its dots do: the AMD reference's reduce rows of
    5-50 us kernels paid a median 145 us of call overhead (dots 106, adds 71), the Xeon
    reference's 33 (dots 13, adds 12)."""
    return library_reduce or split or bool(LIBRARY_CALLS.intersection(op_names))


def reduce_wakes_pool(op: OpInfo, wake_bytes: float) -> bool:
    """Whether a reduce XLA:CPU hands to YNNPACK (`fusion.cpu_reduce_mode`) wakes the thread
    pool: when its input holds more than `wake_bytes` (`reduce_wake_fit`); below, YNNPACK
    runs it on the calling thread. A YNNPACK pool (reduce_window) always does."""
    if not library_reduce(op):
        return False
    if op.short_name != "reduce":
        return True
    src = op.operands[0]
    return (src.num_elements or 0) * element_bytes(src.element_type) > wake_bytes


@dataclass(frozen=True)
class HostParams:
    """Measured roofline parameters of one machine (NaN where the calibration lacks the rows)."""

    bandwidth_gbps: float
    f32_tflops: float
    kernel_overhead_ns: float
    program_overhead_ns: float = math.nan
    threadpool_wake_ns: float = math.nan
    parallel_kernel_ns: float = math.nan
    output_ns_per_mib: float = math.nan
    # From multi-kernel probe programs (runtime/program_probes.py), not from the rows.
    multi_kernel_ns: float = math.nan
    kernel_dispatch_ns: float = math.nan
    # From the fused bf16 chain probe (runtime/fused_probes.py): ns per element per op.
    bf16_fused_ns_per_elem: float = math.nan
    # The long-call ramp (`long_call_ns`).
    long_call_start_ns: float = math.nan
    long_call_slope: float = math.nan
    long_call_cap_ns: float = math.nan
    # From the probes whose steps each run a split loop kernel (runtime/program_probes.py).
    rewake_ns: float = math.nan
    # From the fused transpose probe (runtime/fused_probes.py): ns per element, and where the
    # transpose's reads are a multiple of `fusion_cost.ALIASED_STRIDE_BYTES` apart.
    transpose_fused_ns_per_elem: float = math.nan
    transpose_fused_aliased_ns_per_elem: float = math.nan
    # How much of the wake a short call pays per ns of its kernels on the pool
    # (`wake_slope_fit`; infinity: all of it).
    threadpool_wake_slope: float = math.nan
    # From the fused transpose probe whose reads miss the L2 (runtime/fused_probes.py:
    # `measure_transpose_l2`): ns per element.
    transpose_fused_l2_ns_per_elem: float = math.nan
    # Input bytes above which a YNNPACK reduce wakes the pool (`reduce_wake_fit`).
    reduce_wake_bytes: float = math.nan
    # From the probes of chained YNNPACK reduces (runtime/program_probes.py): what a call
    # pays once for a second reduce that wakes the pool.
    reduce_rewake_ns: float = math.nan
    # The wake a call running a loop kernel split over the pool pays (`fit_host_params`).
    split_wake_ns: float = math.nan

    def long_call(self, kernel_ns: float) -> float:
        """`long_call_ns` with these parameters (0 where they are unknown)."""
        return long_call_ns(
            kernel_ns, self.long_call_start_ns, self.long_call_slope, self.long_call_cap_ns
        )

    def header(self) -> str:
        """`key=value` pairs for the calibration header."""
        return " ".join(f"{f.name}={getattr(self, f.name):.6g}" for f in fields(self))

    @classmethod
    def parse(cls, text: str) -> HostParams | None:
        """The inverse of `header`; None if a required field is missing or a value malformed."""
        try:
            pairs = dict(item.split("=", 1) for item in text.split())
            return cls(**{f.name: float(pairs[f.name]) for f in fields(cls) if f.name in pairs})
        except (KeyError, ValueError, TypeError):
            return None


def _step_fit(
    kernel_us: np.ndarray,
    overhead_us: np.ndarray,
    wakes: np.ndarray,
    timed: np.ndarray,
    handed: np.ndarray,
) -> tuple[float, float, float]:
    """(base, wake, threshold) minimising
    Σ|overhead − base·handed − wake·[kernel ≥ threshold, timed and handed, or wakes]|:
    a call of `INLINE_FLOPS` or more is `handed` to the pool and pays the base, a library
    call or a kernel XLA splits over threads (`wakes`) wakes the pool whatever its time, a
    `SINGLE_THREADED` one (not `timed`) never, nor a long kernel of a call run on the
    calling thread: the Zen 4 reference's 96 rows of unsplit transcendentals of 0 XLA flops
    (exp, log, tanh, sqrt, erf, atan in f32) whose kernels take 14-140 us paid a median
    -1.5 us, its 118 of 1000+ flops (their bf16 forms, logistic, rsqrt) 50 us."""
    best = (np.inf, 0.0, 0.0, math.inf)
    for tau in np.unique(np.quantile(kernel_us, np.linspace(0.05, 0.95, 37))):
        woke = ((kernel_us >= tau) & timed & handed) | wakes
        if not woke.any() or woke.all():
            continue
        below = overhead_us[~woke & handed]
        base = float(np.median(below)) if len(below) else 0.0
        paid = base * handed
        wake = max(float(np.median(overhead_us[woke] - paid[woke])), 0.0)
        cost = np.abs(overhead_us - paid - wake * woke).sum()
        if cost < best[0]:
            best = (cost, base, wake, float(tau))
    return best[1], best[2], best[3]


_WAKE_SLOPES = np.r_[np.arange(0.5, 10.01, 0.25), np.inf]


def wake_slope_fit(
    kernel_us: np.ndarray, overhead_us: np.ndarray, base_us: float, wake_us: float
) -> float:
    """The slope k minimising Σ|overhead − base − min(k · kernel, wake)| over programs that
    wake the pool (`_step_fit`'s), among 0.5-10 by 0.25 and infinity (the plain step).

    A call whose kernel is short pays less than the whole wake: its kernel runs on the
    calling thread while the pool's threads wake, and the call ends when the kernel does.
    The references' single-op programs of library or split kernels under 16 us paid 1 us
    (kernels of 0-2 us), 7 (2-4), 18 (4-8), 30 (8-16), 45-48 (16-32) and the full 54 from
    32 us (Zen 4 VM, 2026-12-05); on their woken rows under 16 us the step's mean absolute
    error was 37.4 / 21.4 / 8.9 us (Zen 4 / Zen 5 / Xeon references), with k = 2.5 15.2 /
    12.0 / 6.3 (fitted: 2.5, 4, 2.5; 5.25 on the Xeon's one-thread reference). Split loop
    kernels are none of them (`fit_host_params` charges them the whole wake): apart, the Zen 4
    reference's dots of 4-8 / 8-12 / 12-16 us paid a median 15 / 17 / 30 us beyond the base,
    its split loop rows 62 / 68 / 77 (2026-12-06; fitted k 2.25 -> 1.75). The pass
    applies it to the time of all the call's kernels on the pool, each run of a loop's
    counted (`passes.critical_path`): the zoo's loops of short dots and its 162-kernel
    transformer pay the whole wake (benchmarks/end_to_end.py), where a slope on the call's
    longest kernel alone would charge them 7-30 us."""
    if len(kernel_us) == 0:
        return math.nan
    pred = base_us + np.minimum(_WAKE_SLOPES[:, None] * kernel_us[None, :], wake_us)
    cost = np.abs(overhead_us[None, :] - pred).sum(axis=1)
    return float(_WAKE_SLOPES[int(np.argmin(cost))])


def _sloped_threshold(
    kernel_us: np.ndarray,
    beyond_us: np.ndarray,
    timed: np.ndarray,
    wakes: np.ndarray,
    whole: np.ndarray,
    wake_us: float,
    step_tau: float,
) -> tuple[float, float]:
    """(threshold, slope) minimising Σ|overhead beyond the base − paid·min(slope · kernel,
    wake)| (`whole` rows the whole wake), the threshold among the kernel times' quantiles
    up to the step's (`_step_fit`), the slope `wake_slope_fit`'s for each.

    The step fit puts the threshold where a plain step errs least, above the kernels that
    pay part of the wake: the Zen 4 reference's unsplit rows of 1000+ XLA flops paid a
    median 0-0.5 us under 4 us of kernel, 13 (4-10 us), 25 (10-14), 30-39 (14-25) and 54-58
    from 25 us, where its threshold stood at 15.6 us."""
    taus = np.unique(np.quantile(kernel_us, np.linspace(0.05, 0.95, 37)))
    best = (np.inf, step_tau, math.nan)
    for tau in [*taus[taus < step_tau], step_tau]:
        paid = ((kernel_us >= tau) & timed) | wakes
        sloped = paid & ~whole
        slope = wake_slope_fit(kernel_us[sloped], beyond_us[sloped], 0.0, wake_us)
        charged = np.where(paid, np.minimum(slope * kernel_us, wake_us), 0.0)
        cost = np.abs(beyond_us - np.where(whole, wake_us, charged)).sum()
        if cost < best[0]:
            best = (cost, float(tau), slope)
    return best[1], best[2]


def reduce_wake_fit(input_bytes: np.ndarray, overhead_us: np.ndarray, wake_us: float) -> float:
    """The input size T (bytes) minimising Σ|overhead − wake·[bytes > T]| over the rows of
    YNNPACK reduces (their overhead beyond the base), among 0 and the rows' sizes.

    A YNNPACK reduce pays the whole wake or none of it, whatever its kernel's time (no
    `wake_slope_fit` slope): sums of 64x512, 32x1024, 128x256 and 32768 f32 (128 KiB) paid
    0.5 us beyond the dispatch floor, of 64x513, 32x1025, 128x257 and 32769 f32 70-90 us, and
    bf16 ones step at 64x1024 -> 64x1025 (128 KiB) alike (Zen 4 VM, 2026-12-06); the Zen 4
    and Zen 5 references' reduce rows up to 128 KiB paid a median 3.9 and 3.8 us, larger
    ones 62 and 50, where the Xeon reference's paid 61 and 94: every one wakes there."""
    if len(input_bytes) == 0:
        return math.nan
    candidates = np.r_[0.0, np.unique(input_bytes)]
    pred = wake_us * (input_bytes[None, :] > candidates[:, None])
    cost = np.abs(overhead_us[None, :] - pred).sum(axis=1)
    return float(candidates[int(np.argmin(cost))])


def long_call_ns(kernel_ns: float, start_ns: float, slope: float, cap_ns: float) -> float:
    """What a call whose kernels take `kernel_ns` pays beyond the step's terms:
    min(slope · max(kernel − start, 0), cap); 0 where a parameter is unknown (NaN)."""
    if math.isnan(start_ns) or math.isnan(slope) or math.isnan(cap_ns):
        return 0.0
    return min(slope * max(kernel_ns - start_ns, 0.0), cap_ns)


def _ramp_fit(kernel_us: np.ndarray, residual_us: np.ndarray) -> tuple[float, float, float]:
    """(start, slope, cap) minimising Σ|residual − min(slope · max(kernel − start, 0), cap)|
    / kernel over a grid: starts at the kernel times' quantiles, slopes 0-1 by 0.025, caps
    at the residuals' quantiles (or none); a zero slope (no ramp) is among the candidates.
    Relative, not absolute: the few rows of milliseconds scatter by ±1 ms and an absolute
    fit let them set a 2.5% slope from 22 us where the rows' medians by kernel time step
    from ~0 below 150 us to 240-290 us beyond 1 ms (Xeon reference, 2026-12-01)."""
    starts = np.unique(np.quantile(kernel_us, np.linspace(0.5, 0.99, 50)))
    slopes = np.arange(0.0, 1.0001, 0.025)
    # Caps among what the rows a ramp can reach (from the first start) have left over.
    reach = residual_us[kernel_us >= starts[0]]
    caps = np.r_[np.unique(np.quantile(reach, np.linspace(0.5, 0.995, 40))), np.inf]
    weight = 1.0 / kernel_us
    best = (float((weight * np.abs(residual_us)).sum()), 0.0, 0.0, 0.0)
    for start in starts:
        over = np.maximum(kernel_us - start, 0.0)
        ramp = np.minimum(slopes[:, None, None] * over[None, None, :], caps[None, :, None])
        cost = (weight * np.abs(residual_us[None, None, :] - ramp)).sum(axis=2)
        i, j = np.unravel_index(np.argmin(cost), cost.shape)
        if cost[i, j] < best[0]:
            best = (float(cost[i, j]), float(start), float(slopes[i]), float(caps[j]))
    return best[1], best[2], best[3]


# Calibration rows of one-input reductions, and the axis each sums.
_SUM_AXES = {"reduce": -1, "sum_axis0": 0, "sum_axis1": 1}
_SUM_ROWS = frozenset(_SUM_AXES)


_ROW_CORES = 2
"""Threads of the machines the references were measured on (2-vCPU VMs)."""


def _reduce_row_bytes(op: str, dtype: str, shape: tuple[int, ...]) -> float:
    """Input bytes of a calibration row's YNNPACK reduce (`fusion.ynn_reduces`); NaN for
    every other row."""
    n = math.prod(shape)
    if op in _SUM_ROWS and ynn_reduces(dtype, n):
        return n * element_bytes(dtype)
    return math.nan


def _row_splits(op: str, dtype: str, shape: tuple[int, ...]) -> bool:
    """Whether XLA:CPU splits a calibration row's loop kernel over its threads
    (`splits_over_threads`; a gather row is (table rows, width, indices): it writes width x
    indices). An elementwise row's kernel reads its operands (two for a binary op) and writes
    its result, its FLOPs as XLA counts them (`_row_flops`) and a transcendental an element
    of a transcendental op."""
    out = math.prod(shape[1:]) if op == "gather" else math.prod(shape)
    klass = op_class(f"stablehlo.{op}")
    accessed = out * element_bytes(dtype) * (3 if klass == "binary" else 2)
    transcendental = klass == "transcendental"
    flops = _row_flops(op, dtype, shape)
    if not math.isfinite(flops):
        flops = 0 if transcendental else out
    return splits_over_threads([klass], flops, out if transcendental else 0, accessed, _ROW_CORES)


def _row_wakes(op: str, dtype: str, shape: tuple[int, ...]) -> bool:
    """Whether a calibration row's program wakes the thread pool whatever its time
    (`wakes_pool`): a library call, a YNNPACK reduce or pool, a split loop kernel."""
    library_reduce = math.isfinite(_reduce_row_bytes(op, dtype, shape))
    if op == "reduce_window":  # a max pool (nb, h, w, c, window, stride): runtime/sweeps.py
        k, stride = shape[4:6]
        library_reduce = ynn_pools(dtype, "maximum", (k, k), (stride, stride), math.prod(shape[:4]))
    return wakes_pool([op], _row_splits(op, dtype, shape), library_reduce)


_ROW_EXTRA_FLOPS = {"select": (1, 1), "rsqrt": (1, 3)}
"""FLOPs an element the rows of these ops run beside the op itself (`runtime.sweeps`: a
select's predicate is a compare, an rsqrt is rsqrt(x + 1e-5)), on f32 and on 16-bit floats
(the add widened and narrowed: XLA counts a bf16 row's rsqrt of 1024 as 5120 flops)."""


def _row_flops(op: str, dtype: str, shape: tuple[int, ...]) -> float:
    """XLA flops of a calibration row's program (`xla_cpu_flops`; `runtime.sweeps` makes the
    programs): an elementwise row on its operands (two for a binary op, a predicate and two
    values for a select), data movement none, a sum one an element it folds in (16-bit
    floats widened and its result narrowed); infinity for the other rows (dots, sorts,
    argmaxes, windows, scans), which count as handed to the pool (`INLINE_FLOPS`)."""
    n = math.prod(shape[1:]) if op == "gather" else math.prod(shape)
    klass = op_class(f"stablehlo.{op}")
    half = dtype in HALF_FLOATS
    if klass == "movement":
        return 0.0
    if op in _SUM_AXES:
        kept = n // shape[_SUM_AXES[op]]
        return float(n - kept + (n + kept if half else 0))
    if klass not in ELEMENTWISE_CLASSES:
        return math.inf
    t = TensorType(shape, dtype)
    arity = 3 if op == "select" else 2 if klass == "binary" else 1
    info = OpInfo.build(0, f"stablehlo.{op}", [t] * arity, [t])
    return xla_cpu_flops(info) + n * _ROW_EXTRA_FLOPS.get(op, (0, 0))[half]


def _output_mib(op: str, dtype: str, shape: tuple[int, ...]) -> float:
    """MiB an elementwise row's program writes (its shape in its dtype); NaN for other ops."""
    if op_class(f"stablehlo.{op}") not in ELEMENTWISE_CLASSES:
        return math.nan
    return math.prod(shape) * element_bytes(dtype) / 2**20


def _per_mib(mib: np.ndarray, residual_us: np.ndarray) -> float:
    """Size-weighted median of residual / MiB over rows writing at least 1 MiB (ns per MiB)."""
    keep = np.isfinite(mib) & (mib >= 1.0)
    if keep.sum() < 3:
        return math.nan
    w, q = mib[keep], residual_us[keep] / mib[keep]
    order = np.argsort(q)
    cum = np.cumsum(w[order])
    return max(float(q[order][np.searchsorted(cum, cum[-1] / 2)]), 0.0) * 1e3


_WIDE_ROW = 64


def _narrow_rows(shape: tuple[int, ...]) -> bool:
    """Whether a tensor's rows are shorter than `_WIDE_ROW` elements: XLA:CPU's loop then runs
    its vector tail on much of every row and is compute-bound (`analysis.elementwise`
    vector_tail: 4248x7 f32 add at 1.9 ns per element, 22191x64 at 0.3), so its time is no
    bandwidth. The Xeon reference's 479157x3 and 236287x6 adds, multiplies and divides
    (5-16 GB/s) put the median of its 18 rows of 1M+ elements at 22.7 GB/s; the other 12 give
    28.9."""
    return len(shape) > 1 and shape[-1] < _WIDE_ROW


def fit_host_params(
    rows: Sequence[tuple[str, str, tuple[int, ...], float, float]],
) -> HostParams:
    """Fit from (op, dtype, shape, in-loop time, standalone program time) rows, times in µs
    (the program time may be NaN: then the call overhead stays unknown)."""
    bw, rate, small, kernel, program, mib = [], [], [], [], [], []
    wakes, timed, handed, reduced, split = [], [], [], [], []
    for op, dtype, shape, t_us, program_us in rows:
        if op in UNFITTED_ROWS or dtype in UNFITTED_DTYPES:
            continue
        if math.isfinite(program_us) and t_us > 0:
            kernel.append(t_us)
            program.append(program_us)
            mib.append(_output_mib(op, dtype, shape))
            wakes.append(_row_wakes(op, dtype, shape))
            reduced.append(_reduce_row_bytes(op, dtype, shape))
            split.append(_row_splits(op, dtype, shape))
            timed.append(wakes_by_time([op]))
            handed.append(_row_flops(op, dtype, shape) >= INLINE_FLOPS)
        if t_us <= 0:
            continue
        numel = math.prod(shape)
        if op in _BINARY and dtype == "f32" and numel >= 1 << 20 and not _narrow_rows(shape):
            bw.append(3 * 4 * numel / t_us / 1e3)
        elif op == "dot_general" and dtype == "f32" and len(shape) == 4:  # operands M x K, K x N
            b, m, n, k = shape
            rate.append((2 * b * m * n * k, 2 * b * m * n * k / t_us / 1e6))
        if op_class(f"stablehlo.{op}") in _FLOOR_CLASSES and numel <= _SMALL:
            small.append(t_us * 1e3)
    rate.sort()
    top = [r for _, r in rate[-8:]]
    base = wake = tau = k_wake = per_mib = start = slope = cap = threshold = math.nan
    split_wake = math.nan
    if len(kernel) >= 8:
        k, out_mib, woke = np.array(kernel), np.array(mib), np.array(wakes, dtype=bool)
        by_time, pooled = np.array(timed, dtype=bool), np.array(handed, dtype=bool)
        overhead = np.array(program) - k
        small_out = ~(out_mib >= 1.0)  # NaN (not elementwise) counts as small
        red_bytes = np.array(reduced)
        ynn = np.isfinite(red_bytes)

        def step(woken: np.ndarray) -> tuple[float, float, float]:
            return _step_fit(
                k[small_out], overhead[small_out], woken[small_out], by_time[small_out],
                pooled[small_out],
            )  # fmt: skip

        # Every YNNPACK reduce taken to wake first; then the size from which they do.
        base, wake, tau = step(woke)
        fit = small_out & ynn
        threshold = reduce_wake_fit(red_bytes[fit], (overhead - base * pooled)[fit], wake)
        if math.isfinite(threshold):
            woke = np.where(ynn, red_bytes > threshold, woke)
            base, wake, tau = step(woke)
        # A YNNPACK reduce or a split loop kernel pays the whole wake, whatever its time.
        split_rows = np.array(split, dtype=bool) & woke
        whole = (ynn & woke) | split_rows
        beyond = overhead - base * pooled
        tau, k_wake = _sloped_threshold(
            k[small_out], beyond[small_out], (by_time & pooled)[small_out],
            woke[small_out], whole[small_out], wake, tau,
        )  # fmt: skip
        paid = ((k >= tau) & by_time & pooled) | woke

        def left_ramp(split_us: float) -> tuple[np.ndarray, float, float, float, np.ndarray]:
            """What the rows pay beyond the base and the wake (`split_us` for a split loop
            kernel's), the long-call ramp fitted on it, and the ramp of each row."""
            charged = np.where(whole, wake, np.where(paid, np.minimum(k_wake * k, wake), 0.0))
            left = beyond - np.where(split_rows, split_us, charged)
            start, slope, cap = _ramp_fit(k[small_out], left[small_out])
            ramp = [long_call_ns(t * 1e3, start * 1e3, slope, cap * 1e3) / 1e3 for t in k]
            return left, start, slope, cap, np.array(ramp)

        left, start, slope, cap, ramp = left_ramp(wake)
        # A split loop kernel's wake, apart from the library calls' (`split_wake_ns`): the
        # Zen 4 reference's split rows under 100 us paid a median 70.6 us beyond the base,
        # its YNNPACK reduces 50.1, its dots and convolutions of 32-100 us 48.5 (2026-12-06).
        own = split_rows & small_out
        if own.any():
            split_wake = float(np.median((beyond - ramp)[own]))
            left, start, slope, cap, ramp = left_ramp(split_wake)
        per_mib = _per_mib(out_mib, left - ramp)
    return HostParams(
        bandwidth_gbps=float(np.median(bw)) if bw else math.nan,
        f32_tflops=float(np.median(top)) if top else math.nan,
        kernel_overhead_ns=float(np.median(small)) if small else math.nan,
        program_overhead_ns=max(base, 0.0) * 1e3,
        threadpool_wake_ns=wake * 1e3,
        parallel_kernel_ns=tau * 1e3,
        threadpool_wake_slope=k_wake,
        reduce_wake_bytes=threshold,
        split_wake_ns=max(split_wake, 0.0) * 1e3 if math.isfinite(split_wake) else math.nan,
        output_ns_per_mib=per_mib,
        long_call_start_ns=start * 1e3,
        long_call_slope=slope,
        long_call_cap_ns=cap * 1e3,
    )
