"""Sums of products of broadcasts that XLA:CPU runs as matrix products.

`(a[:, None, :] * b[None]).sum(-1)` is a matrix product written out: XLA:CPU (jax 0.10.2)
hands the broadcasts, the multiply and the sum to one YNNPACK fusion, which runs at a
product's speed, not an elementwise loop's. In a loop on the Xeon VM (2026-12-07), over the
minor dimension of both operands, against `a @ b` of the same sizes: 64x512x1024 347 vs 303
us, 128x512x512 312 vs 312, 256x256x256 181 vs 176, 512x512x64 197 vs 213, 64x1024x64 79 vs
69, 1024x64x1024 555 vs 551, 64x512x256 118 vs 84; batched (8 x 64x64 over 32) 20.8 vs
19.1. The sums' model, which has no such chains, priced them at 5-10x. A sum over a middle
dimension (`(a[:, :, None] * b[None]).sum(1)`) ran at 0.68-1.14x the product on 15 sizes of
M, K, N 16-1024 where the K x N operand is under 256 KiB, and at 1.33-5.2x on 9 where it
is 256 KiB or more (64x64x1024 4.7x, 1024x64x1024 5.2x, 256x256x256 1.7x), where the
reductions' model priced it at 0.14-0.50x its time (64x512x1024 1.23x): the product's price
is its floor.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from stablehlo_perf.analysis.fusion import cpu_reduce_mode
from stablehlo_perf.analysis.opinfo import OpInfo, TensorType

__all__ = ["WrittenProduct", "as_dot", "broadcast_contraction"]


def _broadcast_dims(op: OpInfo) -> frozenset[int] | None:
    """The result dimensions a broadcast_in_dim fills from its operand's dimensions (not from
    the operand's dimensions of 1 it stretches), None for any other op."""
    if op.short_name != "broadcast_in_dim" or not op.operands or not op.results:
        return None
    src, out = op.operands[0].shape, op.results[0].shape
    mapping = op.attrs.get("broadcast_dimensions")
    if src is None or out is None or mapping is None or len(mapping) != len(src):
        return None
    return frozenset(int(d) for s, d in zip(src, mapping, strict=True) if s == out[d])


@dataclass(frozen=True)
class WrittenProduct:
    """The matrix product a sum of a product of broadcasts computes: (batch, M, N, K), and
    whether it sums the trailing dimensions (YNNPACK runs it as the product) or others (at
    least the product's time)."""

    dims: tuple[int, int, int, int]
    trailing: bool


def broadcast_contraction(
    ops: Sequence[OpInfo], reduce: int, sources: Sequence[Sequence[int | None]]
) -> WrittenProduct | None:
    """The matrix product a YNNPACK sum (`ops[reduce]`) computes where it sums a multiply of
    two broadcasts that each fill the summed dimensions and some of the others (every kept
    dimension filled by one or both); None for any other reduce. `sources[i][k]` is the op
    producing operand k of op i."""
    op = ops[reduce]
    if op.short_name != "reduce" or op.attrs.get("reducer") != "add" or len(op.operands) != 2:
        return None
    if cpu_reduce_mode(op) != "ynn" or not sources[reduce]:
        return None
    p = sources[reduce][0]
    if p is None or p < 0 or ops[p].short_name != "multiply" or len(sources[p]) != 2:
        return None
    shape = ops[p].results[0].shape if ops[p].results else None
    if not shape or any(d is None for d in shape):
        return None
    filled = []
    for s in sources[p]:
        dims = None if s is None or s < 0 else _broadcast_dims(ops[s])
        if dims is None or (ops[s].operands[0].num_elements or 0) >= math.prod(shape):
            return None
        filled.append(dims)
    lhs, rhs = filled
    summed = frozenset(int(d) for d in op.attrs.get("dimensions") or ())
    rank = len(shape)
    kept = frozenset(range(rank)) - summed
    if not summed or not (summed <= lhs & rhs) or not kept <= (lhs | rhs):
        return None

    def size(dims: frozenset[int]) -> int:
        return math.prod(int(shape[d]) for d in dims)

    dims = size(kept & lhs & rhs), size(kept & lhs - rhs), size(kept & rhs - lhs), size(summed)
    return WrittenProduct(dims, summed == frozenset(range(rank - len(summed), rank)))


def as_dot(op: OpInfo, dims: tuple[int, int, int, int]) -> OpInfo:
    """A dot_general of (batch, M, N, K) in `op`'s element type, row-major operands (M x K
    times K x N, the batch leading), for the matrix-product model to price in `op`'s place."""
    batch, m, n, k = dims
    dtype = op.results[0].element_type if op.results else "f32"
    lead = (batch,) if batch > 1 else ()
    attrs = {
        "lhs_batch_dims": (0,) if lead else (),
        "rhs_batch_dims": (0,) if lead else (),
        "lhs_contracting_dims": (len(lead) + 1,),
        "rhs_contracting_dims": (len(lead),),
    }
    return OpInfo.build(
        op.id,
        "stablehlo.dot_general",
        (TensorType((*lead, m, k), dtype), TensorType((*lead, k, n), dtype)),
        (TensorType((*lead, m, n), dtype),),
        attrs,
        op.loc,
        op.func,
    )
