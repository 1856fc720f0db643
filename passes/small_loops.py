"""What ops in while loops cost on a CPU target: loops XLA:CPU compiles into one kernel (the
rule and the prices: `analysis.small_loops`), and the others' kernels, one thunk each."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from stablehlo_perf.analysis.opinfo import OpInfo
from stablehlo_perf.analysis.service import OpCost, Registry
from stablehlo_perf.analysis.small_loops import is_small_loop, loop_member_ns, reference_op
from stablehlo_perf.analysis.targets import Target
from stablehlo_perf.passes.base import AnalysisCache
from stablehlo_perf.passes.extract import ModuleView
from stablehlo_perf.passes.loop_copies import LoopCopies

__all__ = ["small_loop_costs", "small_loops", "thunked_loop_costs"]


def _kernel_bytes(view: ModuleView, cache: AnalysisCache, block: list[int]) -> int:
    """Bytes a block's kernels read and write, each once: its fusion groups' inputs and
    outputs where perf-fusion ran (a kernel of one op, which XLA wraps alone, also reads the
    constants it takes: the loop counter's `i + 1`), else its ops'."""
    bf = cache.fusion.get(tuple(block))
    if bf is None:
        return sum(view.records[i].info.bytes or 0 for i in block)
    infos = [view.records[i].info for i in bf.ids]
    members: list[list[int]] = [[] for _ in bf.plan.kinds]
    for k, g in enumerate(bf.plan.groups):
        if infos[k].short_name != "constant":
            members[g].append(k)
    total = 0
    for g, t in enumerate(bf.traffic):
        root = infos[bf.plan.roots[g]]
        if bf.plan.kinds[g] == "free" or not bf.plan.launches[g] or root.op_class == "control":
            continue
        total += t.input_bytes + t.output_bytes
        if len(members[g]) == 1 and bf.sources:
            k = members[g][0]
            total += sum(
                infos[k].operands[j].nbytes or 0
                for j, src in enumerate(bf.sources[k])
                if src is not None and src >= 0 and infos[src].short_name == "constant"
            )
    return total


def small_loops(
    view: ModuleView, cache: AnalysisCache, copies: dict[int, LoopCopies]
) -> dict[int, list[int]]:
    """While ops XLA:CPU runs as one kernel, each with the ids of every op inside it (a small
    loop nested in another counts as part of the outer one). The copies copy insertion puts
    in a body (`copies`: `passes.loop_copies.loop_copies`) are kernels of it too, each
    reading and writing its value: a fori_loop that swaps two elements of 200 i32 copies the
    array twice a trip and is not hoisted (jax 0.10.2), where one that sets an element is."""
    found: dict[int, list[int]] = {}
    covered: set[int] = set()
    for rec in view.records:
        info = rec.info
        if info.name != "stablehlo.while" or info.id in covered or info.dead:
            continue
        blocks = view.blocks_inside(info.id)
        ids = [i for block in blocks for i in block]
        nbytes = sum(_kernel_bytes(view, cache, block) for block in blocks)
        nbytes += sum(
            2 * (t.nbytes or 0) for w in (info.id, *ids) if w in copies for t in copies[w].per_trip
        )
        if is_small_loop([view.records[i].info for i in ids], nbytes, len(info.results)):
            found[info.id] = ids
            covered.update(ids)
    return found


def small_loop_costs(
    costs: list[OpCost],
    unfused: Sequence[OpCost],
    infos: Sequence[OpInfo],
    loops: dict[int, list[int]],
    target: Target,
    registry: Registry,
) -> list[OpCost]:
    """`costs` with each small loop's ops at their compute alone and the loop itself one
    kernel launch and its trips' own cost (`unfused`: the models' own answers, before
    fusion shared them out)."""
    if not loops:
        return costs
    out = list(costs)
    inside = [i for ids in loops.values() for i in ids]
    refs = {i: reference_op(infos[i]) for i in inside}
    wanted = [i for i in inside if refs[i] is not None]
    priced = registry.price([refs[i] for i in wanted], target) if wanted else []
    ref_cost = dict(zip(wanted, priced, strict=True))
    for i in inside:
        latency = loop_member_ns(infos[i], unfused[i], ref_cost.get(i), target)
        out[i] = OpCost(round(latency * target.clock_ghz), latency, 0, "small-loop:compute")
    base = target.small_loop_latency_ns.get("base", 0.0)
    for w in loops:
        # One launch, and the loop's own work each trip (counter, test, branch).
        own = target.launch_overhead_ns + base * (infos[w].attrs.get("trip_count") or 1)
        out[w] = OpCost(round(own * target.clock_ghz), own, 0, "small-loop:launch")
    return out


# The host calibration times each op inside a while loop whose every trip also runs the
# loop's counter and its test, two more kernels (runtime/sweeps.in_loop, as jax 0.10.2
# compiles it), so its per-kernel floor (`Target.launch_overhead_ns`: the median time of
# its smallest elementwise ops) is three thunks' worth; in a program's loop each kernel,
# counter and test included, runs as one.
_CALIBRATION_THUNKS = 3


def _thunked_ids(view: ModuleView, small: dict[int, list[int]]) -> dict[int, int]:
    """Ops inside while loops XLA:CPU runs kernel by kernel (not hoisted into one), each with
    the bytes its innermost such loop carries (its operands: JAX passes the arrays a body
    reads from outside as loop state too), what stays in cache from trip to trip if any."""
    hoisted = {i for ids in small.values() for i in ids}
    out: dict[int, int] = {}
    for rec in view.records:  # outer loops first: an inner loop's ops take its bytes
        info = rec.info
        if info.name == "stablehlo.while" and info.id not in small and not info.dead:
            carried = sum(t.nbytes or 0 for t in info.operands)
            out.update((i, carried) for block in view.blocks_inside(info.id) for i in block)
    return {i: b for i, b in out.items() if i not in hoisted}


_SCALAR_BYTES = 64
"""Bytes up to which a kernel of a thunked loop is one of its scalar kernels (the counter's
add, the test's compare), which the thunked-loop probe prices together as `base`."""


def _in_loop_ns(nbytes: float, carried: int, target: Target) -> float | None:
    """Time a kernel of a thunked loop carrying `carried` bytes takes beyond its compute to
    launch and move `nbytes` of state kept in cache from trip to trip (`Target.thunked_loop`:
    the fixed cost, and the bandwidth of the smallest of a core's L1 and L2 that holds them);
    None where the target has no such measurement or the loop's state outgrows L2."""
    p = target.thunked_loop
    if not {"base", "kernel", "l1_gbps", "l2_gbps"} <= set(p):
        return None
    # A loop whose state outgrows a core's L2 streams it: a body slicing a 2 MiB input
    # (unseen dyn_slice_loop) reads new data every trip.
    if carried > target.onchip_mib.get("l2", 0.0) * 2**20:
        return None
    if nbytes <= _SCALAR_BYTES:
        return p["base"] / 2
    if nbytes <= target.onchip_mib.get("l1", 0.0) * 2**20:
        bandwidth = p["l1_gbps"] * 1e9
    else:
        bandwidth = p["l2_gbps"] * 1e9
    return p["kernel"] + nbytes / bandwidth * 1e9


def thunked_loop_costs(
    costs: list[OpCost],
    view: ModuleView,
    cache: AnalysisCache,
    small: dict[int, list[int]],
    target: Target,
) -> list[OpCost]:
    """`costs` with every kernel inside a thunk-by-thunk loop at its compute plus what the
    thunked-loop probe says launching it and moving its bytes in cache cost
    (`_in_loop_ns`), or where the target has no probe at its calibrated time less the
    calibration loop's two other thunks a trip (a kernel costs at least one thunk)."""
    inside = _thunked_ids(view, small)
    if not inside:
        return costs
    thunk = target.launch_overhead_ns / _CALIBRATION_THUNKS
    out = list(costs)

    def rescale(ids: list[int], launches: int, nbytes: float | None = None) -> float:
        """Rescale these ops' costs to their kernel's in-loop time; `nbytes`, where the
        kernel was priced from its bytes at the streaming bandwidth (a roofline or a
        serial fused loop, not a learned model's time, which was measured in a loop)."""
        total = sum(out[i].latency_ns for i in ids)
        if total <= 0 or launches <= 0:
            return total
        moved = None if nbytes is None else _in_loop_ns(nbytes / launches, inside[ids[0]], target)
        if moved is None:
            new = max(total - (_CALIBRATION_THUNKS - 1) * thunk * launches, thunk * launches)
        else:
            # The compute: what the kernel costs beyond its launches and its bytes at the
            # streaming bandwidth (`analysis.fusion_cost`), kept; those two replaced.
            streamed = nbytes / target.memory_bandwidth * 1e9
            compute = max(total - target.launch_overhead_ns * launches - streamed, 0.0)
            new = compute + moved * launches
        for i in ids:
            c = out[i]
            latency = c.latency_ns * new / total
            out[i] = OpCost(
                round(latency * target.clock_ghz), latency, c.dram_bytes, c.model, c.extra
            )
        return new

    done: set[int] = set()
    for bf in cache.fusion.values():
        if not bf.ids or bf.ids[0] not in inside:
            continue
        for g, members in enumerate(bf.group_members()):
            root = view.records[bf.ids[bf.plan.roots[g]]].info
            if bf.plan.kinds[g] == "free" or root.op_class == "control":
                continue
            t = bf.traffic[g]
            # XLA's own loop kernels priced from their bytes; a library call (a dot, a
            # YNNPACK reduce: "opaque", "input") pays its call beyond its bytes (scan_rnn's
            # 8x128 dots in a loop: ~3 us a trip, priced 0.6 from their bytes in cache).
            streamed = bf.plan.kinds[g] == "loop" and bool(bf.costs) and bf.costs[g].streamed
            nbytes = t.input_bytes + t.output_bytes if streamed else None
            new = rescale(members, bf.plan.launches[g], nbytes)
            if bf.costs:
                bf.costs[g] = dataclasses.replace(bf.costs[g], latency_ns=new)
            done.update(members)
    for i in inside.keys() - done:
        if view.records[i].info.op_class != "control":
            rescale([i], 1)
    return out
