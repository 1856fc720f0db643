"""perf-op-info: record each op's FLOPs and logical bytes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from jaxlib.mlir import ir
from stablehlo_perf.passes.base import AnalysisCache, set_i64, set_str

__all__ = ["OpInfoPass"]


@dataclass(frozen=True)
class OpInfoPass:
    """Write `perf.id`, `perf.flops` and `perf.bytes` (logical bytes read + written) on every op.

    Ops whose shapes are not static get `perf.model = "unknown-shape"` instead
    of numbers that could not be known.
    """

    name: ClassVar[str] = "perf-op-info"

    def apply(self, module: ir.Operation, cache: AnalysisCache) -> None:
        for rec in cache.view(module).records:
            info, op = rec.info, rec.op
            set_i64(op, "perf.id", info.id)
            if info.flops is None or info.bytes is None:
                set_str(op, "perf.model", "unknown-shape")
                continue
            set_i64(op, "perf.flops", info.flops)
            set_i64(op, "perf.bytes", info.bytes)
