"""FLOPs of dot_general and convolution equal XLA's own cost_analysis() exactly.

Each program here has all of its FLOPs in dot/conv ops, so the sum of
`perf.flops` over the module must equal what XLA counts after compiling it.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
import stablehlo_perf as sp
from conftest import corpus_programs
from jax import lax

S = jax.ShapeDtypeStruct


def conv(lhs, rhs, dn, **kw):
    def f(x, w):
        return lax.conv_general_dilated(x, w, dimension_numbers=dn, **kw)

    return f, (lhs, rhs)


CASES = {
    "same_3x3": conv(S((2, 9, 9, 4), jnp.float32), S((3, 3, 4, 8), jnp.float32),
                     ("NHWC", "HWIO", "NHWC"), window_strides=(1, 1), padding="SAME"),
    "stride2_same": conv(S((1, 10, 7, 3), jnp.float32), S((3, 3, 3, 5), jnp.float32),
                         ("NHWC", "HWIO", "NHWC"), window_strides=(2, 2), padding="SAME"),
    "rhs_dilated": conv(S((1, 12, 12, 2), jnp.float32), S((3, 3, 2, 4), jnp.float32),
                        ("NHWC", "HWIO", "NHWC"), window_strides=(1, 1), padding=((2, 2), (1, 3)),
                        rhs_dilation=(2, 2)),
    "transposed_lhs_dilated": conv(S((1, 5, 5, 4), jnp.float32), S((3, 3, 4, 2), jnp.float32),
                                   ("NHWC", "HWIO", "NHWC"), window_strides=(1, 1),
                                   padding=((2, 2), (2, 2)), lhs_dilation=(2, 2)),
    "depthwise": conv(S((2, 8, 8, 6), jnp.float32), S((3, 3, 1, 6), jnp.float32),
                      ("NHWC", "HWIO", "NHWC"), window_strides=(1, 1), padding="SAME",
                      feature_group_count=6),
    "nchw_oihw": conv(S((2, 3, 11, 11), jnp.float32), S((7, 3, 5, 5), jnp.float32),
                      ("NCHW", "OIHW", "NCHW"), window_strides=(3, 3), padding="VALID"),
    "conv1d_negative_pad": conv(S((1, 20, 2), jnp.float32), S((4, 2, 3), jnp.float32),
                                ("NWC", "WIO", "NWC"), window_strides=(1,), padding=((-1, 2),)),
    "dot_multi_contract": (lambda a, b: jnp.einsum("ijk,jkl->il", a, b),
                           (S((5, 6, 7), jnp.float32), S((6, 7, 8), jnp.float32))),
    "matvec": (lambda a, b: a @ b, (S((64, 48), jnp.float32), S((48,), jnp.float32))),
}  # fmt: skip


def flops_of(fn, args) -> tuple[int, int]:
    lowered = jax.jit(fn).lower(*args)
    ours = sp.analyze(lowered, pipeline="builtin.module(perf-op-info)")
    total = sum(op.flops or 0 for op in ours.report.ops)
    xla = lowered.compile().cost_analysis()
    if isinstance(xla, list):
        xla = xla[0]
    return total, int(xla["flops"])


@pytest.mark.parametrize("name", sorted(CASES))
def test_dot_conv_flops_equal_xla(name):
    ours, xla = flops_of(*CASES[name])
    assert ours == xla


@pytest.mark.parametrize("name", ["dot_only", "conv_only"])
def test_corpus_dot_conv_modules_equal_xla(name):
    fn, args = corpus_programs().PROGRAMS[name]()
    ours, xla = flops_of(fn, args)
    assert ours == xla


def test_bf16_dot_differs_by_xla_cpu_upcast_converts():
    """XLA:CPU runs bf16 dots in f32: it adds converts of both operands and the result,
    one FLOP per element each, which StableHLO does not contain."""
    args = (S((3, 17, 33), jnp.bfloat16), S((3, 33, 9), jnp.bfloat16))
    ours, xla = flops_of(lambda a, b: jnp.einsum("bij,bjk->bik", a, b), args)
    assert ours == 2 * 3 * 17 * 9 * 33
    assert xla - ours == 3 * 17 * 33 + 3 * 33 * 9 + 3 * 17 * 9


@pytest.mark.parametrize("kind", ["slice", "dynamic_slice"])
def test_slice_bytes_equal_xla(kind):
    """A slice reads only what it returns: XLA's cost analysis counts 2 x result bytes
    (plus a dynamic slice's start index); the whole operand used to be counted (69,632 B)."""
    x = jax.ShapeDtypeStruct((16, 8, 128), jnp.float32)
    if kind == "slice":
        lowered = jax.jit(lambda a: a[3:4]).lower(x)
    else:
        i = jax.ShapeDtypeStruct((), jnp.int32)
        lowered = jax.jit(lambda a, k: lax.dynamic_slice(a, (k, 0, 0), (1, 8, 128))).lower(x, i)
    ca = lowered.compile().cost_analysis()
    xla = (ca[0] if isinstance(ca, list) else ca)["bytes accessed"]
    op = next(o for o in sp.analyze(lowered, target="host").report.ops if o.name.endswith(kind))
    # Our count includes all three start indices (12 B); XLA keeps the one that is not 0.
    assert xla <= op.bytes <= xla + 8
    assert op.bytes >= 2 * 8 * 128 * 4


SCANS = {
    "cumsum_rows": (lambda x: jnp.cumsum(x, axis=1), (128, 1024)),
    "cumsum_long": (lambda x: jnp.cumsum(x, axis=1), (64, 4096)),
    "cumsum_odd": (lambda x: jnp.cumsum(x, axis=1), (100, 1000)),
    "cumsum_17": (lambda x: jnp.cumsum(x, axis=1), (16, 17)),
    "cumsum_16": (lambda x: jnp.cumsum(x, axis=1), (8, 16)),
    "cumsum_cols": (lambda x: jnp.cumsum(x, axis=0), (128, 1024)),
    "cumprod": (lambda x: jnp.cumprod(x, axis=1), (128, 1024)),
    "cummax": (lambda x: lax.cummax(x, axis=1), (512, 256)),
}


@pytest.mark.parametrize("name", sorted(SCANS))
def test_scan_flops_as_xla_cpu_runs_them(name):
    """A scan's flops as XLA:CPU's blocked rewrite runs them equal the compiled module's
    cost_analysis() (the lowered module's HLO count is the naive window x length)."""
    from conftest import op_infos
    from stablehlo_perf.analysis.scans import executed_flops

    fn, shape = SCANS[name]
    lowered = jax.jit(fn).lower(S(shape, jnp.float32))
    (scan,) = [o for o in op_infos(lowered.as_text()) if o.short_name == "reduce_window"]
    compiled = lowered.compile().cost_analysis()
    assert executed_flops(scan) == compiled["flops"]
    assert scan.flops == lowered.cost_analysis()["flops"]
