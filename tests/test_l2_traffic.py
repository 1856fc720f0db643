"""Per-op DRAM traffic through a shared L2: tensor residency and the GEMM tile model."""

from __future__ import annotations

import pytest
import stablehlo_perf as sp
from conftest import ROOT
from stablehlo_perf.analysis.cache_predictor import gemm_dram_traffic
from stablehlo_perf.analysis.l2_traffic import GemmTiles, TensorAccess, l2_traffic


def acc(reads, writes):
    return TensorAccess(reads, writes)


def test_residency_hits_and_lru_eviction_by_hand():
    kb = 1024
    ops = [
        acc([], [("A", kb)]),  # A
        acc([], [("B", kb)]),  # A B
        acc([("A", kb)], [("C", kb)]),  # hit A; order B A C
        acc([], [("D", kb)]),  # 3 KiB L2: evict B -> A C D
        acc([("B", kb), ("D", kb)], []),  # B missed, D hit
        acc([("E", 4 * kb)], []),  # larger than L2: never resident
        acc([("E", 4 * kb)], []),
    ]
    t = l2_traffic(ops, [None] * len(ops), l2_bytes=3 * kb, workers=1)
    assert [x.dram_bytes for x in t] == [kb, kb, kb, kb, kb, 4 * kb, 4 * kb]
    assert [x.hit_rate for x in t] == [0, 0, 1, 0, 0.5, 0, 0]


def test_gemm_uses_the_fill_multiple_on_the_real_footprint():
    # 1024x1024x1024 bf16 on 132 CTAs with a 1 MiB L2: the tile model decides the multiple.
    g = GemmTiles(batch=2, m=1024, n=1024, k=1024, elem_bytes=2)
    (t,) = l2_traffic([acc([("A", 2**21), ("B", 2**21)], [("C", 2**21)])], [g], 2**20, 132)
    multiple = gemm_dram_traffic(132, 8, 8, 16, 2**20).fill_multiple
    assert t.dram_bytes == round(multiple * (1024 + 1024) * 1024 * 2 * 2 + 2**21)
    assert t.source.startswith("pascal-gemm:static-aligned")
    # Requested panel bytes: every 128x128 tile reads its A and B panels (8 tiles each way).
    requested = (1024 * 8 + 1024 * 8) * 1024 * 2 * 2
    dram_reads = t.dram_bytes - 2**21
    assert t.hit_rate == pytest.approx(1 - dram_reads / requested)


def test_gpu_default_pipeline_writes_traffic_and_it_changes_latency():
    text = (ROOT / "test_ir/corpus/mlp.mlir").read_text()
    assert "perf.l2_hit_rate" in sp.analyze(text, target="h100").annotated_ir
    res = sp.analyze(
        text,
        target="h100",
        pipeline="builtin.module(perf-op-info,perf-annotate-cache-traffic{target=h100},"
        "perf-annotate-cycles{target=h100})",
    )
    ir_text = res.annotated_ir
    assert "perf.l2_hit_rate" in ir_text and "pascal-gemm:static-aligned" in ir_text
    plain = sp.analyze(
        text,
        target="h100",
        pipeline="builtin.module(perf-op-info,perf-annotate-cycles{target=h100})",
    )
    by_id = {o.id: o for o in plain.report.ops}
    changed = [
        o
        for o in res.report.ops
        if o.model == "roofline+l2" and o.latency_ns != by_id[o.id].latency_ns
    ]
    assert changed, "cache behaviour must change predicted latency"
    assert all(
        o.latency_ns <= by_id[o.id].latency_ns
        for o in changed
        if o.dram_bytes <= by_id[o.id].dram_bytes
    )


def test_fused_kernels_on_gpu_read_l2_resident_inputs_at_l2_bandwidth():
    text = (ROOT / "test_ir/corpus/transformer_block.mlir").read_text()
    fused = "perf-op-info,perf-fusion{target=h100},"
    with_cache = sp.analyze(text, target="h100")
    without = sp.analyze(
        text, target="h100",
        pipeline=f"builtin.module({fused}perf-annotate-cycles{{target=h100}},perf-critical-path{{target=h100}})",
    )  # fmt: skip
    assert with_cache.report.total_latency_ns < without.report.total_latency_ns
    kernels = {g["id"]: g for g in with_cache.report.fusion_groups}
    plain = {g["id"]: g for g in without.report.fusion_groups}
    assert any(kernels[i]["bytes"] < plain[i]["bytes"] for i in kernels), "L2 hits cut DRAM bytes"


def test_convolution_is_one_gemm_per_image_and_group_on_gpu():
    """A conv's tile model: batch x groups GEMMs of (output pixels) x (filters per group) x
    (taps x channels per group). Conv programs on GPU targets used to stop with an internal
    error here."""
    import jax
    import jax.numpy as jnp
    from jax import lax
    from stablehlo_perf.passes.cache_traffic import _gemm
    from stablehlo_perf.passes.extract import view_module
    from stablehlo_perf.passes.ir import make_context, parse_module

    def conv(x, k):
        dn = ("NHWC", "HWIO", "NHWC")
        return lax.conv_general_dilated(
            x, k, (1, 1), "SAME", dimension_numbers=dn, feature_group_count=2
        )

    x = jax.ShapeDtypeStruct((2, 8, 8, 4), jnp.float32)
    k = jax.ShapeDtypeStruct((3, 3, 2, 8), jnp.float32)
    lowered = jax.jit(conv).lower(x, k)
    with make_context() as ctx:
        view = view_module(parse_module(lowered.as_text(), "conv.mlir", ctx), "conv.mlir")
        rec = next(r for r in view.records if r.info.name == "stablehlo.convolution")
        assert _gemm(rec) == GemmTiles(batch=2 * 2, m=8 * 8, n=8 // 2, k=3 * 3 * 2, elem_bytes=4)
    for name in ("conv_net", "conv_only"):
        text = (ROOT / f"test_ir/corpus/{name}.mlir").read_text()
        res = sp.analyze(text, target="h100")
        convs = [o for o in res.report.ops if o.name == "stablehlo.convolution"]
        assert convs and all(o.dram_bytes > 0 for o in convs)
