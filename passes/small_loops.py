"""Which while loops of a module XLA:CPU compiles into one kernel, and what their ops cost there
(the rule and the prices: `analysis.small_loops`)."""

from __future__ import annotations

from collections.abc import Sequence

from stablehlo_perf.analysis.opinfo import OpInfo
from stablehlo_perf.analysis.service import OpCost, Registry
from stablehlo_perf.analysis.small_loops import is_small_loop, loop_member_ns, reference_op
from stablehlo_perf.analysis.targets import Target
from stablehlo_perf.passes.base import AnalysisCache
from stablehlo_perf.passes.extract import ModuleView

__all__ = ["small_loop_costs", "small_loops"]


def _inside(view: ModuleView, op_id: int) -> list[list[int]]:
    """Every block a control op runs, its nested regions' blocks included."""
    blocks: list[list[int]] = []
    for block in view.regions.get(op_id, []):
        blocks.append(block)
        for i in block:
            blocks.extend(_inside(view, i))
    return blocks


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


def small_loops(view: ModuleView, cache: AnalysisCache) -> dict[int, list[int]]:
    """While ops XLA:CPU runs as one kernel, each with the ids of every op inside it (a small
    loop nested in another counts as part of the outer one)."""
    found: dict[int, list[int]] = {}
    covered: set[int] = set()
    for rec in view.records:
        info = rec.info
        if info.name != "stablehlo.while" or info.id in covered:
            continue
        blocks = _inside(view, info.id)
        ids = [i for block in blocks for i in block]
        names = [view.records[i].info.short_name for i in ids]
        nbytes = sum(_kernel_bytes(view, cache, block) for block in blocks)
        if is_small_loop(names, nbytes, len(info.results)):
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
