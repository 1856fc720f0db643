"""OpInfo records and XLA's FLOP/byte conventions, checked by hand and by brute force."""

from __future__ import annotations

import itertools

import pytest
from stablehlo_perf.analysis.opinfo import (
    OpInfo,
    TensorType,
    conv_valid_positions,
    element_bytes,
    op_class,
)


@pytest.mark.parametrize(
    "etype,nbytes",
    [
        ("f32", 4), ("bf16", 2), ("f16", 2), ("f64", 8), ("i1", 1), ("i8", 1), ("i16", 2),
        ("i32", 4), ("i64", 8), ("ui8", 1), ("ui32", 4), ("f8E4M3FN", 1), ("f8E5M2", 1),
        ("complex<f32>", 8), ("complex<f64>", 16), ("i4", 1),
    ],
)  # fmt: skip
def test_element_bytes(etype, nbytes):
    assert element_bytes(etype) == nbytes


def test_unknown_element_type_is_an_error():
    with pytest.raises(ValueError, match="unknown element type 'tuple<f32>'"):
        element_bytes("tuple<f32>")


def T(*shape, e="f32"):
    return TensorType(tuple(shape), e)


def test_dot_general_flops_and_bytes():
    # (8x4x16) x (8x16x32) batched over 8: 2 * (8*4*32 outputs) * 16 = 32768 FLOPs.
    op = OpInfo.build(
        0, "stablehlo.dot_general", [T(8, 4, 16), T(8, 16, 32)], [T(8, 4, 32)],
        {"lhs_batch_dims": (0,), "rhs_batch_dims": (0,), "lhs_contracting_dims": (2,),
         "rhs_contracting_dims": (1,)},
    )  # fmt: skip
    assert op.flops == 32768
    assert op.bytes == (512 + 4096 + 1024) * 4
    assert op.op_class == "matmul"


def test_elementwise_and_transcendental_counts():
    add = OpInfo.build(0, "stablehlo.add", [T(3, 5), T(3, 5)], [T(3, 5)])
    exp = OpInfo.build(1, "stablehlo.exponential", [T(3, 5)], [T(3, 5)])
    assert (add.flops, add.transcendentals) == (15, 0)
    assert (exp.flops, exp.transcendentals) == (0, 15)
    assert op_class("stablehlo.maximum") == "compare_select"
    assert op_class("stablehlo.tanh") == "transcendental"
    assert op_class("stablehlo.transpose") == "movement"
    assert op_class("chlo.square") == "unary"


def test_reduce_and_reduce_window_flops():
    red = OpInfo.build(0, "stablehlo.reduce", [T(4, 6), T()], [T(4)], {"body_flops": 1})
    assert red.flops == 20  # 24 inputs -> 4 outputs: 20 adds
    rw = OpInfo.build(
        1, "stablehlo.reduce_window", [T(1, 8, 8, 3), T()], [T(1, 4, 4, 3)],
        {"window_dimensions": (1, 2, 2, 1), "body_flops": 1},
    )  # fmt: skip
    assert rw.flops == (4 - 1) * 48


def brute_positions(i, k, o, s, p, ld, rd):
    count = 0
    for kk, oo in itertools.product(range(k), range(o)):
        u = oo * s - p + kk * rd
        if u % ld == 0 and 0 <= u // ld < i:
            count += 1
    return count


def test_conv_valid_positions_match_brute_force():
    cases = itertools.product(
        [1, 2, 5, 9], [1, 2, 3], [1, 3, 7], [1, 2, 3], [-1, 0, 1, 2], [1, 2, 3], [1, 2]
    )
    for args in cases:
        assert conv_valid_positions(*args) == brute_positions(*args), args


def test_conv_flops_grouped_and_batch_grouped():
    attrs = {
        "input_batch_dim": 0, "input_feature_dim": 3, "input_spatial_dims": (1, 2),
        "kernel_input_feature_dim": 2, "kernel_output_feature_dim": 3,
        "kernel_spatial_dims": (0, 1), "output_batch_dim": 0, "output_feature_dim": 3,
        "output_spatial_dims": (1, 2), "window_strides": (1, 1), "padding": ((0, 0), (0, 0)),
        "feature_group_count": 4,
    }  # fmt: skip
    # Depthwise-style: 8 in features in 4 groups -> 2 per group; 3x3 VALID on 6x6 -> 4x4 out.
    op = OpInfo.build(
        0, "stablehlo.convolution", [T(2, 6, 6, 8), T(3, 3, 2, 8)], [T(2, 4, 4, 8)], attrs
    )
    assert op.flops == 2 * (8 // 4) * 8 * 2 * (4 * 3) * (4 * 3)


def test_dynamic_and_unranked_shapes_have_no_counts():
    dyn = OpInfo.build(0, "stablehlo.add", [T(None, 4)], [T(None, 4)])
    unranked = OpInfo.build(
        1, "stablehlo.add", [TensorType(None, "f32")], [TensorType(None, "f32")]
    )
    assert (dyn.flops, dyn.bytes, dyn.is_static) == (None, None, False)
    assert (unranked.flops, unranked.bytes) == (None, None)
    assert str(dyn.operands[0]) == "tensor<?x4xf32>"


def test_counts_past_int64_stay_exact():
    big = 2**40
    op = OpInfo.build(0, "stablehlo.multiply", [T(big, big)] * 2, [T(big, big)])
    assert op.flops == 2**80
    assert op.bytes == 3 * 4 * 2**80


def test_zero_size_tensor_costs_nothing():
    op = OpInfo.build(0, "stablehlo.add", [T(0, 7)] * 2, [T(0, 7)])
    assert (op.flops, op.bytes) == (0, 0)
