"""The cost of a fused kernel, and how it is shared among the ops it contains.

A fusion group runs as one kernel (or `launches` kernels where XLA:CPU adds
helpers): it reads its external inputs once, writes its outputs once, and
its internal tensors never touch memory. Its latency is

    max(roofline of the group: FLOPs / peak, (input + output bytes) / bandwidth
        — on a GPU, inputs the cache-traffic pass found in L2 move at L2 bandwidth; on a
        CPU, a reduction YNNPACK runs on a tensor smaller than a core's L2 moves its
        group's bytes at its own measured rate —,
        on a CPU with several members the group's memory time plus every member's
        compute, elsewhere the slowest member priced by a dedicated model less its
        launch overhead)
    + one launch overhead per kernel,

so a dot priced by the systolic model keeps its MXU time and its fused
epilogue adds only what it cannot hide. A CPU kernel of several ops runs every
member's code for each element on the same cores, so members' compute adds up
there (a GELU's tanh, multiplies and adds are paid one after another), but the
tensors move once: a member's compute is its measured time less its launch and
less the time its own operands and result take at the target's bandwidth. The
member's own time is no floor there: a layer norm's `x - mean` was measured
reading two full tensors, and fused it reads one. (Adding whole member times
charged a 512x512 layer norm's eight-op loop 362 us where XLA's kernel takes
~55 us; on the same three runs of benchmarks/end_to_end.py this took pipeline
MAPE from 29.1 / 23.0 / 33.7% to 20.7 / 19.2 / 24.1%.) Each member op reports a
share of the group's latency and DRAM bytes in proportion to its own unfused
latency (the group total is what the schedule uses).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from stablehlo_perf.analysis.fusion import (
    ELEMENTWISE_CLASSES,
    INDEX_MOVES,
    FusionPlan,
    GroupTraffic,
    library_reduce,
)
from stablehlo_perf.analysis.opinfo import (
    READS_PART,
    READS_WHAT_IT_RETURNS,
    WRITTEN_AS,
    OpInfo,
    moves_minor_axis,
    transpose_read_stride_bytes,
)
from stablehlo_perf.analysis.scans import executed_flops, rewritten_scan
from stablehlo_perf.analysis.service import DEAD_MODEL, FREE_MODEL, OpCost
from stablehlo_perf.analysis.targets import Target

if TYPE_CHECKING:  # the fused-loop model imports scikit-learn: loaded only on the host
    from stablehlo_perf.analysis.fused_loops import Composition, FusedLoopModel

__all__ = [
    "ALIASED_STRIDE_BYTES",
    "PAGE_BYTES",
    "UNMEASURED",
    "GroupCost",
    "member_compute_ns",
    "price_groups",
    "sum_absorbs",
    "transpose_footprint_bytes",
    "unmeasured",
]


@dataclass(frozen=True)
class GroupCost:
    """One fusion group's latency, DRAM bytes and the model that set it; `streamed` where
    that latency is the group's bytes at the target's memory bandwidth (a roofline, or the
    members' compute plus those bytes), not a dedicated model's time."""

    latency_ns: float
    dram_bytes: int
    model: str
    streamed: bool = False


def _input_hit_rate(members: Sequence[OpInfo]) -> float:
    """Share of a group's reads that hit in L2, from the cache-traffic pass's per-op rates
    (weighted by each op's operand bytes); 0 where that pass did not run."""
    read = hit = 0.0
    for op in members:
        rate = op.attrs.get("l2_hit_rate")
        if rate is None:
            continue
        nbytes = sum(t.nbytes or 0 for t in op.operands)
        read += nbytes
        hit += rate * nbytes
    return hit / read if read else 0.0


def _moved_bytes(op: OpInfo) -> int:
    """The bytes an op's own measured time moved (operands read, result written); a gather
    reads the rows it returns, not its whole table; an outer product (`WRITTEN_AS`), priced as
    the multiply it becomes, was measured on operands of its result's shape."""
    if WRITTEN_AS in op.attrs and op.results:
        return (len(op.operands) + 1) * (op.results[0].nbytes or 0)
    nbytes = op.bytes or 0
    if op.short_name in READS_PART - READS_WHAT_IT_RETURNS and op.operands and op.results:
        table = op.operands[0].nbytes or 0  # counted in op.bytes, as XLA's cost analysis does
        nbytes += min(op.results[0].nbytes or 0, table) - table
    return nbytes


def _memory_ns(op: OpInfo, target: Target) -> float:
    """Time to move `_moved_bytes` of an op at memory bandwidth."""
    return _moved_bytes(op) / target.memory_bandwidth * 1e9


_TINY = 1024
"""Elements up to which a fused member adds no compute of its own on a CPU: its measured
time is the per-kernel floor of a loop kernel (the fused kernel pays one), not work. The
take_along_axis of softmax cross-entropy fuses 24 ops on 64 elements; their learned times
(0.2-3.9 us each) priced XLA's 1.3 us kernel (jax.profiler, in a loop) at 12.2 us.
A transcendental's time is work even there (Xeon reference: cosine of 544 f32 2.8 us; a
loop of cos(v) * 0.95 on 512 floats, 1.9 us a trip, was priced 0.3)."""


def _tiny(op: OpInfo) -> bool:
    """Whether an op touches at most `_TINY` elements (its results and, unless it reads only
    what it returns — a gather, a slice —, its operands) and is not a transcendental."""
    if op.op_class == "transcendental":
        return False
    tensors = op.results if op.short_name in READS_PART else (*op.operands, *op.results)
    return all((t.num_elements or 0) <= _TINY for t in tensors)


# Cost models that price an op from its work alone, not from a measurement of it.
UNMEASURED = frozenset({"roofline", "roofline+l2", FREE_MODEL, DEAD_MODEL})


def unmeasured(model: str) -> bool:
    """Whether a cost's model label is one of `UNMEASURED`, bare or with a note after it (the
    learned model's fallback for a class without data: `roofline(hgb-host: no fft data)`)."""
    return model.split("(")[0] in UNMEASURED


def _l2_bytes(target: Target) -> float:
    """One core's L2 cache in bytes (0 where the target does not know it)."""
    return target.onchip_mib.get("l2", 0.0) * 2**20


def _reduces_rows(op: OpInfo) -> bool:
    """Whether op reduces its operand's last dimension (contiguous rows, as a row sum)."""
    src = op.operands[0] if op.operands else None
    rank = len(src.shape) if src is not None and src.shape is not None else 0
    return rank > 0 and rank - 1 in (op.attrs.get("dimensions") or ())


def _elements(op: OpInfo) -> int | None:
    """Elements of an op's first result."""
    return op.results[0].num_elements if op.results else None


def _llc_bytes(target: Target) -> float:
    """The last-level cache in bytes (the L2 where the target does not know it; 0 where it
    knows neither)."""
    return target.onchip_mib.get("llc", target.onchip_mib.get("l2", 0.0)) * 2**20


def _library_reduce_bandwidth(op: OpInfo, cost: OpCost, overhead_ns: float) -> float | None:
    """Bytes per second a one-input reduction XLA:CPU hands to YNNPACK moves, from its own
    measured time (None for any other op). From a core's L2 the library streams faster
    than XLA's loops, from which the target's bandwidth is fitted (Xeon VM, 2026-12-01:
    f32 sum rows of 256K+ elements 44 GB/s, large adds 22.7; a 512x512 layer norm's two
    row reductions were priced 47 us each, measured 14-25), and from the last-level cache
    too where that is large: on the Zen 5 VM (1 MiB L2, 32 MiB L3, 2026-12-02) its sum rows
    of 1-9 MiB ran at 60-125 GB/s and in-loop row means of 512-4096 x 512 (sums of squares
    alike) at 80-170 GB/s, where the target's 35.9 GB/s priced them 2.8-5.4x their time.
    The measured rows set the bandwidth at each size (the Xeon's fell to 35 GB/s beyond
    3 MiB); beyond the last-level cache the target's bandwidth holds. That is for reductions
    of rows (the last dimension); the column sums' rows ran at 10-23 GB/s beyond 5 MiB,
    and reductions over leading dimensions beyond L2 keep the target's bandwidth (priced
    by their own, a 8x28x28x256 global average pool went 0.81 -> 0.56x its time)."""
    return _measured_rate(op.bytes or 0, cost, overhead_ns) if library_reduce(op) else None


def _gather_bandwidth(op: OpInfo, cost: OpCost, overhead_ns: float) -> float | None:
    """Bytes per second a gather moves, from its own measured time (None for any other op).
    Its rows are contiguous copies, faster than XLA's elementwise loops stream, from which
    the target's bandwidth is fitted: on the Zen 5 VM (2026-12-02) an embedding lookup of
    512-2048 rows of 128 f32 from a 5000-row table took 3.9-10.8 us in a loop (100-190 GB/s
    moved), priced 14.8-58.8 us by its group's bytes at the target's 35.9 GB/s."""
    return (
        _measured_rate(_moved_bytes(op), cost, overhead_ns) if op.short_name == "gather" else None
    )


def _movement_bandwidth(
    members: Sequence[OpInfo], costs: Sequence[OpCost], overhead_ns: float
) -> float | None:
    """Bytes per second a loop kernel of data movement alone (broadcasts, copies, slices,
    pads, concatenations and constants: no arithmetic) moves, from its slowest member's
    measured rate (None for a kernel that computes, or with no measured member). Such a
    kernel streams at copy speed, beyond the elementwise loops' rate the target's bandwidth
    is fitted from: on the Zen 5 VM (2026-12-03, in a loop) a fill of 1 / 4 / 16 MiB of f32
    from a scalar took 7.5 / 62 / 151 us (140 / 68 / 111 GB/s), priced 23 / 93 / 373 us by
    its bytes at the target's 45 GB/s; the reference's copies of 1-9 MiB ran at 96-245 GB/s."""
    if any(op.op_class not in ("movement", "constant") for op in members):
        return None
    rates = [
        _measured_rate(_moved_bytes(op), c, overhead_ns)
        for op, c in zip(members, costs, strict=True)
        if op.op_class == "movement"
    ]
    known = [r for r in rates if r is not None]
    return min(known) if known else None


def _measured_rate(nbytes: float, cost: OpCost, overhead_ns: float) -> float | None:
    """Bytes per second an op moving `nbytes` moved in its own measured time beyond its
    launch (None where its cost is no measurement or leaves no time)."""
    t_ns = cost.latency_ns - overhead_ns
    if not nbytes or unmeasured(cost.model) or t_ns <= 0:
        return None
    return nbytes / t_ns * 1e9


def _bf16_floor_ns(op: OpInfo, target: Target) -> float:
    """The least a bf16 member of a fused CPU loop computes: XLA:CPU widens its operands
    to f32 and rounds its result back per op (`Target.bf16_fused_ns_per_element`), work
    a standalone bf16 op hides under its memory traffic (1024x1024 GELU of bf16
    a * b + a, one 19-op loop: predicted 1.3 ms from member times less memory, measured
    2.3-3.4 ms; in f32 0.65-0.98 ms)."""
    if op.element_type != "bf16" or not op.results:
        return 0.0
    return (op.results[0].num_elements or 0) * target.bf16_fused_ns_per_element


ALIASED_STRIDE_BYTES = 2048
"""A fused transpose whose reads are a multiple of this many bytes apart runs at the target's
aliased rate (`Target.transpose_fused_aliased_ns_per_element`; measured:
`runtime.fused_probes.ALIASED_CASES`). The likely cause: such reads fall in a few of the L1
cache's sets (64 sets of 64-byte lines: 4 KiB apart, one set; 2 KiB, two), so the lines a
row of the result reads are evicted before the next row reads them again."""


PAGE_BYTES = 4096
"""The OS page. A core's L2 is indexed by physical address: reads a multiple of 2^k bytes
apart (k up to the page's 12) land in 1 / 2^(k - 6) of the sets a page's lines use, while
which page frame a read falls in spreads it over the rest."""


def transpose_footprint_bytes(shape: Sequence[int], perm: Sequence[int], elem_bytes: float) -> int:
    """The L2 capacity the lines that one row of a transpose's result reads claim until the
    next rows reuse them: each of its reads (the result's minor dim) takes the gcd of the
    read stride and `PAGE_BYTES` (at least a line): rows of 1000 f32 claim a line a read,
    rows of 1024 a page. Past the L2 the reads miss it (in loops on the Xeon VM, 2 MiB L2,
    2026-12-06, f32 transposes times a constant, ns an element: footprints of 0.25-1 MiB
    0.6-0.8 whatever the stride; 2 MiB 1.15-1.69 (1024x512, 512x1024, 512x2048, 512x4096,
    2048x768), one 2.98 (1024x1536); 4-16 MiB 2.4-4.0 (eleven shapes of 128 to 4096 rows of
    128 to 1536 elements); 1000x1000, 2000x1000, 4096x192, 2048x640 and 4096x320 0.79-0.91)."""
    kept = [d for d in perm if shape[d] != 1]
    if not kept:
        return 0
    stride = int(transpose_read_stride_bytes(shape, perm, elem_bytes))
    return shape[kept[-1]] * max(math.gcd(stride, PAGE_BYTES), 64)


def _fused_transpose_rate(op: OpInfo, target: Target) -> float:
    """ns per element of a fused transpose: the aliased rate where its reads alias in the L1
    (`ALIASED_STRIDE_BYTES`) and the target measured one, the strided rate otherwise; from
    there to the target's rate past the L2 (`Target.transpose_fused_l2_ns_per_element`) as
    its footprint (`transpose_footprint_bytes`) grows from half the L2 to twice it,
    geometrically in the footprint."""
    x = op.operands[0]
    perm = op.attrs.get("permutation")
    rate = target.transpose_fused_ns_per_element
    if not x.shape or not x.is_static or perm is None:
        return rate
    aliased = target.transpose_fused_aliased_ns_per_element
    stride = transpose_read_stride_bytes(x.shape, perm, x.elem_bytes)  # type: ignore[arg-type]
    if aliased > 0 and stride % ALIASED_STRIDE_BYTES == 0:
        rate = aliased
    past, l2 = target.transpose_fused_l2_ns_per_element, _l2_bytes(target)
    footprint = transpose_footprint_bytes(x.shape, perm, x.elem_bytes)  # type: ignore[arg-type]
    if past > rate > 0 and l2 > 0 and footprint > l2 / 2:
        return rate * (past / rate) ** min(math.log2(footprint / (l2 / 2)) / 2, 1.0)
    return rate


def _passes(members: Sequence[OpInfo]) -> int:
    """How many times a kernel reads its inputs: once for each YNNPACK reduce over leading
    dimensions in it of a tensor as large as the largest any of them reads. XLA:CPU fuses a
    variance's mean and its sum of squares into one library kernel, which streams a column
    reduction's input twice but finishes a row's two sums while the row is in the L1 (in
    loops on the Xeon VM, 2026-12-06: variances over axis 0 of 8x16384 and 64x4096 f32
    126-134 and 152-161 us, priced 61 and 47 as one pass; over axis 1 of 4096x64 71-87,
    priced 59 as one pass and 99 as two)."""
    sizes = [
        op.operands[0].num_elements or 0
        for op in members
        if library_reduce(op) and op.operands and not _reduces_rows(op)
    ]
    return max(sum(n == max(sizes) for n in sizes), 1) if sizes else 1


def _fused_transpose_ns(members: Sequence[OpInfo], target: Target, input_bytes: float) -> float:
    """The least a CPU loop kernel that moves a tensor's minor axis and computes on it takes:
    the transposed elements at the target's fused-transpose rate (`_fused_transpose_rate`; 0
    for any other kernel). XLA:CPU copies a lone transpose in tiles but runs a fused one
    element by element, reading across its input (runtime/fused_probes.py: 512x512 f32 60 us
    alone and 220 scaled by a constant, 64x256x128 over its last two axes 641 and 1140, in a
    loop on the Zen 5 VM, 2026-12-03), which the member rule priced as the transpose plus a
    multiply. Only a transpose of a tensor the kernel reads (its `input_bytes` at least the
    transpose's operand): one of a product of broadcasts computes its elements from rows in
    cache (the per-example weight gradient `vmap(grad)` of `tanh(x @ w)`, 32 x 64 x 32 written
    transposed from 16 KiB of inputs, ran its whole step in 8 us in a loop where this rate
    put the kernel alone at 45; Xeon VM, 2026-12-07)."""
    moved = [
        (op.results[0].num_elements or 0) * _fused_transpose_rate(op, target)
        for op in members
        if op.short_name == "transpose"
        and op.results
        and op.operands
        and moves_minor_axis(op)
        and (op.operands[0].nbytes or 0) <= input_bytes
    ]
    computes = any(op.op_class in ELEMENTWISE_CLASSES and not _tiny(op) for op in members)
    return max(moved) if moved and computes else 0.0


def member_compute_ns(op: OpInfo, cost: OpCost, target: Target) -> float:
    """An op's compute inside a fused CPU kernel: its measured time beyond its launch and
    beyond moving its own operands and result at the target's bandwidth (the kernel moves
    only its inputs and outputs), at least what a bf16 op pays to widen and round."""
    return max(
        cost.latency_ns - target.launch_overhead_ns - _memory_ns(op, target),
        _bf16_floor_ns(op, target),
    )


def _learned_group_ns(
    model: FusedLoopModel,
    ops: Sequence[OpInfo],
    plan: FusionPlan,
    members: Sequence[Sequence[int]],
    traffic: Sequence[GroupTraffic],
    heads: Sequence[int | None],
    sources: Sequence[Sequence[int | None]] | None = None,
) -> dict[int, tuple[float, str]]:
    """Groups' times and model names from the host's fused-chain model
    (`analysis.fused_loops`), by group: loop groups, and input groups whose YNNPACK sum
    (`heads`, by group: `_chain_head`) is over the last or the leading dimensions (as XLA
    collapses it) of what elementwise members compute (`hgb-host-fused-reduce`), less the op
    the sum takes in (`sum_absorbs`, with `sources`: each op's operands' producers); groups
    it does not answer for (members or sizes its chains did not cover) left out."""
    from stablehlo_perf.analysis.fused_loops import group_composition, summed_shape

    loops: list[tuple[int, tuple[int, ...], Composition]] = []
    sums: list[tuple[int, tuple[int, ...], int, Composition]] = []  # group, shape, kind, comp
    for g, kind in enumerate(plan.kinds):
        root = ops[plan.roots[g]]
        if plan.launches[g] == 0 or not root.results:
            continue
        if kind == "loop":
            shape = root.results[0].shape
            kernel = [ops[i] for i in members[g]]
            comp = group_composition(kernel, traffic[g].input_bytes, widening=True)
            if comp is not None and shape is not None:
                loops.append((g, tuple(shape), comp))
        elif kind == "input" and (head := heads[g]) is not None:
            summed = ops[head]
            if not summed_shape(summed)[1]:
                continue
            # What the kernel computes on the summed tensor's elements: side work on fewer (a
            # layer norm's mean divided by the row length, on its vector; a row norm's square
            # root after its sum) is not the chains'.
            src = summed.operands[0]
            taken = sum_absorbs(ops, head, sources) if sources else None
            before = [
                ops[i]
                for i in members[g]
                if i not in (head, taken) and ops[i].results
                and ops[i].results[0].num_elements == src.num_elements
            ]  # fmt: skip
            comp = group_composition(before, traffic[g].input_bytes, absorbed=taken is not None)
            if comp is not None and src.element_type == "f32":
                sums.append((g, *summed_shape(summed), comp))
    out = {}
    times = model.predict_us([(shape, comp) for _, shape, comp in loops])
    for (g, _, _), us in zip(loops, times, strict=True):
        if us is not None:
            out[g] = (us * 1e3, "hgb-host-fused")
    times = model.predict_reduce_us([(shape, comp, k) for _, shape, k, comp in sums])
    for (g, _, _, _), us in zip(sums, times, strict=True):
        if us is not None:
            out[g] = (us * 1e3, "hgb-host-fused-reduce")
    return out


def _chain_head(ops: Sequence[OpInfo], members: Sequence[int], root: int) -> int | None:
    """The YNNPACK reduce an input group's kernel runs: the one whose result the root reduce
    merges into (`fusion._merges_reduce`: a mean of row sums), else the root reduce, else the
    one heading the chain of ops on its result that ends in the root (`fusion._ynn_chain`: a
    row norm's square root); None where the group has none such."""
    if library_reduce(ops[root]):
        fed = ops[root].operands[0].num_elements if ops[root].operands else None
        merged = (
            i for i in members if i != root and library_reduce(ops[i]) and _elements(ops[i]) == fed
        )
        return next(merged, root)
    size = _elements(ops[root])
    return next((i for i in members if library_reduce(ops[i]) and _elements(ops[i]) == size), None)


def sum_absorbs(
    ops: Sequence[OpInfo], reduce: int, sources: Sequence[Sequence[int | None]]
) -> int | None:
    """The op feeding a sum (`reduce`) that XLA:CPU does not run as a step of its own: a
    square (CHLO's, or a multiply of a value by itself), which YNNPACK sums as squares, or a
    negate, which XLA's simplifier moves past the sum (jax 0.10.2: `-x` summed over rows is
    the rows' sum, then a negate of the sums).
    In a loop on the Zen 4 VM, 1024x1024 f32: `x.sum(-1)` 35 us, `(x * x).sum(-1)` 35,
    `(x * 0.5).sum()` 112; the Zen 4 chains' `neg` then a row sum 0.05-0.11 ns an element,
    `abs` then a sum 0.14-0.15, and a square after a `max0` costs what the `max0` alone
    does (0.116 and 0.111 at 1M)."""
    root = ops[reduce]
    if root.attrs.get("reducer") != "add" or not sources[reduce]:
        return None
    p = sources[reduce][0]
    if p is None or p < 0:
        return None
    op = ops[p]
    square = op.short_name == "multiply" and len(sources[p]) == 2
    square = square and sources[p][0] is not None and sources[p][0] == sources[p][1]
    return p if square or op.short_name in ("square", "negate") else None


def price_groups(
    ops: Sequence[OpInfo],
    plan: FusionPlan,
    traffic: Sequence[GroupTraffic],
    costs: Sequence[OpCost],
    target: Target,
    fused: FusedLoopModel | None = None,
    sources: Sequence[Sequence[int | None]] | None = None,
    products: Mapping[int, tuple[OpCost, bool]] | None = None,
) -> tuple[list[GroupCost], list[float], list[int]]:
    """Group costs, and each op's share of its group's latency and DRAM bytes. Producers
    fused into a gather are priced at the gathered elements only (`GroupTraffic.gathered`);
    with `fused` (the host's fused-loop model, `fused_loops.model_for_host`) the loop groups
    it covers are priced by it; `products` holds, by group, the price of the matrix product
    a group's sum computes (`contractions.broadcast_contraction`) and whether it is the
    group's (a sum over the trailing dimensions) or its floor."""
    overhead = target.launch_overhead_ns
    members: list[list[int]] = [[] for _ in plan.kinds]
    for i, g in enumerate(plan.groups):
        members[g].append(i)
    heads = [
        _chain_head(ops, members[g], plan.roots[g]) if kind == "input" else None
        for g, kind in enumerate(plan.kinds)
    ]
    learned = _learned_group_ns(fused, ops, plan, members, traffic, heads, sources) if fused else {}
    costs = list(costs)
    for g, t in enumerate(traffic):
        for i, share in t.gathered.items():
            if plan.groups[i] != g:  # a copy recomputed here: priced with its own group
                continue
            c = costs[i]
            scaled = min(c.latency_ns, overhead) + max(c.latency_ns - overhead, 0.0) * share
            costs[i] = OpCost(c.cycles, scaled, c.dram_bytes, c.model, c.extra)
    groups: list[GroupCost] = []
    for g, kind in enumerate(plan.kinds):
        t = traffic[g]
        if kind == "free" or plan.launches[g] == 0:
            groups.append(GroupCost(0.0, 0, "fused:free"))
            continue
        root = ops[plan.roots[g]]
        if root.op_class == "control":  # a while/if/case/call: its regions or callee carry the cost
            groups.append(
                GroupCost(
                    costs[plan.roots[g]].latency_ns,
                    costs[plan.roots[g]].dram_bytes,
                    costs[plan.roots[g]].model,
                )
            )
            continue
        matrix = kind == "output" or root.op_class == "matmul"
        peak = target.peak_flops(root.element_type, matrix=matrix)
        hit = _input_hit_rate([ops[i] for i in members[g]])
        read, flops = t.input_bytes, t.flops
        if target.kind == "cpu":  # XLA:CPU runs a scan blocked (analysis.scans)
            flops -= sum((ops[i].flops or 0) - (executed_flops(ops[i]) or 0) for i in members[g])
        dram = read * (1.0 - hit) + t.output_bytes
        bandwidth = target.memory_bandwidth
        # The reduce an input fusion runs (`_chain_head`; not `op(x, broadcast(reduce(x)))`'s,
        # whose root moves x's elements, not the reduce's).
        head = plan.roots[g] if heads[g] is None else heads[g]
        cache = _llc_bytes(target) if _reduces_rows(ops[head]) else _l2_bytes(target)
        rated = None  # the member whose own measured time set the group's bandwidth
        if target.kind == "cpu" and kind == "input" and t.input_bytes < cache:
            found = _library_reduce_bandwidth(ops[head], costs[head], overhead)
            bandwidth = found or bandwidth
            rated = head if found else None
        if target.kind == "cpu" and kind == "loop":
            for i in members[g]:
                bandwidth = max(_gather_bandwidth(ops[i], costs[i], overhead) or 0.0, bandwidth)
            if t.input_bytes + t.output_bytes < _llc_bytes(target):  # beyond it, DRAM's
                kernel = [ops[i] for i in members[g]], [costs[i] for i in members[g]]
                bandwidth = max(_movement_bandwidth(*kernel, overhead) or 0.0, bandwidth)
        l2_bw = target.l2_bandwidth_gbps * 1e9 or target.memory_bandwidth
        memory_s = (dram / bandwidth + read * hit / l2_bw) * _passes([ops[i] for i in members[g]])
        roofline_ns = max(flops / peak, memory_s) * 1e9
        # Moving the bytes at a member's own measured rate is that member's model's price.
        best_ns, model = roofline_ns, "roofline" if rated is None else costs[rated].model
        streamed = bandwidth == target.memory_bandwidth
        dedicated = [i for i in members[g] if not unmeasured(costs[i].model)]
        if target.kind == "cpu" and dedicated and len(members[g]) > 1:
            # Each member's compute: its measured time beyond its launch and beyond moving
            # its own operands and result at the target's bandwidth (which the fused kernel
            # does once, for the group's inputs and outputs only). A member's own time is
            # no floor here: it moves tensors the fused kernel keeps in registers.
            compute = sum(
                member_compute_ns(ops[i], costs[i], target)
                for i in dedicated
                if ops[i].short_name not in INDEX_MOVES and not _tiny(ops[i]) and i != rated
            )
            serial = compute + memory_s * 1e9
            if serial > best_ns:
                best_ns, model = serial, costs[dedicated[0]].model + "+serial"
            if kind == "loop":
                strided = _fused_transpose_ns([ops[i] for i in members[g]], target, read)
                if strided > best_ns:
                    best_ns, model = strided, model + "+strided-transpose"
        else:
            for i in dedicated:
                c = costs[i]
                if c.latency_ns - overhead > best_ns:
                    best_ns, model, streamed = c.latency_ns - overhead, c.model, False
        if g in learned:
            best_ns, model, streamed = max(learned[g][0] - overhead, 0.0), learned[g][1], False
        if products and g in products:
            product, trailing = products[g]
            if trailing or product.latency_ns - overhead > best_ns:
                best_ns, streamed = max(product.latency_ns - overhead, 0.0), False
                model = product.model + "+broadcast-product"
        launches = plan.launches[g]
        if target.kind == "cpu":  # a scan's own time holds the launches of its levels
            launches -= sum(s.kernels - 1 for i in members[g] if (s := rewritten_scan(ops[i])))
        latency = best_ns + overhead * launches
        groups.append(GroupCost(latency, round(dram), f"fused-{kind}:{model}", streamed))
    latency_share = [0.0] * len(ops)
    dram_share = [0] * len(ops)
    for g, ids in enumerate(members):
        weights = [max(costs[i].latency_ns, 0.0) for i in ids]
        total = sum(weights)
        for i, w in zip(ids, weights, strict=True):
            frac = w / total if total > 0 else 1.0 / len(ids)
            latency_share[i] = groups[g].latency_ns * frac
            dram_share[i] = round(groups[g].dram_bytes * frac)
    return groups, latency_share, dram_share
