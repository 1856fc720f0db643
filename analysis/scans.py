"""Scans: a reduce_window whose window spans an axis and keeps its length (cumsum,
cumprod, cummax), and the work XLA:CPU runs for one.

XLA:CPU's ReduceWindowRewriter (base length 16) turns a scan of length L into blocked
scans: every block of 16 scanned (15 combines an element), the blocks' totals scanned
the same way up to a last level of at most 16, and each level's prefixes combined into
the one below (one combine an element). A 128x1024 f32 cumsum is then 2,230,144 flops,
not the 134 million its HLO counts; `blocked_scan_flops` equals the compiled module's
`cost_analysis()` (jax 0.10.2) for sums, products and maxima along either axis.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from stablehlo_perf.analysis.opinfo import OpInfo

__all__ = ["REWRITE_BASE", "blocked_scan_flops", "executed_flops", "scan_axis"]

REWRITE_BASE = 16
"""The block length of XLA:CPU's ReduceWindowRewriter."""


def scan_axis(
    window: Sequence[int], in_shape: Sequence[int], out_shape: Sequence[int]
) -> int | None:
    """The axis a reduce_window scans (its window spans the axis, which keeps its
    length), or None for a pool."""
    for axis, (w, i, o) in enumerate(zip(window, in_shape, out_shape, strict=True)):
        if w > 1 and w == i and o == i:
            return axis
    return None


def _op_scan(op: OpInfo) -> tuple[int, int] | None:
    """(outer elements, scan length) of a static reduce_window scan, else None."""
    if op.short_name != "reduce_window" or not op.operands or not op.results:
        return None
    src, out = op.operands[0], op.results[0]
    if not (src.is_static and out.is_static):
        return None
    window = op.attrs.get("window_dimensions", ())
    if len(window) != len(src.shape) or len(out.shape) != len(src.shape):
        return None
    axis = scan_axis(window, src.shape, out.shape)
    if axis is None:
        return None
    length = src.shape[axis]
    return math.prod(out.shape) // length, length


def blocked_scan_flops(
    outer: int, length: int, body_flops: int = 1, base: int = REWRITE_BASE
) -> int:
    """Flops of `outer` scans of `length` elements as XLA:CPU runs them (module doc)."""
    total = 0
    level, top = length, True
    while level > base:
        blocks = -(-level // base)
        total += outer * blocks * base * base  # base - 1 combines within a block, one across
        level, top = blocks, False
    # The last level: a window of its length over it (padded by one more when it scans
    # the blocks' totals, which the level below combines as an exclusive prefix).
    total += outer * (level if top else level + 1) * (level - 1)
    return total * body_flops


def executed_flops(op: OpInfo) -> int | None:
    """An op's flops as XLA:CPU executes it: a scan's blocked work, else its HLO count."""
    scan = _op_scan(op)
    if scan is None:
        return op.flops
    return blocked_scan_flops(*scan, int(op.attrs.get("body_flops", 0)))
