"""Scans: a reduce_window whose window spans an axis and keeps its length (cumsum,
cumprod, cummax), and the work XLA:CPU runs for one.

XLA:CPU's ReduceWindowRewriter (base length 16) turns a scan of length L into blocked
scans: every block of 16 scanned (15 combines an element), the blocks' totals scanned
the same way up to a last level of at most 16, and each level's prefixes combined into
the one below (one combine an element). A 128x1024 f32 cumsum is then 2,230,144 flops,
not the 134 million its HLO counts; `blocked_scan_flops` equals the compiled module's
`cost_analysis()` (jax 0.10.2) for sums, products and maxima along either axis.

Each level is kernels of its own (`rewritten_scan_kernels`): a 128x1024 cumprod runs six,
where its HLO has one reduce_window.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from stablehlo_perf.analysis.opinfo import OpInfo

__all__ = [
    "REWRITE_BASE",
    "RewrittenScan",
    "blocked_scan_flops",
    "executed_flops",
    "op_scan",
    "rewritten_scan",
    "scan_axis",
]

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


def op_scan(op: OpInfo) -> tuple[int, int] | None:
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
    scan = op_scan(op)
    if scan is None:
        return op.flops
    return blocked_scan_flops(*scan, int(op.attrs.get("body_flops", 0)))


@dataclass(frozen=True)
class RewrittenScan:
    """The kernels XLA:CPU runs for a scan its ReduceWindowRewriter splits: `kernels` in
    all, of which the first pads or transposes the input when `head` (and takes the scan's
    elementwise producers), and the last combines the levels (and takes its consumers)."""

    kernels: int
    head: bool


def rewritten_scan(op: OpInfo) -> RewrittenScan | None:
    """How XLA:CPU runs a reduce_window the ReduceWindowRewriter splits into levels (a
    scan, all its padding on one side, longer than `REWRITE_BASE`), None for one it keeps.

    Each of the k levels that split is a reduce-window kernel and a kernel slicing out its
    blocks' totals (padded there for the next level); the last level is one more
    reduce-window; a kernel combines them all; a first kernel pads the input to a multiple
    of 16 or moves the scanned axis last when it is not already (jax 0.10.2: 2k + 2
    kernels, one more with that head: a cumsum over 1024 is 6, over 1000 7, over the first
    axis of 1024x8 7, over 4097 9, over 65536 8)."""
    scan = op_scan(op)
    if scan is None:
        return None
    a = op.attrs
    src = op.operands[0]
    window = a.get("window_dimensions", ())
    axis = scan_axis(window, src.shape, op.results[0].shape)
    length = scan[1]
    if axis is None or length <= REWRITE_BASE or sum(w > 1 for w in window) != 1:
        return None
    pad = (a.get("padding") or ((0, 0),) * len(window))[axis]
    plain = all(
        all(v == 1 for v in (a.get(k) or ()))
        for k in ("window_strides", "base_dilations", "window_dilations")
    )
    if not plain or (min(pad) != 0 or max(pad) not in (length - 1, length)):
        return None
    levels, level = 0, length
    while level > REWRITE_BASE:
        level, levels = -(-level // REWRITE_BASE), levels + 1
    moved = any(d > 1 for d in src.shape[axis + 1 :])
    head = length % REWRITE_BASE != 0 or moved
    return RewrittenScan(2 * levels + 2 + head, head)
