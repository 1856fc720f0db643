"""perf-fusion: group ops into the kernels XLA fuses them into for the target."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from jaxlib.mlir import ir
from stablehlo_perf.analysis.fusion import (
    elemental_gathers,
    group_deps,
    group_traffic,
    one_read_ops,
    plan_fusion,
)
from stablehlo_perf.analysis.targets import DEFAULT_TARGET, load_target
from stablehlo_perf.passes.base import AnalysisCache, BlockFusion

__all__ = ["FusionPass"]


@dataclass(frozen=True)
class FusionPass:
    """Write `perf.fusion` (a module-wide group id) and `perf.fusion_kind` on every op.

    Options: target — its kind (tpu, gpu, cpu) picks XLA's fusion rules.
    Producer→consumer chains of elementwise/broadcast/convert/reshape/transpose
    ops form loop fusions, reductions are fusion roots, dots take their
    epilogue where the backend does; ops with regions and calls are never
    fused. Run it before perf-annotate-cycles, which then prices each group
    as one kernel, and perf-critical-path, which schedules groups as units.
    """

    name: ClassVar[str] = "perf-fusion"
    target: str = DEFAULT_TARGET

    def apply(self, module: ir.Operation, cache: AnalysisCache) -> None:
        kind = load_target(self.target).kind
        view = cache.view(module)
        first = 0
        for ids in view.blocks():
            if not ids:
                continue
            ops = [view.records[i].info for i in ids]
            deps = view.block_deps(ids)
            sources = view.block_sources(ids)
            live = view.block_live_out(ids)
            plan = plan_fusion(ops, deps, kind, sources, live)
            traffic = group_traffic(ops, deps, plan, sources, live)
            cache.fusion[tuple(ids)] = BlockFusion(
                list(ids), plan, traffic, group_deps(plan, deps), first,
                sources=sources, live_out=live,
                one_read={ids[k] for k in one_read_ops(ops, plan, sources)},
                elemental_gathers={ids[k] for k in elemental_gathers(ops, plan)},
            )  # fmt: skip
            for k, i in enumerate(ids):
                rec = view.records[i]
                g = plan.groups[k]
                cache.write(rec, "perf.fusion", first + g)
                cache.write(rec, "perf.fusion_kind", plan.kinds[g])
            first += plan.num_groups
