"""perf-annotate-cache-traffic: predicted DRAM traffic through a GPU's shared L2, per op."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from jaxlib.mlir import ir
from stablehlo_perf.analysis.l2_traffic import GemmTiles, TensorAccess, l2_traffic
from stablehlo_perf.analysis.systolic_service import conv_to_layer, dot_to_gemm
from stablehlo_perf.analysis.targets import load_target
from stablehlo_perf.passes.base import AnalysisCache
from stablehlo_perf.passes.extract import CONTROL_OPS, ModuleView, OpRecord

__all__ = ["CacheTrafficPass"]


def _gemm(rec: OpRecord) -> GemmTiles | None:
    """The tile grid of a dot_general / convolution (None for every other op)."""
    info = rec.info
    if info.name not in ("stablehlo.dot_general", "stablehlo.convolution"):
        return None
    if not info.is_static or any(d == 0 for t in info.operands for d in t.shape):
        return None
    eb = info.operands[0].elem_bytes
    if info.name == "stablehlo.dot_general":
        g = dot_to_gemm(info)
        return GemmTiles(g.batch, g.m, g.n, g.k, eb)
    if info.name == "stablehlo.convolution":
        conv = conv_to_layer(info)
        c = conv.layer
        out_h = -(-(c.ifmap_h - c.filter_h + c.stride_h) // c.stride_h)
        out_w = -(-(c.ifmap_w - c.filter_w + c.stride_w) // c.stride_w)
        return GemmTiles(
            conv.repeats, out_h * out_w, c.num_filters, c.filter_h * c.filter_w * c.channels, eb
        )
    return None


@dataclass(frozen=True)
class CacheTrafficPass:
    """Write `perf.dram_bytes` and `perf.l2_hit_rate` on every op for a GPU target.

    Options: target — h100, h200, gb10, thor or a GPU description file.
    Streaming ops reuse what earlier ops left in L2 (tensor granularity, LRU,
    program order per block); dot_general / convolution use the PASCAL tile
    model (calibrated fill multiple if the target has a calibration, else the
    static aligned reference — `perf.cache_model` says which). Run it before
    perf-annotate-cycles, whose memory term then charges DRAM bytes at HBM
    bandwidth and L2 hits at L2 bandwidth.
    """

    name: ClassVar[str] = "perf-annotate-cache-traffic"
    target: str = "h100"

    def apply(self, module: ir.Operation, cache: AnalysisCache) -> None:
        target = load_target(self.target)
        if target.kind != "gpu":
            cache.warnings.append(
                f"perf-annotate-cache-traffic: target '{target.name}' is not a GPU; skipped"
            )
            return
        view = cache.view(module)
        l2 = int(target.onchip_mib.get("l2", 0) * 2**20)
        if l2 <= 0:
            cache.warnings.append(
                f"perf-annotate-cache-traffic: target '{target.name}' has no L2 size; skipped"
            )
            return
        for block in view.blocks():
            self._block(view, cache, block, l2, target.cores)

    def _block(
        self, view: ModuleView, cache: AnalysisCache, ids: list[int], l2: int, workers: int
    ) -> None:
        accesses, gemms = [], []
        for i in ids:
            rec = view.records[i]
            # Each distinct value is read once however many operands name it.
            reads = list(
                dict(
                    zip(rec.op.operands, (t.nbytes or 0 for t in rec.info.operands), strict=True)
                ).items()
            )
            writes = [
                (v, t.nbytes or 0) for v, t in zip(rec.op.results, rec.info.results, strict=True)
            ]
            accesses.append(TensorAccess(reads, writes))
            gemms.append(_gemm(rec))
        for i, traffic in zip(ids, l2_traffic(accesses, gemms, l2, workers), strict=True):
            rec = view.records[i]
            if (
                rec.info.name in CONTROL_OPS
                or rec.info.name == "func.call"
                or not rec.info.is_static
            ):
                continue
            cache.write(rec, "perf.dram_bytes", traffic.dram_bytes)
            cache.write(rec, "perf.l2_hit_rate", traffic.hit_rate)
            cache.write(rec, "perf.cache_model", traffic.source)
