"""Learned latency of the host's fused elementwise loop kernels (XLA:CPU), from measured chains.

A loop kernel of several elementwise ops is priced elsewhere from its members: its bytes at
the streaming bandwidth plus each member's compute from its single-op measurement
(`analysis.fusion_cost`). XLA:CPU's code for a fused chain depends on the chain and the
shape in ways no member shows (`runtime/fused_chains.py`; `benchmarks/fused_chains.py`
scored that rule at an error factor of 1.9-2.1 on two sets of ~80 chains, 4-12x under for
transcendental chains on rows of 16, 4-11x over for cheap chains on (n, 1), and this
model, trained on other chains, at 1.42-1.47). This model learns kernel
time from measured chains, as the op models do from single ops: a least-absolute-deviation
line in work (elements x ops) carries the size trend and boosted trees learn the
multiplicative residual from the output's shape features (`elementwise.shape_features`)
and the kernel's composition (`Composition`).

It answers for f32 loop kernels whose members are the chains' ops (`_TRAINED`: arithmetic,
maximum, minimum, abs, round, compare and select, tanh, exp, log, rsqrt, sine), uint32 ones
(`_INTEGER`: a random generator's adds, xors, ors and shifts), bf16 ones where the file has
bf16 chains, and the index moves a loop does for free (broadcasts, reshapes), with no more of
each kind than
the training chains had, on the machine the chains were measured on
(`calibration_files.nearest_machine`); anything else keeps the member rule. A second
regressor, fitted on the file's chains that end in a sum (`reduce_features`), answers
likewise for YNNPACK kernels that sum what such ops compute, over the last dimension or
over all the others: the member rule had priced them at 0.65-0.77x their time (a sum of
squares reads its input once, but its steps cost more than their single-op times less
their bytes said).
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import math
import warnings
from collections.abc import Sequence
from dataclasses import astuple, dataclass
from pathlib import Path

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from stablehlo_perf.analysis import calibration_files as cf
from stablehlo_perf.analysis import model_cache
from stablehlo_perf.analysis.elementwise import (
    CalibrationError,
    collapsed_reduce,
    lad_line,
    residual_trees,
    shape_features,
    wide_column_reduce,
)
from stablehlo_perf.analysis.opinfo import OpInfo
from threadpoolctl import threadpool_limits

__all__ = [
    "SHORT_STEPS",
    "SUM_ABSORBS",
    "Composition",
    "FusedLoopModel",
    "FusedLoopRegressor",
    "chain_composition",
    "chains_path",
    "group_composition",
    "load_chains",
    "model_for_host",
    "reduce_features",
    "summed_shape",
]

SHIPPED = ("host_fused_xeon.csv", "host_fused_zen5.csv", "host_fused_zen4.csv")
"""The shipped chains (`analysis/data`), one file per machine the project measured them on:
its Xeon VM (the 797 loop and 393 sum chains of its --quick calibration, 2026-12-05), its
Zen 5 VM (1020 loop chains on the training shapes, 144 on `runtime.fused_chains.LARGE_SHAPES`,
786 that end in a sum) and its Zen 4 VM (765, 144 and 786, and 170 each of 17-48 steps, of
uint32 steps, of 2-32 cheap steps and of up to four full-size inputs: `draw_long`,
`draw_ints`, `draw_cheap`, `draw_inputs`; 255 bf16 chains and 170 of cheap bf16 steps:
`draw_bf16`)."""

_TRAINED = frozenset(
    {
        "add", "subtract", "multiply", "divide", "maximum", "minimum", "negate", "abs",
        "round_nearest_even", "compare", "select", "tanh", "exponential", "log", "rsqrt", "sine",
        "square",
    }
)  # fmt: skip
"""Elementwise ops the training chains run (`runtime.fused_chains.VOCAB`; a subtract costs
what an add does, a square what a multiply does: XLA emits it as one). The composition counts kinds of ops, not which: a sine fused with a
multiply on 512x256 f32 takes ~700 us, a tanh 90, so it answers for no op it did not see."""
_INTEGER = frozenset(
    {"add", "subtract", "multiply", "xor", "or", "and", "shift_left", "shift_right_logical"}
)
"""Ops on uint32 tensors the training's integer chains run (`runtime.fused_chains.INT_VOCAB`:
a counter-based generator's rounds; a subtract costs what an add does)."""
_TRIGONOMETRIC = frozenset({"sine"})
_SELECTS = frozenset({"compare", "select"})
_TYPES = frozenset({"f32", "i1"})
_HALF_TYPES = frozenset({"bf16", "i1"})
"""A kernel whose ops are all on these types is priced by the bf16 chains where a file has
them (`Composition.half`: without them no regressor covers it), unless it computes a sine: a
chain's sine mostly takes what its earlier steps shrank, which XLA:CPU's sine runs faster
(`runtime.sweeps`), and sin(x) * 2 of 700x300 bf16 standard normals (873 us in a loop, Zen 4
VM, 2026-12-04) was priced 463 by the chains, 1236 by its members."""
_LANE_OPS = frozenset({"compare", "select", "maximum", "minimum", "negate", "abs"})
"""Ops that run on i32 lanes as they do on f32 ones (one vector instruction each), priced as
the f32 chains' ops; the integer arithmetic and logic of `_INTEGER` (and an i32's arithmetic
shift, and masks' and/or/not) as the uint32 chains' steps. Masks and index arithmetic (a
causal mask's iota compare, a one-hot's label compare, clipped or masked int32 tensors) ran
2.0-3.6x under the roofline's price in a loop on the Zen 4 VM (2026-12-05: a 512 x 512
causal mask 15 us, priced 45 from its bytes at DRAM bandwidth; a 2048 x 1000 one-hot 95,
priced 199; where(a > b, a, b) of 1M i32 107, priced 271)."""
_INT_TYPES = frozenset({"i32", "ui32", "i1"})
_INT_STEPS = _INTEGER | {"shift_right_arithmetic", "not"}
_WORDS = frozenset({"f32", "i32", "ui32", "i1"})
"""A convert between these counts as one op of the composition (XLA:CPU emits one vector
instruction per vector of elements for it, as for a round): the chains ran no converts."""
_NARROW_INTS = frozenset({"ui8", "i8", "ui16", "i16"})
"""Integer inputs a convert to f32 widens as one op too (an image's uint8 pixels): priced by
the convert model instead, whose rows are f32 and bf16 converts, `x.astype(f32) / 127.5 - 1`
on uint8 images of 8x64x64x3, 32768x3, 98304, 4248x7 and 64x127 ran 0.7-4.8 us in a loop
(Zen 4 VM, 2026-12-05) and was priced 2.4-9.9x that; the same chain on f32, which this
model prices, 1.0-1.5x."""
_FREE = frozenset(
    {"broadcast_in_dim", "reshape", "constant", "reverse", "slice", "bitcast_convert", "iota"}
)
"""Members a fused loop computes as index arithmetic, no work of their own. A reverse reads
its operand's elements in the other order: `x[:, ::-1] + 1` on 256-2048 x 512 f32 took
7.5 / 12.5 / 26.9 / 61.7 us in a loop where `x + 1` took 6.8 / 13.2 / 28.4 / 57.5 (Zen 5 VM,
2026-12-02), and was priced 3.8-4.7x that by its bytes at the target's bandwidth. A slice
reads part of its operand: `z[:n] + z[n:2n]` (n = 512 x 512) took 20-24 us, priced 84.7 by
its bytes, 33.9 as the two-input add it is (two separate inputs' add: 44-65 us). A
bitcast_convert reinterprets its operand's bits (a uniform sample's uint32 as f32)."""


@dataclass(frozen=True)
class Composition:
    """What a fused loop kernel computes, beyond its output's shape: elementwise ops (on more
    than one element), of which transcendentals (sine apart), sines, divides and compares or
    selects; inputs of the output's size and broadcast vectors (each broadcast of a
    non-scalar to the output's size counted); of the ops, those on uint32 (`_INTEGER`) and
    those on bf16 (`half`: XLA:CPU widens and rounds around them)."""

    ops: int
    transcendental: int
    trigonometric: int
    divides: int
    selects: int
    full_inputs: int
    broadcasts: int
    integer: int = 0
    half: int = 0


# Per `runtime.fused_chains.VOCAB` and `INT_VOCAB` step: (ops, transcendental, sine, divide,
# compare/select, reads y, row vector, column vector, uint32 ops); a column's compare is
# counted by `chain_composition`.
_STEP = {
    "add_c": (1, 0, 0, 0, 0, 0, 0, 0, 0),
    "mul_c": (1, 0, 0, 0, 0, 0, 0, 0, 0),
    "max0": (1, 0, 0, 0, 0, 0, 0, 0, 0),
    "min_c": (1, 0, 0, 0, 0, 0, 0, 0, 0),
    "neg": (1, 0, 0, 0, 0, 0, 0, 0, 0),
    "abs": (1, 0, 0, 0, 0, 0, 0, 0, 0),
    "round": (1, 0, 0, 0, 0, 0, 0, 0, 0),
    "clip": (2, 0, 0, 0, 0, 0, 0, 0, 0),
    "add_y": (1, 0, 0, 0, 0, 1, 0, 0, 0),
    "mul_y": (1, 0, 0, 0, 0, 1, 0, 0, 0),
    "div_y": (1, 0, 0, 1, 0, 1, 0, 0, 0),
    "where_y": (2, 0, 0, 0, 2, 1, 0, 0, 0),
    "mul_row": (1, 0, 0, 0, 0, 0, 1, 0, 0),
    "sub_col": (1, 0, 0, 0, 0, 0, 0, 1, 0),
    "where_col": (1, 0, 0, 0, 1, 0, 0, 1, 0),
    "tanh": (1, 1, 0, 0, 0, 0, 0, 0, 0),
    "exp": (1, 1, 0, 0, 0, 0, 0, 0, 0),
    "log": (1, 1, 0, 0, 0, 0, 0, 0, 0),
    "rsqrt": (1, 1, 0, 0, 0, 0, 0, 0, 0),
    "sigmoid": (4, 1, 0, 1, 0, 0, 0, 0, 0),
    "sin": (1, 0, 1, 0, 0, 0, 0, 0, 0),
    "sq": (1, 0, 0, 0, 0, 0, 0, 0, 0),
    "add_z": (1, 0, 0, 0, 0, 0, 0, 0, 0),
    "mul_z": (1, 0, 0, 0, 0, 0, 0, 0, 0),
    "sub_w": (1, 0, 0, 0, 0, 0, 0, 0, 0),
    "mul_w": (1, 0, 0, 0, 0, 0, 0, 0, 0),
    "iadd_y": (1, 0, 0, 0, 0, 1, 0, 0, 1),
    "ixor_y": (1, 0, 0, 0, 0, 1, 0, 0, 1),
    "ior_y": (1, 0, 0, 0, 0, 1, 0, 0, 1),
    "iadd_c": (1, 0, 0, 0, 0, 0, 0, 0, 1),
    "imul_c": (1, 0, 0, 0, 0, 0, 0, 0, 1),
    "iand_c": (1, 0, 0, 0, 0, 0, 0, 0, 1),
    "shl_c": (1, 0, 0, 0, 0, 0, 0, 0, 1),
    "shr_c": (1, 0, 0, 0, 0, 0, 0, 0, 1),
    "rotl": (3, 0, 0, 0, 0, 0, 0, 0, 3),
    "ixor_row": (1, 0, 0, 0, 0, 0, 1, 0, 1),
}
_MORE_INPUTS = {"add_z": "z", "mul_z": "z", "sub_w": "w", "mul_w": "w"}
"""Steps that read a third or a fourth full-size input, by the input they read."""
REDUCE_KINDS = {"sum_rows": 1, "sum_lead": 2}
"""A reduce chain's last step (`runtime.fused_chains.REDUCES`) as the reduce model's
feature: 1 sums the last dimension, 2 all the others."""


def chain_composition(ops: Sequence[str], shape: Sequence[int], dtype: str = "f32") -> Composition:
    """The composition of a measured chain (`runtime.fused_chains.VOCAB` step names) on x of
    `shape`, as `group_composition` finds it in the chain's StableHLO: the row vector (the
    last dimension) is a full-size input where the leading dimensions are 1 and a broadcast
    where x has two dimensions or more (of a (1, d) chain, both), the column vector (the
    leading dimensions) a full-size input where the last dimension is 1 and a broadcast
    where it is more and the leading ones are; `where_col` compares the column, an op
    unless the column is one element. Every op of a bf16 chain is a `half` one."""
    try:
        steps = [_STEP[o] for o in ops]
    except KeyError as e:
        raise CalibrationError(f"unknown chain step {e.args[0]!r}") from None
    rank = len(shape)
    lead = math.prod(shape[:-1])
    row_full, row_broadcast = lead == 1, rank > 1 and shape[-1] > 1
    col_full = rank > 1 and shape[-1] == 1
    col_broadcast = rank > 1 and shape[-1] > 1 and lead > 1
    rows = sum(s[6] for s in steps)
    cols = sum(s[7] for s in steps)
    compares = ops.count("where_col") * int(lead > 1)
    full = 1 + int(any(s[5] for s in steps)) + len({_MORE_INPUTS.get(o) for o in ops} - {None})
    full += int(rows > 0 and row_full) + int(cols > 0 and col_full)
    n_ops = sum(s[0] for s in steps) + compares
    return Composition(
        ops=n_ops,
        transcendental=sum(s[1] for s in steps),
        trigonometric=sum(s[2] for s in steps),
        divides=sum(s[3] for s in steps),
        selects=sum(s[4] for s in steps) + compares,
        full_inputs=full,
        broadcasts=rows * row_broadcast + cols * col_broadcast,
        integer=sum(s[8] for s in steps),
        half=n_ops if dtype == "bf16" else 0,
    )


SUM_ABSORBS = ("sq", "neg")
"""Chain steps that are no step of a sum's kernel where they feed the sum (as
`fusion_cost.sum_absorbs` finds them in a fused group): YNNPACK sums squares itself, and XLA
moves a negate past the sum."""


def split_reduce(ops: Sequence[str]) -> tuple[tuple[str, ...], int]:
    """A chain's elementwise steps (less a last one the sum absorbs: `SUM_ABSORBS`) and its
    sum's `REDUCE_KINDS` value (0: a loop chain)."""
    if ops and ops[-1] in REDUCE_KINDS:
        steps = tuple(ops[:-1])
        if steps and steps[-1] in SUM_ABSORBS:
            steps = steps[:-1]
        return steps, REDUCE_KINDS[ops[-1]]
    return tuple(ops), 0


def rows_shape(shape: Sequence[int]) -> tuple[int, int]:
    """A summed tensor as (rows, last dimension): a sum over the last dimension or over all
    the others reads the same memory whatever the leading dimensions are."""
    return (math.prod(shape[:-1]), shape[-1]) if shape else (1, 1)


def summed_shape(op: OpInfo) -> tuple[tuple[int, ...], int]:
    """A one-input reduce's input as XLA normalises it (`elementwise.collapsed_reduce`) and
    its `REDUCE_KINDS` value there: 1 over the last dimension (all of a 1-D tensor), 2 over
    all the others; 0 for any other reduce. A sum of all of a tensor is the 1-D sum of its
    elements: on 104 held-out sums of all with steps before them (losses, means of scaled
    pixels, 13 shapes of 2-4 dimensions, timed in a loop; two runs, their own spread 1.10)
    the error factor went 2.81 / 2.73 (priced as the plain sum's bytes) -> 1.41 / 1.38;
    as (rows, last dimension) with 378 chains timed as sums of all of matrices, 1.65 / 1.59
    (Zen 4 VM, 2026-12-05: XLA runs a few of them row by row, `(x * 0.5).sum()` of 65536x3
    at 4x its time on 196608, but most not). A sum over one leading axis that keeps more than
    YNNPACK's column tile is 0: it runs a slow path no sum chain reached (their last
    dimensions stop at 2048; `elementwise.wide_column_reduce`: `(x * x).sum(0)` of 8 x 16385
    f32 343 us in a loop on the Xeon VM, 2026-12-06, priced 29.6 from the chains)."""
    src = op.operands[0] if op.operands else None
    if op.short_name != "reduce" or len(op.operands) != 2 or src is None or not src.shape:
        return (), 0
    if wide_column_reduce(src.shape, op.attrs.get("dimensions") or ()):
        return (), 0
    shape, dims = collapsed_reduce(src.shape, op.attrs.get("dimensions") or ())
    if dims == (len(shape) - 1,):
        return shape, 1
    return shape, 2 if len(shape) > 1 and dims == tuple(range(len(shape) - 1)) else 0


def _widens_to_f32(op: OpInfo) -> bool:
    """Whether an op converts a narrow integer tensor (`_NARROW_INTS`) to f32."""
    return (
        bool(op.operands and op.results)
        and op.operands[0].element_type in _NARROW_INTS
        and op.results[0].element_type == "f32"
    )


def group_composition(
    members: Sequence[OpInfo], input_bytes: float, widening: bool = False, absorbed: bool = False
) -> Composition | None:
    """The composition of a fused group's members reading `input_bytes` (its distinct inputs,
    `fusion.GroupTraffic`), or None where the model does not answer for it: a member other
    than f32 (and boolean) ops the chains ran (`_TRAINED`), free index moves and scalar
    work (XLA hoists it), or no elementwise op; with `widening`, a convert of a narrow
    integer input to f32 counts as one op (loop kernels: `_NARROW_INTS`; a YNNPACK sum of
    uint8 channels ran 70 us where the sums' model, which saw f32 inputs only, said 168). A
    broadcast counts where it makes a full-size tensor of a non-scalar (JAX broadcasts a row
    vector in two steps, 16 -> 1x16 -> 16384x16). With `absorbed` (a sum took in the op
    that fed it, left out of `members`: `fusion_cost.sum_absorbs`), no other work is the
    composition of no steps, as `chain_composition` gives it."""
    work = [
        op
        for op in members
        if op.short_name not in _FREE
        and not op.removed
        and any((t.num_elements or 0) > 1 for t in (*op.operands, *op.results))
    ]
    if not work:
        return Composition(0, 0, 0, 0, 0, 1, 0) if absorbed else None
    for op in work:
        types = {t.element_type for t in (*op.operands, *op.results)}
        if op.short_name == "convert" and (types <= _WORDS or (widening and _widens_to_f32(op))):
            continue
        if types <= _INT_TYPES and op.short_name in _INT_STEPS:
            continue
        if op.short_name in _LANE_OPS and types <= _TYPES | {"i32"}:
            continue
        if op.short_name not in _TRAINED or not op.results:
            return None
        if not (types <= _TYPES or types <= _HALF_TYPES):
            return None
        if op.short_name in _TRIGONOMETRIC and "bf16" in types:
            return None  # `_HALF_TYPES`: the bf16 chains' sines are not a sine of data
    out = max(op.results[0].num_elements or 0 for op in work)
    out_bytes = max(op.results[0].nbytes or 0 for op in work)
    if out == 0 or out_bytes == 0:
        return None
    broadcasts = sum(
        1
        for op in members
        if op.short_name == "broadcast_in_dim"
        and op.operands
        and (op.operands[0].num_elements or 0) > 1
        and op.results
        and op.results[0].num_elements == out
    )
    return Composition(
        ops=len(work),
        transcendental=sum(
            op.op_class == "transcendental" and op.short_name not in _TRIGONOMETRIC for op in work
        ),
        trigonometric=sum(op.short_name in _TRIGONOMETRIC for op in work),
        divides=sum(op.short_name == "divide" for op in work),
        selects=sum(op.short_name in _SELECTS for op in work),
        full_inputs=max(1, int(input_bytes // out_bytes)),
        broadcasts=broadcasts,
        integer=sum(
            op.short_name in _INT_STEPS and {t.element_type for t in op.results} <= _INT_TYPES
            for op in work
        ),
        half=sum(any(t.element_type == "bf16" for t in (*op.operands, *op.results)) for op in work),
    )


def features(shape: Sequence[int], comp: Composition) -> list[float]:
    """Shape features of the kernel's f32 output, its composition and its work (elements x ops)."""
    n = math.prod(shape) if shape else 1
    return [*shape_features(shape, 4.0), *map(float, astuple(comp)), float(n * comp.ops)]


def reduce_features(shape: Sequence[int], comp: Composition, kind: int) -> list[float]:
    """Features of a sum of `kind` over a tensor of `shape` computed by `comp` in the same
    kernel: the summed tensor's `rows_shape` features, the composition, the kind and the
    work (elements x ops, the sum one of them)."""
    n = math.prod(shape) if shape else 1
    return [
        *shape_features(rows_shape(shape), 4.0),
        *map(float, astuple(comp)),
        float(kind),
        float(n * (comp.ops + 1)),
    ]


_WORK = -1  # the features' last column: elements x ops
_COMPOSITION = slice(len(shape_features((1,), 4.0)), None)  # composition columns and work


class FusedLoopRegressor(RegressorMixin, BaseEstimator):
    """Kernel time (us) from `features` rows: a LAD floor + slope line in work times a boosted
    multiplicative residual, trained on absolute error of the log ratio; fixed seed."""

    def __init__(
        self,
        max_iter: int = 200,
        learning_rate: float = 0.1,
        min_samples_leaf: int = 5,
        random_state: int = 0,
    ) -> None:
        self.max_iter = max_iter
        self.learning_rate = learning_rate
        self.min_samples_leaf = min_samples_leaf
        self.random_state = random_state

    def _line(self, X: np.ndarray) -> np.ndarray:
        return np.maximum(self.floor_ + self.slope_ * X[:, _WORK], self.floor_)

    def fit(self, X: np.ndarray, y: np.ndarray) -> FusedLoopRegressor:
        X, y = np.asarray(X, dtype=float), np.asarray(y, dtype=float)
        floor, slope = lad_line(X[:, _WORK], y)
        self.floor_ = max(floor, 0.25 * float(y.min()))
        self.slope_ = max(slope, 0.0)
        self.range_ = (X.min(axis=0), X.max(axis=0))
        self.hgb_ = residual_trees(self, len(y))
        with threadpool_limits(1):
            self.hgb_.fit(X, np.log(y / self._line(X)))
        return self

    def predict(self, X: np.ndarray) -> np.ndarray:
        X = np.asarray(X, dtype=float)
        with threadpool_limits(1):
            return self._line(X) * np.exp(self.hgb_.predict(X))

    def covers(self, X: np.ndarray) -> np.ndarray:
        """True where a row's size and every composition count lie within the training rows'
        (its composition columns and work are what the chains spanned)."""
        X = np.asarray(X, dtype=float)
        lo, hi = self.range_
        c = _COMPOSITION
        size = (X[:, 0] >= lo[0]) & (X[:, 0] <= hi[0])
        return size & np.all((X[:, c] >= lo[c]) & (X[:, c] <= hi[c]), axis=1)


def load_chains(
    path: Path, reduces: bool = False, extended: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """(features, us) of a fused-chain CSV's short f32 loop chains
    (`runtime.fused_chains.write_csv`), with `extended` of all its loop chains (uint32 ones
    and ones longer than `SHORT_STEPS` too), or with `reduces` of its chains that end in a
    sum (`reduce_features`); rows at the median machine speed of the file's short loop
    chains by their `sentinel_us`."""
    return _select(_read_chains(path), reduces, path, extended)


SHORT_STEPS = 8
"""The most steps of the f32 loop chains the model's first regressor is fitted on (those of
`runtime.fused_chains.draw`, and of its other draws up to this length). Longer ones and uint32
ones and bf16 ones (`draw_long`, `draw_cheap`, `draw_inputs`, `draw_ints`, `draw_bf16`)
fit a second, with them, that
answers for kernels the first does not cover: fitted all in one, they moved the short
chains' line and so every loop's price (the zoo's `sin(x) * 2` on 512x256 by -14%)."""

# A chain row: its shape, its composition before any sum, the sum's kind (0: a loop chain),
# its time (us), its sentinels' time (us) and whether it is a uint32 or a long loop chain.
_Row = tuple[tuple[int, ...], Composition, int, float, float, bool]


def _read_chains(path: Path) -> list[_Row]:
    """The rows of a fused-chain CSV; a malformed row or a time that is no positive number is
    a `CalibrationError` naming the file and row."""
    lines = [ln for ln in path.read_text().splitlines() if ln and not ln.startswith("#")]
    out = []
    for k, r in enumerate(csv.DictReader(lines), start=2):
        try:
            shape = tuple(int(d) for d in r["shape"].split("x"))
            t = float(r["measured_us_median"])
            s = float(r.get("sentinel_us") or "nan")
            ops = r["chain"].split(".")
        except (KeyError, ValueError, AttributeError) as e:
            raise CalibrationError(f"{path}: row {k}: malformed ({e})") from None
        if not (math.isfinite(t) and t > 0):
            raise CalibrationError(f"{path}: row {k}: time {t!r} is not a positive number")
        steps, kind = split_reduce(ops)
        dtype = r.get("dtype") or "f32"
        extended = not kind and (dtype in ("u32", "bf16") or len(steps) > SHORT_STEPS)
        out.append((shape, chain_composition(steps, shape, dtype), kind, t, s, extended))
    return out


def _select(
    rows: Sequence[_Row], reduces: bool, path: Path, extended: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """`load_chains` of already read rows. The short loop chains set the file's speed (the
    sum, long and uint32 chains were measured later, beside them)."""
    loops = [s for _, _, kind, _, s, ext in rows if not kind and not ext]
    factors = cf.speed_factors([r[4] for r in rows], cf.median_sentinel(loops))
    picked = [
        (reduce_features(shape, comp, kind) if kind else features(shape, comp), t * f)
        for (shape, comp, kind, t, _, ext), f in zip(rows, factors, strict=True)
        if bool(kind) == reduces and (extended or not ext)
    ]
    if not picked:
        raise CalibrationError(f"{path}: no {'sum chain rows' if reduces else 'rows'}")
    return np.array([x for x, _ in picked]), np.array([t for _, t in picked])


@dataclass(frozen=True)
class FusedLoopModel:
    """Fitted regressors of the short loop chains, where the CSV has them of all its loop
    chains with the uint32 and long ones (`wide_regressor`) and of the chains that end in a
    sum (`reduce_regressor`), and the CSV they came from."""

    regressor: FusedLoopRegressor
    source: str
    reduce_regressor: FusedLoopRegressor | None = None
    wide_regressor: FusedLoopRegressor | None = None
    # Times of a re-levelled calibration's chains: the source's times this many times
    # (`calibration_files.relevel_of`).
    factor: float = 1.0

    def predict_us(
        self, kernels: Sequence[tuple[Sequence[int], Composition]]
    ) -> list[float | None]:
        """Each (output shape, composition) kernel's time in us, from the short chains'
        regressor where they cover it, else from the wide one's, else None."""
        rows = [features(shape, comp) for shape, comp in kernels]
        out = _covered(self.regressor, rows, self.factor)
        rest = [k for k, t in enumerate(out) if t is None]
        if self.wide_regressor is not None and rest:
            wide = _covered(self.wide_regressor, [rows[k] for k in rest], self.factor)
            for k, t in zip(rest, wide, strict=True):
                out[k] = t
        return out

    def predict_reduce_us(
        self, kernels: Sequence[tuple[Sequence[int], Composition, int]]
    ) -> list[float | None]:
        """Each (summed shape, composition before the sum, `REDUCE_KINDS` value) kernel's
        time in us, None where the sum chains do not cover it or the CSV has none. A sum
        larger than the largest chain is that chain size's time an element (`_shrunk`): the
        chains' time an element is flat past the L2 (Xeon VM, 2026-12-07, in a loop: the
        squared distances of 1000 x 64 to 500 x 64 rows, 32M elements summed in 64s, 88 ps an
        element; of 128 x 256 to 128 x 256, 4.2M, 81), where the members' rule priced them at
        0.15x."""
        if self.reduce_regressor is None:
            return [None] * len(kernels)
        top = self.reduce_regressor.range_[1][0]
        scaled = [_shrunk(shape, top) for shape, _, _ in kernels]
        rows = [
            reduce_features(small, comp, kind)
            for small, (_, comp, kind) in zip(scaled, kernels, strict=True)
        ]
        out = _covered(self.reduce_regressor, rows, self.factor)
        return [
            None if t is None else t * math.prod(shape) / math.prod(small)
            for t, small, (shape, _, _) in zip(out, scaled, kernels, strict=True)
        ]


def _shrunk(shape: Sequence[int], elements: float) -> tuple[int, ...]:
    """A summed shape of more than `elements` as (rows, last dimension) with as many rows as
    keep it within them (the shape itself where it is, or where one row is more)."""
    if not shape or math.prod(shape) <= elements or shape[-1] > elements:
        return tuple(shape)
    return (max(1, int(elements // shape[-1])), shape[-1])


def _covered(
    regressor: FusedLoopRegressor, rows: Sequence[list[float]], factor: float = 1.0
) -> list[float | None]:
    """The regressor's time (times `factor`) for the rows it covers, None for the others."""
    if not rows:
        return []
    X = np.array(rows)
    covered = regressor.covers(X)
    out: list[float | None] = [None] * len(rows)
    if covered.any():
        for i, t in zip(np.flatnonzero(covered), regressor.predict(X[covered])):
            out[int(i)] = float(t) * factor
    return out


@functools.lru_cache(maxsize=4)
def _fit(path: str, mtime_ns: int) -> FusedLoopModel:
    relevel = cf.relevel_of(Path(path))
    if relevel is not None:  # the chains shipped for this machine's reference, scaled
        theirs = cf.nearest_shipped(SHIPPED)
        if theirs is not None and theirs[1]:
            source = theirs[0]
            own = _fit(str(source), source.stat().st_mtime_ns)
            return dataclasses.replace(own, factor=relevel.factor)

    def fit() -> FusedLoopModel:
        rows = _read_chains(Path(path))
        loops = FusedLoopRegressor().fit(*_select(rows, False, Path(path)))
        sums = wide = None
        if any(r[2] for r in rows):
            sums = FusedLoopRegressor().fit(*_select(rows, True, Path(path)))
        if any(r[5] for r in rows):
            wide = FusedLoopRegressor().fit(*_select(rows, False, Path(path), extended=True))
        return FusedLoopModel(loops, Path(path).name, sums, wide)

    return model_cache.fitted("fused_loops", Path(path), fit, (Path(path).name,))


def chains_path(calibration: Path) -> Path:
    """Where `stablehlo-perf-calibrate` writes the fused chains it measures with a calibration."""
    return calibration.with_name(calibration.stem + ".fused.csv")


def model_for_host(path: Path | None = None) -> FusedLoopModel | None:
    """The model fitted from `path` (default: the chains of this machine's host calibration,
    else the shipped ones) if its chains were measured on this machine, else None; a file it
    cannot read is named in a warning and not used."""
    if path is None:
        mine = chains_path(cf.calibration_path("host"))
        shipped = None if mine.is_file() else cf.nearest_shipped(SHIPPED)
        path = mine if shipped is None else shipped[0]
    if not path.is_file():
        return None
    found = cf.nearest_machine([cf.header_value(path, "machine")])
    if found is None or not found[1]:
        return None
    try:
        return _fit(str(path), path.stat().st_mtime_ns)
    except CalibrationError as e:
        warnings.warn(f"{e}; fused loop kernels priced from their members", stacklevel=2)
        return None
