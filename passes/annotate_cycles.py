"""perf-annotate-cycles: ask the cost services for every op and write the answers."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from jaxlib.mlir import ir
from stablehlo_perf.analysis.aggregate import (
    BRANCH_POLICIES,
    ControlNode,
    aggregate,
    branch_shares,
)
from stablehlo_perf.analysis.cc4cs import intervals_for
from stablehlo_perf.analysis.contractions import as_dot, broadcast_contraction
from stablehlo_perf.analysis.fusion import (
    ELEMENTWISE_CLASSES,
    FusionPlan,
    GroupTraffic,
    f16_vectorised_ops,
)
from stablehlo_perf.analysis.fusion_cost import GroupCost, price_groups, unmeasured
from stablehlo_perf.analysis.opinfo import HALF_FLOATS, OpInfo
from stablehlo_perf.analysis.service import OpCost, Registry, default_registry
from stablehlo_perf.analysis.targets import DEFAULT_TARGET, Target, load_target
from stablehlo_perf.passes.base import AnalysisCache
from stablehlo_perf.passes.extract import BRANCH_WEIGHTS, CONTROL_OPS, ModuleView
from stablehlo_perf.passes.loop_copies import (
    LoopCopies,
    loop_copies,
    loop_copy_costs,
)
from stablehlo_perf.passes.small_loops import small_loop_costs, small_loops, thunked_loop_costs

__all__ = ["AnnotateCyclesPass", "control_nodes"]


def control_nodes(view: ModuleView) -> dict[int, ControlNode]:
    """Control ops and calls of a module view, as the aggregation needs them."""
    nodes: dict[int, ControlNode] = {}
    for rec in view.records:
        info = rec.info
        if info.dead:  # priced at nothing, whatever it would run
            continue
        if info.name in CONTROL_OPS:
            kind = info.short_name
            nodes[info.id] = ControlNode(
                kind=kind,
                regions=view.regions.get(info.id, []),
                trips=info.attrs.get("trip_count"),
                weights=info.attrs.get(BRANCH_WEIGHTS),
            )
        elif info.name == "func.call":
            nodes[info.id] = ControlNode(
                kind="call", callee=info.attrs.get("callee", "").lstrip("@")
            )
    return nodes


@dataclass(frozen=True)
class AnnotateCyclesPass:
    """Write `perf.cycles`, `perf.latency_ns`, `perf.dram_bytes` and `perf.model` on every op.

    Options: target — a target name (see --list-targets) or a path to a description file;
    branches — how an if/case without `perf.branch_weights` is priced: `max` (its
    costliest branch, an upper bound) or `mean` (branches equally likely).
    Control ops and calls carry the cost of what they run (body x trips, the
    branches as weighted or by that policy, callee). On a CPU target a while loop
    XLA:CPU compiles into one kernel costs one launch and its ops' compute a trip,
    and on a calibrated one the kernels of other loops one thunk each beyond their
    work (`passes/small_loops.py`).
    """

    name: ClassVar[str] = "perf-annotate-cycles"
    target: str = DEFAULT_TARGET
    branches: str = "max"

    def __post_init__(self) -> None:
        if self.branches not in BRANCH_POLICIES:
            raise ValueError(
                f"perf-annotate-cycles: branches must be one of {', '.join(BRANCH_POLICIES)}, "
                f"not '{self.branches}'"
            )

    def apply(self, module: ir.Operation, cache: AnalysisCache) -> None:
        target = load_target(self.target)
        view = cache.view(module)
        one_read = set().union(*(bf.one_read for bf in cache.fusion.values()))
        elemental = set().union(*(bf.elemental_gathers for bf in cache.fusion.values()))
        infos = [
            _model_input(
                r.info,
                cache.values.get(r.info.id),
                r.info.id in one_read,
                r.info.id in elemental,
            )
            for r in view.records
        ]
        registry = default_registry()
        unfused = registry.price(infos, target)
        costs = _fused_costs(unfused, infos, cache, target, registry) if cache.fusion else unfused
        every_copy = loop_copies(view, cache)
        cpu = target.kind == "cpu"
        loops = cache.one_kernel_loops = small_loops(view, cache, every_copy) if cpu else {}
        costs = small_loop_costs(costs, unfused, infos, loops, target, registry)
        if target.kind == "cpu" and target.calibrated:
            costs = thunked_loop_costs(costs, view, cache, loops, target)
        # One-kernel loops (and the ops inside them) run their copies inside that kernel.
        inside = {i for w, ids in loops.items() for i in (w, *ids)}
        copies = {w: c for w, c in every_copy.items() if w not in inside}
        costs = loop_copy_costs(costs, infos, copies, target, registry)
        own = np.array([[c.latency_ns, c.cycles, c.dram_bytes] for c in costs], dtype=float)
        nodes = control_nodes(view)
        agg = aggregate(
            own.reshape(len(costs), 3),
            nodes,
            {name: f.top for name, f in view.funcs.items()},
            names={i: f"{infos[i].name} at {infos[i].loc}" for i in nodes},
            policy=self.branches,
        )
        cache.warnings.extend(agg.caveats)
        totals = agg.total.tolist()
        intervals = intervals_for(infos, target.name, [row[0] for row in totals])
        for rec, cost in zip(view.records, costs, strict=True):
            i = rec.info.id
            latency, cycles, dram = totals[i]
            model = cost.model
            node = nodes.get(i)
            if node is not None:
                model = _control_model(node, self.branches, i in loops, copies.get(i))
                cycles = latency * target.clock_ghz
            cache.write(rec, "perf.cycles", round(cycles))
            cache.write(rec, "perf.latency_ns", latency)
            cache.write(rec, "perf.dram_bytes", round(dram))
            cache.write(rec, "perf.model", model)
            for key, value in cost.extra.items():
                if isinstance(value, float) and not key.startswith("latency_p"):
                    cache.write(rec, f"perf.{key}", value)
            if cost.extra.get("extrapolated") is True:
                cache.write(rec, "perf.extrapolated", True)
            if cost.extra.get("same_machine") is False:
                cache.values[i]["other_machine"] = True
            if intervals[i] is not None and node is None:
                # Around the final (fused) latency, not the model's own unfused one.
                cache.write(rec, "perf.latency_p10_ns", intervals[i][0])
                cache.write(rec, "perf.latency_p90_ns", intervals[i][1])
            if i in agg.branch_costs:
                rec.op.attributes["perf.branch_latency_ns"] = ir.ArrayAttr.get(
                    [ir.FloatAttr.get_f64(c) for c in agg.branch_costs[i]]
                )
            if node is not None and node.kind == "while":
                cache.write(rec, "perf.trip_count", node.trips if node.trips is not None else 1)
                if node.trips is None:
                    cache.warn(rec, "trip count not static; counted one trip")


def _fused_costs(
    costs: list[OpCost],
    infos: list[OpInfo],
    cache: AnalysisCache,
    target: Target,
    registry: Registry,
) -> list[OpCost]:
    """Each op's share of its fusion group's kernel; unfused ops keep their own cost. On the
    host, loop kernels the fused-chain model covers are priced by it (looked up once)."""
    out = list(costs)
    fused = None
    if target.kind == "cpu" and target.name == "host":
        from stablehlo_perf.analysis.fused_loops import model_for_host  # imports scikit-learn

        fused = model_for_host()
    for bf in cache.fusion.values():
        ops = [infos[i] for i in bf.ids]
        members, member_costs, traffic = ops, [costs[i] for i in bf.ids], bf.traffic
        if target.kind == "cpu" and bf.plan.ynn:
            members, member_costs, traffic = _widened_in_ynn(
                ops, member_costs, bf.plan, bf.traffic, registry, target
            )
        if target.kind == "cpu":
            members, member_costs = _f16_as_f32(
                members, member_costs, bf.plan, bf.sources, registry, target
            )
        products = (
            _written_products(members, bf.plan, bf.sources, registry, target)
            if target.kind == "cpu"
            else {}
        )
        groups, latency, dram = price_groups(
            members, bf.plan, traffic, member_costs, target, fused, bf.sources, products
        )
        bf.costs = groups
        sizes = [0] * bf.plan.num_groups
        for g in bf.plan.groups:
            sizes[g] += 1
        for k, i in enumerate(bf.ids):
            g = bf.plan.groups[k]
            alone = sizes[g] == 1 and bf.plan.kinds[g] != "free"
            control = ops[k].op_class == "control"
            if alone and not control:
                # A kernel of one op costs what its model says: so does its group.
                c = costs[i]
                groups[g] = GroupCost(
                    c.latency_ns,
                    c.dram_bytes,
                    f"fused-{bf.plan.kinds[g]}:{c.model}",
                    unmeasured(c.model),
                )
            if control or alone or not ops[k].is_static:
                continue
            out[i] = OpCost(
                cycles=round(latency[k] * target.clock_ghz),
                latency_ns=latency[k],
                dram_bytes=dram[k],
                model=groups[g].model,
                extra=costs[i].extra,
            )
    return out


def _written_products(
    ops: list[OpInfo],
    plan: FusionPlan,
    sources: Sequence[Sequence[int | None]],
    registry: Registry,
    target: Target,
) -> dict[int, tuple[OpCost, bool]]:
    """By group, the price of the matrix product its sum of a product of broadcasts computes
    (`contractions.broadcast_contraction`) and whether the sum is over the trailing
    dimensions, which YNNPACK runs as that product (one batched call to the services)."""
    found = {
        plan.groups[i]: (as_dot(ops[i], product.dims), product.trailing)
        for i in range(len(ops))
        if plan.kinds[plan.groups[i]] == "input"
        and (product := broadcast_contraction(ops, i, sources)) is not None
    }
    priced = registry.price([dot for dot, _ in found.values()], target) if found else []
    return {
        g: (cost, trailing) for (g, (_, trailing)), cost in zip(found.items(), priced, strict=True)
    }


def _f16_as_f32(
    ops: list[OpInfo],
    costs: list[OpCost],
    plan: FusionPlan,
    sources: Sequence[Sequence[int | None]],
    registry: Registry,
    target: Target,
) -> tuple[list[OpInfo], list[OpCost]]:
    """Members XLA:CPU vectorises in f16 only beside a broadcast (`fusion.f16_vectorised_ops`:
    exp, log, expm1) priced as their f32 twins: they compute in f32 there, at its rate (65536
    in a loop, Zen 4 VM: f16 exp(x) + 1 26 us, f32 25, bf16 41, where bf16 widens and rounds
    around each op). A twin moves f32 bytes (`_as_f32`), which its compute in the kernel is
    measured beyond."""
    twins = {k: _as_f32(ops[k]) for k in sorted(f16_vectorised_ops(ops, plan, sources))}
    return _repriced(list(ops), list(costs), twins, registry, target)


def _repriced(
    ops: list[OpInfo],
    costs: list[OpCost],
    twins: dict[int, OpInfo],
    registry: Registry,
    target: Target,
) -> tuple[list[OpInfo], list[OpCost]]:
    """`ops` and `costs` with each op k of `twins` replaced by its twin and the twin's price
    (one batched call to the services)."""
    if twins:
        priced = registry.price(list(twins.values()), target)
        for (k, twin), cost in zip(twins.items(), priced, strict=True):
            ops[k], costs[k] = twin, cost
    return ops, costs


def _widened_in_ynn(
    ops: list[OpInfo],
    costs: list[OpCost],
    plan: FusionPlan,
    traffic: list[GroupTraffic],
    registry: Registry,
    target: Target,
) -> tuple[list[OpInfo], list[OpCost], list[GroupTraffic]]:
    """Members and traffic of YNNPACK fusions of 16-bit floats as YNNPACK runs them: in f32.
    An elementwise member is priced as its f32 twin, a convert computes nothing, and the
    group moves its tensors as f32. XLA:CPU's own bf16 loops widen and round per op; a
    YNNPACK fusion ran as fast as its f32 twin (layer norms of 4096x256: 265 us in bf16,
    246 in f32; 4096x512: 445 and 445; a bf16 softmax of 8192x128 333 us where its members'
    own bf16 times summed to 859; timed in loops, jax 0.10.2)."""
    ops, costs, traffic = list(ops), list(costs), list(traffic)
    twins: dict[int, OpInfo] = {}
    widened: set[int] = set()
    for k, op in enumerate(ops):
        g = plan.groups[k]
        if g not in plan.ynn or op.op_class not in ELEMENTWISE_CLASSES:
            continue
        if not any(t.element_type in HALF_FLOATS for t in (*op.operands, *op.results)):
            continue
        widened.add(g)
        if op.short_name == "convert":
            ops[k] = _as_f32(op)
            costs[k] = dataclasses.replace(costs[k], latency_ns=target.launch_overhead_ns)
        else:
            twins[k] = _as_f32(op)
    ops, costs = _repriced(ops, costs, twins, registry, target)
    for g in widened:
        t = traffic[g]
        traffic[g] = dataclasses.replace(
            t, input_bytes=2 * t.input_bytes, output_bytes=2 * t.output_bytes
        )
    return ops, costs, traffic


def _as_f32(op: OpInfo) -> OpInfo:
    """op with its 16-bit float operands and results in f32."""

    twin = op.retyped(lambda t: "f32" if t in HALF_FLOATS else t)
    return dataclasses.replace(twin, bytes=None if op.bytes is None else 2 * op.bytes)


def _model_input(
    info: OpInfo, values: dict | None, one_read: bool, elemental: bool = False
) -> OpInfo:
    """The OpInfo the models see: with the cache-traffic pass's DRAM bytes (for their memory
    term), `fused_reads = 1` where perf-fusion found its loop reads one tensor and
    `elemental_gather = 1` on a gather it fused into a reduction."""
    extra: dict[str, object] = {}
    if values and "perf.l2_hit_rate" in values:
        extra["dram_bytes"] = values["perf.dram_bytes"]
        extra["l2_hit_rate"] = values["perf.l2_hit_rate"]
    if one_read:
        extra["fused_reads"] = 1
    if elemental:
        extra["elemental_gather"] = 1
    return dataclasses.replace(info, attrs={**info.attrs, **extra}) if extra else info


def _control_model(
    node: ControlNode, policy: str, one_kernel: bool = False, copies: LoopCopies | None = None
) -> str:
    if node.kind == "call":
        return f"call(@{node.callee})"
    if node.kind == "while":
        trips = f"x{node.trips}" if node.trips is not None else "x1?"
        if one_kernel:
            return f"while({trips}, one kernel)"
        if copies is not None:
            made = [
                f"{n} {when}"
                for n, when in ((len(copies.per_trip), "a trip"), (len(copies.before), "before"))
                if n
            ]
            return f"while({trips}, copies: {', '.join(made)})"
        return f"while({trips})"
    shares = branch_shares(node.weights, len(node.regions))
    if shares is None:
        return f"{node.kind}(max branch)" if policy == "max" else f"{node.kind}(mean of branches)"
    if shares.max() == 1.0:
        return f"{node.kind}(branch {int(shares.argmax())} taken)"
    return f"{node.kind}(weighted branches)"
