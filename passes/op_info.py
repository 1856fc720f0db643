"""perf-op-info: record each op's FLOPs and logical bytes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from jaxlib.mlir import ir
from stablehlo_perf.passes.base import AnalysisCache

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
            info = rec.info
            cache.write(rec, "perf.id", info.id)
            if info.flops is None or info.bytes is None:
                cache.write(rec, "perf.model", "unknown-shape")
                continue
            cache.write(rec, "perf.flops", info.flops)
            cache.write(rec, "perf.bytes", info.bytes)
