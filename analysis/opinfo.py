"""OpInfo: the plain record every cost model reads, and XLA's FLOP/byte conventions.

No MLIR object crosses into analysis/: passes turn each op into an `OpInfo`
(shapes, element types, the attributes models need) and the counting rules
here derive `flops` and `bytes` from those plain values. The FLOP rules follow
XLA's HloCostAnalysis so that sums compare with `compiled.cost_analysis()`:
2 per multiply-add in dot/convolution (only window positions that hit real,
non-padded input count), one per output element for non-transcendental
elementwise ops, transcendentals counted apart, reducer flops once per
reduction step.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cache, cached_property
from typing import Any

__all__ = [
    "DEAD",
    "HALF_FLOATS",
    "PASSES_THROUGH",
    "READS_PART",
    "READS_WHAT_IT_RETURNS",
    "SCALAR_LOOPS",
    "SPECIAL_FUNCTIONS",
    "WRITTEN_AS",
    "OpInfo",
    "TensorType",
    "conv_valid_positions",
    "count_bytes",
    "count_flops",
    "count_transcendentals",
    "element_bytes",
    "is_integer",
    "moves_minor_axis",
    "op_class",
    "real_part",
    "transpose_read_stride_bytes",
]

DEAD = "dead"
"""OpInfo attribute of an op whose results nothing reads and that has no effect
(`passes.extract`): XLA's dead-code elimination removes it."""

MERGED_INDUCTION = "merged_induction"
"""OpInfo attribute of a while body's op stepping an induction variable that XLA's while-loop
simplifier folds into the loop's trip counter (`passes.extract`): it no longer runs."""

MERGED_STATE = "merged_state"
"""OpInfo attribute of a while op: (position, counter) for each value of its loop state so
folded into the counter at that position (no longer carried from trip to trip: its readers
read the counter)."""

PASSES_THROUGH = "passes_through"
"""OpInfo attribute of a binary op with its identity splat (`x + 0`, `x * 1`): the operand it
returns unchanged, as XLA's algebraic simplifier leaves it (`passes.extract`)."""

WRITTEN_AS = "written_as"
"""OpInfo attribute of an op the models see as another, as XLA rewrites it before it compiles:
the op's own name (`passes.extract`: a dot_general whose contracting dimensions are all of
size 1, an outer product, is a multiply of broadcasts). Reports name the op so."""

_INT_RE = re.compile(r"^(u?i|si)(\d+)$")
_FLOAT_BITS = {"f16": 16, "bf16": 16, "f32": 32, "f64": 64, "tf32": 32, "f4E2M1FN": 4}


def is_integer(element_type: str) -> bool:
    """Whether an element type is an integer (iN, uiN, siN; i1 too)."""
    return _INT_RE.match(element_type) is not None


def real_part(element_type: str) -> str:
    """The element type of a `complex<fN>`'s two parts (fN); any other type itself."""
    if element_type.startswith("complex<") and element_type.endswith(">"):
        return element_type[len("complex<") : -1]
    return element_type


def element_bytes(element_type: str) -> float:
    """Bytes one element of `element_type` occupies (as XLA stores it).

    Sub-byte types (i1, i4, f4, f6) take one byte each, like XLA's unpacked
    PRED/S4 arrays; `complex<fN>` is two fN.
    """
    t = element_type
    if real_part(t) != t:
        return 2 * element_bytes(real_part(t))
    if t in _FLOAT_BITS:
        return max(1, _FLOAT_BITS[t] // 8)
    if t.startswith(("f8", "f6", "f4")):
        return 1
    m = _INT_RE.match(t)
    if m:
        return max(1, int(m.group(2)) // 8)
    if t == "index":
        return 8
    raise ValueError(f"unknown element type '{element_type}'")


@dataclass(frozen=True)
class TensorType:
    """A tensor's static facts: shape (None = unranked, None dims = dynamic) and element type."""

    shape: tuple[int | None, ...] | None
    element_type: str

    @cached_property
    def is_static(self) -> bool:
        return self.shape is not None and all(d is not None for d in self.shape)

    @cached_property
    def num_elements(self) -> int | None:
        """Exact element count (a Python int, never overflows), or None if not static."""
        if not self.is_static:
            return None
        return math.prod(self.shape)  # type: ignore[arg-type]

    @cached_property
    def elem_bytes(self) -> float:
        return element_bytes(self.element_type)

    @cached_property
    def nbytes(self) -> int | None:
        n = self.num_elements
        return None if n is None else int(n * self.elem_bytes)

    def __str__(self) -> str:
        if self.shape is None:
            return f"tensor<*x{self.element_type}>"
        dims = "".join(("?" if d is None else str(d)) + "x" for d in self.shape)
        return f"tensor<{dims}{self.element_type}>"


@dataclass(frozen=True)
class OpInfo:
    """One StableHLO op as the cost models see it; `flops`/`bytes` are None when shapes are dynamic."""

    id: int
    name: str
    operands: tuple[TensorType, ...]
    results: tuple[TensorType, ...]
    attrs: Mapping[str, Any] = field(default_factory=dict)
    loc: str = ""
    func: str = ""
    flops: int | None = None
    transcendentals: int | None = None
    bytes: int | None = None

    @classmethod
    def build(
        cls,
        id: int,
        name: str,
        operands: Sequence[TensorType],
        results: Sequence[TensorType],
        attrs: Mapping[str, Any] | None = None,
        loc: str = "",
        func: str = "",
    ) -> OpInfo:
        """Make an OpInfo and derive its flops, transcendentals and bytes."""
        ops, res, at = tuple(operands), tuple(results), dict(attrs or {})
        return cls(
            id=id,
            name=name,
            operands=ops,
            results=res,
            attrs=at,
            loc=loc,
            func=func,
            flops=count_flops(name, ops, res, at),
            transcendentals=count_transcendentals(name, res),
            bytes=count_bytes(ops, res, name),
        )

    def retyped(self, element_type: Callable[[str], str]) -> OpInfo:
        """This op with every operand's and result's element type mapped by `element_type`
        (same shapes, counts kept): a twin a model prices in its place."""

        def twin(t: TensorType) -> TensorType:
            return TensorType(t.shape, element_type(t.element_type))

        return replace(
            self,
            operands=tuple(twin(t) for t in self.operands),
            results=tuple(twin(t) for t in self.results),
        )

    @property
    def dead(self) -> bool:
        """Nothing reads its results and it has no effect (`DEAD`): XLA removes it."""
        return bool(self.attrs.get(DEAD))

    @property
    def removed(self) -> bool:
        """XLA removes it before it compiles: it is dead, passes an operand through or steps
        an induction variable merged into the trip counter."""
        return self.dead or PASSES_THROUGH in self.attrs or MERGED_INDUCTION in self.attrs

    @property
    def short_name(self) -> str:
        """Op name without its dialect prefix (`stablehlo.add` → `add`)."""
        return self.name.split(".", 1)[-1]

    @cached_property
    def is_static(self) -> bool:
        return all(t.is_static for t in (*self.operands, *self.results))

    @cached_property
    def op_class(self) -> str:
        return op_class(self.name)

    @property
    def element_type(self) -> str:
        """The element type the op computes in: its first operand's, else its first result's."""
        for t in (*self.operands, *self.results):
            return t.element_type
        return "f32"


# CHLO's special functions (erf_inv for jax.random.normal, erfc for the exact GELU, lgamma and
# digamma for distributions, ...): XLA expands each into a polynomial or rational
# approximation, elementwise work that fuses like any transcendental.
SPECIAL_FUNCTIONS = frozenset({
    "erf", "erf_inv", "erfc", "lgamma", "digamma", "polygamma", "zeta", "bessel_i1e",
    "sinh", "cosh", "asin", "acos", "atan", "asinh", "atanh",
})  # fmt: skip

SCALAR_LOOPS = frozenset({
    "exponential_minus_one", "log_plus_one", "cbrt", "power", "remainder", "integer_divide",
    "integer_remainder",
})  # fmt: skip
"""Ops XLA:CPU runs an element at a time, through a libm call or a scalar instruction (tan too,
priced with sines): 65536 f32 in a loop on the Zen 4 VM (2026-12-05) took expm1 55 us, log1p
58, pow 278, tan 559, cbrt 561, fmod 490 (the remainder of floats, with a constant divisor
too) against 9 for an add. Integer division by a tensor is `integer_divide` /
`integer_remainder` (`analysis.elementwise.division_code`), as the calibration rows
`runtime.sweeps` times name it."""

# Op classes shared by the models; XLA's HloCostAnalysis decides which count as flops.
_BINARY = {
    "add", "subtract", "multiply", "divide", "remainder", "power", "atan2", "and", "or",
    "xor", "shift_left", "shift_right_arithmetic", "shift_right_logical",
}  # fmt: skip
_COMPARE_SELECT = {"maximum", "minimum", "compare", "select", "clamp"}
_TRANSCENDENTAL = {
    "exponential", "exponential_minus_one", "log", "log_plus_one", "logistic", "tanh",
    "sqrt", "rsqrt", "cbrt", "sine", "cosine", "tan", "power", "atan2", "erf", "acosh",
    *SPECIAL_FUNCTIONS,
}  # fmt: skip
_UNARY = {
    "abs", "negate", "sign", "floor", "ceil", "round_nearest_afz", "round_nearest_even",
    "not", "is_finite", "popcnt", "count_leading_zeros", "real", "imag", "complex",
    "reduce_precision", "square",
}  # fmt: skip
_CONVERT = {"convert", "bitcast_convert"}
_MOVEMENT = {
    "broadcast_in_dim", "broadcast", "reshape", "transpose", "concatenate", "slice", "pad",
    "copy", "reverse", "dynamic_slice", "dynamic_update_slice", "gather", "scatter", "iota",
    "dynamic_broadcast_in_dim", "dynamic_reshape", "dynamic_pad", "dynamic_gather",
    "dynamic_iota", "get_tuple_element", "tuple", "optimization_barrier", "bitcast",
}  # fmt: skip
_REDUCTION = {"reduce", "reduce_window", "select_and_scatter", "sort", "top_k", "reduce_scatter"}
_MATMUL = {"dot_general", "dot", "convolution"}
_CONTROL = {"while", "if", "case", "call", "return", "func.return", "stablehlo.return"}
_FREE = {"constant", "return", "get_tuple_element", "tuple", "optimization_barrier"}
# Elementwise ops XLA counts as one flop per output element (HandleElementwiseOp).
_FLOP_PER_ELEMENT = (
    (_BINARY | _COMPARE_SELECT | _UNARY | _CONVERT) - _TRANSCENDENTAL - {"bitcast_convert"}
)


@cache
def op_class(name: str) -> str:
    """Coarse class of an op: matmul, binary, compare_select, transcendental, unary,
    convert, movement, reduction, control, constant or other."""
    short = name.split(".", 1)[-1]
    if short in _MATMUL:
        return "matmul"
    if short in _TRANSCENDENTAL:
        return "transcendental"
    for cls, names in (
        ("binary", _BINARY),
        ("compare_select", _COMPARE_SELECT),
        ("unary", _UNARY),
        ("convert", _CONVERT),
        ("movement", _MOVEMENT),
        ("reduction", _REDUCTION),
    ):
        if short in names:
            return cls
    if short == "constant":
        return "constant"
    if short in _CONTROL or name in ("func.call", "func.return"):
        return "control"
    return "other"


def count_flops(
    name: str,
    operands: Sequence[TensorType],
    results: Sequence[TensorType],
    attrs: Mapping[str, Any],
) -> int | None:
    """FLOPs of one op by XLA's convention; None if a shape it needs is not static."""
    short = name.split(".", 1)[-1]
    if short in _FREE or op_class(name) in ("control", "movement", "constant", "other"):
        if short == "scatter" and results and results[0].is_static:
            # One application of the update computation per update element.
            upd = operands[-1] if operands else None
            if upd is None or not upd.is_static:
                return None
            return int(attrs.get("body_flops", 0)) * upd.num_elements  # type: ignore[operator]
        return 0
    if not all(t.is_static for t in (*operands, *results)):
        return None
    if short in _FLOP_PER_ELEMENT:
        return sum(r.num_elements for r in results[:1])  # type: ignore[misc]
    if short in _TRANSCENDENTAL:
        return 0
    if short in ("dot_general", "dot"):
        lhs = operands[0].shape
        contracting = attrs.get("lhs_contracting_dims", (len(lhs) - 1,) if lhs else ())
        width = math.prod(lhs[d] for d in contracting)  # type: ignore[index,misc]
        return 2 * results[0].num_elements * width  # type: ignore[operator]
    if short == "convolution":
        return _conv_flops(operands, results, attrs)
    if short == "sort":
        # XLA assumes a comparison sort: N * ceil(log2 N) over the first operand.
        n = operands[0].num_elements
        return n * (n - 1).bit_length() if n else 0  # type: ignore[operator]
    if short == "reduce":
        n_in = operands[0].num_elements
        n_out = results[0].num_elements
        return int(attrs.get("body_flops", 0)) * (n_in - n_out)  # type: ignore[operator]
    if short == "reduce_window":
        window = math.prod(attrs.get("window_dimensions", (1,)))
        return int(attrs.get("body_flops", 0)) * (window - 1) * results[0].num_elements  # type: ignore[operator]
    if short == "select_and_scatter":
        src = operands[1].num_elements
        window = math.prod(attrs.get("window_dimensions", (1,)))
        sel, sca = int(attrs.get("body_flops", 0)), int(attrs.get("scatter_body_flops", 0))
        return src * ((window - 1) * sel + sca)  # type: ignore[operator]
    return 0


def count_transcendentals(name: str, results: Sequence[TensorType]) -> int | None:
    """Transcendental evaluations (XLA counts them apart from flops)."""
    if name.split(".", 1)[-1] not in _TRANSCENDENTAL or not results:
        return 0
    return results[0].num_elements


HALF_FLOATS = frozenset({"bf16", "f16"})
"""The 16-bit float types XLA:CPU widens to f32 to compute on: elementwise work in a loop or
a YNNPACK fusion (rounding back after each op) and the operands of a dot."""

READS_WHAT_IT_RETURNS = frozenset({"slice", "dynamic_slice"})
"""Ops that read only the elements they return (their bytes and their models' tensor)."""
READS_PART = READS_WHAT_IT_RETURNS | {"gather"}
"""Ops that read only the part of their first operand they return: a fused kernel that
slices or gathers an input moves those bytes, not the input. (A gather's bytes still count
its whole table, as XLA's cost analysis does.)"""


def count_bytes(
    operands: Sequence[TensorType], results: Sequence[TensorType], name: str = ""
) -> int | None:
    """Logical bytes read plus written: every operand once, every result once; a slice reads
    only the elements it returns (as XLA's cost analysis counts it: 2 x result, plus a
    dynamic slice's start indices)."""
    if name.split(".", 1)[-1] in READS_WHAT_IT_RETURNS and operands and results:
        operands = (results[0], *operands[1:])
    sizes = [t.nbytes for t in (*operands, *results)]
    if any(s is None for s in sizes):
        return None
    return sum(sizes)  # type: ignore[arg-type]


def conv_valid_positions(
    in_size: int,
    kernel: int,
    out_size: int,
    stride: int = 1,
    pad_low: int = 0,
    lhs_dilation: int = 1,
    rhs_dilation: int = 1,
) -> int:
    """Number of (output, kernel tap) pairs in one spatial dim that read a real input element.

    Padding and the holes of lhs (base) dilation contribute no multiply-adds,
    which is how XLA counts convolution FLOPs.
    """
    total = 0
    for k in range(kernel):
        # Output o reads dilated-input index u = o*stride - pad_low + k*rhs_dilation,
        # which is real when u is a multiple of lhs_dilation inside [0, (in-1)*lhs_dilation].
        base = k * rhs_dilation - pad_low
        hi = (in_size - 1) * lhs_dilation
        o_lo = max(0, -(base // stride))  # smallest o with o*stride + base >= 0
        o_hi = min(out_size - 1, (hi - base) // stride) if hi - base >= 0 else -1
        if o_hi < o_lo:
            continue
        if lhs_dilation == 1:
            total += o_hi - o_lo + 1
            continue
        # Count o in [o_lo, o_hi] with (o*stride + base) % lhs_dilation == 0.
        g = math.gcd(stride, lhs_dilation)
        if base % g:
            continue
        period = lhs_dilation // g
        first = next(
            (o for o in range(o_lo, min(o_hi, o_lo + period - 1) + 1)
             if (o * stride + base) % lhs_dilation == 0),
            None,
        )  # fmt: skip
        if first is not None:
            total += (o_hi - first) // period + 1
    return total


def _conv_flops(
    operands: Sequence[TensorType], results: Sequence[TensorType], attrs: Mapping[str, Any]
) -> int:
    lhs, rhs, out = operands[0].shape, operands[1].shape, results[0].shape
    assert lhs is not None and rhs is not None and out is not None
    in_sp = attrs["input_spatial_dims"]
    k_sp = attrs["kernel_spatial_dims"]
    out_sp = attrs["output_spatial_dims"]
    n = len(in_sp)
    strides = attrs.get("window_strides") or (1,) * n
    padding = attrs.get("padding") or ((0, 0),) * n
    lhs_dil = attrs.get("lhs_dilation") or (1,) * n
    rhs_dil = attrs.get("rhs_dilation") or (1,) * n
    positions = 1
    for i in range(n):
        positions *= conv_valid_positions(
            lhs[in_sp[i]], rhs[k_sp[i]], out[out_sp[i]],
            strides[i], padding[i][0], lhs_dil[i], rhs_dil[i],
        )  # fmt: skip
    in_features = lhs[attrs["input_feature_dim"]]
    out_features = out[attrs["output_feature_dim"]]
    batch = lhs[attrs["input_batch_dim"]]
    fgc = int(attrs.get("feature_group_count", 1))
    bgc = int(attrs.get("batch_group_count", 1))
    return 2 * (in_features // fgc) * out_features * (batch // bgc) * positions  # type: ignore[operator]


def transpose_read_stride_bytes(
    shape: Sequence[int], perm: Sequence[int], elem_bytes: float
) -> float:
    """Bytes between the input elements a transpose reads for neighbours along its result's
    minor axis (unit dims aside): the input's stride along the dim that becomes minor."""
    kept = [d for d in perm if shape[d] != 1]
    if not kept:
        return float(elem_bytes)
    return float(math.prod(shape[kept[-1] + 1 :]) * elem_bytes)


def moves_minor_axis(op: OpInfo) -> bool:
    """Whether a transpose changes which input dim is minor in memory (unit dims aside):
    if not, it copies contiguous rows (64x256x128 -> 256x64x128) or is a reshape."""
    shape = op.operands[0].shape if op.operands else None
    perm = op.attrs.get("permutation")
    if not shape or perm is None:
        return True
    kept = [d for d in perm if shape[d] != 1]
    return bool(kept) and kept[-1] != max(d for d in range(len(shape)) if shape[d] != 1)
