"""Sums of products of broadcasts, which XLA:CPU runs as the matrix products they write out
(analysis/contractions.py), and their price on the host."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
from stablehlo_perf import perf_jit
from stablehlo_perf.analysis.contractions import WrittenProduct, as_dot, broadcast_contraction
from stablehlo_perf.passes.extract import view_module
from stablehlo_perf.passes.ir import make_context, parse_module


def _f32(*shape: int) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct(shape, jnp.float32)


def _contraction(fn, *specs) -> WrittenProduct | None:
    """What `broadcast_contraction` finds for the one reduce of fn lowered on specs."""
    text = jax.jit(fn).lower(*specs).as_text()
    with make_context() as ctx:
        module = parse_module(text, "<jax>", ctx)
        view = view_module(module.operation, "<jax>")
        ids = view.funcs["main"].top
        ops = [view.records[i].info for i in ids]
        sources = view.block_sources(ids)
    [reduce] = [k for k, op in enumerate(ops) if op.short_name == "reduce"]
    return broadcast_contraction(ops, reduce, sources)


@pytest.mark.parametrize(
    ("fn", "specs", "want"),
    [
        # a (64 x 32) times b's rows (48 x 32): M 64, N 48, K 32 over the trailing dimension.
        (lambda a, b: (a[:, None, :] * b[None]).sum(-1), (_f32(64, 32), _f32(48, 32)),
         WrittenProduct((1, 64, 48, 32), True)),
        # The same product summed over the middle: a (64 x 32) times b (32 x 48).
        (lambda a, b: (a[:, :, None] * b[None]).sum(1), (_f32(64, 32), _f32(32, 48)),
         WrittenProduct((1, 64, 48, 32), False)),
        # Attention's scores written out: 8 batches of 64 x 32 times 32 x 40.
        (lambda q, k: (q[:, :, None, :] * k[:, None]).sum(-1), (_f32(8, 64, 32), _f32(8, 40, 32)),
         WrittenProduct((8, 64, 40, 32), True)),
        # Scaled first: the scalar goes into the broadcast's operand.
        (lambda a, b: (2.0 * a[:, None, :] * b[None]).sum(-1), (_f32(64, 32), _f32(48, 32)),
         WrittenProduct((1, 64, 48, 32), True)),
    ],
)  # fmt: skip
def test_the_product_a_sum_of_broadcasts_writes_out_by_hand(fn, specs, want) -> None:
    assert _contraction(fn, *specs) == want


@pytest.mark.parametrize(
    ("fn", "specs"),
    [
        # Squared distances: a subtract, no product.
        (lambda a, b: ((a[:, None] - b[None]) ** 2).sum(-1), (_f32(64, 32), _f32(48, 32))),
        # A full-size operand: a row scaling summed, not a product of two smaller tensors.
        (lambda x, w: (x * w[None]).sum(-1), (_f32(64, 48, 32), _f32(48, 32))),
        # c fills no summed dimension: a sum of a's rows, scaled.
        (lambda a, c: (a[:, None, :] * c[None, :, None]).sum(-1), (_f32(64, 32), _f32(48))),
        # A maximum of the products: no sum.
        (lambda a, b: (a[:, None, :] * b[None]).max(-1), (_f32(64, 32), _f32(48, 32))),
    ],
)  # fmt: skip
def test_other_reduces_are_no_written_product(fn, specs) -> None:
    assert _contraction(fn, *specs) is None


def test_the_twin_dot_has_the_products_shapes_and_flops() -> None:
    text = jax.jit(lambda q, k: (q[:, :, None, :] * k[:, None]).sum(-1)).lower(
        _f32(8, 64, 32), _f32(8, 40, 32)
    )
    with make_context() as ctx:
        module = parse_module(text.as_text(), "<jax>", ctx)
        view = view_module(module.operation, "<jax>")
        reduce = next(r.info for r in view.records if r.info.short_name == "reduce")
    dot = as_dot(reduce, (8, 64, 40, 32))
    assert dot.short_name == "dot_general"
    assert [t.shape for t in dot.operands] == [(8, 64, 32), (8, 32, 40)]
    assert dot.results[0].shape == (8, 64, 40)
    assert dot.flops == 2 * 8 * 64 * 40 * 32


def _group(fn, *specs, target: str = "host") -> dict:
    """The fusion group of fn's reduce."""
    groups = perf_jit(fn, target=target).analyze(*specs).result.report.fusion_groups
    [group] = [g for g in groups if g["root"] == "stablehlo.reduce"]
    return group


def _dot_ns(*specs) -> float:
    """The host's price of `a @ b` (batched where 3-D) on specs: its one op."""
    r = perf_jit(lambda a, b: a @ b, target="host").analyze(*specs).result.report
    return next(op.latency_ns for op in r.ops if op.name == "stablehlo.dot_general")


def test_a_written_product_is_priced_as_the_product() -> None:
    """In a loop on the Xeon VM (2026-12-07) `(a[:, None, :] * b[None]).sum(-1)` of
    256 x 256 rows of 256 took 181 us, `a @ b` 176; the sums' model priced it at 7x: it is
    priced as the product. Summed over the middle (282 us there) the product is its floor."""
    a, b, bt = _f32(256, 256), _f32(256, 256), _f32(256, 256)
    dot = _dot_ns(a, b)
    last = _group(lambda a, b: (a[:, None, :] * b[None]).sum(-1), a, bt)
    assert last["model"].endswith("+broadcast-product")
    assert last["latency_ns"] == pytest.approx(dot, rel=1e-6)
    mid = _group(lambda a, b: (a[:, :, None] * b[None]).sum(1), a, b)
    assert mid["latency_ns"] >= dot * (1 - 1e-6)
    batched = _group(
        lambda q, k: (q[:, :, None, :] * k[:, None]).sum(-1), _f32(8, 64, 32), _f32(8, 64, 32)
    )
    assert batched["latency_ns"] == pytest.approx(_dot_ns(_f32(8, 64, 32), _f32(8, 32, 64)))
    tpu = _group(lambda a, b: (a[:, None, :] * b[None]).sum(-1), a, bt, target="tpu-v5e")
    assert "broadcast-product" not in tpu["model"]
