"""What every perf pass shares: the per-run analysis cache, which also writes the attributes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Protocol

from jaxlib.mlir import ir
from stablehlo_perf.analysis.fusion import FusionPlan, GroupTraffic
from stablehlo_perf.passes.extract import ModuleView, OpRecord, view_module

__all__ = ["INT64_MAX", "AnalysisCache", "BlockFusion", "PerfPass"]

INT64_MAX = 2**63 - 1


class PerfPass(Protocol):
    """A pass: a name, typed options (dataclass fields) and `apply` on the module op."""

    name: ClassVar[str]

    def apply(self, module: ir.Operation, cache: AnalysisCache) -> None: ...


@dataclass
class BlockFusion:
    """perf-fusion's result for one block: op ids, the plan, group traffic and group edges."""

    ids: list[int]
    plan: FusionPlan
    traffic: list[GroupTraffic]
    group_deps: list[list[int]]
    first_group: int
    costs: list = field(default_factory=list)  # GroupCost per group, once perf-annotate-cycles ran
    sources: list[list[int | None]] = field(default_factory=list)  # per op, per operand
    live_out: list[int] = field(default_factory=list)
    one_read: set[int] = field(default_factory=set)  # op ids in loops that read one tensor
    elemental_gathers: set[int] = field(default_factory=set)  # gathers fused into a reduce

    def group_members(self) -> list[list[int]]:
        """Op ids (not block-local indices) of each group, by primary membership."""
        out: list[list[int]] = [[] for _ in self.plan.kinds]
        for k, g in enumerate(self.plan.groups):
            out[g].append(self.ids[k])
        return out


@dataclass
class AnalysisCache:
    """Analyses shared by the passes of one pipeline run, like MLIR's analysis manager.

    The analysis passes only add attributes, never change the IR's structure
    (perf-inline-calls, which runs before them, resets the view), so the module
    view (OpInfo of every op) is computed once and reused. Every
    attribute a pass writes is also kept here as a Python value, so the report
    reads exact numbers without parsing attributes back.
    """

    filename: str
    warnings: list[str] = field(default_factory=list)
    values: dict[int, dict[str, object]] = field(default_factory=dict)
    totals: dict[str, float] = field(default_factory=dict)
    fusion: dict[tuple[int, ...], BlockFusion] = field(default_factory=dict)
    critical_path: list[int] = field(default_factory=list)
    one_kernel_loops: dict[int, list[int]] = field(default_factory=dict)
    _view: ModuleView | None = None
    _i64: ir.Type | None = None
    # Attributes are uniqued by MLIR; reusing the Python handles for repeated values
    # (model names, kinds, small counts) saves a binding call per write.
    _attr_memo: dict = field(default_factory=dict)

    def view(self, module: ir.Operation) -> ModuleView:
        if self._view is None:
            self._view = view_module(module, self.filename)
        return self._view

    def reset_view(self) -> None:
        """Forget the module view: a pass that changed the IR's structure (perf-inline-calls,
        before any analysis) calls this so the next pass sees the new ops."""
        self._view = None
        self.values.clear()

    def write(self, rec: OpRecord, name: str, value: bool | float | str) -> None:
        """Set `name` on the op: True → unit, int → i64, float → f64, str → string.

        An int past int64 is clamped in the IR, kept exact here, and flagged in `perf.warning`.
        """
        values = self.values.get(rec.info.id)
        if values is None:
            values = self.values[rec.info.id] = {}
        values[name] = value
        if type(value) is int and value > INT64_MAX:  # clamped with a warning on every op
            rec.op.attributes[name] = self._make_attr(rec, name, value)
            return
        key = (type(value), value)
        attr = self._attr_memo.get(key)
        if attr is None:
            attr = self._make_attr(rec, name, value)
            if len(self._attr_memo) < 65536:
                self._attr_memo[key] = attr
        rec.op.attributes[name] = attr

    def _make_attr(self, rec: OpRecord, name: str, value: bool | float | str) -> ir.Attribute:
        if value is True:
            return ir.UnitAttr.get()
        if isinstance(value, int):
            if value > INT64_MAX:
                self.warn(rec, f"{name} = {value} exceeds int64; clamped here, exact in the report")
                value = INT64_MAX
            if self._i64 is None:
                self._i64 = ir.IntegerType.get_signless(64)
            return ir.IntegerAttr.get(self._i64, value)
        if isinstance(value, float):
            return ir.FloatAttr.get_f64(value)
        return ir.StringAttr.get(value)

    def warn(self, rec: OpRecord, message: str) -> None:
        """Append to the op's `perf.warning` (several passes may have something to say)."""
        current = self.values.setdefault(rec.info.id, {}).get("perf.warning")
        if current and message in str(current):
            return
        text = f"{current}; {message}" if current else message
        self.values[rec.info.id]["perf.warning"] = text
        rec.op.attributes["perf.warning"] = ir.StringAttr.get(text)
