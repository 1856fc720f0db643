"""Per-op DRAM traffic through a GPU's shared L2: tensor residency between ops and GEMM tile reuse.

Two effects decide how many bytes an op really moves to and from DRAM:

- Between ops (streaming): in schedule order, every tensor an op writes goes
  through L2 (write-allocate) and stays until evicted least-recently-used;
  an op whose input is still resident reads it at L2 speed. Granularity is a
  whole tensor; a tensor larger than L2 is never resident.
- Inside a dot_general / convolution: the output tiles are the workers of the
  PASCAL model (§4.6): resident CTAs (one per SM) walk their A and B panels
  over K; the fill multiple from a calibration, or else the static aligned
  reference, scales the compulsory traffic B0 = 16384·(nr+nc)·nk bytes
  (128x128x64 tiles of 2-byte elements; other element sizes scale it).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from stablehlo_perf.analysis.cache_predictor import Calibration, gemm_dram_traffic

__all__ = ["GemmTiles", "OpTraffic", "TensorAccess", "l2_traffic"]

TILE_M, TILE_N, TILE_K = 128, 128, 64


@dataclass(frozen=True)
class TensorAccess:
    """The tensors one op reads and writes: (key, bytes) pairs; keys identify SSA values."""

    reads: Sequence[tuple[Hashable, int]]
    writes: Sequence[tuple[Hashable, int]]


@dataclass(frozen=True)
class GemmTiles:
    """`batch` GEMMs of M x N x K on 128x128x64 tiles, elements of `elem_bytes`."""

    batch: int
    m: int
    n: int
    k: int
    elem_bytes: float


@dataclass(frozen=True)
class OpTraffic:
    """Predicted DRAM bytes, the L2 hit rate of its reads, and what priced the reuse."""

    dram_bytes: int
    read_bytes: int
    hit_rate: float
    source: str


def _gemm_reads(
    g: GemmTiles, workers: int, l2_bytes: int, cal: Calibration | None
) -> tuple[float, float, str]:
    """(DRAM read bytes, requested bytes) of the GEMM's operand panels, and the source.

    The fill multiple (DRAM fills per compulsory byte) comes from the tile model;
    it multiplies the operands' real footprint, so small GEMMs are not charged
    for the padding of 128x128x64 tiles.
    """
    nr, nc, nk = (math.ceil(g.m / TILE_M), math.ceil(g.n / TILE_N), math.ceil(g.k / TILE_K))
    t = gemm_dram_traffic(workers, nr, nc, nk, l2_bytes, cal)
    footprint = (g.m + g.n) * g.k * g.elem_bytes
    requested = (g.m * nc + g.n * nr) * g.k * g.elem_bytes  # each tile reads its A and B panels
    return t.fill_multiple * footprint * g.batch, requested * g.batch, t.source


def l2_traffic(
    accesses: Sequence[TensorAccess],
    gemms: Sequence[GemmTiles | None],
    l2_bytes: int,
    workers: int,
    calibration: Calibration | None = None,
) -> list[OpTraffic]:
    """DRAM traffic of each op of one block, in schedule (program) order."""
    resident: OrderedDict[Hashable, int] = OrderedDict()
    used = 0
    out: list[OpTraffic] = []

    def touch(key: Hashable, nbytes: int) -> None:
        nonlocal used
        if key in resident:
            resident.move_to_end(key)
            return
        if nbytes > l2_bytes:
            return
        while used + nbytes > l2_bytes and resident:
            _, freed = resident.popitem(last=False)
            used -= freed
        resident[key] = nbytes
        used += nbytes

    for acc, gemm in zip(accesses, gemms, strict=True):
        hit = sum(b for key, b in acc.reads if key in resident)
        read = sum(b for _, b in acc.reads)
        written = sum(b for _, b in acc.writes)
        source = "l2-residency"
        if gemm is not None:
            dram_reads, requested, source = _gemm_reads(gemm, workers, l2_bytes, calibration)
            # Operands already resident in L2 cost no fills; the rest fill per the tile model.
            cold = 1.0 - (hit / read if read else 0.0)
            dram_reads *= cold
            dram = dram_reads + written
            hit_rate = 1.0 - dram_reads / requested if requested else 0.0
            source = f"pascal-gemm:{source}"
        else:
            dram = read - hit + written
            hit_rate = hit / read if read else 0.0
        for key, b in acc.reads:
            touch(key, b)
        for key, b in acc.writes:
            touch(key, b)
        out.append(OpTraffic(round(dram), read, max(0.0, min(1.0, hit_rate)), source))
    return out
