"""StableHLO dot_general / convolution mapped onto the systolic model, priced on TPU targets."""

from __future__ import annotations

import dataclasses

import pytest
from stablehlo_perf.analysis.opinfo import OpInfo, TensorType
from stablehlo_perf.analysis.scalesim_io import Layer
from stablehlo_perf.analysis.service import default_registry
from stablehlo_perf.analysis.systolic import ArrayConfig, simulate_conv, simulate_gemm
from stablehlo_perf.analysis.systolic_service import (
    ConvLayer,
    GemmShape,
    SystolicService,
    conv_to_layer,
    dot_to_gemm,
)
from stablehlo_perf.analysis.targets import load_target


def T(*shape, e="f32"):
    return TensorType(tuple(shape), e)


NHWC = {
    "input_batch_dim": 0, "input_feature_dim": 3, "input_spatial_dims": (1, 2),
    "kernel_input_feature_dim": 2, "kernel_output_feature_dim": 3, "kernel_spatial_dims": (0, 1),
    "output_batch_dim": 0, "output_feature_dim": 3, "output_spatial_dims": (1, 2),
}  # fmt: skip


def test_dot_general_dimension_numbers_to_gemm():
    # lhs [b=4, m=3, k1=5, m2=2], rhs [b=4, k1=5, n=7]: M = 3*2, N = 7, K = 5, batch 4.
    op = OpInfo.build(
        0, "stablehlo.dot_general", [T(4, 3, 5, 2), T(4, 5, 7)], [T(4, 3, 2, 7)],
        {"lhs_batch_dims": (0,), "rhs_batch_dims": (0,), "lhs_contracting_dims": (2,),
         "rhs_contracting_dims": (1,)},
    )  # fmt: skip
    assert dot_to_gemm(op) == GemmShape(batch=4, m=6, n=7, k=5)


def test_conv_padding_dilation_groups_fold_into_scalesim_layer():
    # 2 x 9x9x8 input, 3x3 kernel, SAME padding [1,1], stride 2, rhs dilation 2 -> 5x5 filter,
    # 2 feature groups of 4 channels, 6 filters (3 per group).
    attrs = dict(NHWC, window_strides=(2, 2), padding=((1, 1), (2, 2)), rhs_dilation=(2, 2),
                 feature_group_count=2)  # fmt: skip
    op = OpInfo.build(
        0, "stablehlo.convolution", [T(2, 9, 9, 8), T(3, 3, 4, 6)], [T(2, 4, 5, 6)], attrs
    )
    assert conv_to_layer(op) == ConvLayer(
        repeats=2 * 2,
        layer=Layer("stablehlo.convolution", ifmap_h=11, ifmap_w=13, filter_h=5, filter_w=5,
                    channels=4, num_filters=3, stride_h=2, stride_w=2),
    )  # fmt: skip


def test_nchw_layout_and_lhs_dilation():
    attrs = {
        "input_batch_dim": 0, "input_feature_dim": 1, "input_spatial_dims": (2, 3),
        "kernel_input_feature_dim": 1, "kernel_output_feature_dim": 0, "kernel_spatial_dims": (2, 3),
        "output_batch_dim": 0, "output_feature_dim": 1, "output_spatial_dims": (2, 3),
        "lhs_dilation": (2, 2), "padding": ((2, 2), (2, 2)),
    }  # fmt: skip
    # Transposed conv: 5x5 input dilated by 2 -> 9x9, padded by 2 -> 13x13.
    op = OpInfo.build(
        0, "stablehlo.convolution", [T(1, 4, 5, 5), T(2, 4, 3, 3)], [T(1, 2, 11, 11)], attrs
    )
    layer = conv_to_layer(op).layer
    assert (layer.ifmap_h, layer.ifmap_w, layer.channels, layer.num_filters) == (13, 13, 4, 2)


def one_mxu(name="tpu-one-mxu"):
    """tpu-v4 with a single 128x128 MXU, so cycles equal one SCALE-Sim layer."""
    return dataclasses.replace(load_target("tpu-v4"), name=name, cores=1, matrix_units_per_core=1)


def test_gemm_cycles_are_the_systolic_models():
    target = one_mxu()
    op = OpInfo.build(0, "stablehlo.dot_general", [T(256, 384, e="bf16"), T(384, 200, e="bf16")],
                      [T(256, 200, e="bf16")], {"lhs_contracting_dims": (1,), "rhs_contracting_dims": (0,)})  # fmt: skip
    svc = SystolicService()
    (cost,) = svc.predict([op], target)
    ref = simulate_gemm(256, 200, 384, svc.array(target, 2))
    compute_ns = ref.total_cycles / target.clock_ghz
    assert cost.latency_ns == pytest.approx(
        max(compute_ns, cost.dram_bytes / target.memory_bandwidth * 1e9) + 850
    )
    assert cost.model == "systolic-ws"
    assert cost.extra["util"] == pytest.approx(ref.overall_util_pct / 100)


def test_conv_cycles_are_the_systolic_models():
    target = one_mxu()
    attrs = dict(NHWC, window_strides=(1, 1), padding=((0, 0), (0, 0)))
    op = OpInfo.build(0, "stablehlo.convolution", [T(1, 16, 16, 8, e="bf16"), T(3, 3, 8, 32, e="bf16")],
                      [T(1, 14, 14, 32, e="bf16")], attrs)  # fmt: skip
    svc = SystolicService()
    (cost,) = svc.predict([op], target)
    ref = simulate_conv(16, 16, 3, 3, 8, 32, 1, 1, svc.array(target, 2))
    assert cost.cycles == round(cost.latency_ns * target.clock_ghz)
    assert cost.latency_ns >= ref.total_cycles / target.clock_ghz + 850 - 1e-6


def test_f32_highest_precision_is_six_passes():
    target = one_mxu()
    big = [T(2048, 2048), T(2048, 2048)]
    attrs = {"lhs_contracting_dims": (1,), "rhs_contracting_dims": (0,)}
    default = OpInfo.build(0, "stablehlo.dot_general", big, [T(2048, 2048)], attrs)
    highest = OpInfo.build(1, "stablehlo.dot_general", big, [T(2048, 2048)],
                           dict(attrs, precision_config="[#stablehlo<precision HIGHEST>, #stablehlo<precision HIGHEST>]"))  # fmt: skip
    d, h = SystolicService().predict([default, highest], target)
    assert (h.latency_ns - 850) == pytest.approx(6 * (d.latency_ns - 850))


def test_registry_routes_matmuls_to_systolic_on_tpu_only():
    dot = OpInfo.build(0, "stablehlo.dot_general", [T(64, 64), T(64, 64)], [T(64, 64)],
                       {"lhs_contracting_dims": (1,), "rhs_contracting_dims": (0,)})  # fmt: skip
    add = OpInfo.build(1, "stablehlo.add", [T(64, 64)] * 2, [T(64, 64)])
    reg = default_registry()
    tpu = reg.price([dot, add], load_target("tpu-v5e"))
    gpu = reg.price([dot, add], load_target("h100"))
    assert tpu[0].model == "systolic-ws" and tpu[1].model != "systolic-ws"
    assert gpu[0].model == "roofline"


def test_arrays_follow_the_target():
    assert SystolicService().array(load_target("tpu-v6e"), 2).rows == 256
    assert SystolicService().array(load_target("tpu-v5e"), 2).cols == 128
    assert isinstance(SystolicService().array(load_target("tpu-v4"), 2), ArrayConfig)


@pytest.mark.parametrize("target", ["tpu-v5e", "tpu-v6e"])
def test_every_corpus_matmul_is_priced_by_the_systolic_service(target):
    import stablehlo_perf as sp
    from conftest import corpus_files

    seen = 0
    for path in corpus_files():
        for o in sp.analyze(path.read_text(), target=target).report.ops:
            if o.name in ("stablehlo.dot_general", "stablehlo.convolution"):
                # alone, or as the root of the fused kernel that carries its epilogue
                assert o.model in ("systolic-ws", "fused-output:systolic-ws"), (path.name, o)
                seen += 1
    assert seen >= 30
