"""Learned latency models for non-systolic ops (SCALE-Sim TPU, "learned latency models").

Following the paper, each (target, op class) gets a histogram gradient-boosting
regressor on static shape features, trained to minimise absolute error and fitted
from measured latencies shipped as CSV. Two choices go beyond the paper, both
decided by held-out numbers (benchmarks/elementwise_accuracy.py):

- a floor + per-byte slope line, fitted by least absolute deviation, carries the
  size trend, and the boosted trees learn the multiplicative shape residual
  log(t / line). Trees alone are piecewise constant in size, so they step between
  and flatten beyond the training sizes; the line interpolates and extrapolates.
- the TPU tile features ((8, 128) / (16, 128) padding, alignment, powers of two) and
  the op's identity within its class (a categorical feature).

Classes without data borrow the nearest class with data, scaled by the
roofline ratio of the two ops, and otherwise fall back to the roofline model; the
service's model name says which (`hgb-tpu-v4-binary→transcendental(scaled)`).
Predictions outside the training size range carry `extrapolated=True`.

Calibration CSVs: `#` lines are a free-form header (machine, date, versions);
required columns `op, dtype, shape, measured_us_median`; a `primary` column,
when present, keeps only rows with primary == 1 (the tpu_v4 data's convention); a
`sentinel_us` column, when present, puts every row at the file's median machine speed
(`analysis.calibration_files.speed_factors`; `row_speed_factors`: grouped convolutions are
read as measured). Duplicate (op, dtype, shape) rows are
merged by their median.
"""

from __future__ import annotations

import csv
import functools
import math
import os
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.optimize import nnls
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.ensemble import HistGradientBoostingRegressor
from stablehlo_perf.analysis import model_cache
from stablehlo_perf.analysis.calibration_files import (
    SENTINEL_COLUMN,
    file_speed,
    header_value,
    relevel_of,
    speed_factors,
    training_files,
)
from stablehlo_perf.analysis.fusion import library_reduce, ynn_reduces
from stablehlo_perf.analysis.opinfo import (
    READS_PART,
    SCALAR_LOOPS,
    SPECIAL_FUNCTIONS,
    OpInfo,
    TensorType,
    element_bytes,
    is_integer,
    moves_minor_axis,
    op_class,
    real_part,
)
from stablehlo_perf.analysis.roofline import RooflineModel
from stablehlo_perf.analysis.scans import op_scan, scan_axis
from stablehlo_perf.analysis.service import OpCost
from stablehlo_perf.analysis.targets import Target
from threadpoolctl import threadpool_limits

__all__ = [
    "CLASSES",
    "COMPLEX_PRODUCTS",
    "FEATURE_NAMES",
    "FEATURE_SETS",
    "NEAREST",
    "OP_CODES",
    "ROW_OPS",
    "CalibrationError",
    "LatencyRegressor",
    "LearnedLatencyModel",
    "Measurement",
    "calibrated_dispatch_ns",
    "collapsed_reduce",
    "conv_features",
    "division_code",
    "features",
    "fft_features",
    "fft_work",
    "fit_class_models",
    "gather_features",
    "gemm_layout",
    "lad_line",
    "load_measurements",
    "matmul_features",
    "measurement_features",
    "model_class",
    "normalize_dtype",
    "op_model_class",
    "op_tensor",
    "reduce_features",
    "regressor_for",
    "residual_trees",
    "row_speed_factors",
    "shape_features",
    "size_split",
    "spec_window_features",
    "topk_features",
    "training_files",
    "window_features",
]

# Classes the learned models cover; "matmul" only where a calibration measured it (host).
CLASSES = (
    "binary",
    "compare_select",
    "transcendental",
    "trigonometric",
    "special",
    "unary",
    "convert",
    "movement",
    "transpose",
    "reduction",
    "sort",
    "reduce_variadic",
    "top_k",
    "reduce_window",
    "select_and_scatter",
    "fft",
    "gather",
    "matmul",
    "convolution",
    "grouped_conv",
)

# Ops with a model of their own inside their op class: XLA:CPU's comparator sort costs
# 10-10,000x a sum of the same tensor (host reference), and one reduction model for
# both fitted neither (5-fold CV by size: reduce 22.6% -> 27.6% median rel err with sort in).
# A reduce_window is a loop over each output's window (a pool) or, when the window spans
# an axis (cumsum), a blocked scan: neither costs what a reduce of its input does
# (256x512 f32 cumsum: 2.6 ms measured, 170 us by the reduction model).
# A variadic reduce (argmax: value and index with a comparator body) is not vectorised
# by XLA:CPU (512x1000 f32: 1.3 ms, ~15x a sum), and top_k is a custom call of its own
# (512x1000, k=8: 3.7 ms measured, 0.2 ms by the reduction model). An FFT is a library
# call no other class resembles (256x1024 RFFT: ~0.65-1.3 ms, 0.26 ms by the roofline).
# A gather copies rows it finds by index: priced by the movement model, by its table it
# overshot a 4,096-row take from 20,000 rows 3x, by its result it undershot an embedding
# lookup 2x. A transpose that moves the minor axis reads (or writes) one element per cache
# line: 2048x2048 f32 took 4.5 ms against 1.4 ms for a copy (`opinfo.moves_minor_axis`).
# Convolutions and dots share no model: with the dots' transposed-operand rows in one
# matmul model, the e2e depthwise program swung from -51% to +29% between neighbouring
# sizes; grouped and depthwise convolutions run on a path of their own ("grouped_conv":
# ~2.6-3.4 ns per FLOP depthwise against ~0.015 dense, host reference). XLA:CPU's sine and
# cosine reduce their argument's range first: 4.6-5.5 ns per element on standard normal
# f32 against 0.5-1 for tanh (Xeon reference); fitted in the transcendental model, they
# moved its other ops' predictions by up to a quarter (log of 64x512 f32: 27.1 -> 33.5 us).
# CHLO's special functions (`opinfo.SPECIAL_FUNCTIONS`, and atan2) are XLA's polynomial and
# rational expansions, at rates of their own (256x256 f32 in a loop on the Zen 4 VM,
# 2026-12-05: erf 16 us, tanh 19, erfc 43, erf_inv 110, lgamma 322, digamma 361, atan 473;
# the transcendental model had priced erf at 81, the roofline erf_inv at 18): a model of
# their own, each op by its code, one without rows (polygamma, sinh, ...) as the missing code.
# The ops XLA:CPU runs an element at a time (`SCALAR_LOOPS`) share it: rates of their own
# too, from 0.8 to 10 ns an element. A max pool's gradient (select_and_scatter) is a
# reduce_window of values and indices and a scatter, an element at a time: 20-50 ns a source
# element, 40x the pool (Zen 4 VM, 2026-12-07: 8x56x56x64 f32, 2x2 stride 2, 20 ms against
# 0.5; the roofline had priced it at 0.3 ms).
_OWN_MODEL = {
    "sine": "trigonometric",
    "cosine": "trigonometric",
    "tan": "trigonometric",
    **dict.fromkeys(SPECIAL_FUNCTIONS | {"atan2"} | SCALAR_LOOPS, "special"),
    "convolution": "convolution",
    "transpose": "transpose",
    "sort": "sort",
    "reduce_window": "reduce_window",
    "select_and_scatter": "select_and_scatter",
    "top_k": "top_k",
    "fft": "fft",
    "gather": "gather",
}

ROW_OPS: Mapping[str, str] = {
    "conv3d": "convolution",
    "cumsum": "reduce_window",
    "cummax": "reduce_window",
    "sum_pool": "reduce_window",
    "pool_grad": "select_and_scatter",
    "argmax": "reduce",
    "argmax_axis0": "reduce",
    "sum_axis0": "reduce",
    "sum_axis1": "reduce",
    "sum_groups": "reduce",
}
"""Calibration rows named for the JAX function the sweep timed, and the StableHLO op each
lowers to (`runtime.sweeps`); argmax's reduce has two inputs (value and index)."""
_VARIADIC_ROWS = frozenset({"argmax", "argmax_axis0"})
_ROW_CODES = {"cummax": "cummax", "sum_pool": "sum_pool", "sum_groups": "reduce_groups"}
"""Calibration rows whose op code is not their StableHLO op's (`_window_code`,
`_reduce_code`)."""

# Where a class has no data: the classes tried next, in order (then roofline).
# Movement and reductions have access patterns unlike arithmetic, so they never
# borrow from it; matmul never borrows at all.
NEAREST: Mapping[str, tuple[str, ...]] = {
    "binary": ("compare_select", "unary", "convert"),
    "compare_select": ("binary", "unary"),
    "unary": ("compare_select", "binary"),
    "transcendental": ("unary", "compare_select", "binary"),
    "trigonometric": ("transcendental", "unary", "compare_select", "binary"),
    "special": ("transcendental", "unary", "compare_select", "binary"),
    "convert": ("unary", "compare_select", "binary"),
    "movement": ("convert",),
    "transpose": ("movement", "convert"),
    "reduction": (),
    "sort": (),
    "reduce_variadic": (),
    "top_k": (),
    "reduce_window": (),
    "select_and_scatter": (),
    "fft": (),
    "gather": ("movement", "convert"),
    "matmul": (),
    "convolution": (),
    "grouped_conv": (),
}

# The op each class's data measures (name, tensor inputs), used to scale a borrowed class
# by the roofline ratio. compare_select data is ReLU, max(x, 0): its zero is a fused
# broadcast constant, so it reads one tensor.
_PROXY = {
    "movement": ("stablehlo.copy", 1),
    "binary": ("stablehlo.add", 2),
    "compare_select": ("stablehlo.maximum", 1),
    "unary": ("stablehlo.negate", 1),
    "convert": ("stablehlo.convert", 1),
    "transcendental": ("stablehlo.exponential", 1),
}

# CSV op spellings that are not StableHLO names.
_OP_ALIASES = {"relu": "maximum", "mul": "multiply", "sub": "subtract", "exp": "exponential"}
_DTYPE_ALIASES = {
    "float16": "f16",
    "bfloat16": "bf16",
    "float32": "f32",
    "float64": "f64",
    "int8": "i8",
    "int32": "i32",
    "bool": "i1",
}
REQUIRED_COLUMNS = ("op", "dtype", "shape", "measured_us_median")
_MAX_RANK = 4


class CalibrationError(ValueError):
    """A calibration CSV that cannot be used; the message names the file and row."""


@dataclass(frozen=True)
class Measurement:
    """One measured shape: StableHLO op short name, MLIR element type, shape, median time (us).

    For `dot_general` the shape is (batch, M, N, K); for `convolution` it is
    (N, H, W, C, KH, KW, O, stride) with SAME padding, for `conv3d` (N, D, H, W, C, K, O,
    stride) with a KxKxK window; reduce_window, cumsum, argmax,
    top_k, fft and gather rows are as `runtime.sweeps` records them.
    """

    op: str
    dtype: str
    shape: tuple[int, ...]
    latency_us: float

    @property
    def op_class(self) -> str:
        return op_class(f"stablehlo.{self.op}")

    @property
    def model_class(self) -> str:
        if self.op in _VARIADIC_ROWS:
            return "reduce_variadic"
        if self.op == "transpose" and 1 in self.shape[-2:]:
            return "movement"  # the sweep swaps the last two dims: with a 1 there, a copy
        if self.op == "convolution" and len(self.shape) > 8 and self.shape[8] > 1:
            return "grouped_conv"
        return model_class(f"stablehlo.{ROW_OPS.get(self.op, self.op)}")


def normalize_dtype(dtype: str) -> str:
    """MLIR spelling of a dtype name (`float16` → `f16`); raises on unknown names."""
    t = _DTYPE_ALIASES.get(dtype, dtype)
    element_bytes(t)
    return t


def load_measurements(path: str | os.PathLike[str]) -> list[Measurement]:
    """Read and validate a calibration CSV; duplicate shapes are merged by their median.

    Raises CalibrationError naming the file and the (1-based, header = 1) line for
    an empty file, a missing column, an unparsable shape or dtype, or a time that is
    missing, NaN, infinite, zero or negative.
    """
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise CalibrationError(f"{path}: cannot read calibration file: {e.strerror}") from None
    numbered = [
        (i, line) for i, line in enumerate(text.splitlines(), 1) if not line.startswith("#")
    ]
    numbered = [(i, line) for i, line in numbered if line.strip()]
    if not numbered:
        raise CalibrationError(f"{path}: empty calibration file (no header, no rows)")
    reader = csv.DictReader([line for _, line in numbered])
    missing = [c for c in REQUIRED_COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise CalibrationError(
            f"{path}:{numbered[0][0]}: missing column(s) {', '.join(missing)} "
            f"(required: {', '.join(REQUIRED_COLUMNS)})"
        )
    keyed: list[tuple[tuple[str, str, tuple[int, ...]], float, float]] = []
    for (lineno, _), row in zip(numbered[1:], reader, strict=True):
        where = f"{path}:{lineno}"
        if row.get("primary") not in (None, "", "1"):
            continue
        if None in row.values() or None in row:
            raise CalibrationError(f"{where}: wrong number of fields")
        op = _OP_ALIASES.get(row["op"].strip(), row["op"].strip())
        try:
            dtype = normalize_dtype(row["dtype"].strip())
        except ValueError:
            raise CalibrationError(f"{where}: unknown dtype {row['dtype']!r}") from None
        try:
            shape = tuple(int(d) for d in row["shape"].strip().split("x") if d != "")
        except ValueError:
            raise CalibrationError(f"{where}: bad shape {row['shape']!r}") from None
        if not shape or any(d <= 0 for d in shape):
            raise CalibrationError(f"{where}: bad shape {row['shape']!r} (dims must be > 0)")
        raw = row["measured_us_median"].strip()
        try:
            value = float(raw)
        except ValueError:
            raise CalibrationError(f"{where}: measured_us_median {raw!r} is not a number") from None
        if not math.isfinite(value) or value <= 0:
            raise CalibrationError(
                f"{where}: measured_us_median must be a positive finite time, got {raw!r}"
            )
        sentinel = (row.get(SENTINEL_COLUMN) or "nan").strip()
        try:
            keyed.append(((op, dtype, shape), value, float(sentinel)))
        except ValueError:
            raise CalibrationError(
                f"{where}: {SENTINEL_COLUMN} {sentinel!r} is not a number"
            ) from None
    if not keyed:
        raise CalibrationError(f"{path}: no measurement rows")
    groups: dict[tuple[str, str, tuple[int, ...]], list[float]] = defaultdict(list)
    sentinels = [s for *_, s in keyed]
    factors = row_speed_factors([k for k, *_ in keyed], sentinels, file_speed(path, sentinels))
    for (key, value, _), factor in zip(keyed, factors, strict=True):
        groups[key].append(value * factor)
    return [
        Measurement(op, dtype, shape, float(np.median(v)))
        for (op, dtype, shape), v in groups.items()
    ]


_UNSCALED_CLASSES = frozenset({"grouped_conv"})
"""Classes whose kernels do not slow down or speed up with the sentinel ops, so their rows
are read as measured. XLA:CPU's grouped convolutions (scalar loops, compute-bound) ran at
their reference times whatever the sentinels said (Zen 4 VM, 2026-12-04): 40 fresh layers
timed with sentinels at 1.34-1.53x the reference's were priced 1.51x their scaled times and
1.05x their raw ones; 45 grid rows added in that spell and scaled took the model's CV by
size from 7.5 to 17%. Fitted on raw rows, CV 7.46 -> 7.02%, fresh layers (raw) error
factor 1.118 -> 1.106 (100, sentinels 0.8-1.1x) and 1.136 -> 1.108 (the 40); the zoo's
three saved runs (all in fast spells, where the reference's grouped rows near its median
speed barely move) MAPE 8.1 / 10.4 / 10.6 -> 8.2 / 10.5 / 10.7% (depthwise_conv x1 +26 ->
+33% on the first). Dense convolutions gain less and lose on fresh layers (CV 8.17 ->
7.44%, 40 layers 1.138 -> 1.149): scaled. The other references' CC4CS characterisations
were not regenerated for this (their grouped classes read scaled rows)."""


def row_speed_factors(
    keys: Sequence[tuple[str, str, tuple[int, ...]]],
    sentinel_us: Sequence[float],
    ref: float | None = None,
) -> list[float]:
    """`analysis.calibration_files.speed_factors` of calibration rows by (op, dtype, shape):
    1.0 for the rows of `_UNSCALED_CLASSES`, which are read as measured."""
    factors = speed_factors(sentinel_us, ref)
    return [
        1.0 if Measurement(op, dtype, shape, 1.0).model_class in _UNSCALED_CLASSES else f
        for (op, dtype, shape), f in zip(keys, factors, strict=True)
    ]


# --- features -------------------------------------------------------------------------

FEATURE_NAMES = (
    "numel",
    "log2_numel",
    "tensor_bytes",
    "elem_bytes",
    "rank",
    *(f"d{i}" for i in range(_MAX_RANK)),
    "last_mod128",
    "second_mod8",
    "second_mod16",
    "padded_8x128",
    "padded_16x128",
    "pad_ratio_8x128",
    "last_pow2",
    "numel_pow2",
    "vector_tail",
    "operand_layout",
    "lane_padded_bytes",
    "tail_fraction",
    "last_mod_unroll",
    "units",
    "op_code",
)
_IDX = {n: i for i, n in enumerate(FEATURE_NAMES)}
# Categorical op identity (the op name is a compile-time fact): ops of one class still
# differ (tpu-v4 multiply vs add: 3.3% -> 1.4% median rel err with it). Ops not
# listed are NaN, which the trees treat as a missing category.
OP_CODES = (
    "add", "subtract", "multiply", "divide", "maximum", "minimum", "compare", "select",
    "clamp", "exponential", "log", "tanh", "logistic", "rsqrt", "sqrt", "negate", "abs",
    "convert", "transpose", "broadcast_in_dim", "reshape", "concatenate", "slice", "pad",
    "copy", "reduce", "dot_general", "convolution", "sort", "reduce_window", "argmax", "top_k",
    "fft", "gather", "sine", "cosine", "erf", "erf_inv", "erfc", "lgamma", "digamma", "atan",
    "tan", "exponential_minus_one", "log_plus_one", "cbrt", "power", "remainder",
    "integer_divide", "integer_remainder", "floor", "select_and_scatter", "integer_dot",
    "cummax", "sum_pool", "reduce_groups",
)  # fmt: skip
_OP_CODE = {op: float(i) for i, op in enumerate(OP_CODES)}
# Column subsets compared by the ablation; "tile+op" is the shipped default, "conv" the
# grouped convolutions' (`_CLASS_PARAMS`).
FEATURE_SETS: Mapping[str, tuple[int, ...]] = {
    "size": tuple(_IDX[n] for n in ("numel", "log2_numel", "tensor_bytes", "elem_bytes")),
    "shape": tuple(range(_IDX["d3"] + 1)),
    "tile": tuple(range(_IDX["lane_padded_bytes"])),
    "tile+op": (
        *range(_IDX["lane_padded_bytes"]),
        _IDX["tail_fraction"],
        _IDX["last_mod_unroll"],
        _IDX["units"],
        _IDX["op_code"],
    ),
    # A convolution's log FLOPs, window, N and K a group, images, stride, and M x K (the
    # implicit GEMM's left operand: `matmul_features` puts it in the third pad slot), which
    # tells a layer whose input leaves the L2 from its neighbours: without it the Zen 4
    # reference's 4x32x32x32 depthwise row (3692 us) shared a leaf with 4x56x56x32's (15236,
    # 1.6 MB of input) and was priced 4314 in sample; with it 3744 (median in-sample error
    # 0.92 -> 0.44%; 140 fresh layers 1.098 / 1.103 -> 1.102 / 1.099).
    "conv": tuple(
        _IDX[n]
        for n in (
            "log2_numel",
            "rank",
            "d2",
            "d3",
            "vector_tail",
            "operand_layout",
            "pad_ratio_8x128",
        )
    ),
}
_BASE_FEATURE = _IDX["tensor_bytes"]
_LANE_BASE = _IDX["lane_padded_bytes"]
_UNITS = _IDX["units"]
# top_k's k, a gather's slice bytes and whether a reduce reduces the minor axis take this
# slot (CPU models of their own: the TPU tile ratio means nothing there).
_TOPK_SLOT = _SLICE_SLOT = _AXIS_SLOT = "pad_ratio_8x128"
# A gather's table bytes take the dot's layout slot (no layout for a gather): lookups into a
# table beyond the caches miss where a small table's hit.
_TABLE_SLOT = "operand_layout"
# An elementwise loop of f16 is marked in the same slot (no layout for a loop either): f16 and
# bf16 are both two bytes, but XLA:CPU computes bf16 in f32 (it widens and rounds around each
# op) and keeps f16 ops in f16, which LLVM runs without AVX-512 FP16 as a scalar call an
# element for its intrinsics (exp, log, sqrt, floor, ...). 65536 elements in a loop (Zen 4 VM,
# 2026-12-05), f16 against its bf16 price: exp 159 us / 49, sqrt 97 / 17, floor 38 / 12,
# expm1 291 / 83; but add 21 / 20, tanh 30 / 43 (XLA expands tanh in f32).
_HALF_SLOT = "operand_layout"


def _round_up(x: int, m: int) -> int:
    return -(-x // m) * m


def _pow2(x: int) -> float:
    return float(x > 0 and x & (x - 1) == 0)


def _lane_padded(shape: Sequence[int]) -> float:
    """Elements of a tensor laid out in rows of 128 lanes with its best dim in the lanes
    (the one that pads least; the other dims' product rounded up to 8 sublanes); 1-D
    tensors unpadded. The tpu-v4 data time shapes by it, not by element count:
    permutations of a shape take the same time, 24x24x8 f16 (192 rows of 128 lanes,
    24,576 elements) runs as long as a 24,576-element 2-D add (1.35 us) and 8x8x120 as
    one of 8,192 elements, while 960x896 runs unpadded (896 = 7 x 128 in the lanes)."""
    if len(shape) < 2:
        return float(math.prod(shape))
    n = math.prod(shape)
    return float(min((_round_up(n // d, 8) * _round_up(d, 128) for d in shape if d > 0), default=0))


# XLA expands atan(x) as atan2(x, 1): the two-input op is priced by atan's rows; ceil and the
# roundings are one rounding instruction as floor is (and, in f16, the same scalar call).
_CODE_ALIASES = {
    "atan2": "atan",
    "ceil": "floor",
    "round_nearest_even": "floor",
    "round_nearest_afz": "floor",
}


def _op_code(op: str) -> float:
    return _OP_CODE.get(_CODE_ALIASES.get(op, op), math.nan)


def division_code(op: OpInfo) -> str | None:
    """`integer_divide` or `integer_remainder` for a divide or remainder of integers by a tensor
    or a runtime scalar, which x86 runs as a scalar divide an element (65536 i32 in a loop,
    Zen 4 VM: 65-73 us, an add 8); None otherwise, and for a constant divisor
    (`constant_divisor`, set by the pass layer), which XLA turns into a multiply and shifts
    (5 us)."""
    if op.short_name not in ("divide", "remainder") or op.attrs.get("constant_divisor"):
        return None
    return f"integer_{op.short_name}" if _integers(op) else None


def dot_code(op: str, dtype: str) -> str:
    """`integer_dot` for a dot_general of integers wider than a byte, which XLA:CPU runs
    on no GEMM library's int8 path: i32 products in a loop ran 40-88 ps a multiply-add,
    3.7-6.4x the f32 product of the same dims (64^3 to 512^3, skinny and batched; Xeon
    VM, 2026-12-07), where the trees would see an f32 product's four bytes; `op` itself
    otherwise."""
    if op == "dot_general" and is_integer(dtype) and element_bytes(dtype) > 1:
        return "integer_dot"
    return op


def _window_code(op: OpInfo) -> str | None:
    """`cummax` for a running maximum or minimum (`lax.cummax`, `cummin`: a scan,
    `scans.op_scan`, whose reducer is one), `sum_pool` for a pool that sums (an average
    pool's window), as `runtime.sweeps`' rows of each; None for any other op (a max pool
    and a cumsum are `reduce_window`)."""
    if op.short_name != "reduce_window":
        return None
    reducer = op.attrs.get("reducer")
    if op_scan(op) is not None:
        return "cummax" if reducer in ("maximum", "minimum") else None
    return "sum_pool" if reducer == "add" else None


def _reduce_code(op: OpInfo) -> str | None:
    """`reduce_groups` for a one-input reduce whose reduced dims, after `collapsed_reduce`,
    are runs with kept dims between them (a group norm's sums over pixels and the channels
    of each group: `runtime.sweeps`' sum_groups rows), else None."""
    if op.short_name != "reduce" or len(op.operands) != 2 or not op.operands[0].shape:
        return None
    _, dims = collapsed_reduce(op.operands[0].shape, op.attrs.get("dimensions") or ())
    return "reduce_groups" if len(dims) > 1 else None


def _integers(op: OpInfo) -> bool:
    """Whether an op's operands are all integers (and it has some)."""
    return bool(op.operands) and all(is_integer(t.element_type) for t in op.operands)


# A row whose last dim is not a whole number of vector registers leaves a tail XLA:CPU's
# loop runs otherwise, and the whole loop slows (f32 add in a loop on this project's VM:
# 64x127 6.2 us, 64x128 2.4 us, 64x129 8.4 us; 4248x7 at 1.9 ns per element, 22191x64 at 0.3).
# 32 bytes: AVX2, this project's machine. 5-fold CV by size on the reference, median rel
# err: convert 19.6 -> 13.4%, binary 20.1 -> 19.2%, compare_select 25.0 -> 23.7%; transposes
# (set by strided reads of two minor dims) fit worse with it and keep 0.
_VECTOR_BYTES = 32


def _lanes(elem_bytes: float) -> int:
    """Elements of this size in one `_VECTOR_BYTES` vector."""
    return max(1, round(_VECTOR_BYTES / elem_bytes))


# How much of each row that tail is (tail_fraction) and the last dim modulo two vectors
# (last_mod_unroll: LLVM unrolls the vector loop by two) tell the trees what the last dim
# alone does not: one run of add / tanh f32 over 49,152 elements in rows of C (2026-12-01,
# this VM) took per element, add: C = 1, 2, 4, 8, 16, 32, 48, 64 0.15-0.31 ns, C = 3, 5,
# 6, 7 1.0-2.3 ns, 9, 10, 12, 20, 24 0.5-0.8 ns; tanh: 8, 16, 32, 64 0.5-0.6 ns, 20 and 24
# 1.6-1.7 ns. Same-run check ratios (benchmarks/elementwise_accuracy.py on two saved runs):
# transcendental 2.01 / 1.95 -> 1.81 / 1.81, convert 1.67 / 1.39 -> 1.54 / 1.35, binary
# 1.16 / 1.82 -> 1.17 / 1.51. Elementwise loop classes only: the reductions, FFTs and
# transposes whose kernels are other loops fit worse with them.
_ROW_TAIL_CLASSES = frozenset(
    {
        "binary",
        "compare_select",
        "convert",
        "transcendental",
        "trigonometric",
        "special",
        "unary",
        "movement",
    }
)


def shape_features(shape: Sequence[int], elem_bytes: float) -> list[float]:
    """Static features of one tensor (FEATURE_NAMES order but the op code); dims are
    right-aligned to rank 4.

    Right alignment keeps the last two dims, which a TPU lays out in (8, 128) or,
    for 16-bit types, (16, 128) tiles, in fixed columns.
    """
    shape = tuple(shape) or (1,)
    lead_shape = shape[:-_MAX_RANK]
    kept = shape[-_MAX_RANK:]
    dims = [1] * (_MAX_RANK - len(kept)) + list(kept)
    dims[0] *= math.prod(lead_shape)
    n = math.prod(shape)
    second, last = dims[-2], dims[-1]
    vec = _lanes(elem_bytes)
    lead = math.prod(dims[:-2])
    p8 = lead * _round_up(second, 8) * _round_up(last, 128)
    p16 = lead * _round_up(second, 16) * _round_up(last, 128)
    return [
        float(n),
        math.log2(n),
        n * elem_bytes,
        float(elem_bytes),
        float(len(shape)),
        *map(float, dims),
        float(last % 128),
        float(second % 8),
        float(second % 16),
        float(p8),
        float(p16),
        p8 / n,
        _pow2(last),
        _pow2(n),
        float(last % vec),
        0.0,
        _lane_padded(shape) * elem_bytes,
        (last % vec) / max(last, 1),
        float(last % (2 * vec)),
        0.0,
    ]


def op_tensor(op: OpInfo) -> TensorType:
    """The tensor whose shape sets an op's time: a reduction's or an FFT's input, a slice's
    or gather's result, a dynamic_update_slice's update, the larger side of other data movement,
    otherwise the first result."""
    cls = op.op_class
    if (cls == "reduction" or op.short_name == "fft") and op.operands:
        return op.operands[0]
    short = op.short_name
    if short in READS_PART and op.results:
        return op.results[0]  # reads only what it returns (a gather: its rows, not its table)
    if short == "dynamic_update_slice" and len(op.operands) >= 2:
        return op.operands[1]  # writes the update in place
    if short == "scatter" and len(op.operands) >= 3:
        # Reads and combines every update into its row of the operand, in place: the updates
        # (inputs..., indices, updates...) set its time, not the operand it writes into.
        return max(op.operands[len(op.operands) // 2 + 1 :], key=lambda t: t.num_elements or 0)
    if cls == "movement" and op.operands and op.results:
        a, b = op.operands[0], op.results[0]
        return a if (a.num_elements or 0) > (b.num_elements or 0) else b
    return op.results[0] if op.results else op.operands[0]


def _gemm_dims(op: OpInfo) -> tuple[int, int, int, int]:
    """(batch, M, N, K) of a dot_general, or of a convolution as an implicit GEMM (a grouped
    convolution as `feature_group_count` GEMMs of N = output features / groups; K counts
    the taps that meet real inputs)."""
    lhs = op.operands[0].shape or ()
    rhs = op.operands[1].shape or ()
    out = op.results[0].shape or ()
    if op.short_name == "convolution":
        of = op.attrs.get("output_feature_dim", len(out) - 1)
        kin = op.attrs.get("kernel_input_feature_dim", len(rhs) - 2)
        ksp = op.attrs.get("kernel_spatial_dims", tuple(range(len(rhs) - 2)))
        # An input-dilated (transposed) convolution multiplies only the taps that land on
        # real inputs: 1 / dilation of them per dim (a stride-2 3x3 one: 2.25 of 9).
        dil = op.attrs.get("lhs_dilation") or (1,) * len(ksp)
        taps = math.prod(rhs[d] / max(int(s), 1) for d, s in zip(ksp, dil, strict=False))
        k = max(1, round(rhs[kin] * taps))
        groups = int(op.attrs.get("feature_group_count", 1))
        return groups, math.prod(out) // out[of], out[of] // groups, k
    lb = op.attrs.get("lhs_batch_dims", ())
    lc = op.attrs.get("lhs_contracting_dims", (len(lhs) - 1,))
    rb = op.attrs.get("rhs_batch_dims", ())
    rc = op.attrs.get("rhs_contracting_dims", (0,))
    batch = math.prod(lhs[d] for d in lb)
    k = math.prod(lhs[d] for d in lc)
    m = math.prod(d for i, d in enumerate(lhs) if i not in lb and i not in lc)
    n = math.prod(d for i, d in enumerate(rhs) if i not in rb and i not in rc)
    return batch, m, n, k


def gemm_layout(op: OpInfo) -> int:
    """How a dot_general's operands lie in memory: 2·[lhs is K x M] + [rhs is N x K], read
    from which dims are minor (the last): M x K times K x N is 0. XLA:CPU runs the layouts
    at different rates (`runtime.sweeps.matmul_specs`); a convolution is 0."""
    if op.short_name != "dot_general" or len(op.operands) < 2:
        return 0
    lhs_rank = len(op.operands[0].shape or ())
    rhs_rank = len(op.operands[1].shape or ())
    lc = op.attrs.get("lhs_contracting_dims", (lhs_rank - 1,))
    rc = op.attrs.get("rhs_contracting_dims", (0,))
    return 2 * int(lhs_rank - 1 not in lc) + int(rhs_rank - 1 in rc)


GEMM_TILE = (7, 32)
"""Rows and columns of the output tile whose padding `matmul_features` gives a dot: a GEMM
microkernel computes whole tiles of C, so a product of M x N costs about as one padded to
them (the tile is the one that fitted best below, not read from the library XLA:CPU calls,
whose microkernels this VM's CPU picks at run time). Tried as M x N rounded up to the
tile over M x N in the vector tail's slot (a loop's, meaning nothing to a product), 5-fold CV
by size (median of 5 draws) on the references' matmul rows, median rel err: Zen 4 11.96 ->
11.54%, Zen 5 12.33 -> 11.50, Xeon 14.59 -> 14.14, Xeon one thread 13.86 -> 13.35; same-run
check (benchmarks/elementwise_accuracy.py, Zen 4 VM, 2026-12-07, fit on pass A, scored on B)
11.2 -> 10.4%, 2.15 -> 1.99 x its noise floor (the median of its 3 draws of folds; of 8
draws, 10.6 -> 10.2%). Of the tiles tried there (3 draws: 8x16 10.8%, 16x16 10.5, 7x32 10.4,
8x32 10.6, 4x64 10.8, 16x64 10.7) 7x32 did best; the trees see both factors' padding only as
this one ratio. The zoo's 9 saved runs (benchmarks/end_to_end.py --predict-from) moved
within 0.1 point of own-level MAPE and 0.002 of Kendall tau."""


def gemm_padding(m: int, n: int) -> float:
    """M x N rounded up to whole `GEMM_TILE`s over M x N (1.0 for a product of whole tiles)."""
    rows, cols = GEMM_TILE
    return _round_up(max(m, 1), rows) * _round_up(max(n, 1), cols) / (max(m, 1) * max(n, 1))


def matmul_features(
    batch: int, m: int, n: int, k: int, elem_bytes: float, window: int = 1, layout: int = 0
) -> list[float]:
    """GEMM features in FEATURE_NAMES' slots: the base column holds FLOPs (a CPU's
    matmul time is linear in FLOPs), dims are (batch, M, N, K), `window` (the
    convolution's kernel taps; 1 for dot_general) takes the rank slot, `layout`
    (`gemm_layout`) its own and the output's padding to whole tiles (`gemm_padding`) the
    vector tail's (a convolution's images take that slot: `conv_features`)."""
    flops = 2.0 * batch * m * n * k
    dims = (batch, m, n, k)
    return [
        flops,
        math.log2(flops),
        flops,
        float(elem_bytes),
        float(window),
        *map(float, dims),
        float(k % 128),
        float(n % 8),
        float(m % 16),
        float(m * n),
        float(n * k),
        float(m * k),
        _pow2(k),
        _pow2(n),
        gemm_padding(m, n),
        float(layout),
        flops,
        0.0,
        0.0,
        0.0,
    ]


_IMAGES_SLOT = "vector_tail"
_STRIDE_SLOT = "operand_layout"
"""A convolution's images (its batch) and stride take these slots (a dot's layout and tile
padding mean nothing to it). Its implicit GEMM folds both into M, and XLA:CPU runs
batched and strided layers on other code paths (`runtime.sweeps.matmul_specs`): fitted on
pass A of three saved same-run checks (benchmarks/elementwise_accuracy.py) and scored on
their pass B, the error over the floor went 3.09 -> 2.61 for convolutions and 3.35 -> 3.26
for grouped ones (geometric means over the runs; with the stride alone 2.75, the batch alone
2.73)."""


_CHANNELS_SLOT = "last_mod_unroll"
"""A convolution's input channels per group take this slot (a loop's unroll tail means nothing
to it). Its K is channels x window taps, a product the trees cannot split into its factors,
and XLA:CPU runs 1, 3 or 5 channels into 32 or fewer outputs on a slow path (3 -> 24 at
3x40x40: 312 ps a multiply-add; 4 -> 24: 30; `runtime.sweeps.matmul_specs`' stems)."""
_CHANNEL_CLASSES = frozenset({"convolution", "grouped_conv"})

_SPATIAL_SLOT = "tail_fraction"
"""A convolution's spatial dims, at least 2, take this slot (a loop's row tail means nothing
to it): XLA:CPU runs a 1-D layer as a 2-D one of 1-high images, and a 3-D one on a path of
its own, 3.4-4.2x the time of a 2-D layer of the same implicit GEMM (`runtime.sweeps`'
conv3d rows). Every 2-D row holds the same 2, so a reference without 3-D rows fits as it
did without the slot."""


def conv_features(
    batch: int,
    m: int,
    n: int,
    k: int,
    elem_bytes: float,
    window: int,
    images: int,
    stride: int,
    channels: int,
    spatial: int = 2,
) -> list[float]:
    """`matmul_features` of a convolution's implicit GEMM (`batch` its feature groups), with
    its `images`, largest `stride`, input `channels` per group and `spatial` dims in their
    slots (`_IMAGES_SLOT`, `_STRIDE_SLOT`, `_CHANNELS_SLOT`, `_SPATIAL_SLOT`). The channels
    are the kernel's, not K over the window: a transposed convolution's K counts only the
    taps that meet real inputs, and 8 channels of a stride-2 one read as 2 put it on the
    stems' slow path (a 2x16x16x8 -> 4 layer priced 4.3x its time in a loop; 1.03x with
    its 8)."""
    row = matmul_features(batch, m, n, k, elem_bytes, window)
    row[_IDX[_IMAGES_SLOT]] = float(images)
    row[_IDX[_STRIDE_SLOT]] = float(stride)
    row[_IDX[_CHANNELS_SLOT]] = float(channels)
    row[_IDX[_SPATIAL_SLOT]] = float(max(spatial, 2))
    return row


def window_features(
    in_shape: Sequence[int],
    out_shape: Sequence[int],
    window: Sequence[int],
    strides: Sequence[int],
    elem_bytes: float,
) -> list[float]:
    """reduce_window features in FEATURE_NAMES' slots: the base column holds the work,
    output elements x window taps for a pool and output elements for a scan (a window
    that spans its axis and keeps the axis' length, as cumsum's: XLA rewrites it into a
    blocked scan whose host cost per element is flat, 6-12 ns, at lengths 64-2048);
    dims are (output elements, taps, largest window dim, stride product), and a scan
    flag takes the second_mod8 slot. The power-of-two slots stay 0: every scan of the
    sweep's grid has a power-of-two length, so the flags can stand in for the scan flag
    (a fit that split on them priced a 1000-long cumsum 10x too slow). The input's minor
    dim (a pool's channels) takes the second_mod16 slot and its remainder in vectors the
    vector_tail slot: a 2x2 pool of channels that fill no vector runs 2-4x slower a byte
    (in a loop on the Zen 5 VM, 2026-12-03: 4x28x28x4 f32 11.5 us, 4x16x16x64 14)."""
    n_in, n_out = math.prod(in_shape), math.prod(out_shape)
    minor = in_shape[-1] if in_shape else 1
    taps = math.prod(window)
    scan = scan_axis(window, in_shape, out_shape) is not None
    work = n_out if scan else n_out * taps
    return [
        float(n_in),
        math.log2(max(work, 1)),
        work * elem_bytes,
        float(elem_bytes),
        float(len(in_shape)),
        float(n_out),
        float(taps),
        float(max(window, default=1)),
        float(math.prod(strides)),
        float(n_in / max(n_out, 1)),
        float(scan),
        float(minor),
        n_in * elem_bytes,
        n_out * elem_bytes,
        work / max(n_in, 1),
        0.0,
        0.0,
        float(minor % _lanes(elem_bytes)),
        0.0,
        work * elem_bytes,
        0.0,
        0.0,
        0.0,
    ]


def spec_window_features(op: str, shape: Sequence[int], elem_bytes: float) -> list[float]:
    """window_features of a calibration row: a max pool or its gradient (N, H, W, C, K,
    stride), SAME padding, or a cumsum or cummax (A, B, axis), axis 1-based."""
    if op in ("cumsum", "cummax"):
        a, b, axis = shape
        win = (a, 1) if axis == 1 else (1, b)
        return window_features((a, b), (a, b), win, (1, 1), elem_bytes)
    nb, h, w, c, k, stride = shape
    out = (nb, _ceil_div(h, stride), _ceil_div(w, stride), c)
    if op == "pool_grad":  # JAX pads the operand of its select_and_scatter to SAME's size
        h, w = (max((n - 1) * stride + k, side) for n, side in ((out[1], h), (out[2], w)))
    return window_features((nb, h, w, c), out, (1, k, k, 1), (1, stride, stride, 1), elem_bytes)


def _prime_factors(n: int) -> list[int]:
    """n's prime factors with multiplicity, ascending ([] for n = 1)."""
    out, p = [], 2
    while p * p <= n:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    return out + [n] * (n > 1)


def _smooth_at_least(n: int) -> int:
    """The smallest 2^a 3^b 5^c 7^d >= n: a length a mixed-radix FFT runs with small factors."""
    best, p2 = 1 << max(n - 1, 1).bit_length(), 1
    while p2 < best:
        p3 = p2
        while p3 < best:
            p5 = p3
            while p5 < best:
                p7 = p5
                while p7 < n:
                    p7 *= 7
                best = min(best, p7)
                p5 *= 5
            p3 *= 3
        p2 *= 2
    return best


def fft_work(length: int) -> float:
    """Operations of one FFT of `length`, up to a constant: a mixed-radix FFT makes one pass
    per prime factor p costing ~p per element (length x the sum of the factors: 2 length
    log2 length for a power of two); a length with a large prime factor runs as Bluestein's
    chirp-z instead, a convolution done by FFTs of a smooth length >= 2 length - 1, the
    cheaper of the two. Three of them (two run, the chirp's may be planned ahead): against
    two, the FFT class's same-run check (benchmarks/elementwise_accuracy.py on ew_s35,
    Zen 4 VM, 2026-12-03) read 2.66 and 2.98 x its noise floor."""
    length = max(int(length), 1)
    m = _smooth_at_least(2 * length - 1)
    return float(
        min(length * (sum(_prime_factors(length)) or 1), 3 * m * (sum(_prime_factors(m)) or 1))
    )


def fft_features(shape: Sequence[int], elem_bytes: float) -> list[float]:
    """An FFT of the last axis: `shape_features` of its input with the work (elements x
    log2 length) in the base columns and the length's largest prime factor in the
    second_mod16 slot: a length with a large prime factor takes another algorithm (64
    rows of 2,048 f32: 169 us, of 2,049 = 3 x 683: 1.3 ms, host reference), its `fft_work`
    over the radix-2 ideal (length log2 length) in the TPU tile ratio's slot (unused on a
    CPU), and the number of transforms (rows) in `units`. With the ratio, the same-run check
    (benchmarks/elementwise_accuracy.py on ew_s35, Zen 4 VM) read 2.68 x the noise floor
    against 3.15, 5-fold CV on the references 20.4 / 18.0 / 15.2 / 13.8 / 13.0% against
    23.9 / 19.2 / 15.3 / 12.8 / 12.7% (AVX2 EPYC, Xeon, Xeon 1 thread, Zen 4, Zen 5)."""
    row = shape_features(shape, elem_bytes)
    length = shape[-1] if shape else 1
    work = math.prod(shape) * math.log2(max(length, 2)) * elem_bytes
    row[_BASE_FEATURE] = row[_LANE_BASE] = work
    row[_IDX["second_mod16"]] = float(max(_prime_factors(length), default=1))
    row[_IDX["pad_ratio_8x128"]] = fft_work(length) / (length * math.log2(max(length, 2)))
    row[_IDX["units"]] = math.prod(shape) / max(length, 1)
    return row


def gather_features(
    out_shape: Sequence[int], slice_elems: int, elem_bytes: float, table_bytes: float
) -> list[float]:
    """A gather: `shape_features` of its result (what it reads) with the bytes of one
    gathered slice in `_SLICE_SLOT`, the slice count in `units` (a row of 512 f32 is one
    long copy, 512 single elements are 512 lookups) and the bytes of the table it reads
    from in `_TABLE_SLOT`."""
    row = shape_features(out_shape, elem_bytes)
    row[_IDX[_SLICE_SLOT]] = float(slice_elems * elem_bytes)
    row[_IDX[_TABLE_SLOT]] = float(table_bytes)
    row[_IDX["units"]] = math.prod(out_shape) / max(slice_elems, 1)
    return row


YNN_COLUMN_TILE = 16384
"""A YNNPACK reduce of one leading axis (dims of 1 aside) that keeps more elements than this
runs an order of magnitude slower an element (jax 0.10.2; in loops on the Xeon VM, 2026-12-06:
f32 sums over axis 0 of 8 x 16384 38 us, of 8 x 16385 364-404, 8 x 17000 385, 8 x 18000 395;
2 x 16385 143, 64 x 16385 2485, 512 x 16385 32586; 8 x 2 x 16384 and 8 x 4 x 8192 620-625;
bf16 8 x 16384 45, 8 x 16385 503; the max and the mean over axis 0 step alike; the Zen 4 and
Xeon references' 2 x 16384 -> 2 x 20480 rows 2.6 -> 118 and 3.6 -> 156 us). Sums over two
leading axes do not follow one rule (4 x 4 x 16385 over both 140 us, 0.5 ns an element; 2 x 8 x
16385 733 us, 2.8 ns) and keep the plain leading-axis code."""


def reduce_axis(in_shape: Sequence[int], dims: Sequence[int]) -> float:
    """1 for a reduce of the minor axis (a row sum: one contiguous run per output), 0 for one
    of the leading axes only (a column sum walks the rows; XLA:CPU's argmax over axis 0 of
    512x1000 f32 took ~1.4 ms against ~0.7-1.0 ms over axis 1), 0.5 for one with a kept dim
    before a reduced one (a middle axis: 4 x 8 x 32,768 f32 summed over the 8 at 0.35 ns an
    element, 8 x 32,768 over its rows at 2.5; Zen 4 VM, 2026-12-05). Dims of 1 count as
    neither."""
    if not in_shape or len(in_shape) - 1 in dims:
        return 1.0
    before = [d for d in range(max(dims, default=0)) if d not in dims and in_shape[d] > 1]
    return 0.5 if before else 0.0


def wide_column_reduce(in_shape: Sequence[int], dims: Sequence[int]) -> bool:
    """Whether a reduce of this input over `dims` reduces one leading axis (dims of 1 aside)
    and keeps more than `YNN_COLUMN_TILE` elements: YNNPACK's slow column reduce."""
    reduced = [d for d in dims if d < len(in_shape) and in_shape[d] > 1]
    if len(reduced) != 1 or any(in_shape[d] > 1 for d in range(reduced[0])):
        return False
    return math.prod(in_shape) // in_shape[reduced[0]] > YNN_COLUMN_TILE


def collapsed_reduce(
    in_shape: Sequence[int], dims: Sequence[int]
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """A reduce's input shape and reduced dims with dims of 1 dropped and neighbouring dims
    merged where both are reduced or both kept, as XLA normalises a reduction before it
    emits it: a sum of all of 256x256x3 is one of 196,608 elements (0.05 ns an element in a
    loop on the Zen 4 VM, as the 1-D sum), not 65,536 rows of 3."""
    shape: list[int] = []
    reduced: list[bool] = []
    for d, n in enumerate(in_shape):
        if n == 1:
            continue
        r = d in dims
        if reduced and reduced[-1] == r:
            shape[-1] *= n
        else:
            shape.append(n)
            reduced.append(r)
    if not shape:
        return (1,), (0,)
    return tuple(shape), tuple(i for i, r in enumerate(reduced) if r)


def reduce_features(
    in_shape: Sequence[int], dims: Sequence[int], elem_bytes: float, library: bool = False
) -> list[float]:
    """A reduce (or argmax): `shape_features` of its input (`collapsed_reduce`) with
    `reduce_axis` in `_AXIS_SLOT` and its output count in `units`; a `library` (YNNPACK)
    reduce that is a `wide_column_reduce` has -1 there, a code of its own."""
    wide = library and wide_column_reduce(in_shape, dims)
    in_shape, dims = collapsed_reduce(in_shape, dims)
    row = shape_features(in_shape, elem_bytes)
    row[_IDX[_AXIS_SLOT]] = -1.0 if wide else reduce_axis(in_shape, dims)
    row[_IDX["units"]] = math.prod(in_shape) / max(math.prod(in_shape[d] for d in dims), 1)
    return row


def topk_features(in_shape: Sequence[int], k: int, elem_bytes: float) -> list[float]:
    """A top_k of the last axis: `shape_features` of its input with k in `_TOPK_SLOT` and in
    `units` the heap steps a streaming top k of random rows expects: k (1 + ln(n / k))
    insertions per row of n, each sifting through a heap of k, log2(2k) levels. (Counting
    insertions alone, the #4 same-run check on saved runs A-D scored top_k at a geometric
    mean 6.27x its floor, 5.09x with the levels; the reference's 5-fold CV by size 8.1 ->
    7.2% median rel err. Beyond the line, a heap step costs ~1.5 ns where a call makes a
    few thousand and ~6 ns from ~15,000: Zen 5 VM, 2026-12-02.)"""
    row = shape_features(in_shape, elem_bytes)
    row[_IDX[_TOPK_SLOT]] = float(k)
    n = in_shape[-1] if in_shape else 1
    rows = math.prod(in_shape) / max(n, 1)
    insertions = rows * k * (1.0 + math.log(max(n / max(k, 1), 1.0)))
    row[_IDX["units"]] = insertions * math.log2(2 * max(k, 1))
    return row


def _sorted_last(shape: Sequence[int], dimension: object) -> tuple[int, ...]:
    """A sort's shape with its sorted dimension moved last, where the calibration's sorts
    have it: XLA:CPU's sort costs what sorting as many rows of that length costs, whichever
    axis it runs along (Zen 5 VM, 2026-12-02: 1024x128 along axis 0 16.8 ms, 128x1024 along
    axis 1 16.4; 4096x64 along 0 41.0, 64x4096 along 1 38.5; read as rows of the last
    axis, the first of each pair was priced 9.7 and 22.9 ms)."""
    d = int(dimension) if isinstance(dimension, int | float) else len(shape) - 1
    d = d % len(shape)
    return (*shape[:d], *shape[d + 1 :], shape[d])


def features(ops: Sequence[OpInfo]) -> np.ndarray:
    """Feature matrix (one FEATURE_NAMES row per op) from compile-time facts only."""
    rows = []
    for op in ops:
        if op.op_class == "matmul":
            batch, m, n, k = _gemm_dims(op)
            eb = op.operands[0].elem_bytes
            if op.short_name == "convolution":
                lhs, rhs = op.operands[0].shape or (), op.operands[1].shape or ()
                ksp = op.attrs.get("kernel_spatial_dims", tuple(range(len(rhs) - 2)))
                window = math.prod(rhs[d] for d in ksp)
                images = lhs[op.attrs.get("input_batch_dim", 0)] if lhs else 1
                stride = max(op.attrs.get("window_strides") or (1,))
                kin = op.attrs.get("kernel_input_feature_dim", len(rhs) - 2)
                row = conv_features(batch, m, n, k, eb, window, images, stride, rhs[kin], len(ksp))
            else:
                row = matmul_features(batch, m, n, k, eb, 1, gemm_layout(op))
        elif op.short_name == "reduce_window" or (
            op.short_name == "select_and_scatter" and len(op.operands) > 1
        ):
            # A pool's windows are its outputs; a pool gradient's, its source's elements.
            x = op.operands[0]
            out = op.results[0] if op.short_name == "reduce_window" else op.operands[1]
            rank = len(x.shape or ())
            row = window_features(
                x.shape or (),  # type: ignore[arg-type]
                out.shape or (),  # type: ignore[arg-type]
                op.attrs.get("window_dimensions") or (1,) * rank,
                op.attrs.get("window_strides") or (1,) * rank,
                x.elem_bytes,
            )
        elif op.short_name == "fft":
            t = op_tensor(op)
            row = fft_features(t.shape or (), t.elem_bytes)  # type: ignore[arg-type]
        elif op.short_name == "top_k" and op.results and op.results[0].shape:
            t = op_tensor(op)
            row = topk_features(t.shape or (), op.results[0].shape[-1], t.elem_bytes)  # type: ignore[arg-type]
        elif op.short_name == "reduce" and op.operands:
            t = op.operands[0]
            dims = op.attrs.get("dimensions") or ()
            row = reduce_features(t.shape or (), dims, t.elem_bytes, library_reduce(op))  # type: ignore[arg-type]
        elif op.short_name == "gather" and op.results:
            out = op.results[0]
            table = (
                (op.operands[0].num_elements or 0) * op.operands[0].elem_bytes if op.operands else 0
            )
            if op.attrs.get("elemental_gather") == 1:
                # Fused into a reduction it reads one element at a time (fusion.elemental_gathers):
                # priced as the sweep's gathers of single elements.
                row = gather_features((out.num_elements or 0, 1), 1, out.elem_bytes, table)
            else:
                # As the sweep's (slices, slice) rows: an embedding lookup's (batch, seq, width)
                # result is batch x seq rows of width.
                width = max(math.prod(op.attrs.get("slice_sizes") or ()), 1)
                slices = (out.num_elements or 0) // width
                row = gather_features((slices, width), width, out.elem_bytes, table)
        elif op.short_name == "sort" and op.operands and op.operands[0].shape:
            t = op.operands[0]
            shape = _sorted_last(t.shape, op.attrs.get("dimension"))  # type: ignore[arg-type]
            row = shape_features(shape, t.elem_bytes)
        else:
            t = op_tensor(op)
            row = shape_features(t.shape or (), t.elem_bytes)  # type: ignore[arg-type]
        cls = op_model_class(op)
        _class_slots(row, cls, op.element_type)
        code = "argmax" if cls == "reduce_variadic" else division_code(op) or op.short_name
        code = dot_code(code, op.operands[0].element_type) if op.operands else code
        code = _window_code(op) or _reduce_code(op) or code
        rows.append([*row, _op_code(code)])
    return np.array(rows, dtype=float).reshape(len(rows), len(FEATURE_NAMES))


def _class_slots(row: list[float], cls: str, dtype: str) -> None:
    """Clear the tail slots where a class's kernel is not a vectorised loop over the last dim:
    a transpose's time is set by strided reads of two minor dims, so it keeps no tail; the
    row-tail features (`_ROW_TAIL_CLASSES`) are for elementwise loops only (a convolution's
    slots hold its channels and spatial dims, `_CHANNELS_SLOT` and `_SPATIAL_SLOT`). An
    elementwise loop of IEEE halves is marked (`_HALF_SLOT`)."""
    if cls in _ROW_TAIL_CLASSES and dtype == "f16":
        row[_IDX[_HALF_SLOT]] = 1.0
    if cls == "transpose":
        row[_IDX["vector_tail"]] = 0.0
    if cls not in _ROW_TAIL_CLASSES and cls not in _CHANNEL_CLASSES:
        row[_IDX["tail_fraction"]] = 0.0
        row[_IDX["last_mod_unroll"]] = 0.0


def measurement_features(rows: Sequence[Measurement]) -> np.ndarray:
    """Feature matrix of calibration rows, computed as `features` computes it for an OpInfo."""
    out = []
    for r in rows:
        eb = element_bytes(r.dtype)
        if r.op == "dot_general":
            row = matmul_features(*r.shape[:4], eb, layout=r.shape[4] if len(r.shape) > 4 else 0)
        elif r.op == "convolution":
            nb, h, w, c, kh, kw, o, stride, *grouped = r.shape
            g = grouped[0] if grouped else 1
            m = nb * _ceil_div(h, stride) * _ceil_div(w, stride)
            row = conv_features(g, m, o // g, c // g * kh * kw, eb, kh * kw, nb, stride, c // g)
        elif r.op == "conv3d":
            nb, d, h, w, c, k, o, stride = r.shape
            m = nb * _ceil_div(d, stride) * _ceil_div(h, stride) * _ceil_div(w, stride)
            row = conv_features(1, m, o, c * k**3, eb, k**3, nb, stride, c, spatial=3)
        elif r.model_class in ("reduce_window", "select_and_scatter"):
            row = spec_window_features(r.op, r.shape, eb)
        elif r.op == "fft":
            row = fft_features(r.shape, eb)
        elif r.op == "top_k":
            row = topk_features(r.shape[:-1], r.shape[-1], eb)
        elif r.op == "gather":
            table_rows, width, n = r.shape
            row = gather_features((n, width), width, eb, table_rows * width * eb)
        elif r.op in _REDUCE_ROWS:
            library = r.op not in _VARIADIC_ROWS and ynn_reduces(r.dtype, math.prod(r.shape))
            axes = tuple(a % len(r.shape) for a in _REDUCE_ROWS[r.op])
            row = reduce_features(r.shape, axes, eb, library)
        else:
            row = shape_features(r.shape, eb)
        _class_slots(row, r.model_class, r.dtype)
        code = "argmax" if r.op in _VARIADIC_ROWS else ROW_OPS.get(r.op, r.op)
        code = _ROW_CODES.get(r.op, code)
        out.append([*row, _op_code(dot_code(code, r.dtype))])
    return np.array(out, dtype=float).reshape(len(out), len(FEATURE_NAMES))


# Calibration rows of reduces: the axes each reduces (the sweep's jnp.sum / jnp.argmax of the
# last axis, of axis 0, of a rank-3 input's middle axis, or a group norm's axes 1 and 3).
_REDUCE_ROWS = {
    "reduce": (-1,),
    "argmax": (-1,),
    "sum_axis0": (0,),
    "argmax_axis0": (0,),
    "sum_axis1": (1,),
    "sum_groups": (1, 3),
}


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


# --- estimator ------------------------------------------------------------------------


def _irls(a_mat: np.ndarray, y: np.ndarray, solve: Callable, iters: int) -> np.ndarray:
    """Least absolute deviation by iteratively reweighted least squares: `solve(A, b)` fits
    each weighted step (its coefficients for A's columns)."""
    w = np.ones_like(y)
    coef = np.zeros(a_mat.shape[1])
    for _ in range(iters):
        sw = np.sqrt(w)
        coef = solve(a_mat * sw[:, None], y * sw)
        w = 1.0 / np.maximum(
            np.abs(y - a_mat @ coef), 1e-9 * max(float(np.median(np.abs(y))), 1e-12)
        )
    return coef


def lad_line(x: np.ndarray, y: np.ndarray, iters: int = 60) -> tuple[float, float]:
    """Least-absolute-deviation fit y ≈ a + b·x (IRLS); the median line resists outliers."""
    scale = max(float(np.max(np.abs(x))), 1.0)
    coef = _irls(
        np.c_[np.ones_like(x), x / scale],
        y,
        lambda a, b: np.linalg.lstsq(a, b, rcond=None)[0],
        iters,
    )
    return float(coef[0]), float(coef[1] / scale)


def nonneg_lad(a_mat: np.ndarray, y: np.ndarray, iters: int = 60) -> np.ndarray:
    """Least-absolute-deviation fit y ≈ a_mat · coef with coef >= 0, no intercept (IRLS,
    each step a non-negative least squares)."""
    scale = np.maximum(np.abs(a_mat).max(axis=0), 1e-12)
    return _irls(a_mat / scale, y, lambda a, b: nnls(a, b)[0], iters) / scale


def residual_trees(
    params: BaseEstimator, rows: int, categorical: list[int] | None = None
) -> HistGradientBoostingRegressor:
    """The boosted trees of a residual fit: absolute-error loss, the estimator's `max_iter`,
    `learning_rate`, `min_samples_leaf` (at most half the rows) and `random_state`."""
    return HistGradientBoostingRegressor(
        loss="absolute_error",
        max_iter=params.max_iter,
        learning_rate=params.learning_rate,
        min_samples_leaf=min(params.min_samples_leaf, max(1, rows // 2)),
        early_stopping=False,
        random_state=params.random_state,
        categorical_features=categorical,
    )


class LatencyRegressor(RegressorMixin, BaseEstimator):
    """Latency (us) from a FEATURE_NAMES matrix: a LAD floor + slope line times a boosted
    multiplicative residual (residual="log"), or the paper's plain HGB (residual="plain").

    `feature_set` names the columns the trees see (FEATURE_SETS); the line uses the size
    column (tensor bytes; FLOPs for matmul rows), or with `lane_padded` the bytes of the
    tensor padded to 128-lane rows (TPU targets: 5-fold CV by size on the tpu-v4 data,
    median rel err ReLU 1.43% -> 0.52%, R² 0.69 -> 0.98, multiply 1.40% -> 0.83%, R² 0.87
    -> 0.98; host data fit worse with it). `line="lad"` fits floor and slope by least
    absolute deviation; `line="ratio"` keeps the floor at half the fastest time and the
    slope at the median time per unit above it (`regressor_for`), plus a cost per unit of
    the `units` column where the rows have one. Loss is absolute
    error, as in the paper; seeds are fixed so a fit is reproducible.

    The residual is the mean of `n_average` boosted fits, each split choosing among a random
    `max_features` of the columns (seeds `random_state` + k): on the Xeon reference's matmul
    rows, their targets perturbed by 0.1%, one fit's predictions moved 3-4% (10th-90th
    percentile) and 8-17% (1st-99th), five fits' 1.5% and 4-7% (absolute-error leaves are
    medians of a few rows); fitting its 17 classes takes 14 s instead of 3. Same-run check
    (benchmarks/elementwise_accuracy.py on .cal run ew_A of 2026-12-05, fit on pass A, 5-fold
    split by size, scored on pass B), error over the noise floor: 12 of 15 classes lower
    with five fits on 0.7 of the columns (binary 2.02 -> 1.88, convolution 2.03 -> 1.95,
    matmul 2.72 -> 2.66, reduce_variadic 2.18 -> 1.96, reduce_window 2.36 -> 2.19,
    transcendental 2.14 -> 2.05, transpose 1.84 -> 1.70; top_k 5.54 -> 5.98, convert 1.89
    -> 1.92, reduction 3.31 -> 3.33), sum over classes 38.6 -> 37.6 (five on 0.5: 38.1,
    eight on 0.8: 38.0); the zoo's 16 saved runs of 2026-12-05 and 06 re-predicted:
    own-level MAPE 10.54 -> 10.45%, Kendall tau 0.927 -> 0.925; unseen sets' error
    factors within +-0.015.
    """

    def __init__(
        self,
        feature_set: str = "tile+op",
        residual: str = "log",
        max_iter: int = 100,
        learning_rate: float = 0.1,
        min_samples_leaf: int = 5,
        random_state: int = 0,
        lane_padded: bool = False,
        line: str = "lad",
        n_average: int = 5,
        max_features: float = 0.7,
    ) -> None:
        self.feature_set = feature_set
        self.residual = residual
        self.max_iter = max_iter
        self.learning_rate = learning_rate
        self.min_samples_leaf = min_samples_leaf
        self.random_state = random_state
        self.lane_padded = lane_padded
        self.line = line
        self.n_average = n_average
        self.max_features = max_features

    def _base(self, X: np.ndarray) -> np.ndarray:
        return X[:, _LANE_BASE if self.lane_padded else _BASE_FEATURE]

    def _line(self, X: np.ndarray) -> np.ndarray:
        floor = max(self.floor_, 1e-6)
        line = self.floor_ + self.slope_ * self._base(X) + self.unit_slope_ * X[:, _UNITS]
        return np.maximum(line, floor)

    def fit(self, X: np.ndarray, y: np.ndarray) -> LatencyRegressor:
        X = np.asarray(X, dtype=float)
        y = np.asarray(y, dtype=float)
        if self.residual not in ("log", "plain"):
            raise ValueError(f"residual must be 'log' or 'plain', got {self.residual!r}")
        cols = list(FEATURE_SETS[self.feature_set])
        self.numel_range_ = (float(X[:, 0].min()), float(X[:, 0].max()))
        self.spatial_max_ = float(X[:, _IDX[_SPATIAL_SLOT]].max())
        self.smallest_us_ = float(np.median(y[X[:, 0] == self.numel_range_[0]]))
        self.fastest_us_ = float(y.min())
        self.unit_slope_ = 0.0
        if self.line == "ratio":
            # Time proportional to work above a floor of half the fastest op: kinds of
            # one class with different per-unit costs then differ by a size-independent
            # factor, which the trees learn (a shared LAD intercept made it size-dependent).
            self.floor_ = 0.5 * float(y.min())
            if X[:, _UNITS].any():
                rel = 1.0 / np.maximum(y, 1e-12)
                a_mat = np.c_[self._base(X), X[:, _UNITS]] * rel[:, None]
                coef = nonneg_lad(a_mat, (y - self.floor_) * rel)
                self.slope_, self.unit_slope_ = float(coef[0]), float(coef[1])
            else:
                self.slope_ = float(np.median((y - self.floor_) / np.maximum(self._base(X), 1e-12)))
        elif self.line == "lad":
            self.floor_, self.slope_ = lad_line(self._base(X), y)
        else:
            raise ValueError(f"line must be 'lad' or 'ratio', got {self.line!r}")
        if self.residual == "log":
            # A LAD line steered by large sizes can cross zero, and log(t / line) of small
            # ops would then be huge and unstable: the floor stays at least a quarter of
            # the fastest measurement.
            self.floor_ = max(self.floor_, 0.25 * float(y.min()))
            self.slope_ = max(self.slope_, 0.0)
            target = np.log(y / self._line(X))
        else:
            target = y
        categorical = [cols.index(_IDX["op_code"])] if _IDX["op_code"] in cols else None
        codes = X[:, _IDX["op_code"]]
        self.op_codes_ = frozenset(float(c) for c in codes[np.isfinite(codes)])
        self.trees_ = []
        for k in range(self.n_average):
            trees = residual_trees(self, len(y), categorical)
            if self.n_average > 1:
                trees.set_params(max_features=self.max_features, random_state=self.random_state + k)
            with threadpool_limits(1):
                self.trees_.append(trees.fit(X[:, cols], target))
        return self

    def predict(self, X: np.ndarray) -> np.ndarray:
        X = np.asarray(X, dtype=float)
        cols = list(FEATURE_SETS[self.feature_set])
        with threadpool_limits(1):
            r = np.mean([trees.predict(X[:, cols]) for trees in self.trees_], axis=0)
        out = r if self.residual == "plain" else self._line(X) * np.exp(r)
        return self._below_range(X, out)

    def _below_range(self, X: np.ndarray, out: np.ndarray) -> np.ndarray:
        """Predictions below the smallest training size capped by that size's median time
        scaled down with the element count (at least a quarter of the fastest row): a
        smaller kernel does no more work, where the line's floor, steered by large sizes,
        put a 32-element f32 cosine at 1.6 us (Xeon reference: 0.7 us at 160 elements)."""
        n = X[:, 0]
        lo = self.numel_range_[0]
        cap = np.maximum(self.smallest_us_ * n / lo, 0.25 * self.fastest_us_)
        return np.where(n < lo, np.minimum(out, cap), out)

    def extrapolated(self, X: np.ndarray) -> np.ndarray:
        """True where a row's size lies outside the sizes seen in training, or a convolution
        has more spatial dims than any training row (`_SPATIAL_SLOT`, at least 2 for one: a
        loop's tail fraction there is below 1): a 3-D layer priced from 2-D rows alone runs
        on another path (`runtime.sweeps`' conv3d rows)."""
        lo, hi = self.numel_range_
        X = np.asarray(X, dtype=float)
        n, spatial = X[:, 0], X[:, _IDX[_SPATIAL_SLOT]]
        return (n < lo) | (n > hi) | ((spatial >= 2) & (spatial > self.spatial_max_))


def size_split(
    sizes: np.ndarray, test_fraction: float = 0.2, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Boolean train/test masks that hold out whole total sizes (never a size in both)."""
    uniq = np.unique(sizes)
    rng = np.random.default_rng(seed)
    n_test = max(1, round(test_fraction * len(uniq)))
    held = rng.choice(uniq, size=n_test, replace=False)
    test = np.isin(sizes, held)
    return ~test, test


# --- training data and fitted models ---------------------------------------------------


def calibrated_dispatch_ns(target: str) -> float | None:
    """Per-call dispatch overhead measured with a target's calibration (ns), if any.

    Kernel times exclude it; an end-to-end estimate adds it once per jitted call.
    """
    src = training_files(target)
    value = header_value(src[0], "dispatch_us") if src else ""
    return float(value) * 1e3 if value else None


def model_class(name: str) -> str:
    """The learned model an op uses: its op class, or one of its own (`_OWN_MODEL`)."""
    return _OWN_MODEL.get(name.split(".", 1)[-1], op_class(name))


def op_model_class(op: OpInfo) -> str:
    """`model_class` of an op, with a reduce of several inputs (argmax) as "reduce_variadic",
    a transpose that keeps the minor axis in place as the copy it is ("movement") and a
    convolution of several feature groups (depthwise) as "grouped_conv"."""
    if op.short_name == "reduce" and len(op.operands) >= 4:
        return "reduce_variadic"
    if op.short_name == "transpose" and not moves_minor_axis(op):
        return "movement"
    if op.short_name == "convolution" and int(op.attrs.get("feature_group_count", 1)) > 1:
        return "grouped_conv"
    if op.short_name == "remainder" and op.attrs.get("constant_divisor") and _integers(op):
        return "binary"  # a multiply and shifts, as an integer divide by a constant
    return model_class(division_code(op) or op.name)


# Classes whose kinds cost different amounts per unit of work (max pools with and
# without overlapping windows, scans; top_k of different k; gathers of single elements
# and of rows; depthwise and 8-group convolutions; dots of each operand layout, skinny
# and square; convolutions of each stride): their line is proportional (LatencyRegressor
# line="ratio"; host 5-fold CV by size, median rel err: reduce_window 31.5% -> 18.7%,
# top_k 33.8% -> 16.5%, gather 55.4% -> 38.8%, grouped_conv 48.0% -> 29.0%, matmul
# 22.2% -> 13.7%, convolution 20.8% -> 13.2%). Reductions too (the Xeon reference's f32
# row sums: 16904x3 1.8 ns per element, 28188x20 0.3, 64x512 0.06): in
# benchmarks/elementwise_accuracy.py's same-run check on two saved runs, median rel err
# 29.2 / 24.4% -> 24.9 / 23.7% (ratio to the noise floor 2.82 / 2.57 -> 2.41 / 2.50); its
# 12 fresh live shapes 17.2 / 17.7% -> 18.5 / 19.6%.
# Where a class's rows have a second work count (`units`: a reduce's outputs, a gather's
# slices, a top_k's expected heap insertions, an FFT's rows), the ratio line has a cost
# per unit beside the cost per byte (`nonneg_lad`, by relative error): a row sum of
# 16,904 x 3 f32 costs by its rows (~4.7 ns each), not its 200 KB; a top 64 of 128 costs
# 7 us a row, a top 1 of 128 0.4. benchmarks/elementwise_accuracy.py on the saved
# session-12 run, same-run ratio to the floor: gather 3.99 -> 3.01, reduction 2.52 ->
# 2.46, top_k 3.81 -> 2.47, fft (its line was LAD) 2.23 -> 1.69, 2.05 with the ratio line
# alone, reduce_variadic (LAD too) 1.16 -> 1.12 (1.29 with its LAD line and the column in
# its trees); 5-fold CV by size on the reference: gather 35.2 -> 31.7%, reduction 19.5 ->
# 19.2%, top_k 38.5 -> 12.0% (R² 0.48 -> 0.99), fft 22.5 -> 19.2% (23.1% ratio alone),
# reduce_variadic 8.4 -> 7.6%; fresh live reduces 21.1 -> 16.6%.
_RATIO_LINE = frozenset(
    {
        "reduce_window",
        "select_and_scatter",
        "top_k",
        "gather",
        "grouped_conv",
        "matmul",
        "convolution",
        "reduction",
        "fft",
        "reduce_variadic",
    }
)


_CLASS_PARAMS = {
    "matmul": {"max_iter": 200, "learning_rate": 0.05, "min_samples_leaf": 3},
    "grouped_conv": {"feature_set": "conv", "min_samples_leaf": 3},
}
"""Boosting parameters of a class where the shared defaults underfit it. The products'
times step with their code paths (skinny, batched, transposed, narrow types: 445 rows of
the Zen 5 reference over five dims), and leaves of 5 rows averaged neighbours on those
steps: its 512x512 @ 512x16 row, 38.0 us, was priced 44.0 in sample, where a 20-trip loop of
it ran 32-45 us a trip. 5-fold CV by size on the reference, median rel err 12.1 -> 11.3%
(other classes gain nothing: binary 10.6 either way, convolution 9.4 -> 9.3); same-run
check on ew_G 11.7 -> 10.5%; the zoo's 30 saved runs re-predicted, MAPE 12.54 -> 12.42%,
own level 8.63 -> 8.48% (int8_bmm x4 +12.3 -> -5.2%), tau 0.927 -> 0.928; unseen runs
A-M own-level error factor 1.231 -> 1.229 (2026-12-03).

Grouped convolutions (XLA:CPU's generic loop) cost a nearly constant time per multiply-add
at each channel count per group (Zen 4 VM, 2026-12-04: ~0.15 ns at 8 a group, ~0.6 at 4,
~3 at 1), and the reference's grid ties its groups to its channels (16-128 channels, 1, 4
or 8 a group): trees that saw the groups and the images' pixels split on them and priced
100 fresh layers (24-96 channels, 12-48 pixels a side, batches 1-4, strides 1-2; timed in
loops beside the sentinel ops, `calibrate.measure`) at a median error of 26.6% and 9.1% on
two draws of 60 and 40 (the second drawn after the choice); on the "conv" columns (log
FLOPs, window, N and K a group, images, stride) with leaves of 3, 13.8% and 7.3% (error
factor 1.35 -> 1.16 and 1.21 -> 1.10). CV by size on the references moves either way
(median rel err, median of 5 draws: Zen 4 8.4 -> 7.5%, Zen 5 5.6 -> 8.5, Xeon 10.6 -> 11.9,
Xeon one thread 11.3 -> 13.2): it holds out sizes whose dims the grid's other rows share.
The zoo's depthwise_conv on one saved run: +15 / +5 / +42% -> +26 / +7 / +15%, zoo MAPE
8.7 -> 8.4%. Dense convolutions gain on
fresh layers the same way (40: error factor 1.38 -> 1.28) but lose on the zoo (8.7%, cnn
and resnet_block 3 points worse) and the unseen pad_conv (1.02 -> 1.15): not changed."""


def regressor_for(cls: str, **params: object) -> LatencyRegressor:
    """The (unfitted) regressor a model class gets: `params`, with the class's line."""
    if cls in _RATIO_LINE:
        params = {"line": "ratio", **params}
    params = {**_CLASS_PARAMS.get(cls, {}), **params}
    return LatencyRegressor(**params)  # type: ignore[arg-type]


def fit_class_models(rows: Iterable[Measurement], **params: object) -> dict[str, LatencyRegressor]:
    """One fitted LatencyRegressor per model class (`model_class`) present in `rows`."""
    by_class: dict[str, list[Measurement]] = defaultdict(list)
    for r in rows:
        by_class[r.model_class].append(r)
    models = {}
    for cls, group in sorted(by_class.items()):
        X = measurement_features(group)
        y = np.array([r.latency_us for r in group])
        models[cls] = regressor_for(cls, **params).fit(X, y)
    return models


@dataclass(frozen=True)
class ScaledRegressor:
    """A fitted class model whose times are `factor` times its own (a re-levelled
    calibration's: `calibration_files.relevel_of`)."""

    model: LatencyRegressor
    factor: float

    def predict(self, X: np.ndarray) -> np.ndarray:
        return self.model.predict(X) * self.factor

    def extrapolated(self, X: np.ndarray) -> np.ndarray:
        return self.model.extrapolated(X)


@functools.lru_cache(maxsize=16)
def _models_for(
    path: str, mtime_ns: int, lane_padded: bool
) -> dict[str, LatencyRegressor | ScaledRegressor]:
    relevel = relevel_of(Path(path))
    if relevel is not None:
        source = relevel.source
        own = _models_for(str(source), source.stat().st_mtime_ns, lane_padded)
        return {cls: ScaledRegressor(m, relevel.factor) for cls, m in own.items()}  # type: ignore[arg-type]
    return model_cache.fitted(
        "class_models",
        Path(path),
        lambda: fit_class_models(load_measurements(path), lane_padded=lane_padded),
        (lane_padded,),
    )


@dataclass(frozen=True)
class _Plan:
    cls: str
    source: str | None  # class whose model answers, None = roofline
    scaled: bool
    # Priced as this measured op of another class: ReLU for an op reading one tensor
    # (`_reads_one_tensor`), an add for a maximum or compare of two (`_reads_two_tensors`).
    as_op: str = ""


_ELEMENTAL = "(fused into a reduce: per element)"

# compare_select data is ReLU, max(x, 0): an arithmetic or compare op whose other operand is
# a splat (x + 1, x > 0) reads the same one tensor, and costs it, not a two-tensor add
# (tpu-v4 at 16x16x32 f16: add 1.51 us, ReLU 1.30 us).
_ONE_READ_CLASSES = frozenset({"binary", "compare_select"})


def _reads_two_tensors(op: OpInfo) -> bool:
    """A maximum, minimum or compare of two tensors, neither a splat: it reads what an add
    reads, not the ReLU rows' one tensor (65536 f32 in a loop, Zen 4 VM: maximum 8.4-9.3 us,
    add 8.8-9.0; the ReLU rows had priced it 4.9)."""
    return (
        len(op.operands) == 2
        and op.short_name in ("maximum", "minimum", "compare")
        and not op.attrs.get("splat_operands")
        and not op.attrs.get("fused_reads")
    )


def _reads_one_tensor(op: OpInfo) -> bool:
    """Two operands, one of them a splat (`splat_operands`), or in a fused loop that reads
    one tensor (`fused_reads`, from `fusion.one_read_ops`); both set by the pass layer."""
    return len(op.operands) == 2 and (
        op.attrs.get("splat_operands") == 1 or op.attrs.get("fused_reads") == 1
    )


class LearnedLatencyModel:
    """Service: per-(target, class) learned latency models fitted from calibration CSVs.

    Supports a target when a calibration exists for it (shipped: tpu-v4, host; any
    target calibrated into the user cache) and the op is of a learned class with a
    non-empty static shape. Matmul ops are supported only where the calibration
    measured them (the host). `data` maps target names to CSV paths and overrides the
    lookup (tests, benchmarks).
    """

    name = "hgb"

    def __init__(self, data: Mapping[str, str | os.PathLike[str]] | None = None) -> None:
        self._data = {k: Path(v) for k, v in (data or {}).items()}
        # Where each target's data lives, looked up once per service instance (the
        # registry asks `supports` for every op; the lookup reads files).
        self._sources: dict[str, tuple[Path, bool] | None] = {}

    def _source(self, target: Target) -> tuple[Path, bool] | None:
        if target.name in self._data:
            return self._data[target.name], True
        if target.name not in self._sources:
            self._sources[target.name] = training_files(target.name)
        return self._sources[target.name]

    def models(self, target: Target) -> dict[str, LatencyRegressor | ScaledRegressor]:
        """Fitted class models for `target` (fitted once per CSV version, then cached)."""
        src = self._source(target)
        if src is None:
            return {}
        path = src[0]
        return _models_for(str(path), path.stat().st_mtime_ns, target.kind == "tpu")

    def _plan(self, cls: str, models: Mapping[str, object]) -> _Plan:
        if cls in models:
            return _Plan(cls, cls, False)
        for near in NEAREST.get(cls, ()):
            if near in models:
                return _Plan(cls, near, True)
        return _Plan(cls, None, False)

    def supports(self, op: OpInfo, target: Target) -> bool:
        if op_model_class(op) not in CLASSES or not op.is_static or not op.results:
            return False
        if any(t.num_elements == 0 for t in (*op.operands, *op.results)):
            return False
        models = self.models(target)
        if op.op_class == "matmul":  # dots and convolutions: only where measured (the host)
            return op_model_class(op) in models
        return bool(models)

    def predict(self, ops: Sequence[OpInfo], target: Target) -> list[OpCost]:
        """Price a batch: one regressor call per class model used, one roofline call for the rest."""
        models = self.models(target)
        src = self._source(target)
        same_machine = bool(src and src[1])
        out: list[OpCost | None] = [None] * len(ops)
        groups: dict[_Plan, list[int]] = defaultdict(list)
        for i, op in enumerate(ops):
            cls = op_model_class(op)
            if cls in _ONE_READ_CLASSES and "compare_select" in models and _reads_one_tensor(op):
                groups[_Plan(cls, "compare_select", False, "maximum")].append(i)
            elif cls == "compare_select" and "binary" in models and _reads_two_tensors(op):
                groups[_Plan(cls, "binary", False, "add")].append(i)
            else:
                groups[self._plan(cls, models)].append(i)
        roofline = RooflineModel()
        prefix = f"{self.name}-{target.name}"
        for plan, idx in groups.items():
            batch = [ops[i] for i in idx]
            if plan.source is None:
                label = f"roofline({prefix}: no {plan.cls} data)"
                for i, c in zip(idx, roofline.predict(batch, target), strict=True):
                    out[i] = OpCost(c.cycles, c.latency_ns, c.dram_bytes, label, c.extra)
                continue
            model = models[plan.source]
            complex_products = np.array([_complex_product(op) for op in batch])
            if complex_products.any():
                batch = [
                    op.retyped(real_part) if c else op
                    for op, c in zip(batch, complex_products, strict=True)
                ]
            # Integer division at its i32 rows' rate an element, whatever the width: 65536
            # elements in a loop (Zen 4 VM) took 1.0-1.2 ns each in i8, u8, i32, u32 and i64.
            batch = [op.retyped(lambda _: "i32") if division_code(op) else op for op in batch]
            X = features(batch)
            label = f"{prefix}-{plan.source}"
            stand_in = _stand_in_codes(X, model)
            if plan.as_op:
                X[:, _IDX["op_code"]] = _OP_CODE[plan.as_op]
                reads = "one tensor" if plan.as_op == "maximum" else "two tensors"
                label = f"{label}({reads} read)"
            lat_ns = model.predict(X) * 1e3 * np.where(complex_products, COMPLEX_PRODUCTS, 1)
            if plan.scaled:
                lat_ns = lat_ns * _roofline_ratio(batch, plan.source, target, roofline)
                label = f"{label}→{plan.cls}(scaled)"
            extrap = model.extrapolated(X)
            for j, i in enumerate(idx):
                name = label + _ELEMENTAL if ops[i].attrs.get("elemental_gather") else label
                if stand_in[j]:
                    name += f"(no {stand_in[j]} rows: priced as {CODE_STAND_INS[stand_in[j]]})"
                out[i] = OpCost(
                    cycles=round(lat_ns[j] * target.clock_ghz),
                    latency_ns=float(lat_ns[j]),
                    dram_bytes=int(ops[i].bytes or 0),
                    model=name + _COMPLEX if complex_products[j] else name,
                    extra={"extrapolated": bool(extrap[j]), "same_machine": same_machine},
                )
        return out  # type: ignore[return-value]


CODE_STAND_INS = {
    "integer_dot": "dot_general",
    "cummax": "reduce_window",
    "sum_pool": "reduce_window",
    "reduce_groups": "reduce",
}
"""Op codes priced as another where a calibration has no rows of their own: an i32 product
as the f32 one of its dims (3.7-6.4x too cheap on the Xeon VM, `dot_code`), a running
maximum as a cumsum of its shape (about 2x too cheap, `runtime.sweeps.window_specs`), a
summing pool as the max pool (a 3x3 one about 1.8x too dear), a group norm's sums as the
row sums they collapse to (up to 12x too cheap, `_reduce_code`), which the trees would otherwise
meet as a missing category."""


_STAND_IN_NAMES = {_OP_CODE[name]: name for name in CODE_STAND_INS}


def _stand_in_codes(X: np.ndarray, model: LatencyRegressor) -> list[str]:
    """Each row's op code that `model` never saw and `CODE_STAND_INS` stands in for (its
    column rewritten to the stand-in's), or "" for a row left as it was."""
    out = []
    col = X[:, _IDX["op_code"]]
    for j, code in enumerate(col):
        name = _STAND_IN_NAMES.get(code, "")
        if name and code not in model.op_codes_:
            col[j] = _OP_CODE[CODE_STAND_INS[name]]
            out.append(name)
        else:
            out.append("")
    return out


COMPLEX_PRODUCTS = 4
"""Real products a complex dot or convolution costs: (a + bi)(c + di) takes four real
multiplies and their adds. XLA:CPU's complex64 dots in a loop ran 3.6-5.6x the f32 dot of
the same dims (64^3 to 256^3, skinny and batched-row shapes; Zen 4 VM, 2026-12-05), priced
at 0.77-1.16x their time as four f32 dots, at 0.19-0.29x as one."""
_COMPLEX = f"(complex: {COMPLEX_PRODUCTS} real products)"


def _complex_product(op: OpInfo) -> bool:
    """Whether a dot or convolution multiplies complex numbers (priced as its real twin's
    `COMPLEX_PRODUCTS` products)."""
    return op.op_class == "matmul" and any(
        real_part(t.element_type) != t.element_type for t in op.operands
    )


def _roofline_ratio(
    ops: Sequence[OpInfo], source: str, target: Target, roofline: RooflineModel
) -> np.ndarray:
    """Roofline time of each op over that of the source class's proxy op on the same tensor."""
    name, arity = _PROXY[source]
    proxies = []
    for op in ops:
        t = op_tensor(op)
        proxies.append(OpInfo.build(op.id, name, [t] * arity, [t]))
    mine = np.array([c.latency_ns for c in roofline.predict(ops, target)])
    theirs = np.array([c.latency_ns for c in roofline.predict(proxies, target)])
    return mine / np.maximum(theirs, 1e-9)
