"""perf-critical-path: schedule each function onto the target's units and find its critical path."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from jaxlib.mlir import ir
from stablehlo_perf.analysis.critical_path import level_order, topological_order
from stablehlo_perf.analysis.fusion import reduces_unit_dims, ynn_convolution, ynn_reduce_window
from stablehlo_perf.analysis.host_params import (
    eigen_uses_pool,
    reduce_wakes_pool,
    splits_over_threads,
    wakes_by_time,
    wakes_pool,
    xla_cpu_flops,
)
from stablehlo_perf.analysis.opinfo import OpInfo
from stablehlo_perf.analysis.schedule import ScheduledBlock, list_schedule
from stablehlo_perf.analysis.targets import DEFAULT_TARGET, load_target
from stablehlo_perf.analysis.temp_arena import arena_bytes
from stablehlo_perf.analysis.thunk_executor import runs_concurrently, thunk_deps
from stablehlo_perf.passes.base import AnalysisCache
from stablehlo_perf.passes.extract import ModuleView

__all__ = ["CriticalPathPass", "read_latency"]


def read_latency(cache: AnalysisCache, op_id: int) -> float:
    """The latency perf-annotate-cycles wrote (0 where it has not run)."""
    return float(cache.values.get(op_id, {}).get("perf.latency_ns", 0.0))


@dataclass(frozen=True)
class CriticalPathPass:
    """Write `perf.start_ns`, `perf.slack_ns` on every op and `perf.critical` on the critical path.

    Options: target — decides which units overlap (TPU: MXU, VPU, DMA; GPU:
    stream + copy engine; CPU: in order). Each block's ops are list-scheduled
    in program order over SSA def-use edges weighted by `perf.latency_ns`;
    region bodies start at their op's start. A path is traced from every
    public function into the regions and callees it runs through; the entry
    function's path and totals go on the module (`perf.critical_path`,
    `perf.total_latency_ns` = makespan, `perf.critical_path_ns` = dataflow
    bound, `perf.work_ns` = sum of latencies). Where the target charges a call
    overhead beyond its kernels (`Target.call_overhead_ns`: a fixed part, the larger of a
    thread-pool wake-up once a kernel is long enough to be split over threads or is a
    library call (at most a slope times the time of the call's kernels on the pool, each
    loop trip's counted), and a one-off cost once the entry of a call that wakes the pool runs
    two kernels or more (neither the fixed part nor that cost for a module of fewer XLA flops
    than `Target.inline_flops`, which runs on the calling thread), a dispatch cost per entry
    kernel, a cost per MiB the entry returns, a long call's ramp in the entry's makespan
    (its kernels' time, each loop trip's counted), and a cost per loop kernel XLA splits
    over threads or Eigen dot on the pool (`host_params.eigen_uses_pool`) that starts after
    the pool has been idle for `Target.rewake_gap_ns`, an Eigen dot also when it is the
    first, a one-off cost once the entry runs a second YNNPACK reduce that wakes the pool,
    and a cost per MiB a split loop kernel hands to a YNNPACK kernel, and one per MiB of a
    temporary arena or output the allocator maps afresh each call: `temp_arena`), it is added to the
    first two and written as `perf.call_overhead_ns`. Where the target charges pool contention
    (`Target.pool_contention`), a function's top-level kernels that follow a YNNPACK
    library call are scheduled that much longer (after a dot small enough for one thread,
    only in a block XLA:CPU's executor runs as a dataflow graph: `_leaves_pollers`), as is
    the first YNNPACK convolution after an Eigen one that leaves the pool's threads spinning
    (`Target.eigen_handoff_ns`: `_eigen_handoffs`), and its while loops by what their
    bodies' kernels pay so each trip; what each op pays is written as
    `perf.contention_ns` (a loop's body ops: per trip; the entry's sum in the report's
    `contention_ns`).
    """

    name: ClassVar[str] = "perf-critical-path"
    target: str = DEFAULT_TARGET

    def apply(self, module: ir.Operation, cache: AnalysisCache) -> None:
        view = cache.view(module)
        target = load_target(self.target)
        kind = target.kind
        # Whether int8 dots leave the pool polling: unknown, or at least half an f32 dot's.
        int8_polls = not target.pool_contention_int8 < target.pool_contention / 2
        loop_fraction = (
            target.pool_contention_loop
            if math.isfinite(target.pool_contention_loop)
            else target.pool_contention
        )
        schedules: dict[tuple[int, ...], tuple[ScheduledBlock, list[list[int]]]] = {}
        longest_kernel = 0.0  # of the kernels that can wake the pool by their time
        wakes = False
        whole = False  # a YNNPACK reduce wakes the pool: all of the wake, whatever the time
        split = False  # a loop kernel split over the pool: all of its wake (`split_wake_ns`)
        pool_ns = 0.0  # the time of the kernels on the pool, each run of a loop's counted
        top_kernels: dict[tuple[int, ...], int] = {}
        pool_spans: dict[tuple[int, ...], list[PoolSpan]] = {}
        handoffs: dict[tuple[int, ...], float] = {}
        contention: dict[tuple[int, ...], list[float]] = {}
        blocks: dict[
            tuple[int, ...], tuple[list[list[int]], list[list[int]], list[KernelCost]]
        ] = {}

        def block_nodes(
            ids: Sequence[int],
        ) -> tuple[list[list[int]], list[list[int]], list[KernelCost]]:
            """`_nodes` of a block, computed once for its schedule and its contention."""
            if tuple(ids) not in blocks:
                blocks[tuple(ids)] = _nodes(view, cache, ids, by_level=kind == "cpu")
            return blocks[tuple(ids)]

        def loop_contention(i: int) -> float:
            """What a while op's trips pay in contention (`block_contention` of its regions,
            each trip, at the loop's fraction); 0 for any other op and a loop XLA:CPU
            compiles into one kernel."""
            info = view.records[i].info
            if info.short_name != "while" or i in cache.one_kernel_loops:
                return 0.0
            per_trip = sum(sum(block_contention(b, True)) for b in view.regions.get(i, ()))
            return (info.attrs.get("trip_count") or 1) * per_trip

        def block_contention(ids: Sequence[int], body: bool = False) -> list[float]:
            """Per schedule node of a block run once, what its kernels after a library call pay
            (`_contention`; a while loop's `body` at `Target.pool_contention_loop` where
            measured) and its loops' trips (`loop_contention`); each op's share is written
            as `perf.contention_ns` (per run of the block)."""
            if tuple(ids) in contention:
                return contention[tuple(ids)]
            nodes, deps, _ = block_nodes(ids)
            latency = [sum(read_latency(cache, i) for i in node) for node in nodes]
            called = [
                t > 0 and _library(view, node) for t, node in zip(latency, nodes, strict=True)
            ]
            library = [
                c and not any(_eigen(view, i) for i in node)
                for c, node in zip(called, nodes, strict=True)
            ]
            control = [_control(view, node) for node in nodes]
            # XLA:CPU's executor runs the block as a dataflow graph (never on other targets).
            thunks = [t > 0 or c for t, c in zip(latency, control, strict=True)]
            graph = kind == "cpu" and _concurrent(view, nodes, deps, thunks)
            starts = [
                lib and _leaves_pollers(view, node, int8_polls, graph)
                for lib, node in zip(library, nodes, strict=True)
            ]
            extra = _contention(
                latency,
                library,
                control,
                loop_fraction if body else target.pool_contention,
                target.pool_contention_cap_ns,
                starts,
            )
            for k in _eigen_handoffs(view, nodes, called):
                extra[k] += target.eigen_handoff_ns
            for k, node in enumerate(nodes):
                own = extra[k]
                for i in node:
                    loop = loop_contention(i)
                    paid = (own * read_latency(cache, i) / latency[k] if own > 0 else 0.0) + loop
                    extra[k] += loop
                    if paid > 0:
                        cache.write(view.records[i], "perf.contention_ns", paid)
            contention[tuple(ids)] = extra
            return extra

        def schedule(
            ids: Sequence[int],
            offset: float,
            runs: bool = True,
            top: bool = False,
            times: float = 1.0,
        ) -> None:
            """Schedule a block from `offset`; a block that never `runs` (a branch weighed 0)
            adds no kernel to the call overhead's terms, one that runs `times` per call (a
            loop's body) adds its kernels on the pool that many times; a function's `top`
            block adds the contention of its kernels that follow a library call and of its
            loops' trips (`block_contention`)."""
            nonlocal longest_kernel, wakes, whole, split, pool_ns
            nodes, deps, costs = block_nodes(ids)
            latency = [sum(read_latency(cache, i) for i in node) for node in nodes]
            classes = [_node_class(view, node) for node in nodes]
            # A node holding a while/if/case/call is its regions' or callee's cost, not a kernel.
            kernel_nodes = [
                (t, node)
                for t, node in zip(latency, nodes, strict=True)
                if t > 0 and not _control(view, node)
            ]
            kernels = [t for t, _ in kernel_nodes]
            # Kernels whose time can wake the pool: all but single-threaded ones.
            timed = [t for t, node in kernel_nodes if _wakes_by_time(view, node)]
            # Kernels that hand work to the pool whatever their time: split loops, Eigen dots.
            eigen = [any(_eigen(view, i) for i in node) for node in nodes]
            pool = [
                t > 0 and (eigen[k] or _splits(view, nodes[k], costs[k], target.cores))
                for k, t in enumerate(latency)
            ]
            library = [latency[k] > 0 and _library(view, node) for k, node in enumerate(nodes)]
            # A YNNPACK reduce below the target's size runs on the calling thread; above, it
            # pays the whole wake (`Target.reduce_wake_bytes`).
            reduces = [
                latency[k] > 0 and _waking_reduce(view, node, target.reduce_wake_bytes)
                for k, node in enumerate(nodes)
            ]
            woken = [
                p or (latency[k] > 0 and _wakes(view, nodes[k], target.reduce_wake_bytes))
                for k, p in enumerate(pool)
            ]
            on_pool = sum(
                t
                for k, (t, node) in enumerate(zip(latency, nodes, strict=True))
                if t > 0
                and not _control(view, node)
                and (woken[k] or (t >= target.parallel_kernel_ns and _wakes_by_time(view, node)))
            )
            if top and (target.pool_contention > 0 or target.eigen_handoff_ns > 0):
                latency = [t + e for t, e in zip(latency, block_contention(ids), strict=True)]
            handoffs[tuple(ids)] = _handoff_bytes(
                deps,
                costs,
                pool,
                eigen,
                [
                    lib and not _one_thread_dot(view, node)
                    for lib, node in zip(library, nodes, strict=True)
                ],
                target.handoff_cap_bytes,
            )
            if runs:
                longest_kernel = max([longest_kernel, *timed])
                wakes = wakes or any(woken)
                # A waking YNNPACK reduce or a split loop kernel pays the whole wake.
                split = split or any(p and not e for p, e in zip(pool, eigen))
                whole = whole or split or any(reduces)
                pool_ns += times * on_pool
            top_kernels[tuple(ids)] = len(kernels)
            sb = list_schedule(latency, deps, classes, kind)
            schedules[tuple(ids)] = (sb, nodes)
            s = sb.schedule
            pool_spans[tuple(ids)] = sorted(
                PoolSpan(s.start_ns[k], s.start_ns[k] + latency[k], eigen[k], pool[k])
                for k in range(len(nodes))
                if pool[k] or reduces[k]
            )
            for k, node in enumerate(nodes):
                for i in node:
                    rec = view.records[i]
                    cache.write(rec, "perf.start_ns", offset + s.start_ns[k])
                    cache.write(rec, "perf.slack_ns", s.slack_ns[k])
                    cache.values[i]["unit"] = sb.units[k]
                    shares = view.branch_shares(i)
                    trips = rec.info.attrs.get("trip_count") or 1
                    for b, block in enumerate(view.regions.get(i, ())):
                        taken = runs and (shares is None or shares[b] > 0)
                        weight = trips if shares is None else shares[b]
                        schedule(block, offset + s.start_ns[k], taken, times=times * weight)

        for func in view.funcs.values():
            schedule(func.top, 0.0, top=True)
        entry = view.entry()
        for func in view.funcs.values():
            if func.public or func is entry:
                path: list[int] = []
                self._mark(view, cache, func.top, schedules, set(), path)
                if func is entry:
                    sb = schedules[tuple(func.top)][0]
                    arena = _arena(view, cache, func.top) if target.fresh_page_ns_per_mib else 0.0
                    if arena >= target.fresh_map_bytes:
                        cache.warnings.append(
                            f"temporaries of {arena / 2**20:.1f} MiB (estimated) reach the "
                            f"allocator's {target.fresh_map_bytes / 2**20:.0f} MiB mmap "
                            "threshold: each call faults them in afresh ("
                            f"{target.fresh_page_ns_per_mib * arena / 2**20 / 1e3:,.1f} us)"
                        )
                    call = target.call_overhead_ns(
                        longest_kernel,
                        top_kernels[tuple(func.top)],
                        func.result_bytes,
                        wakes,
                        sb.makespan_ns,
                        _rewakes(pool_spans[tuple(func.top)], target.rewake_gap_ns),
                        handoffs[tuple(func.top)],
                        pool_ns,
                        sum(xla_cpu_flops(rec.info) for rec in view.records),
                        whole,
                        _reduce_rewakes(pool_spans[tuple(func.top)]),
                        split,
                        arena,
                        func.result_sizes,
                    )
                    cache.totals = {
                        "total_latency_ns": sb.makespan_ns + call,
                        "critical_path_ns": sb.dataflow.span_ns + call,
                        "work_ns": sb.schedule.work_ns,
                        "call_overhead_ns": call,
                        "contention_ns": sum(contention.get(tuple(func.top), ())),
                    }
                    attrs = module.attributes
                    attrs["perf.critical_path"] = ir.DenseI64ArrayAttr.get(path)
                    for key, value in cache.totals.items():
                        if key not in ("call_overhead_ns", "contention_ns") or value:
                            attrs[f"perf.{key}"] = ir.FloatAttr.get_f64(value)
                    cache.critical_path = path

    def _mark(
        self,
        view: ModuleView,
        cache: AnalysisCache,
        ids: Sequence[int],
        schedules: dict[tuple[int, ...], tuple[ScheduledBlock, list[list[int]]]],
        seen: set[str],
        path: list[int],
    ) -> None:
        """Mark the path through `ids`, descending into the regions and callees on it."""
        if tuple(ids) not in schedules:
            return
        sb, nodes = schedules[tuple(ids)]
        for k in sb.schedule.path:
            for i in nodes[k]:
                rec = view.records[i]
                cache.write(rec, "perf.critical", True)
                path.append(i)
                blocks = view.regions.get(i, [])
                if rec.info.name == "stablehlo.while" and len(blocks) > 1:
                    self._mark(view, cache, blocks[1], schedules, seen, path)
                elif blocks:
                    shares = view.branch_shares(i)
                    if shares is not None:
                        on_path = blocks[int(shares.argmax())]
                    else:
                        on_path = max(blocks, key=lambda b: sum(read_latency(cache, j) for j in b))
                    self._mark(view, cache, on_path, schedules, seen, path)
                callee = (
                    rec.info.attrs.get("callee", "").lstrip("@")
                    if rec.info.name == "func.call"
                    else ""
                )
                if callee in view.funcs and callee not in seen:
                    seen.add(callee)
                    self._mark(view, cache, view.funcs[callee].top, schedules, seen, path)


def _arena(view: ModuleView, cache: AnalysisCache, ids: Sequence[int]) -> float:
    """XLA:CPU's temporary arena for a call of the block `ids` (`temp_arena.arena_bytes`, its
    kernels in the order XLA:CPU runs them: `level_order`); 0 where perf-fusion did not run."""
    bf = cache.fusion.get(tuple(ids))
    order = None if bf is None else _group_order(bf.group_deps, by_level=True)
    if bf is None or order is None:
        return 0.0
    ops = [view.records[i].info for i in bf.ids]
    return arena_bytes(ops, bf.plan, view.block_deps(bf.ids), bf.sources, bf.live_out, order)


def _group_order(deps: Sequence[Sequence[int]], by_level: bool) -> list[int] | None:
    """Fusion groups in a topological order (`topological_order`), by level where `by_level`
    (`level_order`: XLA:CPU's); None if they form a cycle."""
    order = topological_order(deps)
    return level_order(deps, order) if order is not None and by_level else order


def _nodes(
    view: ModuleView, cache: AnalysisCache, ids: Sequence[int], by_level: bool = False
) -> tuple[list[list[int]], list[list[int]], list[KernelCost]]:
    """Schedule nodes of a block, their edges and their HLO costs, in a topological order:
    fusion groups if perf-fusion ran (a group can hold ops from far apart, so group ids are
    not an order; `by_level`: XLA:CPU's order, `level_order`), else ops in program order
    (costed by the op alone)."""
    bf = cache.fusion.get(tuple(ids))
    order = None if bf is None else _group_order(bf.group_deps, by_level)
    if bf is not None and order is None:
        cache.warnings.append("fusion groups form a cycle; scheduled op by op instead")
    if bf is None or order is None:
        return [[i] for i in ids], view.block_deps(ids), [_op_cost(view, [i]) for i in ids]
    members, deps = bf.group_members(), bf.group_deps
    computed = bf.plan.members()  # copies included, block-local indices
    costs = [
        KernelCost(
            _xla_flops([view.records[bf.ids[k]].info for k in computed[g]], t.flops),
            float(sum(view.records[bf.ids[k]].info.transcendentals or 0 for k in computed[g])),
            float(t.cost_input_bytes + t.output_bytes),
            float(t.output_bytes),
        )
        for g, t in enumerate(bf.traffic)
    ]
    position = {g: k for k, g in enumerate(order)}
    return (
        [members[g] for g in order],
        [sorted(position[d] for d in deps[g]) for g in order],
        [costs[g] for g in order],
    )


def _xla_flops(infos: Sequence[OpInfo], flops: float) -> float:
    """The FLOPs XLA's cost analysis counts for a kernel of these ops
    (`host_params.xla_cpu_flops`: a 16-bit op's converts, a CHLO function's polynomial), which
    its parallel task assignment weighs; `flops` where a shape is dynamic."""
    total = sum(xla_cpu_flops(info) for info in infos)
    return float(total) if math.isfinite(total) else float(flops)


@dataclass(frozen=True)
class KernelCost:
    """A kernel's HLO cost as XLA:CPU's parallel task assignment weighs it."""

    flops: float
    transcendentals: float
    bytes_accessed: float
    output_bytes: float


@dataclass(frozen=True, order=True)
class PoolSpan:
    """When a pool kernel (a split loop kernel or an Eigen dot on the pool) runs, and which;
    `wakes` False for a YNNPACK reduction, which keeps awake threads from sleeping but
    pays no wake-up of its own."""

    start_ns: float
    end_ns: float
    eigen: bool
    wakes: bool = True


def _rewakes(spans: Sequence[PoolSpan], gap_ns: float) -> int:
    """Pool kernels, of these spans in start order, that start more than `gap_ns` after every
    earlier span ended: they find the pool's threads asleep again. The first split kernel's
    wake-up is the call's own (`Target.threadpool_wake_ns`, fitted on single-op programs,
    none of them an Eigen dot); a first Eigen dot pays like a later one (single x^T g dots of
    256x256x32 and 128x128x128 on the Xeon VM: 52-68 us beyond their in-loop time, 2026-12-02,
    where a split kernel alone pays 15-30). A YNNPACK reduction that starts while the pool
    is awake keeps it awake (one that starts after it slept does not wake it): the zoo's
    layer norms (benchmarks/end_to_end.py, 30 saved runs on the Zen 5 VM) paid 81 / 80 /
    86 us beyond their kernels (medians) at 128 / 256 / 512 rows of 512, where one more
    wake-up than none priced them 93 / 97 / 104 and none 74 / 78 / 85 (their variance
    sums, priced by the sum-chain model, 7.5-22.5 us, parted the two split loops by more
    than the gap)."""
    count, busy_until, woken = 0, -math.inf, False
    for span in spans:
        awake = span.start_ns - busy_until <= gap_ns
        if span.wakes:
            if (not woken and span.eigen) or (woken and not awake):
                count += 1
            woken = True
        elif not awake:
            continue  # a YNNPACK reduction does not wake a pool that has gone to sleep
        busy_until = max(busy_until, span.end_ns)
    return count


def _reduce_rewakes(spans: Sequence[PoolSpan]) -> int:
    """1 where these spans hold two or more YNNPACK reduces that wake the pool (`wakes`
    False): the call pays `Target.reduce_rewake_ns` once for the second
    (`runtime.program_probes.REDUCE_KINDS`); 0 otherwise."""
    return int(sum(not span.wakes for span in spans) >= 2)


def _concurrent(
    view: ModuleView,
    nodes: Sequence[list[int]],
    deps: Sequence[Sequence[int]],
    is_thunk: Sequence[bool],
) -> bool:
    """Whether XLA:CPU's thunk executor runs these schedule nodes (in its order, with their
    deps) as a dataflow graph (`thunk_executor.runs_concurrently`); `is_thunk` marks its
    thunks: kernels (a node of some latency) and control ops, not bitcasts."""
    largest = max(
        (
            t.nbytes or 0
            for node, thunk in zip(nodes, is_thunk, strict=True)
            if thunk
            for i in node
            for t in (*view.records[i].info.operands, *view.records[i].info.results)
        ),
        default=0,
    )
    return runs_concurrently(thunk_deps(deps, is_thunk), largest)


def _contention(
    latency: Sequence[float],
    library: Sequence[bool],
    control: Sequence[bool],
    fraction: float,
    cap_ns: float,
    starts: Sequence[bool] | None = None,
) -> list[float]:
    """What each kernel of a block, in program order, costs beyond its own latency for running
    after a YNNPACK library call that leaves its threads polling for work (`starts`, by
    default every `library` call: a dot, a convolution, a reduction XLA:CPU hands to
    YNNPACK; the pass passes `_leaves_pollers`) while they poll (`Target.pool_contention`:
    runtime/contention_probes.py): `fraction` of its latency, at most `cap_ns` for all the
    kernels between two such calls; 0 for library calls, for kernels before the first, and
    for a node holding a loop or branch (its regions are priced before this pass).

    Loop kernels XLA splits over its own pool pay it too, and start none: in loops on the
    Zen 5 VM (2026-12-02, two runs of three sets of 31 rounds), a split exp of 128x256 after
    a dot paid 17 / 7 us beyond both alone, 8 tanh kernels after the dot 16 / 18, after the
    split exp -1 / -1 and after a split multiply-add of 512x256 -1.5; a dot after a dot
    1 / -5."""
    extra: list[float] = []
    left = 0.0  # what the kernels since the last library call may still pay
    starts = library if starts is None else starts
    for t, lib, start, ctl in zip(latency, library, starts, control, strict=True):
        paid = min(fraction * t, left) if not lib and not ctl and t > 0 else 0.0
        extra.append(paid)
        left = cap_ns if start else left - paid
    return extra


EIGEN_HANDOFF_MIN_BYTES = 64 * 1024
"""The output from which an Eigen convolution leaves the pool's threads spinning for the next
YNNPACK one (`_eigen_handoffs`). In loops on the Xeon VM (2026-12-07, 9-11 rounds, twice), a
3x3 convolution of 3 input features (Eigen) then a YNNPACK one on its result (3x3, stride 2,
32 out) ran 2-7 us beyond both alone where the first wrote 32 KiB (1x32x32, 8 features), and
19-99 us (median 47, 16 pairs) where it wrote 64 KiB to 1 MiB (1-8 images of 32x32 or 64x64,
8 or 16 features); an Eigen convolution after it -25 to +22 us."""


def _eigen_handoffs(
    view: ModuleView, nodes: Sequence[list[int]], called: Sequence[bool]
) -> list[int]:
    """The schedule nodes, in program order, that pay `Target.eigen_handoff_ns`: the first
    YNNPACK convolution (`fusion.ynn_convolution`) after an Eigen one writing at least
    `EIGEN_HANDOFF_MIN_BYTES`, with no other library call (`called`: `_library`) between
    (loop kernels between them, a ReLU, do not stop it: six pairs with one ran -11 to +55 us
    beyond their parts, median 42)."""
    paying: list[int] = []
    pending = False
    for k, node in enumerate(nodes):
        if not called[k]:
            continue
        infos = [view.records[i].info for i in node]
        if any(ynn_convolution(info) for info in infos):
            if pending:
                paying.append(k)
            pending = False
        elif any(info.short_name == "convolution" for info in infos):
            written = sum(r.nbytes or 0 for info in infos for r in info.results)
            pending = written >= EIGEN_HANDOFF_MIN_BYTES
        else:
            pending = False
    return paying


ONE_THREAD_MACS = 2**22
"""Multiply-adds up to which a YNNPACK dot ran on one thread and left no pollers in loops
(`_leaves_pollers`)."""


def _one_thread(info: OpInfo) -> bool:
    """Whether this op is a dot small enough for one thread (`ONE_THREAD_MACS`)."""
    return info.short_name == "dot_general" and (info.flops or 0) / 2 <= ONE_THREAD_MACS


def _leaves_pollers(
    view: ModuleView, node: list[int], int8_polls: bool = True, graph: bool = True
) -> bool:
    """Whether a library kernel leaves its threads polling after it: one holding a dot or a
    YNNPACK pool, not a convolution or a reduction alone (8 tanh kernels after them, in loops
    on the Zen 5 VM, 2026-12-02, 4 passes of 31 rounds: +15-24 us after a 128x256x256 dot,
    +10-21 after a 2x2/2 max pool of 4x64x64x32, 0-1 after YNNPACK convolutions of 2x32x32
    images, 3 to 32 features, and -2-10 after an Eigen one, 0-5 after YNNPACK sums of
    512x1024 to 2048x1024). Not every dot does: in the same loops, M x 256 x 256 dots left
    15-21 us for M of 72-128 and none for 16-64 or 160-256, and of 14 other shapes 6 left
    6-13 us (128x256x512, 256x256x128) and 8 none (128x256x128, 128x128x512). On 2026-12-03
    the dots of at most `ONE_THREAD_MACS` multiply-adds ran at one thread's rate (M x 256 x
    256 for M = 16 / 32 / 64: 8.8 / 17.7 / 36.0 us) and left none, larger ones mostly did
    (80 and 96 x 256 x 256: 17-20 us); so such a dot counts only in a block XLA:CPU's
    executor runs as a dataflow graph (`graph`: `thunk_executor.runs_concurrently`), where
    the kernels after it run on pool threads and pay as after a large one. Charging nothing
    after small dots anywhere put the zoo's programs with small dots 5-15% under their
    measured times (deep_transformer and mlp_grad, both run as graphs); charging them in
    every block put programs run in sequence over theirs (benchmarks/unseen_programs.py
    --set idioms, the per-example gradient of one small dot 2.1-2.7x, a top-k router after
    a 512x256x16 dot 1.35x). An int8 dot counts unless `int8_polls` is False: the pass
    passes whether the target's contention after the probe's int8 dot is at least half the
    f32 dot's (`Target.pool_contention_int8`, unknown: it is; the Xeon VM's 0.22 against
    3.66, `runtime.contention_probes._INT8_DOT`)."""
    return any(
        (
            info.short_name == "dot_general"
            and (int8_polls or not _int8(info))
            and (graph or not _one_thread(info))
        )
        or ynn_reduce_window(info)
        for info in (view.records[i].info for i in node)
    )


def _int8(info: OpInfo) -> bool:
    """Whether a dot multiplies int8 operands."""
    return all(t.element_type in ("i8", "ui8") for t in info.operands[:2])


def _control(view: ModuleView, node: list[int]) -> bool:
    """Whether a schedule node holds a while/if/case/call: its regions' or callee's cost."""
    return any(view.records[i].info.op_class == "control" for i in node)


def _splits(view: ModuleView, node: list[int], cost: KernelCost, cores: int) -> bool:
    """Whether XLA:CPU splits this loop kernel over its thread pool by its HLO cost
    (`host_params.splits_over_threads`); a reduce over unit dimensions is XLA's bitcast
    (take_along_axis's bounds check: jnp.all over the index's unit dimension)."""
    infos = [view.records[i].info for i in node]
    return splits_over_threads(
        ["movement" if reduces_unit_dims(op) else op.op_class for op in infos],
        cost.flops,
        cost.transcendentals,
        cost.bytes_accessed,
        cores,
    )


def _op_cost(view: ModuleView, node: list[int]) -> KernelCost:
    """The HLO cost of a kernel of these ops outside any fusion group."""
    infos = [view.records[i].info for i in node]
    return KernelCost(
        float(sum(i.flops or 0 for i in infos)),
        float(sum(i.transcendentals or 0 for i in infos)),
        float(sum(i.bytes or 0 for i in infos)),
        float(sum(r.nbytes or 0 for i in infos for r in i.results)),
    )


def _handoff_bytes(
    deps: list[list[int]],
    costs: list[KernelCost],
    pool: list[bool],
    eigen: list[bool],
    library: list[bool],
    cap_bytes: float,
) -> float:
    """The most bytes one of this block's split loop kernels (on the pool, not Eigen dots)
    writes for a `library` kernel off the pool to read (`Target.handoff_ns_per_mib`): a
    YNNPACK one, or an Eigen dot too small for the pool, which no measurement has separated;
    at most `cap_bytes` (`Target.handoff_cap_bytes`). A call pays for one handoff, not each:
    on the Xeon VM (2026-12-07, 11 rounds) 16 dots of 64 or 128 x 256 x 256, each reading a
    256 KiB slice of a stacked weight that XLA splits, paid 300 / 472 us beyond their loop
    where the same dots on 16 separate weights paid 360 / 507, not the 16 x 34 us more a sum
    priced. The pass leaves out dots small enough for one thread (`_one_thread_dot`): on
    the same VM (2026-12-07, 11 rounds, `x @ w` after a split gather of 64 or 128 x 8 rows
    of 128, or after a split exp of 512 or 1024 x 128, with w of 128 x 16 to 1024) the 9
    such calls paid 50-107 us beyond their loop (median 70), where the pass priced 90 without
    the handoff and 124 with it (the VM's per-call overhead then ran 0.78x its
    calibration's: `stablehlo-perf-calibrate --relevel`); the zoo's embedding lookup (a
    gather of 256 KiB into a 64 x 128 x 64 dot) went from 1.29x its time to 1.03x."""
    read = {d for j, ds in enumerate(deps) if library[j] and not pool[j] for d in ds}
    return max(
        (min(costs[k].output_bytes, cap_bytes) for k in read if pool[k] and not eigen[k]),
        default=0.0,
    )


def _one_thread_dot(view: ModuleView, node: list[int]) -> bool:
    """Whether this kernel's dots are all small enough for one thread (`_one_thread`)."""
    dots = [view.records[i].info for i in node if view.records[i].info.short_name == "dot_general"]
    return bool(dots) and all(_one_thread(info) for info in dots)


def _eigen(view: ModuleView, op_id: int) -> bool:
    """Whether this op is a dot Eigen runs on the pool (`host_params.eigen_uses_pool`),
    looking through a transpose that produces its lhs (XLA folds it into the dot)."""
    rec = view.records[op_id]
    if rec.info.short_name != "dot_general":
        return False
    owner = rec.op.operands[0].owner
    permutation = None
    if isinstance(owner, ir.Operation | ir.OpView) and owner.name == "stablehlo.transpose":
        permutation = list(ir.DenseI64ArrayAttr(owner.attributes["permutation"]))
    return eigen_uses_pool(rec.info, permutation)


def _library(view: ModuleView, node: list[int]) -> bool:
    """Whether this kernel is a library call (`host_params.wakes_pool`, any YNNPACK reduce:
    the kernels a split loop hands data to and that leave pollers behind); which of them wake
    the pool is `_wakes`, split loop kernels are `_splits`."""
    return _wakes(view, node, 0.0)  # every YNNPACK reduce wakes from 0 bytes on


def _wakes(view: ModuleView, node: list[int], wake_bytes: float) -> bool:
    """Whether this kernel is a library call that wakes the pool whatever its time: `_library`,
    a YNNPACK reduce only above `wake_bytes` (`host_params.reduce_wakes_pool`)."""
    infos = [view.records[i].info for i in node]
    return wakes_pool(
        [info.short_name for info in infos],
        False,
        any(reduce_wakes_pool(info, wake_bytes) for info in infos),
    )


def _waking_reduce(view: ModuleView, node: list[int], wake_bytes: float) -> bool:
    """Whether this kernel holds a YNNPACK reduce that wakes the pool
    (`host_params.reduce_wakes_pool`)."""
    return any(
        view.records[i].info.short_name == "reduce"
        and reduce_wakes_pool(view.records[i].info, wake_bytes)
        for i in node
    )


def _wakes_by_time(view: ModuleView, node: list[int]) -> bool:
    """Whether this kernel wakes XLA:CPU's thread pool once it runs long enough
    (`host_params.wakes_by_time`: not a single-threaded top_k)."""
    return wakes_by_time([view.records[i].info.short_name for i in node])


def _node_class(view: ModuleView, node: list[int]) -> str:
    """The op class that decides a node's unit: a matmul if it holds one, else its first op's."""
    classes = [view.records[i].info.op_class for i in node]
    return "matmul" if "matmul" in classes else classes[0]
