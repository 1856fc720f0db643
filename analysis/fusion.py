"""Fusion: group one block's ops into the kernels XLA would launch for a target.

Mirrors XLA's producer→consumer instruction fusion, visiting ops from last to
first so every consumer's group exists before its producers are considered.
Rules for all targets ("cpu" measured on XLA:CPU, jax 0.10.2, see
benchmarks/fusion_vs_xla.py; "gpu"/"tpu" from XLA's GPU priority fusion,
cuBLASLt/Triton epilogues and TPU output fusion, not measured here):

- elementwise, convert, broadcast, reshape, transpose, slice, concatenate,
  pad, iota, gather and dynamic-slice ops are *loop-fusible*: they join
  their consumers' group (loop fusion); reduce-window too, except on cpu;
- a reduce roots an *input fusion* that takes its loop-fusible producers,
  and fuses into a consumer that reads each of its elements once (XLA:CPU's
  `reduce_divide_fusion`; GPU reduction epilogues, one reduce per group);
- an *expensive* producer (float divide or transcendental, reduce: XLA's
  `IsExpensive`) never joins a group that re-reads its elements through a
  broadcast that replicates or a gather (`ReusesOperandElements`), and is
  never duplicated; a divide by a constant counts as the cheap multiply
  XLA's simplifier makes of it;
- a producer whose consumers sit in several groups is *duplicated* into all
  of them when it is cheap and every group accepts it; a cheap producer that
  reads no more bytes than it writes (a broadcast), or that only YNNPACK
  fusions refuse (XLA fused it everywhere before it outlined those), is copied
  into the groups that accept it and keeps its own kernel for the rest
  (`ComputeGloballyUnfusible`); otherwise it keeps its own kernel. Its
  primary group is its first consumer's; `FusionPlan.copies` lists the rest;
- identical loop-fusible ops on the same operands are merged first (XLA's
  CSE: JAX emits `x - mean` twice in a layer norm);
- a transpose read only by dots (batch dims fixed), or of a matrix product
  read only by it, is folded into the dot (XLA's TransposeFolding and
  simplifier): no kernel;
- dot_general/convolution: on cpu a library call of its own (`ynn_fusion` /
  `convolution`, epilogue in a separate loop fusion); on gpu and tpu it joins
  an elementwise-only consumer group as its epilogue (gpu: at most
  `_GPU_EPILOGUE_MAX_OPS` ops) and takes single-use convert / transpose /
  reshape / broadcast operand producers;
- while/if/case/call, sort, scatter, custom calls and unknown ops are opaque:
  a group of their own, fused with nothing;
- constants join every consumer's group; a group of only constants,
  reshapes, no-op broadcasts and tuple plumbing launches nothing ("free").

XLA:CPU specifics (extra kernels in `FusionPlan.launches`): float reductions of 4096+
elements go to YNNPACK (take the elementwise producers, of no f16 value, all of whose
readers they hold and a YNNPACK dot producing their input; an f32 one also takes `op(x,
broadcast(reduce(x)))` and the single-use elementwise ops after it: a softmax head is
one kernel; a reduce of 4096+ results takes the ops on them too, and fusions holding all
readers of a value merge: a softmax, a layer norm, a batched attention is one kernel; a
reduce of its result alone by the same computation merges into it); others with a
reduced dimension over 32 are split by the TreeReductionRewriter into a reduce-window
kernel (which fuses nothing) and a reduce; a divide by a broadcast YNN reduce (or its
convert) gets a reciprocal kernel; a convolution outside NHWC/HWIO layout gets a
transpose per operand and result; bf16/f16 dots run in f32 with a convert kernel per
operand no fusion absorbs, and so does a bf16 input that a sum of under 4096 results
reads converted and a bf16 elementwise op reads too. `while_init_copies` counts the
copies of read-only while inputs that XLA's copy insertion adds.

Linear in ops + edges: a duplicated producer visits at most `MAX_COPIES`
groups.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from stablehlo_perf.analysis.opinfo import (
    HALF_FLOATS,
    MERGED_INDUCTION,
    PASSES_THROUGH,
    READS_PART,
    READS_WHAT_IT_RETURNS,
    WRITTEN_AS,
    OpInfo,
    TensorType,
)
from stablehlo_perf.analysis.scans import RewrittenScan, rewritten_scan

__all__ = [
    "ELEMENTWISE_CLASSES",
    "INDEX_MOVES",
    "KINDS",
    "FusionPlan",
    "GroupTraffic",
    "cpu_conv_layout_copies",
    "cpu_reduce_mode",
    "elemental_gathers",
    "f16_vectorised_ops",
    "fuse_block",
    "gathered_scales",
    "group_deps",
    "group_traffic",
    "library_reduce",
    "loop_body_copies",
    "one_read_ops",
    "plan_fusion",
    "reduces_unit_dims",
    "runs_on_eigen",
    "scatter_positions",
    "while_init_copies",
    "ynn_convolution",
    "ynn_pools",
    "ynn_reduce_window",
    "ynn_reduces",
]

KINDS = ("tpu", "gpu", "cpu")
MAX_COPIES = 8
"""Most groups a cheap producer is duplicated into before it keeps its own kernel."""

_LOOP_MOVEMENT = frozenset(
    {
        "broadcast_in_dim", "broadcast", "reshape", "transpose", "concatenate", "slice", "pad",
        "reverse", "iota", "dynamic_slice", "dynamic_update_slice", "gather", "copy", "bitcast",
        "dynamic_broadcast_in_dim", "dynamic_reshape", "dynamic_iota", "dynamic_pad",
        "dynamic_gather", "real_dynamic_slice",
    }
)  # fmt: skip
ELEMENTWISE_CLASSES = frozenset({"binary", "compare_select", "transcendental", "unary", "convert"})
# Moves a fused loop does by index arithmetic alone: no compute of their own in a CPU
# group (a broadcast priced by the copy data would add the read of a whole tensor it never
# reads: 316 us for each scalar broadcast of 2048x1024 f32 clipped and rounded).
INDEX_MOVES = frozenset({"broadcast_in_dim", "broadcast", "reshape", "iota"})
_PER_ELEMENT_MOVES = INDEX_MOVES | {"transpose"}
# A sharding constraint (jax.random's key, `sdy.sharding_constraint`) moves nothing on one
# device: no kernel of XLA:CPU's (jax 0.10.2).
_FREE_ALONE = frozenset(
    {
        "constant", "reshape", "bitcast", "get_tuple_element", "tuple", "optimization_barrier",
        "sharding_constraint",
    }
)  # fmt: skip
_REUSING = frozenset({"broadcast_in_dim", "broadcast", "dynamic_broadcast_in_dim", "gather"})
_EXPENSIVE_ELEMENTWISE = frozenset({"divide", "remainder"})
_DOT_OPERAND_PRODUCERS = frozenset(
    {"convert", "transpose", "reshape", "broadcast_in_dim", "bitcast_convert", "copy"}
)
_GPU_EPILOGUE_MAX_OPS = 8
"""Largest elementwise epilogue (non-free ops) a GPU dot absorbs (cuBLASLt bias+activation, Triton)."""
_BROADCASTS = frozenset({"broadcast_in_dim", "broadcast", "reshape"})
_YNN_ELEMENTWISE = frozenset(
    {
        "add", "subtract", "multiply", "divide", "maximum", "minimum", "power", "negate", "abs",
        "sign", "floor", "ceil", "round_nearest_even", "round_nearest_afz", "sqrt", "rsqrt",
        "exponential", "exponential_minus_one", "log", "log_plus_one", "tanh", "logistic",
        "erf", "convert", "square",
    }
)  # fmt: skip
"""Elementwise ops XLA:CPU's YNNPACK fusion takes into a reduce's kernel (jax 0.10.2:
`op(x).sum(0)` on 1024x512 f32 is one `ynn_fusion`). Sine, cosine, tan, cbrt, atan2,
remainder, clamp (also the one XLA's simplifier makes of a maximum and a minimum with constant
bounds: `clip(x, -1, 1).sum(0)`), is_finite, compare and select are not: each ends the fusion,
a loop kernel of its own with what it reads (`where(x > 0, x * y, y - x).sum(0)`:
subtract_select_fusion then ynn_fusion; softplus, leaky_relu and elu sums likewise)."""


@dataclass(frozen=True)
class FusionPlan:
    """One block's fusion: a primary group per op, each group's kind and root, and duplicates.

    `copies[i]` lists the other groups that recompute op i (a duplicated
    cheap producer); `kinds[g]` is "loop", "input" (holds a reduce), "output"
    (holds a dot/convolution with fused ops), "opaque" (one unfusible op) or
    "free" (launches no kernel); `launches[g]` counts its kernels (0 when
    free; XLA:CPU adds a reduce-window kernel for a tree reduction and
    transposes around a non-NHWC convolution); `same_as[i]` is the earlier
    identical op that CSE merged op i into (same group, computed once); `ynn` holds the
    groups XLA:CPU runs as one YNNPACK fusion around a reduce.
    """

    groups: list[int]
    kinds: list[str]
    roots: list[int]
    launches: list[int]
    copies: dict[int, tuple[int, ...]] = field(default_factory=dict)
    same_as: dict[int, int] = field(default_factory=dict)
    ynn: frozenset[int] = frozenset()

    @property
    def num_groups(self) -> int:
        return len(self.kinds)

    @property
    def num_kernels(self) -> int:
        """Kernels launched: one per non-free group, plus XLA:CPU's extra ones (see `launches`)."""
        return sum(self.launches)

    def members(self) -> list[list[int]]:
        """Ops computed by each group, in program order: its own ops plus the copies it recomputes."""
        out: list[list[int]] = [[] for _ in self.kinds]
        for i, g in enumerate(self.groups):
            out[g].append(i)
        for i, gs in self.copies.items():
            for g in gs:
                out[g].append(i)
        for m in out:
            m.sort()
        return out


@dataclass(frozen=True)
class GroupTraffic:
    """What one fused group moves and computes: external inputs once, outputs once; and
    the members a fused gather evaluates at its positions only, with their share of their
    elements (`gathered_scales`, by block-local index)."""

    input_bytes: int
    output_bytes: int
    flops: int
    gathered: Mapping[int, float] = field(default_factory=dict)
    # The inputs' bytes as XLA's HLO cost analysis counts a fusion's parameters (what its
    # parallel task assignment weighs: `host_params.parallel_tasks`): in full, but for a
    # slice's or dynamic slice's part and an in-place update's update. A gather or the
    # members it evaluates at its positions count their inputs in full: XLA:CPU split
    # softmax cross-entropy's take_along_axis kernel (reading 256 of a 256x1000 f32
    # operand) over two threads, where 128 rows (500 KiB) it did not (jax 0.10.2).
    cost_input_bytes: int = 0


@dataclass
class _Group:
    """A group being built: its first-created op and what decides what it accepts."""

    root: int
    has_matmul: bool = False
    has_reduce: bool = False
    opaque: bool = False
    work_ops: int = 0
    only_elementwise: bool = True
    extra: int = 0
    ynn: bool = False
    window: bool = False  # holds, or its root ends, a YNN reduce_window's fusion


_SHORT: dict[str, str] = {}
_ELEMENTWISE: dict[str, bool] = {}


def _short(op: OpInfo) -> str:
    """Op name without dialect, memoised by name (this runs a dozen times per op)."""
    s = _SHORT.get(op.name)
    if s is None:
        s = _SHORT[op.name] = op.short_name
    return s


def _is_elementwise(op: OpInfo) -> bool:
    e = _ELEMENTWISE.get(op.name)
    if e is None:
        e = _ELEMENTWISE[op.name] = op.op_class in ELEMENTWISE_CLASSES
    return e


def _is_loop_fusible(op: OpInfo, kind: str) -> bool:
    s = _short(op)
    if kind == "cpu" and s == "concatenate" and cpu_concatenates_alone(op):
        return False
    if s in _LOOP_MOVEMENT or _is_elementwise(op):
        return True
    return s == "reduce_window" and kind != "cpu"


CONCATENATE_MAX_FUSED_INPUTS = 8
"""XLA:CPU fuses no concatenate of more inputs than this (nine 64x4 f32 add kernels and
their concatenate: 10 kernels, eight: one)."""
CONCATENATE_ALONE_ROW = 128
"""XLA:CPU fuses no concatenate along the minor dimension whose result's rows are this many
elements or more (`cpu_concatenates_alone`)."""


def cpu_concatenates_alone(op: OpInfo) -> bool:
    """Whether XLA:CPU runs a concatenate as a kernel of its own that fuses nothing (its
    fusion rules, jax 0.10.2): one of more than `CONCATENATE_MAX_FUSED_INPUTS` inputs, or
    one along the minor dimension of a matrix or higher whose result's rows are
    `CONCATENATE_ALONE_ROW` elements or longer (a copy loop beats the branches a fused
    kernel's inner loop would take): `concatenate([a + b, a * b], -1)` of 64x64 f32, f16 or
    bf16 halves is three kernels (with bf16's converts, four), of 64x63 one, as is one
    along the leading axis; of nine 64x4 inputs, ten."""
    if len(op.operands) > CONCATENATE_MAX_FUSED_INPUTS:
        return True
    out = op.results[0] if op.results else None
    if out is None or out.shape is None or len(out.shape) <= 1:
        return False
    dim = op.attrs.get("dimension")
    return dim == len(out.shape) - 1 and out.shape[dim] >= CONCATENATE_ALONE_ROW


YNN_REDUCE_MIN_ELEMENTS = 4096
"""XLA:CPU (jax 0.10.2) hands float reductions of at least this many input elements to YNNPACK."""
TREE_REDUCE_WINDOW = 32
"""XLA's TreeReductionRewriter splits a reduced dimension longer than this into a reduce-window."""


def ynn_reduces(element_type: str, elements: int | None) -> bool:
    """Whether XLA:CPU hands a reduce of `elements` input elements of this type to YNNPACK."""
    return (
        element_type in ("f32", "bf16", "f16")
        and elements is not None
        and elements >= YNN_REDUCE_MIN_ELEMENTS
    )


def cpu_reduce_mode(op: OpInfo) -> str:
    """How XLA:CPU emits a reduce (measured with jax 0.10.2).

    "ynn": a YNNPACK custom fusion that takes single-use elementwise producers
    but fuses into no consumer; "tree": a reduce-window kernel (which fuses
    nothing) then a reduce that fuses into its consumers, two launches;
    "loop": an ordinary loop fusion root that also fuses into consumers, as every variadic
    reduce is (argmax and argmin over 1000 of 512x1000 f32 or i32, over the middle axis of
    16x1000x32: one `reduce` kernel each, its iota inside).
    """
    if len(op.operands) > 2:
        return "loop"
    src = op.operands[0] if op.operands else None
    if src is not None and ynn_reduces(src.element_type, src.num_elements):
        return "ynn"
    dims = op.attrs.get("dimensions") or ()
    shape = src.shape if src is not None else None
    if shape and any((shape[d] or 0) > TREE_REDUCE_WINDOW for d in dims if d < len(shape)):
        return "tree"
    return "loop"


def library_reduce(op: OpInfo) -> bool:
    """Whether op is a one-input reduce or reduce_window XLA:CPU hands to YNNPACK (a library
    call: `cpu_reduce_mode`, `ynn_reduce_window`)."""
    if op.short_name == "reduce_window":
        return ynn_reduce_window(op)
    return op.short_name == "reduce" and len(op.operands) == 2 and cpu_reduce_mode(op) == "ynn"


_YNN_WINDOW_TYPES = {"add": ("f32", "f64"), "maximum": ("f32", "f64", "bf16", "f16", "i8", "ui8")}
_YNN_WINDOW_TYPES["minimum"] = _YNN_WINDOW_TYPES["maximum"]


def ynn_reduce_window(op: OpInfo) -> bool:
    """Whether XLA:CPU hands this reduce_window to YNNPACK (`ynn_pools`, from its one input,
    reducer, window, strides and dilations)."""
    if op.short_name != "reduce_window" or len(op.operands) != 2 or not op.results:
        return False
    x = op.operands[0]
    rank = len(x.shape or ())
    a = op.attrs
    return ynn_pools(
        x.element_type,
        a.get("reducer", ""),
        a.get("window_dimensions") or (1,) * rank,
        a.get("window_strides") or (1,) * rank,
        x.num_elements,
        any(d != 1 for k in ("base_dilations", "window_dilations") for d in a.get(k) or ()),
    )


def ynn_pools(
    element_type: str,
    reducer: str,
    window: Sequence[int],
    strides: Sequence[int],
    elements: int | None,
    dilated: bool = False,
) -> bool:
    """Whether XLA:CPU hands a reduce_window of this input type and size, `reducer` (the
    combining op's short name) and window to YNNPACK (jax 0.10.2): a sum (of f32 or f64), max
    or min, windows that do not overlap (every window dimension larger than 1 strides by its
    size) with no dilation, padding allowed, and at least `YNN_REDUCE_MIN_ELEMENTS` input
    elements. A 2x2/2 max pool of 1x16x16x16 f32 (4096 elements) is a `ynn_fusion`, of
    1x16x16x8 a `wrapped_reduce-window`, as are 3x3/2 and 2x2/1 pools, a product window and
    cumsum's scan; a SAME-padded 2x2/2 pool of an odd side is YNNPACK's."""
    if element_type not in _YNN_WINDOW_TYPES.get(reducer, ()):
        return False
    reduces = any(w > 1 or s > 1 for w, s in zip(window, strides, strict=False))
    overlaps = any(w > 1 and s != w for w, s in zip(window, strides, strict=False))
    return reduces and not overlaps and not dilated and (elements or 0) >= YNN_REDUCE_MIN_ELEMENTS


YNN_CONV_MIN_FEATURES = 17
"""XLA:CPU (jax 0.10.2) runs a convolution with fewer input and output features than this
on its own (Eigen) convolution, not YNNPACK: 3x3 convolutions of 1x16x16 images with 3 or
16 input features and 8 or 16 output features compile to a `convolution` thunk, with 24 or
more output features (or 32 input features, any output) to a `ynn_fusion`."""


def ynn_convolution(op: OpInfo) -> bool:
    """Whether XLA:CPU hands this convolution to YNNPACK (jax 0.10.2): two spatial
    dimensions, f32 (or f64), no input dilation, one batch group, and at least
    `YNN_CONV_MIN_FEATURES` input or output features. The rest run on Eigen: a kernel of
    their own that fuses with nothing."""
    if op.short_name != "convolution" or len(op.operands) != 2 or not op.results:
        return False
    lhs, rhs, out = op.operands[0], op.operands[1], op.results[0]
    if not lhs.shape or not out.shape or lhs.element_type not in ("f32", "f64"):
        return False
    if rhs.element_type != lhs.element_type or out.element_type != lhs.element_type:
        return False
    a = op.attrs
    if len(lhs.shape) != 4 or int(a.get("batch_group_count", 1) or 1) != 1:
        return False
    if any(d != 1 for d in a.get("lhs_dilation") or ()):
        return False
    cin = lhs.shape[a.get("input_feature_dim", len(lhs.shape) - 1)]
    cout = out.shape[a.get("output_feature_dim", len(out.shape) - 1)]
    return max(cin or 0, cout or 0) >= YNN_CONV_MIN_FEATURES


def runs_on_eigen(op: OpInfo, lhs_permutation: Sequence[int] | None = None) -> bool:
    """Whether XLA:CPU runs this dot_general as an Eigen contraction rather than a YNNPACK
    call: its lhs does not contract over its last dimension (jax 0.10.2's compiled HLO
    keeps such a dot a plain `dot` thunk: x^T @ g, the weight gradients of a dense layer).
    Unlike a YNNPACK dot, one large enough hands its work to the pool (`eigen_uses_pool`),
    and a call pays for waking it (single dots of 128x128x128 f32 on the Xeon VM: 52-130 us
    beyond their in-loop time, 2026-12-02). `lhs_permutation` is that of a transpose
    producing the lhs: XLA folds it into the dot (`x.T @ g` compiles to the same `dot`
    thunk as a dot_general contracting x over its first dimension)."""
    if op.short_name != "dot_general" or not op.operands or op.operands[0].shape is None:
        return False
    rank = len(op.operands[0].shape)
    contracting = tuple(op.attrs.get("lhs_contracting_dims", (rank - 1,)))
    if lhs_permutation is not None and len(lhs_permutation) == rank:
        contracting = tuple(lhs_permutation[d] for d in contracting)
    return rank - 1 not in contracting


def _is_reduce(op: OpInfo) -> bool:
    return _short(op) == "reduce"


def cpu_conv_layout_copies(op: OpInfo) -> list[TensorType]:
    """The tensors XLA:CPU transposes around a convolution not in NHWC/HWIO/NHWC layout (its
    input, kernel or result, each where not in that layout): a copy kernel and buffer each."""
    a = op.attrs
    if _short(op) != "convolution" or "input_feature_dim" not in a or not op.results:
        return []
    rank = len(op.operands[0].shape or ())
    moved = (
        a["input_feature_dim"] != rank - 1,
        a["kernel_output_feature_dim"] != rank - 1 or a["kernel_input_feature_dim"] != rank - 2,
        a["output_feature_dim"] != rank - 1,
    )
    tensors = (op.operands[0], op.operands[1], op.results[0])
    return [t for t, m in zip(tensors, moved, strict=True) if m]


def _grows(op: OpInfo) -> bool:
    """More result elements than operand elements (a broadcast that really replicates)."""
    if not op.operands or not op.results:
        return True
    n_in, n_out = op.operands[0].num_elements, op.results[0].num_elements
    return n_in is None or n_out is None or n_out > n_in


def _is_noop(op: OpInfo) -> bool:
    """A broadcast or convert that returns its operand unchanged, or a binary op with its
    identity splat (`passes_through`, `x + 0`): XLA's simplifier drops it."""
    if PASSES_THROUGH in op.attrs:
        return True
    return (
        _short(op) in ("broadcast_in_dim", "broadcast", "convert", "reshape", "transpose")
        and len(op.operands) == 1
        and op.operands[0] == op.results[0]
        and (
            _short(op) != "transpose"
            or tuple(op.attrs.get("permutation", ()))
            == tuple(range(len(op.results[0].shape or ())))
        )
    )


def reduces_unit_dims(op: OpInfo) -> bool:
    """A one-input reduce over dimensions of size 1 only: XLA's simplifier makes it a
    bitcast (jax's gradient of a broadcast bias sums its 1x256 reshape over the unit
    dimension: no kernel of XLA:CPU's, jax 0.10.2)."""
    if _short(op) != "reduce" or len(op.operands) != 2 or not op.operands[0].shape:
        return False
    shape = op.operands[0].shape
    dims = op.attrs.get("dimensions") or ()
    return bool(dims) and all(d < len(shape) and shape[d] == 1 for d in dims)


def _is_matmul(op: OpInfo) -> bool:
    return op.op_class == "matmul"


def _is_constant(op: OpInfo) -> bool:
    return _short(op) == "constant"


# What XLA's constant folding leaves alone though its operands are constants: broadcasts
# and iotas (they would make large constants of small ones), random bits, and ops with
# effects or regions of their own.
_NOT_FOLDED = frozenset(
    {"broadcast_in_dim", "broadcast", "iota", "rng", "rng_bit_generator", "custom_call",
     "while", "if", "case", "call", "infeed", "recv", "after_all", "create_token"}
)  # fmt: skip


def _constant_folded(ops: Sequence[OpInfo], srcs: Sequence[Sequence[int | None]]) -> set[int]:
    """Ops XLA's constant folding computes at compile time: every operand a constant or an op
    it folded (jax.random.truncated_normal's bounds, erf of a constant scalar, and nextafter
    of its limits: no kernel of XLA:CPU's, jax 0.10.2)."""
    known: set[int] = set()
    folded: set[int] = set()
    for i, op in enumerate(ops):
        s = _short(op)
        if s == "constant":
            known.add(i)
        elif (
            s not in _NOT_FOLDED
            and srcs[i]
            and all(x is not None and x >= 0 and x in known for x in srcs[i])
        ):
            known.add(i)
            folded.add(i)
        elif s == "convert" and _constant_fed(i, ops, srcs):
            folded.add(i)  # of a broadcast constant (a pad's zero, an integer from `jnp.pad`)
    return folded


def _constant_fed(j: int, ops: Sequence[OpInfo], deps: Sequence[Sequence[int | None]]) -> bool:
    """Op j is a constant or a broadcast/reshape/convert of one (a splat XLA folds); `deps`
    (or operand sources: None or negative for values from outside) lead to producers."""
    for _ in range(8):
        op = ops[j]
        if _is_constant(op):
            return True
        if _short(op) not in ("broadcast_in_dim", "broadcast", "reshape", "convert") or not deps[j]:
            return False
        first = deps[j][0]
        if first is None or first < 0:
            return False
        j = first
    return False


def _is_expensive(
    i: int, ops: Sequence[OpInfo], deps: Sequence[Sequence[int]], srcs: Sequence[int | None]
) -> bool:
    """XLA's IsExpensive: divide or remainder by a non-constant, float transcendental, reduce,
    reduce_window, dot, conv (not a reduce over unit dimensions, which XLA's simplifier has
    made a bitcast)."""
    op = ops[i]
    s = _short(op)
    if (s in ("reduce", "reduce_window") and not reduces_unit_dims(op)) or _is_matmul(op):
        return True
    floating = op.element_type.startswith(("f", "bf", "complex"))
    if s in _EXPENSIVE_ELEMENTWISE:  # by a constant: shifts and multiplies (a reciprocal's)
        divisor = srcs[1] if len(srcs) > 1 else None
        return not (divisor is not None and divisor >= 0 and _constant_fed(divisor, ops, deps))
    return op.op_class == "transcendental" and floating


def _sources(
    ops: Sequence[OpInfo],
    deps: Sequence[Sequence[int]],
    operand_sources: Sequence[Sequence[int | None]] | None,
) -> list[list[int | None]]:
    """Producer per operand; without `operand_sources`, deps are matched to operands by type."""
    if operand_sources is not None:
        return [list(s) for s in operand_sources]
    out: list[list[int | None]] = []
    for i, op in enumerate(ops):
        d = list(deps[i])
        if len(d) == len(op.operands):
            out.append(list(d))
            continue
        srcs: list[int | None] = [None] * len(op.operands)
        free = [k for k in range(len(op.operands))]
        for j in d:
            for k in free:
                if op.operands[k] in ops[j].results:
                    srcs[k] = j
                    free.remove(k)
                    break
        out.append(srcs)
    return out


def _cse(ops: Sequence[OpInfo], srcs: list[list[int | None]]) -> list[int]:
    """Representative per op after XLA-style CSE of identical loop-fusible ops, reduces and
    reduce_windows (JAX repeats e.g. `x - mean` in layer norm, and `x.var()` sums x again
    for its own mean beside `x.mean()`; XLA computes each once). A reduce's init is a
    scalar constant of its own: the same value counts as the same operand there (not
    elsewhere: XLA copies a constant into each fusion, where one merged broadcast would tie
    two GELUs together)."""
    rep = list(range(len(ops)))
    seen: dict[tuple, int] = {}

    def source(x: int, reduce: bool) -> object:
        while reduce and x >= 0 and _is_noop(ops[x]):  # an init broadcast to its own shape
            k = ops[x].attrs.get(PASSES_THROUGH, 0)  # (jnp.cumsum's)
            if k >= len(srcs[x]) or srcs[x][k] is None:
                break
            x = srcs[x][k]  # type: ignore[assignment]
        if reduce and x >= 0 and _short(ops[x]) == "constant" and "scalar" in ops[x].attrs:
            return ("constant", ops[x].results, ops[x].attrs["scalar"])
        return rep[x] if x >= 0 else x

    for i, op in enumerate(ops):
        s = _short(op)
        if s in ("constant", "iota"):
            continue
        reduces = s in ("reduce", "reduce_window")
        if not (reduces or _is_elementwise(op) or s in _LOOP_MOVEMENT):
            continue
        if any(x is None for x in srcs[i]):
            continue
        key = (
            op.name,
            tuple(source(x, reduces) for x in srcs[i]),  # type: ignore[arg-type]
            op.results,
            repr(sorted(op.attrs.items())) if op.attrs else "",
        )
        rep[i] = seen.setdefault(key, i)
    return rep


@dataclass(frozen=True)
class _Facts:
    """What fusion asks about one op, computed once per op."""

    short: str
    loop: bool
    reduce: bool
    matmul: bool
    constant: bool
    elementwise: bool
    free: bool
    reusing: bool
    reduce_mode: str
    scan: RewrittenScan | None = None  # a scan XLA:CPU splits into levels

    @property
    def pointwise(self) -> bool:
        """Elementwise, free or a broadcast: what a group of elementwise ops may hold."""
        return self.elementwise or self.free or self.short in ("broadcast_in_dim", "broadcast")

    @classmethod
    def of(cls, op: OpInfo, kind: str) -> _Facts:
        """Facts of op, shared between ops of one name unless they depend on shapes."""
        key = (
            op.name,
            kind,
            PASSES_THROUGH in op.attrs,
            MERGED_INDUCTION in op.attrs,
            WRITTEN_AS in op.attrs,
        )
        found = _FACTS.get(key)
        if found is not None:
            return found
        facts = cls._compute(op, kind)
        if facts.short not in _SHAPE_DEPENDENT:
            _FACTS[key] = facts
        return facts

    @classmethod
    def _compute(cls, op: OpInfo, kind: str) -> _Facts:
        s = _short(op)
        window = kind == "cpu" and s == "reduce_window" and ynn_reduce_window(op)
        unit = reduces_unit_dims(op)
        reduce = (s == "reduce" and not unit) or window
        scan = rewritten_scan(op) if kind == "cpu" and s == "reduce_window" and not window else None
        return cls(
            short=s,
            loop=_is_loop_fusible(op, kind) or unit or scan is not None,
            reduce=reduce,
            matmul=_is_matmul(op),
            constant=s == "constant",
            elementwise=_is_elementwise(op),
            free=s in _FREE_ALONE or _is_noop(op) or unit or MERGED_INDUCTION in op.attrs,
            # An outer product (a dot XLA makes a multiply: `opinfo.WRITTEN_AS`) reads each
            # operand element once per element of the other operand.
            reusing=(s in _REUSING and _grows(op)) or WRITTEN_AS in op.attrs,
            reduce_mode=_reduce_mode(op, kind, reduce, window),
            scan=scan,
        )


def _reduce_mode(op: OpInfo, kind: str, reduce: bool, window: bool) -> str:
    """A reduce's `cpu_reduce_mode` on a CPU ("ynn" for a YNNPACK pool), "" elsewhere."""
    if window:
        return "ynn"
    return cpu_reduce_mode(op) if reduce and kind == "cpu" else ""


_FACTS: dict[tuple[str, str, bool, bool], _Facts] = {}
_SHAPE_DEPENDENT = frozenset(
    {
        "broadcast_in_dim", "broadcast", "convert", "reshape", "transpose", "reduce",
        "reduce_window", "concatenate",
    }
)  # fmt: skip


class _State:
    """Working state of one `plan_fusion` run."""

    def __init__(
        self,
        ops: Sequence[OpInfo],
        deps: Sequence[Sequence[int]],
        srcs: list[list[int | None]],
        kind: str,
        users: list[list[int]],
    ) -> None:
        self.ops, self.deps, self.srcs, self.kind, self.users = ops, deps, srcs, kind, users
        self.facts = [_Facts.of(op, kind) for op in ops]
        self.folded = {
            i
            for i, f in enumerate(self.facts)
            if (f.short == "transpose" and self._folds(i))
            or (f.short == "pad" and self._pads_convolutions(i))
        }
        self.computed_constants = _constant_folded(ops, srcs)
        self.group_of = [-1] * len(ops)
        # The readers of each value from outside the block, by its (negative) source id:
        # `users` holds those of the block's own ops.
        self.input_readers: dict[int, list[int]] = defaultdict(list)
        for j, row in enumerate(srcs):
            for src in dict.fromkeys(row):
                if src is not None and src < 0:
                    self.input_readers[src].append(j)
        self.copies: dict[int, list[int]] = {}
        # reused[(op, group)]: some element of op's result is read more than once in group.
        self.reused: dict[tuple[int, int], bool] = {}
        self.groups: list[_Group] = []
        self.reciprocals: set[int] = set()  # divides counted with a reciprocal kernel
        self.head_tails: dict[int, int] = {}  # YNN reduce -> last op of the fusion it heads
        self.chain_tails: set[int] = set()  # tails `_ynn_chain` found: what lies between joins
        if kind == "cpu":
            for i in range(len(ops)):
                found = self._ynn_head_tail(i)
                if found is not None:
                    self.head_tails[i], chained = found
                    if chained:
                        self.chain_tails.add(found[0])
        self.tails = set(self.head_tails.values())
        self.window_tails = {
            t for h, t in self.head_tails.items() if self.facts[h].short == "reduce_window"
        }

    def _folds(self, i: int) -> bool:
        """A transpose read only by dots that keeps their batch dims in place: XLA's
        TransposeFolding turns it into the dots' dimension numbers (no kernel)."""
        src = self.srcs[i][0] if self.srcs[i] else None
        if src is not None and src >= 0 and self._transposes_dot_output(i, src):
            return True
        if not self.users[i]:
            return False
        perm = tuple(self.ops[i].attrs.get("permutation", ()))
        for u in self.users[i]:
            dot = self.ops[u]
            if _short(dot) != "dot_general":
                return False
            for k, src in enumerate(self.srcs[u][:2]):
                batch = dot.attrs.get("lhs_batch_dims" if k == 0 else "rhs_batch_dims", ())
                if src == i and any(d >= len(perm) or perm[d] != d for d in batch):
                    return False
        return True

    def _dropped(self, i: int) -> bool:
        """Op i is dead (OpInfo attribute `dead`: nothing reads it) or read only as the
        identity of ops XLA's simplifier drops (the splat zero of `x + 0`)."""
        if self.ops[i].dead:
            return True
        return bool(self.users[i]) and all(
            PASSES_THROUGH in self.ops[u].attrs
            and self.srcs[u][self.ops[u].attrs[PASSES_THROUGH]] != i
            for u in self.users[i]
        )

    def _pads_convolutions(self, i: int) -> bool:
        """A pad by a constant, of spatial dimensions only, read only as the input of
        convolutions: XLA's simplifier folds it into their padding (no kernel: a 5x5
        convolution of 4x32x32x16 padded by 2 is one `ynn_fusion`, jax 0.10.2)."""
        a = self.ops[i].attrs
        src = self.srcs[i][1] if len(self.srcs[i]) > 1 else None
        if src is None or src < 0 or not _constant_fed(src, self.ops, self.deps):
            return False
        if any(p < 0 for k in ("edge_padding_low", "edge_padding_high") for p in a.get(k) or ()):
            return False
        if any(a.get("interior_padding") or ()) or not self.users[i]:
            return False
        padded = {
            d
            for k in ("edge_padding_low", "edge_padding_high")
            for d, p in enumerate(a.get(k) or ())
            if p
        }
        for u in self.users[i]:
            conv = self.ops[u]
            spatial = set(conv.attrs.get("input_spatial_dims") or ())
            if _short(conv) != "convolution" or self.srcs[u][:1] != [i] or not padded <= spatial:
                return False
        return True

    def _transposes_dot_output(self, i: int, src: int) -> bool:
        """transpose(dot(a, b)) of a matrix product read only by the transpose: XLA's
        simplifier rewrites it as dot(b, a)."""
        dot = self.ops[src]
        return (
            _short(dot) == "dot_general"
            and not dot.attrs.get("lhs_batch_dims")
            and len(dot.results[0].shape or ()) == 2
            and self.users[src] == [i]
        )

    def holding(self, u: int) -> list[int]:
        extra = self.copies.get(u)
        return [self.group_of[u], *extra] if extra else [self.group_of[u]]

    def in_group(self, u: int, g: int) -> bool:
        return self.group_of[u] == g or g in self.copies.get(u, ())

    def new_group(self, i: int) -> int:
        f = self.facts[i]
        opaque = not (f.loop or f.reduce or f.constant) and not (f.matmul and self.kind != "cpu")
        g = _Group(root=i, opaque=opaque)
        if self.kind == "cpu":
            g.extra += len(cpu_conv_layout_copies(self.ops[i]))
            if i not in self.chain_tails:  # YNNPACK reads 16-bit operands itself
                g.extra += self._cpu_upcasts(i)
        self.groups.append(g)
        self.add(len(self.groups) - 1, i)
        return len(self.groups) - 1

    def _cpu_upcasts(self, i: int) -> int:
        """XLA:CPU runs 16-bit float dots in f32: an operand no fusion can absorb the convert
        into (a parameter, an opaque op's result) gets a convert kernel of its own."""
        if not self.facts[i].matmul:
            return 0
        count = 0
        for k, t in enumerate(self.ops[i].operands):
            src = self.srcs[i][k] if k < len(self.srcs[i]) else None
            if t.element_type in HALF_FLOATS:
                count += not (src is not None and src >= 0 and self.facts[src].loop)
        return count

    def add(self, g: int, i: int) -> None:
        grp, f = self.groups[g], self.facts[i]
        grp.has_matmul |= f.matmul
        grp.has_reduce |= f.reduce
        grp.extra += f.reduce_mode == "tree" and not self._merged_into_ynn(i)
        grp.extra += f.scan.kernels - 1 if f.scan else 0  # its levels; the combine is the group's
        if self.kind == "cpu" and i not in self.reciprocals and self._divides_by_broadcast(i):
            self.reciprocals.add(i)
            grp.extra += 1
        grp.ynn |= f.reduce_mode == "ynn"
        grp.window |= f.reduce_mode == "ynn" and f.short == "reduce_window"
        if not (f.free or i in self.folded or i in self.computed_constants or self._dropped(i)):
            grp.work_ops += 1
        if not f.pointwise:
            grp.only_elementwise = False
        if self.users[i]:
            self.reused[(i, g)] = self.reuse_in(i, g)

    def reuse_in(self, i: int, g: int) -> bool:
        return any(
            self.in_group(u, g) and (self.facts[u].reusing or self.reused.get((u, g), False))
            for u in self.users[i]
        )

    def accepts(self, g: int, i: int, expensive: bool) -> bool:
        """Whether group g may take producer i (XLA's ShouldFuse for this target)."""
        grp, f, kind = self.groups[g], self.facts[i], self.kind
        if grp.opaque:
            return False
        if kind == "cpu" and f.reduce_mode == "ynn":
            return self._ynn_reduce_joins(g, i)
        if kind == "cpu" and f.matmul:
            return self._ynn_dot_joins(g, i)
        if expensive and not f.matmul and not grp.ynn and self.reuse_in(i, g):
            # A YNN fusion computes a reduce once, not per element of its broadcast.
            return False
        if grp.ynn and (
            any(not self.in_group(u, g) for u in self.users[i]) or self._shares_upcast(i, g)
        ):
            return False
        if grp.ynn and not (self._ynn_pointwise(i) and (not f.elementwise or self._preferred(i))):
            # YNNPACK takes elementwise producers only, and not every one: XLA:CPU runs a
            # gather feeding a row sum as a loop kernel writing the gathered rows (embedding
            # bag, 2048x128), a select feeding one likewise (`_YNN_ELEMENTWISE`).
            return False
        if kind == "cpu" and grp.has_reduce:
            for u in self.users[i]:
                if self.facts[u].reduce_mode == "tree" and self.in_group(u, g):
                    return False
        if f.scan:  # the kernel combining its levels fuses into an elementwise consumer's
            return not (grp.has_reduce or grp.has_matmul or grp.ynn)
        for u in self.users[i]:  # a split scan's first level reads its input unless a
            scan = self.facts[u].scan  # head kernel pads or transposes it
            if scan and not scan.head and self.in_group(u, g):
                return False
        if f.matmul:
            if grp.has_matmul or grp.has_reduce or not grp.only_elementwise:
                return False
            return kind == "tpu" or grp.work_ops <= _GPU_EPILOGUE_MAX_OPS
        if grp.has_matmul and any(
            self.facts[u].matmul and self.in_group(u, g) for u in self.users[i]
        ):
            # Only a dot's own operand producers (Triton / TPU operand fusion) join it. XLA:CPU
            # runs them as kernels of their own, but for the elementwise ones of a dot in a YNN
            # reduce's fusion (`einsum(q, 2 * k)` of an attention head: one kernel).
            if kind == "cpu":
                return grp.ynn and self._ynn_pointwise(i) and len(self.users[i]) == 1
            return f.short in _DOT_OPERAND_PRODUCERS and len(self.users[i]) == 1
        if f.reduce:
            return kind == "cpu" or not grp.has_reduce  # a YNN reduce is decided above
        return f.loop

    def _ynn_reduce_joins(self, g: int, i: int) -> bool:
        """Whether YNN reduce i joins group g: the group its head's tail started
        (`_ynn_head_tail`)."""
        tail = self.head_tails.get(i)
        return tail is not None and self.group_of[tail] == g

    def _ynn_head_tail(self, i: int) -> tuple[int, bool] | None:
        """The last op of the YNN fusion op i heads, if it heads one, and whether `_ynn_chain`
        found it. XLA:CPU's YNNPACK fusion
        takes `op(x, broadcast(reduce(x)))` of f32 (x - max(x), x * sum(x); not a divide,
        which XLA's simplifier turns into a multiply by a reciprocal kernel of its own) and the
        single-use elementwise ops after it into the reduce's kernel, which ends at the first
        value read more than once or at an op it does not take: `exp(x - x.max(1,
        keepdims=True))` on 256x1000 is one kernel; `gelu(h - h.sum(1, keepdims=True))` on
        16x256 two, the subtract ending the first; `sin(x - x.max(1, keepdims=True))` two
        (jax 0.10.2). Otherwise a reduce, like a pool, takes the chain after it that
        `_ynn_chain` follows (`sqrt((x * x).sum(1))` of 4096x256 is one kernel, of 2048x256
        two: a square root of 2048 elements is XLA's own loop)."""
        f = self.facts[i]
        if f.reduce_mode == "ynn" and f.short == "reduce_window":
            c = self._ynn_chain(i)
            return c, c != i
        if f.reduce_mode != "ynn" or not self._starts_ynn_chain(i):
            return None
        c = self._ynn_dot_reading(i)
        if c is None:
            x = self.srcs[i][0] if self.srcs[i] else None
            consumers = self._through_broadcasts(i)
            c = consumers[0] if x is not None and len(consumers) == 1 else None
            if c is not None and (
                not self._ynn_takes(c) or self.facts[c].short == "divide" or x not in self.srcs[c]
            ):
                c = None
            if c is None:
                tail = self._ynn_chain(i)
                return (tail, True) if tail != i else None
        while len(self.users[c]) == 1 and self._ynn_takes(self.users[c][0]):
            c = self.users[c][0]
        return c, False

    def _ynn_chain(self, i: int) -> int:
        """The last op of the YNN fusion a YNNPACK reduce_window or reduce heads: XLA:CPU's
        fusion grows from it down its single-reader chain through reshapes,
        elementwise ops it takes on at least `YNN_REDUCE_MIN_ELEMENTS` elements, YNNPACK
        dots and convolutions and further pools (jax 0.10.2: a 2x2/2 max pool of
        1x32x32x32 then a ReLU, a tanh, a 3x3 convolution or another pool is one
        `ynn_fusion`; a ReLU of 1x16x16x32's pool a kernel of its own; a pool reshaped into
        a 2x4096 @ 4096x10 dot one kernel, into 1x8192 @ 8192x10, a matrix-vector product,
        three)."""
        c = last = i
        while len(self.users[c]) == 1:
            u = self.users[c][0]
            f = self.facts[u]
            if f.short in ("reshape", "bitcast", "broadcast_in_dim", "broadcast"):
                c = u
                continue
            takes = (
                (self._ynn_takes(u) and self._preferred(u) and not self._reciprocal_of(u, c))
                or (f.matmul and c in self.srcs[u][:1] and self._ynn_library(u))
                or (f.short == "reduce_window" and f.reduce_mode == "ynn")
                or self._merges_reduce(u, c)
            )
            if not takes:
                break
            c = last = u
        return last

    def _merges_reduce(self, u: int, c: int) -> bool:
        """A reduce of reduce c's result alone, by the same computation: XLA's simplifier
        makes the two one reduce (a cross-entropy's row sums then their mean: one YNNPACK
        fusion with the rows' log-softmax, the scalar's scaling a loop of its own; jax
        0.10.2)."""
        a, b = self.ops[u], self.ops[c]
        return (
            self.facts[u].short == "reduce" == self.facts[c].short
            and self.srcs[u][:1] == [c]
            and len(a.operands) == len(b.operands) == 2
            and a.attrs.get("reducer") == b.attrs.get("reducer") is not None
        )

    def _merged_into_ynn(self, i: int) -> bool:
        """A reduce XLA merges into the YNN reduce producing its input (`_merges_reduce`): no
        tree-reduction kernel of its own."""
        c = self.srcs[i][0] if self.srcs[i] else None
        return (
            c is not None
            and c >= 0
            and self.facts[c].reduce_mode == "ynn"
            and self._merges_reduce(i, c)
        )

    def _preferred(self, u: int) -> bool:
        """An op with at least `YNN_REDUCE_MIN_ELEMENTS` elements in its result or an
        operand: XLA:CPU's YNNPACK fusion takes no smaller elementwise op."""
        op = self.ops[u]
        return any(
            (t.num_elements or 0) >= YNN_REDUCE_MIN_ELEMENTS for t in (*op.operands, *op.results)
        )

    def _starts_ynn_chain(self, i: int) -> bool:
        """Whether reduce i's result can start a YNN fusion's chain: an f32 one, or a 16-bit
        one of at least `YNN_REDUCE_MIN_ELEMENTS` results (XLA:CPU computes 16-bit elementwise
        ops in f32: the convert of a smaller result is a loop op YNNPACK does not take)."""
        op = self.ops[i]
        if op.operands[0].element_type == "f32":
            return True
        return (op.results[0].num_elements or 0) >= YNN_REDUCE_MIN_ELEMENTS

    def _reciprocal_of(self, u: int, c: int) -> bool:
        """Whether u divides by c, a broadcast of a YNN reduce of fewer than
        `YNN_REDUCE_MIN_ELEMENTS` results (`_divides_by_broadcast`): XLA's reciprocal is then
        a loop kernel YNNPACK does not take, which ends the chain (`x / x.sum(1,
        keepdims=True)` on 2048x256: three kernels, on 4096x256 one, jax 0.10.2)."""
        return self.srcs[u][1:2] == [c] and self._divides_by_broadcast(u)

    def _ynn_library(self, i: int) -> bool:
        """A dot or convolution XLA:CPU's YNNPACK fusion may hold: a convolution YNNPACK
        runs (`ynn_convolution`), a dot not on Eigen (`runs_on_eigen`) nor a
        matrix-vector product (XLA's own code)."""
        op = self.ops[i]
        if self.facts[i].short == "convolution":
            return ynn_convolution(op)
        if runs_on_eigen(op, self._lhs_permutation(i)):
            return False
        out = op.results[0].shape if op.results else None
        return bool(out) and len(out) >= 2 and min(out[-2:]) > 1

    def _ynn_dot_reading(self, i: int) -> int | None:
        """The YNNPACK dot that alone reads reduce i's result, if one does: XLA:CPU's YNNPACK
        fusion takes the reduce, the dot and the dot's single-use elementwise consumers it
        takes (`tanh(x.sum(1) @ w)` on 128x8x128 and `x.sum(1) @ w + 1`: one kernel; not
        `sin(x.sum(1) @ w)`'s sine, nor an Eigen dot: `w.T @ x.sum(1)` two; jax 0.10.2)."""
        if len(self.users[i]) != 1:
            return None
        d = self.users[i][0]
        if self.facts[d].short != "dot_general" or i not in self.srcs[d][:2]:
            return None
        return None if runs_on_eigen(self.ops[d], self._lhs_permutation(d)) else d

    def _ynn_pointwise(self, i: int) -> bool:
        """A pointwise op a YNN fusion takes: a broadcast or free op, or an elementwise op
        of `_YNN_ELEMENTWISE`."""
        f = self.facts[i]
        return f.pointwise and (not f.elementwise or self._ynn_takes(i))

    def _shares_upcast(self, i: int, g: int) -> bool:
        """A convert to f32 of a bf16 block input that a bf16 elementwise op also reads, for a
        YNNPACK reduce of fewer than `YNN_REDUCE_MIN_ELEMENTS` results (group g): XLA:CPU
        computes that op in f32 on the same convert (one after CSE), which then has readers
        outside the reduce's fusion (a bf16 layer norm's `x` summed and centred: its convert
        a kernel of its own, `wrapped_convert`, jax 0.10.2; past 4096 rows the one fusion
        takes all)."""
        op, root = self.ops[i], self.ops[self.groups[g].root]
        if self.facts[i].short != "convert" or not self.srcs[i] or not op.results:
            return False
        if op.results[0].element_type != "f32" or op.operands[0].element_type != "bf16":
            return False
        if (root.results[0].num_elements or 0) >= YNN_REDUCE_MIN_ELEMENTS:
            return False
        src = self.srcs[i][0]
        if src is None or src >= 0:
            return False
        return any(
            j != i and self.facts[j].elementwise and self.ops[j].element_type == "bf16"
            for j in self.input_readers[src]
        )

    def _ynn_takes(self, i: int) -> bool:
        """An elementwise op XLA:CPU's YNNPACK fusion takes (`_YNN_ELEMENTWISE`), of no f16
        value: XLA:CPU runs f16 ones in loop fusions of their own feeding it (a sigmoid
        cross-entropy's terms and their convert to f32 before its sum; jax 0.10.2)."""
        f = self.facts[i]
        return (
            f.elementwise
            and f.short in _YNN_ELEMENTWISE
            and not self._clamps(i)
            and not any(
                t.element_type == "f16" for t in (*self.ops[i].operands, *self.ops[i].results)
            )
        )

    def _clamps(self, i: int) -> bool:
        """A maximum or minimum with a constant bound reading, or read by, the other with one:
        XLA's simplifier makes the pair a clamp (`jnp.clip`, relu6)."""
        other = {"maximum": "minimum", "minimum": "maximum"}.get(self.facts[i].short)
        if other is None or not self._constant_bound(i):
            return False
        near = [j for j in self.srcs[i] if j is not None and j >= 0] + list(self.users[i])
        return any(self.facts[j].short == other and self._constant_bound(j) for j in near)

    def _constant_bound(self, i: int) -> bool:
        """Some operand of op i is a constant or a splat of one."""
        return any(
            s is not None and s >= 0 and _constant_fed(s, self.ops, self.deps) for s in self.srcs[i]
        )

    def _through_broadcasts(self, i: int) -> list[int]:
        """The ops reading op i's result through reshapes and broadcasts only; empty if some
        user reads it otherwise."""
        found: list[int] = []
        stack = [(u, False) for u in self.users[i]]
        while stack:
            u, widened = stack.pop()
            if self.facts[u].short in _BROADCASTS:
                stack.extend((w, True) for w in self.users[u])
            elif self._bounds_by_constant(u):
                stack.extend((w, widened) for w in self.users[u])
            elif widened:
                found.append(u)
            else:
                return []
        return found

    def _bounds_by_constant(self, u: int) -> bool:
        """A maximum with a constant (jax's `max(x, initial=-inf)`), which XLA's simplifier
        drops."""
        return self.facts[u].short == "maximum" and self._constant_bound(u)

    def _divides_by_broadcast(self, i: int) -> bool:
        """A float divide by a broadcast YNN reduce, which XLA's simplifier turns into a
        multiply by the broadcast reciprocal: on a CPU the reciprocal is a kernel of its own
        (`x / x.sum(1, keepdims=True)` on 256x1000: a YNN reduce, a reciprocal loop and a
        multiply loop, jax 0.10.2), where a divisor computed by a loop kernel takes it in
        (`/ sqrt(var + eps)` becomes that kernel's rsqrt). A convert between them too: an f16
        softmax divides by its f32 sum rounded to f16 (`convert_divide_fusion`)."""
        op = self.ops[i]
        if self.facts[i].short != "divide" or not op.element_type.startswith(("f", "bf")):
            return False
        j = self.srcs[i][1] if len(self.srcs[i]) > 1 else None
        widened = False
        while j is not None and j >= 0 and self.facts[j].short in (*_BROADCASTS, "convert"):
            widened = widened or _grows(self.ops[j])
            j = self.srcs[j][0] if self.srcs[j] else None
        return (
            widened
            and j is not None
            and j >= 0
            and self.facts[j].reduce_mode == "ynn"
            and (
                (self.ops[j].results[0].num_elements or 0) < YNN_REDUCE_MIN_ELEMENTS
                or op.element_type == "f16"  # not one YNNPACK takes, however many rows
            )
        )

    def _ynn_dot_joins(self, g: int, i: int) -> bool:
        """Whether dot or convolution i joins group g on a CPU: only a YNNPACK one (not an
        Eigen dot or convolution: `_ynn_library`) read only by a YNN reduce's group
        (`(x @ w).sum(1)`, an attention head's QK dot, scale, max-reduce, subtract and exp:
        one kernel, jax 0.10.2); a pool's fusion takes one more (a convolution, ReLU, max
        pool and the dense layer reading it: one kernel), and so does a fusion whose reduce's
        chain ends in a dot (a batched attention's two dots: one kernel)."""
        grp = self.groups[g]
        ends_in_dot = grp.root in self.chain_tails and self.facts[grp.root].matmul
        return (
            (grp.ynn or grp.root in self.tails)
            and (not grp.has_matmul or grp.window or ends_in_dot)
            and all(self.in_group(u, g) for u in self.users[i])
            and self._ynn_library(i)
        )

    def _lhs_permutation(self, i: int) -> tuple[int, ...] | None:
        """The permutation of a folded transpose producing dot i's lhs (XLA folds it into the
        dot's dimension numbers: `x.T @ w` contracts x over its first dimension), else None."""
        src = self.srcs[i][0] if self.srcs[i] else None
        if src is None or src < 0 or src not in self.folded:
            return None
        return tuple(self.ops[src].attrs.get("permutation", ()))

    def visit(self, i: int, live_out: set[int]) -> None:
        """Place op i, all of whose consumers are already placed."""
        f = self.facts[i]
        if i in self.tails and not self._tail_merges(i):
            # a YNN fusion's last op: its reduce and producers join it
            self.group_of[i] = g = self.new_group(i)
            self.groups[g].opaque = False  # a dot too: its reduce joins it
            if i in self.chain_tails:  # what lies between it and its reduce joins it too
                self.groups[g].ynn = True
                self.groups[g].window = i in self.window_tails
            return
        targets: list[int] = []
        for u in self.users[i]:
            for g in self.holding(u):
                if g not in targets:
                    targets.append(g)
        if not targets:
            self.group_of[i] = self.new_group(i)
            return
        if f.constant:
            self.join(i, targets)
            return
        fusible = f.loop or f.reduce or f.matmul
        expensive = _is_expensive(i, self.ops, self.deps, self.srcs[i])
        ok = [g for g in targets if fusible and self.accepts(g, i, expensive)]
        everyone = len(ok) == len(targets) and i not in live_out
        if self.kind == "cpu" and expensive and self._divides_for_two(i):
            everyone = False
        if everyone and (len(targets) == 1 or (not expensive and len(targets) <= MAX_COPIES)):
            self.join(i, targets)
            return
        own = self.new_group(i)
        self.group_of[i] = own
        op = self.ops[i]
        widens = sum(t.nbytes or 0 for t in op.operands) <= sum(t.nbytes or 0 for t in op.results)
        # Refused only by YNNPACK fusions (they take no value read elsewhere): XLA fused it
        # into every consumer before it outlined those, which leaves it a kernel of its own
        # feeding them and its copies in the loop fusions.
        ynn_only = all(g in ok or self.groups[g].ynn for g in targets)
        if ok and not expensive and (widens or ynn_only) and len(ok) <= MAX_COPIES:
            self.copies[i] = ok
            for g in ok:
                self.add(g, i)

    def _divides_for_two(self, i: int) -> bool:
        """A divide or remainder by an array (not a broadcast) that two ops read: XLA:CPU
        keeps it a kernel of its own though one kernel holds both readers (`jnp.where(q >
        0, q - 1, q)` of q = a / b or a % b, f32 or i32: two kernels; of q = exp(a) or a %
        broadcast(n): one; jax.numpy's floor_divide of i32 arrays: two; jax 0.10.2). Not a bf16
        one: XLA:CPU divides in f32, read by one convert back (the calibration's bf16 fused
        chains: `div_y.where_y` one kernel)."""
        op = self.ops[i]
        if self.facts[i].short not in _EXPENSIVE_ELEMENTWISE or len(set(self.users[i])) < 2:
            return False
        if op.element_type == "bf16":  # XLA:CPU divides in f32: one convert reads it
            return False
        divisor = self.srcs[i][1] if len(self.srcs[i]) > 1 else None
        return divisor is None or divisor < 0 or _short(self.ops[divisor]) not in _BROADCASTS

    def _tail_merges(self, i: int) -> bool:
        """Whether YNN tail i joins the YNN fusion holding all its readers rather than ending
        one of its own: in a softmax of 4096+ rows the fusion grown from the sum holds both
        readers of `exp(x - max(x))` (the sum, the multiply by its reciprocal), and the
        max's fusion merges into it (one kernel, jax 0.10.2)."""
        groups = {self.group_of[u] for u in self.users[i]}
        if len(groups) != 1 or any(len(self.holding(u)) > 1 for u in self.users[i]):
            return False
        g = groups.pop()
        return self.groups[g].ynn and self._ynn_pointwise(i)

    def join(self, i: int, targets: list[int]) -> None:
        """Put op i in the group of its first consumer and copy it into the other targets."""
        if len(targets) == 1:
            self.group_of[i] = targets[0]
            self.add(targets[0], i)
            return

        def first_use(g: int) -> int:
            return min(u for u in self.users[i] if self.in_group(u, g))

        first = min(targets, key=first_use)
        self.group_of[i] = first
        self.copies[i] = [g for g in targets if g != first]
        for g in targets:
            self.add(g, i)


def plan_fusion(
    ops: Sequence[OpInfo],
    deps: Sequence[Sequence[int]],
    kind: str,
    operand_sources: Sequence[Sequence[int | None]] | None = None,
    live_out: Sequence[int] = (),
) -> FusionPlan:
    """Group one block's ops the way XLA fuses them for `kind` ("tpu" | "gpu" | "cpu").

    `operand_sources[i][k]` is the op in this block producing operand k of op
    i, a negative number naming a value from outside the block (the same
    number for the same value), or None (an unknown outside value); without
    it, deps are matched to operands by type. `live_out` lists ops whose
    results are also used outside the block (by its terminator).
    """
    if kind not in KINDS:
        raise ValueError(f"unknown target kind '{kind}', expected one of {KINDS}")
    n = len(ops)
    srcs = _sources(ops, deps, operand_sources)
    rep = _cse(ops, srcs)
    users: list[list[int]] = [[] for _ in range(n)]
    for i in range(n):
        if rep[i] != i or ops[i].dead:  # a dead op reads nothing XLA keeps
            continue
        seen: set[int] = set()
        for j in deps[i]:
            j = rep[j]
            if j not in seen:
                seen.add(j)
                users[j].append(i)
    for i in range(n):
        if rep[i] != i:
            users[rep[i]].extend(u for u in users[i] if u not in users[rep[i]])
    escapes = {rep[i] for i in live_out}
    state = _State(ops, deps, srcs, kind, users)
    for i in range(n - 1, -1, -1):
        if rep[i] == i:
            state.visit(i, escapes)
    for i in range(n):
        if rep[i] != i:
            state.group_of[i] = state.group_of[rep[i]]
    same_as = {i: r for i, r in enumerate(rep) if r != i}
    return _renumber(state, same_as)


def _renumber(state: _State, same_as: dict[int, int]) -> FusionPlan:
    """Number groups in program order of their first op and classify them."""
    order: dict[int, int] = {}
    for g in state.group_of:
        if g not in order:
            order[g] = len(order)
    new_of = [order[g] for g in state.group_of]
    kinds = [""] * len(order)
    roots = [0] * len(order)
    launches = [0] * len(order)
    for old, g in order.items():
        grp = state.groups[old]
        roots[g] = grp.root
        if grp.work_ops == 0:
            kinds[g] = "free"
        elif grp.opaque:
            kinds[g] = "opaque"
        elif grp.has_matmul:
            kinds[g] = "output"
        elif grp.has_reduce:
            kinds[g] = "input"
        else:
            kinds[g] = "loop"
        launches[g] = 0 if kinds[g] == "free" else 1 + grp.extra
    copies = {i: tuple(sorted(order[g] for g in gs)) for i, gs in state.copies.items()}
    return FusionPlan(
        groups=new_of,
        kinds=kinds,
        roots=roots,
        launches=launches,
        copies=copies,
        same_as=same_as,
        ynn=frozenset(g for old, g in order.items() if state.groups[old].ynn),
    )


def fuse_block(
    ops: Sequence[OpInfo],
    deps: Sequence[Sequence[int]],
    kind: str,
    operand_sources: Sequence[Sequence[int | None]] | None = None,
    live_out: Sequence[int] = (),
) -> list[int]:
    """Group id per op (0..G-1, numbered in program order of each group's first op)."""
    return plan_fusion(ops, deps, kind, operand_sources, live_out).groups


def _per_element(op: OpInfo) -> bool:
    return op.op_class in ELEMENTWISE_CLASSES or op.short_name in _PER_ELEMENT_MOVES


def gathered_scales(
    ops: Sequence[OpInfo],
    members: Sequence[int],
    sources: Sequence[Sequence[int | None]],
    live_out: Sequence[int] = (),
) -> dict[int, float]:
    """Members a fused gather evaluates only at the positions it reads, and the share of
    their elements that is: XLA fuses elementwise producers into a gather, so
    `take_along_axis(log_softmax(x), labels)` computes 128 of a 128x1000 tensor's
    log-probabilities. A producer qualifies when it is elementwise (or a broadcast /
    reshape / transpose), all its uses in the group lead only into gathers' data operand,
    and the block does not return it."""
    inside = set(members)
    users: dict[int, set[int]] = {i: set() for i in members}
    for j in members:
        for s in sources[j]:
            if s is not None and s in inside:
                users[s].add(j)
    out: dict[int, float] = {}
    kept_out = set(live_out)
    for g in members:
        if ops[g].short_name != "gather" or not sources[g] or not ops[g].results:
            continue
        start = sources[g][0]
        if start is None or start not in inside:
            continue
        found: set[int] = set()
        todo = [start]
        while todo:
            i = todo.pop()
            if i in found or i in kept_out or not _per_element(ops[i]):
                continue
            found.add(i)
            todo.extend(s for s in sources[i] if s is not None and s in inside)
        changed = True
        while changed:  # drop producers with a use outside the gathered cone
            changed = False
            for i in sorted(found):
                if any(u not in found and not (u == g and i == start) for u in users[i]):
                    found.discard(i)
                    changed = True
        n_out = ops[g].results[0].num_elements
        for i in found:
            n = ops[i].results[0].num_elements if ops[i].results else None
            if n and n_out is not None and n > n_out:
                out[i] = min(out.get(i, 1.0), n_out / n)
    return out


def group_traffic(
    ops: Sequence[OpInfo],
    deps: Sequence[Sequence[int]],
    groups: FusionPlan | Sequence[int],
    operand_sources: Sequence[Sequence[int | None]] | None = None,
    live_out: Sequence[int] = (),
) -> list[GroupTraffic]:
    """Bytes in, bytes out and FLOPs of each group, internal tensors free.

    Inputs: every value a group's ops (copies included) read that the group
    does not compute, once per distinct value: (producer op, type) for values
    of this block, the negative id for outside values, each None operand on
    its own. Non-scalar constants count as inputs (literals in memory).
    Outputs: results of the group's own ops used by another group, by the
    terminator (`live_out`) or by nothing (module outputs). FLOPs include
    recomputed copies. A dynamic_update_slice, or a scatter at one index, reads and writes
    only its update (`in_place_update`); a slice, dynamic_slice or gather reads only what it
    returns of its data operand (`READS_PART`). Members a fused gather evaluates at the gathered
    positions only (`gathered_scales`) read and compute their share: XLA's kernel for
    softmax cross-entropy's take_along_axis reads 64 of the 64x1000 log-probabilities it
    selects from (1.3 us in a loop, jax.profiler; priced 11.4 us as a read of all 256 KB).
    """
    plan = groups if isinstance(groups, FusionPlan) else None
    group_of = list(plan.groups if plan else groups)
    copies = plan.copies if plan else {}
    same_as = plan.same_as if plan else {}
    n_groups = max(group_of, default=-1) + 1
    srcs = [
        [same_as.get(x, x) if x is not None and x >= 0 else x for x in row]
        for row in _sources(ops, deps, operand_sources)
    ]
    members: list[set[int]] = [set() for _ in range(n_groups)]
    for i, g in enumerate(group_of):
        members[g].add(i)
    for i, gs in copies.items():
        for g in gs:
            members[g].add(i)
    users: list[set[int]] = [set() for _ in ops]
    for i, d in enumerate(deps):
        if i not in same_as:
            for j in d:
                users[same_as.get(j, j)].add(i)
    escapes = {same_as.get(i, i) for i in live_out}
    out: list[GroupTraffic] = []
    for g in range(n_groups):
        # Per distinct input value: its full size, and the bytes read of it (the full
        # size, or what the group's slices and gathers of it return).
        reads: dict[object, tuple[float, float]] = {}
        costed: dict[object, tuple[float, float]] = {}
        inp = outb = flops = 0.0
        gathered = gathered_scales(ops, sorted(members[g]), srcs, live_out)
        for i in sorted(members[g]):
            op = ops[i]
            if i in same_as:
                continue
            share = gathered.get(i, 1.0)
            if not op.removed:
                flops += (op.flops or 0) * share
            if _is_constant(op) and (op.results[0].num_elements or 0) > 1:
                inp += op.results[0].nbytes or 0
            update = in_place_update(op)
            for k, t in enumerate(op.operands):
                s = srcs[i][k] if k < len(srcs[i]) else None
                if s is not None and s >= 0 and s in members[g]:
                    continue
                key: object = (s, t) if s is not None else (i, k, "ext")
                full = t.nbytes or 0
                if update is not None and k == 0:
                    read = cost = update.nbytes or 0
                elif k == 0 and _short(op) in READS_PART:
                    read = min(sum(r.nbytes or 0 for r in op.results), full)
                    cost = read if _short(op) in READS_WHAT_IT_RETURNS else full
                else:
                    read, cost = full * share, full
                for seen, part in ((reads, read), (costed, cost)):
                    size, before = seen.get(key, (full, 0))
                    seen[key] = (size, min(before + part, size) if part < size else size)
            if group_of[i] != g or (_is_constant(op) and users[i]):
                continue
            external = i in escapes or not users[i]
            external = external or any(
                i not in members[h] for u in users[i] for h in _holders(u, group_of, copies)
            )
            if external:
                written = [update] if update is not None else op.results
                outb += sum(t.nbytes or 0 for t in written)
        cost = inp + sum(read for _, read in costed.values())
        inp += sum(read for _, read in reads.values())
        out.append(GroupTraffic(round(inp), round(outb), round(flops), gathered, round(cost)))
    return out


def scatter_positions(op: OpInfo) -> int | None:
    """How many index vectors a scatter writes at (None for other ops or unknown shapes)."""
    if op.short_name != "scatter" or not op.operands:
        return None
    indices = op.operands[(len(op.operands) - 1) // 2]  # inputs..., indices, updates...
    dim = op.attrs.get("index_vector_dim", len(indices.shape))
    if not indices.is_static:
        return None
    vector = indices.shape[dim] if dim < len(indices.shape) else 1
    return (indices.num_elements or 0) // max(vector, 1)


def in_place_update(op: OpInfo) -> TensorType | None:
    """The update an op writes into its operand's buffer, so that only it moves, not the
    whole buffer (None for any other op): a dynamic_update_slice's (a scan's carried
    outputs, a donated cache), and a one-input scatter's at one index, which XLA rewrites
    into one (`x.at[i].set(1.0)` on 262,144 f32 in a 16-trip fori_loop: 28 us a call, Zen 4
    VM, 2026-12-07; priced 916 as 16 reads and writes of the whole 1 MiB)."""
    if _short(op) == "dynamic_update_slice" and len(op.operands) >= 2:
        return op.operands[1]
    if len(op.operands) == 3 and scatter_positions(op) == 1:
        return op.operands[2]
    return None


def one_read_ops(
    ops: Sequence[OpInfo], plan: FusionPlan, sources: Sequence[Sequence[int | None]]
) -> set[int]:
    """Two-operand ops of the loop fusions that read one tensor from memory (x * sigmoid(x):
    both operands are computed from x inside the kernel); scalars do not count as reads."""
    out: set[int] = set()
    for g, ids in enumerate(plan.members()):
        if plan.kinds[g] != "loop":
            continue
        inside = set(ids)
        reads: set[object] = set()
        for i in ids:
            for k, src in enumerate(sources[i]):
                if (src is None or src not in inside) and (
                    ops[i].operands[k].num_elements or 0
                ) > 1:
                    reads.add(src if src is not None else (i, k))
        if len(reads) == 1:
            out.update(i for i in ids if len(ops[i].operands) == 2)
    return out


_F16_BROADCAST_VECTORISED = frozenset({"exponential", "log", "exponential_minus_one"})
"""f16 ops that XLA:CPU runs as a scalar call an element in a loop kernel of their own or with
unary and elementwise neighbours, but vectorised where the kernel also broadcasts a scalar
or a vector (256x256 f16 in a loop, Zen 4 VM, 2026-12-05: exp 155 us; exp(x) + 1,
exp(x) + x[0, 0], exp(x) + x[0:1, :], exp(x) * x[:, 0:1] 26-27; exp(x) * x, exp(-x),
exp(x) ** 2 153-166; log 163 at 65536, log(x + 1) 35; 512x512: expm1 555, expm1(x) * 2 219,
where the bf16 rows say 237). log1p, sqrt and floor run scalar either way. A softmax's
`exp(x - max)` is not vectorised: XLA puts the broadcast of the max into its YNNPACK reduce,
and the kernel reads it as a full tensor (256x256: 203 us a softmax)."""


def f16_vectorised_ops(
    ops: Sequence[OpInfo], plan: FusionPlan, sources: Sequence[Sequence[int | None]]
) -> set[int]:
    """f16 members of `_F16_BROADCAST_VECTORISED` in loop fusions that broadcast inside the
    kernel: a member of the kernel's size with a splat operand, or a broadcast to that size of
    anything but a YNNPACK reduce's result (which XLA broadcasts in the reduce's own fusion).
    They run at the f32 rate (their math vectorised in f32), not their own f16 rows'."""
    out: set[int] = set()
    for g, ids in enumerate(plan.members()):
        found = [
            i
            for i in ids
            if ops[i].short_name in _F16_BROADCAST_VECTORISED and ops[i].element_type == "f16"
        ]
        if plan.kinds[g] != "loop" or not found:
            continue
        size = max(ops[i].results[0].num_elements or 0 for i in found)

        def passes(s: int) -> bool:
            """Op s hands a YNNPACK reduce's value on as XLA's reduce fusion does: a broadcast
            or reshape, or JAX's `maximum(-inf, max)` after a max, which XLA folds (a max or
            min with a constant operand)."""
            short = ops[s].short_name
            if short in _BROADCASTS:
                return True
            return short in ("maximum", "minimum") and any(
                t is not None and t >= 0 and _constant_fed(t, ops, sources) for t in sources[s]
            )

        def from_ynn(i: int, g: int = g) -> bool:
            """Whether op i's value is a YNNPACK group's, handed on in group g (`passes`): a
            logsumexp's exp reads the max through a select, XLA's `broadcast_select_fusion`,
            and broadcasts that in its own kernel."""
            srcs = [s for s in sources[i] if s is not None and s >= 0]
            return any(
                plan.groups[s] in plan.ynn or (plan.groups[s] == g and passes(s) and from_ynn(s))
                for s in srcs
            )

        if any(
            ops[i].results
            and ops[i].results[0].num_elements == size
            and (
                ops[i].attrs.get("splat_operands")
                or (ops[i].short_name == "broadcast_in_dim" and not from_ynn(i))
            )
            for i in ids
        ):
            out.update(found)
    return out


def elemental_gathers(ops: Sequence[OpInfo], plan: FusionPlan) -> set[int]:
    """Gathers fused into a reduction's kernel (not its root): the reduce loop evaluates
    them one element at a time instead of copying rows. An embedding lookup summed over
    its 8 ids (64x8 rows of 128 f32) took ~84 us inside a loop against ~11 us for the same
    rows as a lone gather; single-element gathers cost 0.8-1.4 ns each (host reference)."""
    members = plan.members()
    return {
        i
        for g, ids in enumerate(members)
        if plan.kinds[g] == "input"
        for i in ids
        if ops[i].short_name == "gather" and i != plan.roots[g]
    }


def group_deps(plan: FusionPlan, deps: Sequence[Sequence[int]]) -> list[list[int]]:
    """Producer groups of each group (sorted): the group-level graph a schedule walks.

    A value a group recomputes itself (a copy) is no edge, so the graph is
    acyclic even though a duplicated op's primary group is only one of them.
    """
    same = plan.same_as
    out: list[set[int]] = [set() for _ in plan.kinds]
    for i, d in enumerate(deps):
        if i in same:
            continue
        for h in _holders(i, plan.groups, plan.copies):
            for j in d:
                j = same.get(j, j)
                if plan.groups[j] != h and h not in plan.copies.get(j, ()):
                    out[h].add(plan.groups[j])
    return [sorted(s) for s in out]


def _holders(
    u: int, group_of: Sequence[int], copies: dict[int, tuple[int, ...]]
) -> tuple[int, ...]:
    return (group_of[u], *copies.get(u, ()))


def loop_body_copies(
    group_of: Sequence[int],
    group_deps: Sequence[Sequence[int]],
    readers: Mapping[int, Collection[int]],
    returns: Sequence[tuple[str, int]],
    merged: Sequence[tuple[int, int]] = (),
    updates: Mapping[int, Sequence[int]] | None = None,
) -> list[int]:
    """Copies XLA's copy insertion leaves in a while body, per carried value, each trip.

    Value j of the loop state lives in one buffer, read as body argument j and written as
    result j. Written by a kernel that alone (with the kernels it waits for) reads argument
    j, it is updated in place: no copy. Argument j also read by a kernel that does not run
    before the writer (the other half of `(a + b, a - b)`), it is copied first: one.
    Result j not computed from argument j — a permutation, `(b, a)` or `(b * 2, a * 3)` — or
    a value from outside the body, while argument j is still needed: copies of both, two.
    `group_of` maps the body's ops (block-local) to kernels, `group_deps` gives each
    kernel's producers, `readers` the ops reading each argument, `returns` what the
    terminator returns (`ModuleView.block_arguments`) and `merged` the induction variables
    XLA folds into a counter (`MERGED_STATE`: their readers read the counter instead).
    Checked against jax 0.10.2's compiled HLO (copies in the while body): 0 / 0 / 0 for
    independent updates, a pass-through read by the other update and a dot read before the
    update, 2 for `(a + b, a - b)` and for `(tanh(a @ b), tanh(b) + a)`, 4 for `(b, a)` and
    `(b * 2, a * 3)`, 6 for a rotation of three, and jax.random's threefry loop (both
    512x512 halves copied, its five rotated keys and counters twice).

    `updates` lists the ops writing into argument j's buffer in place
    (`ModuleView.block_updates`): where a kernel reading argument j may run after the first
    of them, XLA copies argument j first, and copies the result back when the last of them
    returns it: `x.at[i].set(1) + x[3]` copies once, swapping two elements of a permutation
    (`x.at[i].set(x[j]).at[j].set(x[i])`, jax's LU pivots) twice; `x.at[i].set(x[j])`
    and `x.at[i].set(1).at[j].set(2)` not at all."""
    ancestors: dict[int, set[int]] = {}

    def before(g: int) -> set[int]:
        if g not in ancestors:
            found: set[int] = set()
            stack = list(group_deps[g])
            while stack:
                h = stack.pop()
                if h not in found:
                    found.add(h)
                    stack.extend(group_deps[h])
            ancestors[g] = found
        return ancestors[g]

    folded = dict(merged)
    if folded:
        moved = {j: set(r) for j, r in readers.items() if j not in folded}
        for j, counter in merged:
            moved.setdefault(counter, set()).update(readers.get(j, ()))
        readers = moved
    out = []
    for j, (kind, src) in enumerate(returns):
        returned_elsewhere = any(r == ("arg", j) for k, r in enumerate(returns) if k != j)
        reading = {group_of[r] for r in readers.get(j, ())}
        live = bool(reading) or returned_elsewhere
        if (kind == "arg" and src == j) or j in folded:  # (folded: no longer loop state)
            out.append(0)
        elif kind != "op":
            out.append(2 if live else 1)
        else:
            chain = (updates or {}).get(j, ())
            first = group_of[chain[0]] if chain else None
            if first is not None and reading - before(first) - {first}:
                out.append(2 if src in chain else 1)  # read after an update in place
                continue
            writer = group_of[src]
            runs_first = before(writer) | {writer}
            if not reading & runs_first:
                out.append(2 if live else 0)
            else:
                out.append(int(bool(reading - runs_first) or returned_elsewhere))
    return out


def while_init_copies(
    ops: Sequence[OpInfo],
    operand_sources: Sequence[Sequence[int | None]],
    i: int,
    carried: Sequence[bool],
) -> list[int]:
    """Positions of the loop state XLA's copy insertion copies before while op i (one
    kernel each).

    A loop-carried value the body changes (`carried[k]`) gets its own buffer;
    when its initial value is read-only — a constant or a value from outside
    the block (an entry parameter) — XLA copies it first (`copy.N` beside
    every while in the corpus).
    """
    out = []
    for k, src in enumerate(operand_sources[i]):
        read_only = src is None or src < 0 or _is_constant(ops[src])
        if k < len(carried) and carried[k] and read_only:
            out.append(k)
    return out
