"""The copies XLA's copy insertion adds around while loops, priced as the copy kernels they
are: a loop state value the body cannot update in place is copied every trip
(`analysis.fusion.loop_body_copies`), and one whose initial value is read-only (an entry
parameter, a constant) once before the loop (`analysis.fusion.while_init_copies`).

jax.random's threefry loop copies both halves of its counter block every trip: for a
512x512 uniform, ten 1 MiB copies a call (jax.profiler on the Xeon VM: 140 us each, more
than either of the loop's two fused kernels), which a price of its kernels alone left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from stablehlo_perf.analysis.fusion import loop_body_copies, while_init_copies
from stablehlo_perf.analysis.opinfo import MERGED_STATE, OpInfo, TensorType
from stablehlo_perf.analysis.service import OpCost, Registry
from stablehlo_perf.analysis.targets import Target
from stablehlo_perf.passes.base import AnalysisCache
from stablehlo_perf.passes.extract import ModuleView

__all__ = ["LoopCopies", "loop_copies", "loop_copy_costs"]


@dataclass(frozen=True)
class LoopCopies:
    """One while loop's copies: the carried values copied each trip and once before."""

    per_trip: tuple[TensorType, ...]
    before: tuple[TensorType, ...]


def _block_of(view: ModuleView, op_id: int) -> list[int]:
    rec = view.records[op_id]
    if rec.parent is None:
        return view.funcs[rec.info.func].top
    return next(b for b in view.regions[rec.parent] if op_id in b)


def loop_copies(view: ModuleView, cache: AnalysisCache) -> dict[int, LoopCopies]:
    """The copies of every while loop, from perf-fusion's kernels of the body where it ran,
    else one kernel per op. A body of no ops (a pure permutation) is left out: its block has
    no ops to find its terminator by."""
    out: dict[int, LoopCopies] = {}
    for rec in view.records:
        info = rec.info
        regions = view.regions.get(info.id, [])
        if info.name != "stablehlo.while" or len(regions) < 2 or info.dead:
            continue
        body = regions[1]
        if not body:
            continue
        readers, returns = view.block_arguments(body)
        if len(returns) != len(info.results):
            continue
        bf = cache.fusion.get(tuple(body))
        if bf is not None:
            groups, deps = bf.plan.groups, bf.group_deps
        else:
            groups, deps = list(range(len(body))), view.block_deps(body)
        merged = info.attrs.get(MERGED_STATE, ())
        counts = loop_body_copies(groups, deps, readers, returns, merged, view.block_updates(body))
        per_trip = [t for t, n in zip(info.results, counts, strict=True) for _ in range(n)]
        block = _block_of(view, info.id)
        folded = dict(merged)
        changed = [r != ("arg", j) and j not in folded for j, r in enumerate(returns)]
        before = while_init_copies(
            [view.records[i].info for i in block],
            view.block_sources(block),
            block.index(info.id),
            changed,
        )
        if per_trip or before:
            out[info.id] = LoopCopies(tuple(per_trip), tuple(info.operands[j] for j in before))
    return out


def loop_copy_costs(
    costs: list[OpCost],
    infos: Sequence[OpInfo],
    copies: dict[int, LoopCopies],
    target: Target,
    registry: Registry,
) -> list[OpCost]:
    """`costs` with each loop's copies added to the while op's own cost: each copy priced by
    the target's model of a `copy` of that type, trips times for those in the body."""
    out = list(costs)
    for w, c in copies.items():
        kinds = [*c.per_trip, *c.before]
        priced = registry.price(
            [OpInfo.build(w, "stablehlo.copy", [t], [t]) for t in kinds], target
        )
        trips = infos[w].attrs.get("trip_count") or 1
        weights = [trips] * len(c.per_trip) + [1] * len(c.before)
        latency = sum(n * p.latency_ns for n, p in zip(weights, priced, strict=True))
        dram = sum(n * p.dram_bytes for n, p in zip(weights, priced, strict=True))
        own = out[w]
        out[w] = OpCost(
            round((own.latency_ns + latency) * target.clock_ghz),
            own.latency_ns + latency,
            own.dram_bytes + dram,
            own.model,
            own.extra,
        )
    return out
