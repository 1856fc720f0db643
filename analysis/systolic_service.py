"""dot_general and convolution on a TPU's matrix units, priced by the systolic-array model.

Mapping (after the SCALE-Sim TPU paper, §3): a dot_general is batch x GEMM(M, N, K)
with free lhs dims → M, free rhs dims → N, contracting dims → K; a convolution
is a SCALE-Sim conv layer with its padding folded into the ifmap, rhs
dilation into an effective filter, lhs dilation (transposed conv) as an
explicitly dilated ifmap, and batch x feature/batch groups as repeated
layers. The chip's TensorCores x MXUs share the work: repeats are spread over
them when there are enough, otherwise output columns (N / filters) or rows
(M) are split, whichever gives fewer cycles.

Element type decides MXU passes: bf16/f16 one; f32 at DEFAULT precision one
bf16 pass (XLA's TPU default), at HIGH three and HIGHEST six (bf16_3x and
bf16_6x decompositions); int8/fp8 run at the chip's faster int8 rate.
Latency = max(cycles x passes / clock, DRAM traffic / HBM bandwidth) +
per-kernel overhead; DRAM traffic is the model's DRAM words for the whole layer
(through the core's shared VMEM, however the MXUs split it) x element bytes.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

from stablehlo_perf.analysis.opinfo import OpInfo
from stablehlo_perf.analysis.scalesim_io import Layer
from stablehlo_perf.analysis.service import OpCost
from stablehlo_perf.analysis.systolic import ArrayConfig, LayerResult, simulate_gemm
from stablehlo_perf.analysis.targets import Target

__all__ = ["ConvLayer", "GemmShape", "SystolicService", "conv_to_layer", "dot_to_gemm"]


@dataclass(frozen=True)
class GemmShape:
    """`batch` independent GEMMs C[M,N] = A[M,K] B[K,N]."""

    batch: int
    m: int
    n: int
    k: int


@dataclass(frozen=True)
class ConvLayer:
    """A SCALE-Sim conv layer (its topology row: no padding, no batch) repeated `repeats` times."""

    repeats: int
    layer: Layer


def dot_to_gemm(op: OpInfo) -> GemmShape:
    """batch x GEMM(M, N, K) of a dot_general from its dimension numbers."""
    lhs, rhs = op.operands[0].shape, op.operands[1].shape
    assert lhs is not None and rhs is not None
    a = op.attrs
    lb = tuple(a.get("lhs_batch_dims", ()))
    rb = tuple(a.get("rhs_batch_dims", ()))
    lc = tuple(a.get("lhs_contracting_dims", (len(lhs) - 1,)))
    rc = tuple(a.get("rhs_contracting_dims", (0,) if len(rhs) else ()))
    batch = math.prod(lhs[d] for d in lb)
    k = math.prod(lhs[d] for d in lc)
    m = math.prod(lhs[d] for d in range(len(lhs)) if d not in lb and d not in lc)
    n = math.prod(rhs[d] for d in range(len(rhs)) if d not in rb and d not in rc)
    return GemmShape(batch, m, n, k)  # type: ignore[arg-type]


def conv_to_layer(op: OpInfo) -> ConvLayer:
    """The SCALE-Sim layer a StableHLO convolution runs as, in any dimension layout."""
    lhs, rhs = op.operands[0].shape, op.operands[1].shape
    assert lhs is not None and rhs is not None
    a = op.attrs
    in_sp, k_sp = a["input_spatial_dims"], a["kernel_spatial_dims"]
    n_sp = len(in_sp)
    strides = a.get("window_strides") or (1,) * n_sp
    pads = a.get("padding") or ((0, 0),) * n_sp
    lhs_dil = a.get("lhs_dilation") or (1,) * n_sp
    rhs_dil = a.get("rhs_dilation") or (1,) * n_sp
    sizes, filters = [], []
    for d in range(n_sp):
        dilated = (lhs[in_sp[d]] - 1) * lhs_dil[d] + 1  # type: ignore[operator]
        eff_filter = (rhs[k_sp[d]] - 1) * rhs_dil[d] + 1  # type: ignore[operator]
        padded = max(dilated + pads[d][0] + pads[d][1], eff_filter)
        sizes.append(padded)
        filters.append(eff_filter)
    # Spatial dims past two fold into the height (SCALE-Sim layers are 2-D); 1-D convs get w = 1.
    while len(sizes) < 2:
        sizes.append(1)
        filters.append(1)
        strides = (*strides, 1)
    h = math.prod(sizes[:-1])
    fh = math.prod(filters[:-1])
    fgc = int(a.get("feature_group_count", 1))
    bgc = int(a.get("batch_group_count", 1))
    batch = lhs[a["input_batch_dim"]] // bgc  # type: ignore[operator]
    channels = lhs[a["input_feature_dim"]] // fgc  # type: ignore[operator]
    out_features = rhs[a["kernel_output_feature_dim"]]
    groups = fgc * bgc
    return ConvLayer(
        repeats=batch * groups,
        layer=Layer(
            name=op.name,
            ifmap_h=h,
            ifmap_w=sizes[-1],
            filter_h=fh,
            filter_w=filters[-1],
            channels=channels,
            num_filters=out_features // groups,  # type: ignore[operator]
            stride_h=strides[0] if n_sp > 1 else 1,
            stride_w=strides[-1],
        ),
    )


def mxu_passes(op: OpInfo, target: Target) -> float:
    """MXU passes per multiply-add for the op's element type and precision."""
    etype = op.operands[0].element_type
    precision = str(op.attrs.get("precision_config", ""))
    if etype == "f32":
        if "HIGHEST" in precision:
            return 6.0
        if "HIGH" in precision:
            return 3.0
        return 1.0
    if etype == "f64":
        return 12.0
    bf16 = target.peak_flops("bf16", matrix=True)
    return bf16 / target.peak_flops(etype, matrix=True)


class SystolicService:
    """Weight-stationary systolic model of the target's MXUs for dot_general / convolution."""

    name = "systolic-ws"
    dataflow = "ws"

    def supports(self, op: OpInfo, target: Target) -> bool:
        return (
            op.name in ("stablehlo.dot_general", "stablehlo.convolution")
            and target.matrix_unit_rows > 0
            and op.is_static
            and all(d > 0 for t in (*op.operands, *op.results) for d in t.shape)  # type: ignore[union-attr]
        )

    def array(self, target: Target, elem_bytes: float) -> ArrayConfig:
        """One MXU with its share of VMEM split between the three operands."""
        vmem_kb = target.onchip_mib.get("vmem", 16.0) * 1024
        share_kb = max(1, int(vmem_kb / (3 * max(1, target.matrix_units_per_core) * elem_bytes)))
        return ArrayConfig(
            rows=target.matrix_unit_rows,
            cols=target.matrix_unit_cols,
            dataflow=self.dataflow,
            ifmap_sram_kb=share_kb,
            filter_sram_kb=share_kb,
            ofmap_sram_kb=share_kb,
        )

    def predict(self, ops: Sequence[OpInfo], target: Target) -> list[OpCost]:
        units = max(1, target.cores * max(1, target.matrix_units_per_core))
        out = []
        for op in ops:
            eb = op.operands[0].elem_bytes
            arr = self.array(target, eb)
            if op.name == "stablehlo.convolution":
                layer = conv_to_layer(op)
                res, per_unit = _best_conv_split(layer, units, arr)
                whole, repeats = layer.layer.simulate(arr), layer.repeats
            else:
                g = dot_to_gemm(op)
                res, per_unit = _best_gemm_split(g, units, arr)
                whole, repeats = simulate_gemm(g.m, g.n, g.k, arr), g.batch
            cycles = res.total_cycles * per_unit * mxu_passes(op, target)
            compute_ns = cycles / target.clock_ghz
            # HBM sees the traffic of the whole layer through the core's shared VMEM,
            # however the MXUs split it.
            words = whole.ifmap_dram_reads + whole.filter_dram_reads + whole.ofmap_dram_writes
            dram = int(words * eb * repeats)
            memory_ns = dram / target.memory_bandwidth * 1e9
            latency = max(compute_ns, memory_ns) + target.launch_overhead_ns
            out.append(
                OpCost(
                    cycles=round(latency * target.clock_ghz),
                    latency_ns=latency,
                    dram_bytes=dram,
                    model=self.name,
                    extra={"util": res.overall_util_pct / 100.0},
                )
            )
        return out


def _best_gemm_split(g: GemmShape, units: int, arr: ArrayConfig) -> tuple[LayerResult, int]:
    """The unit's share with the fewest cycles: batch, column folds or row blocks over units.

    Returns one unit's layer result and how many such layers it runs in sequence.
    """
    options = []
    if g.batch >= units:
        options.append((simulate_gemm(g.m, g.n, g.k, arr), math.ceil(g.batch / units)))
    col_folds = math.ceil(g.n / arr.cols)
    n_share = min(g.n, math.ceil(col_folds / units) * arr.cols)
    options.append((simulate_gemm(g.m, n_share, g.k, arr), g.batch))
    m_share = math.ceil(g.m / units)
    options.append((simulate_gemm(m_share, g.n, g.k, arr), g.batch))
    return min(options, key=lambda o: o[0].total_cycles * o[1])


def _best_conv_split(c: ConvLayer, units: int, arr: ArrayConfig) -> tuple[LayerResult, int]:
    """As `_best_gemm_split` for a conv layer: repeats or filter folds over the units."""
    layer = c.layer
    options = []
    if c.repeats >= units:
        options.append((layer.simulate(arr), math.ceil(c.repeats / units)))
    folds = math.ceil(layer.num_filters / arr.cols)
    share = dataclasses.replace(
        layer, num_filters=min(layer.num_filters, math.ceil(folds / units) * arr.cols)
    )
    options.append((share.simulate(arr), c.repeats))
    return min(options, key=lambda o: o[0].total_cycles * o[1])
