"""What every perf pass shares: the per-run analysis cache and typed attribute writers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Protocol

from jaxlib.mlir import ir
from stablehlo_perf.passes.extract import ModuleView, view_module

__all__ = ["INT64_MAX", "AnalysisCache", "PerfPass", "set_f64", "set_i64", "set_str", "set_unit"]

INT64_MAX = 2**63 - 1


class PerfPass(Protocol):
    """A pass: a name, typed options (dataclass fields) and `apply` on the module op."""

    name: ClassVar[str]

    def apply(self, module: ir.Operation, cache: AnalysisCache) -> None: ...


@dataclass
class AnalysisCache:
    """Analyses shared by the passes of one pipeline run, like MLIR's analysis manager.

    The perf passes only add attributes, never change the IR's structure, so
    the module view (OpInfo of every op) is computed once and reused.
    """

    filename: str
    warnings: list[str] = field(default_factory=list)
    _view: ModuleView | None = None

    def view(self, module: ir.Operation) -> ModuleView:
        if self._view is None:
            self._view = view_module(module, self.filename)
        return self._view


def set_i64(op: ir.Operation, name: str, value: int) -> None:
    """Write an i64 attribute; a value past int64 is clamped and flagged in `perf.warning`."""
    if value > INT64_MAX:
        add_warning(op, f"{name} = {value} exceeds int64; clamped here, exact in the report")
        value = INT64_MAX
    op.attributes[name] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), value)


def add_warning(op: ir.Operation, message: str) -> None:
    """Append to the op's `perf.warning` (several passes may have something to say)."""
    attrs = op.attributes
    if "perf.warning" in attrs and message not in attrs["perf.warning"].value:
        message = f"{attrs['perf.warning'].value}; {message}"
    attrs["perf.warning"] = ir.StringAttr.get(message)


def set_f64(op: ir.Operation, name: str, value: float) -> None:
    op.attributes[name] = ir.FloatAttr.get_f64(float(value))


def set_str(op: ir.Operation, name: str, value: str) -> None:
    op.attributes[name] = ir.StringAttr.get(value)


def set_unit(op: ir.Operation, name: str) -> None:
    op.attributes[name] = ir.UnitAttr.get()
