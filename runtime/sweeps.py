"""Calibration sweeps: which (op, dtype, shape) to measure, and how to build each as one jitted op.

Shapes follow SCALE-Sim TPU's elementwise study: a 1-D sweep of lengths 32..8192
step 32, a 2-D sweep of each dim 64..1024 step 64, total sizes log-uniform up to
~16M elements with several factorisations of each size, and shapes at
power-of-two boundaries (2^k - 1, 2^k, 2^k + 1). `quick=True` keeps a strided
subset of each (sizes up to 4M) so a 2-core machine calibrates in minutes. Loop ops
(not sorts, FFTs or transposes) also measure `narrow_shapes`: rows whose last dim
leaves a vector tail; all but sorts and FFTs `layer_shapes`: rows of a layer's width.

Shapes are recorded as the tensor `analysis.elementwise.op_tensor` reads: the
result for elementwise ops and converts (whose dtype is the result's), the input
of a reduction, the result of a transpose. dot_general rows are (batch, M, N, K[, layout])
with layout 2·[lhs is K x M] + [rhs is N x K] (`analysis.elementwise.gemm_layout`; absent: 0);
convolution rows are NHWC (N, H, W, C, KH, KW, O, stride[, groups]) with SAME padding
(groups = feature_group_count; depthwise when groups = C = O); conv3d rows are NDHWC
(N, D, H, W, C, K, O, stride): a KxKxK window, SAME padding. reduce_window rows are
NHWC max pools (N, H, W, C, K, stride): a KxK window, SAME padding, sum_pool rows the same
pools summing (an average pool's window); cumsum rows are (A, B, axis), axis 1-based:
`jnp.cumsum` of an AxB array, which JAX lowers to a reduce_window whose window spans the
axis, cummax rows the same of `lax.cummax`; pool_grad rows are max pools' (N, H, W, C, K,
stride) too, timed as the pool's vector-Jacobian product (one stablehlo.select_and_scatter).
argmax rows are the input of `jnp.argmax` over the last axis (a variadic reduce), sum_axis0
and argmax_axis0 rows the input of `jnp.sum` / `jnp.argmax` over the first axis, sum_axis1
rows the rank-3 input of `jnp.sum` over the middle axis, sum_groups rows the rank-4 input
of `jnp.sum` over axes 1 and 3 (f32 only: a group norm's statistics); top_k rows are (rows,
length, k); fft rows the input of an RFFT of the last axis; gather rows are (table rows, row
width, indices) of `table[idx]` (random indices).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from stablehlo_perf.runtime.timing import Case

__all__ = [
    "DTYPES",
    "OPS",
    "LoopCase",
    "Spec",
    "build_case",
    "build_loop_case",
    "in_loop",
    "op_and_inputs",
    "sweep",
    "volume_draws",
]

_JNP = {
    "f32": jnp.float32,
    "bf16": jnp.bfloat16,
    "f16": jnp.float16,
    "i8": jnp.int8,
    "i32": jnp.int32,
    "f64": jnp.float64,
}
DTYPES = ("f32", "bf16")


def _relu(x: jax.Array) -> jax.Array:
    return jnp.maximum(x, jnp.zeros((), x.dtype))


def _other(dtype: str) -> str:
    return "bf16" if dtype == "f32" else "f32"


# op -> (number of inputs, function of the inputs); converts and the rest are special-cased.
_ELEMENTWISE: dict[str, tuple[int, Callable[..., jax.Array]]] = {
    "add": (2, lax.add),
    "multiply": (2, lax.mul),
    "divide": (2, lax.div),
    "maximum": (1, _relu),
    "select": (3, lambda p, a, b: lax.select(p > 0, a, b)),
    "exponential": (1, lax.exp),
    "tanh": (1, lax.tanh),
    # On standard normal inputs, as the other ops: XLA:CPU's sine is data-dependent (a
    # 512x256 f32 sine and multiply in a loop: 675-765 us on N(0, 1), 233-242 us on
    # N(0, 0.01); 2026-12-01, this VM), and with no rows of its own the transcendental
    # model priced it as a tanh.
    "sine": (1, lax.sin),
    "cosine": (1, lax.cos),
    "logistic": (1, lax.logistic),
    "negate": (1, lax.neg),
    # A rounding (ceil and the roundings are priced by its rows): one instruction on f32, like
    # a negate, but a scalar call an element on f16 (65536 in a loop, Zen 4 VM: 38 us, a
    # negate 16; `analysis.elementwise._HALF_SLOT`).
    "floor": (1, lax.floor),
    # Measured on positive inputs (|x| + 0.5): a NaN or infinity would take other paths.
    # rsqrt as normalisations use it, rsqrt(var + eps): XLA:CPU runs a lone rsqrt 3-5x
    # slower than one fused with an add (2M f32: 3.7 ms vs 0.7-1.4 ms, 2026-11-30).
    "rsqrt": (1, lambda x: lax.rsqrt(x + 1e-5)),
    "sqrt": (1, lax.sqrt),
    "log": (1, lax.log),
    "convert": (1, lambda x: x),
    "transpose": (1, lambda x: x),
    # The identity: XLA runs it as a copy kernel, inside the loop (the result cannot share
    # the input's buffer) and as a program (a result never aliases an undonated input).
    # Data movement that keeps rows contiguous (slices, concatenations, pads, broadcasts,
    # transposes that keep the minor axis) is priced by these rows.
    "copy": (1, lambda x: x),
    "reduce": (1, lambda x: jnp.sum(x, axis=-1)),
    # XLA:CPU sorts with a comparator call per comparison: ~15x a reduction of the same size.
    "sort": (1, lambda x: jnp.sort(x, axis=-1)),
    # A variadic reduce (value, index) with a comparator body: XLA:CPU does not vectorise
    # it (512x1000 f32: ~1.3 ms, ~15x a sum of the same tensor).
    "argmax": (1, lambda x: jnp.argmax(x, axis=-1)),
    # The same over the first axis (rank >= 2 only): a column sum or argmax keeps the
    # minor axis and walks the rows, which costs otherwise than a row's contiguous run.
    "sum_axis0": (1, lambda x: jnp.sum(x, axis=0)),
    "argmax_axis0": (1, lambda x: jnp.argmax(x, axis=0)),
    # The middle axis of a rank-3 tensor (`middle_axis_shapes`): kept dims on both sides of
    # the reduced one, which XLA:CPU runs otherwise than either a row or a column sum.
    "sum_axis1": (1, lambda x: jnp.sum(x, axis=1)),
    # A group norm's statistics (`group_norm_shapes`): an N x S x G x C input summed over the
    # pixels S and the channels C of each group, two reduced runs with the groups kept
    # between them, which XLA:CPU runs at up to 12x a row sum's time an element (2 channels a
    # group: ~1.8 ns an element, 32: ~0.15, as a row sum).
    "sum_groups": (1, lambda x: jnp.sum(x, axis=(1, 3))),
    # stablehlo.fft (RFFT of the last axis): a library call, priced by nothing else.
    "fft": (1, lambda x: jnp.fft.rfft(x, axis=-1)),
    # CHLO's special functions (`analysis.opinfo.SPECIAL_FUNCTIONS`): erf_inv of the
    # standard normal clamped into (-1, 1) (jax.random.normal's own use of it), lgamma and
    # digamma on positive inputs (`_POSITIVE_INPUTS`: away from the poles).
    "erf": (1, lax.erf),
    "erf_inv": (1, lambda x: lax.erf_inv(jnp.clip(x, -0.99, 0.99))),
    "erfc": (1, lax.erfc),
    "lgamma": (1, lax.lgamma),
    "digamma": (1, lax.digamma),
    "atan": (1, lax.atan),
    # Ops XLA:CPU runs an element at a time through a scalar instruction or a libm call,
    # 10-100x an add (65536 f32 in a loop, Zen 4 VM, 2026-12-05: add 9 us, expm1 55, log1p
    # 58, pow 278, tan 559, cbrt 561, fmod 490; their prices were 24, 24, 24, 24, 24 and 10).
    "tan": (1, lax.tan),
    "exponential_minus_one": (1, lax.expm1),
    "log_plus_one": (1, lax.log1p),
    "cbrt": (1, lax.cbrt),
    "power": (2, lax.pow),
    "remainder": (2, lax.rem),
    # Integer division by a tensor (`_INTEGER_ROWS`: i32 rows; the op is stablehlo.divide or
    # remainder of integers): x86 has no vector integer divide, so XLA:CPU divides an element
    # at a time, ~1 ns each on 2 threads (65536 i32: 65-73 us against 8 for an add), unless
    # the divisor is a constant, which it turns into a multiply and shifts (5 us).
    "integer_divide": (2, lax.div),
    "integer_remainder": (2, lax.rem),
}
OPS = (
    *_ELEMENTWISE, "dot_general", "convolution", "conv3d", "reduce_window", "sum_pool",
    "cumsum", "cummax", "pool_grad", "top_k", "gather",
)  # fmt: skip
QUICK_SORT_MAX = 2**20
"""Largest sort of a quick sweep: a 2M-element sort takes ~0.8 s on the project's VM, and the
loop timing runs it ~200 times."""
# Ops whose quick sweep stops at QUICK_SORT_MAX elements, and ops measured in the first
# dtype only (f32: what their consumers use).
_CAPPED = frozenset({"sort", "argmax", "argmax_axis0", "fft"})
_FIRST_DTYPE_ONLY = frozenset({"argmax", "argmax_axis0", "fft"})
_RANK_2 = frozenset({"transpose", "sum_axis0", "argmax_axis0"})
_NARROW_GEMM = ("bf16", "i8", "i32")
_POSITIVE_INPUTS = frozenset({"rsqrt", "sqrt", "log", "lgamma", "digamma", "log_plus_one", "power"})
_INTEGER_ROWS = frozenset({"integer_divide", "integer_remainder"})
"""Ops measured in i32 only (not the sweep's dtypes), on dividends of up to 2^20 in magnitude
and divisors 1-1000."""
_QUICK_OPS = (
    "add",
    "maximum",
    "exponential",
    # tanh (GELU) and logistic (sigmoid, SiLU) are dearer than exp on a CPU (logistic
    # ~2x): the transcendental model tells them apart by op code only where measured.
    "tanh",
    "logistic",
    # XLA:CPU's rsqrt, sqrt and log cost 3-7x an exp of the same tensor (rsqrt of 2.4M f32:
    # 4.0 ms, exp 1.3 ms); divide and multiply are binary ops apart from add.
    "rsqrt",
    "sqrt",
    "log",
    "multiply",
    "divide",
    "convert",
    "transpose",
    "copy",
    "reduce",
    "sort",
    "argmax",
    "sum_axis0",
    "argmax_axis0",
    "sum_axis1",
    "sum_groups",
    "fft",
    "dot_general",
    "convolution",
    "conv3d",
    "reduce_window",
    "sum_pool",
    "cumsum",
    "cummax",
    "pool_grad",
    "top_k",
    "gather",
)


@dataclass(frozen=True, order=True)
class Spec:
    """One measurement to make; `key` is its identity in sweep CSVs (resume, dedup)."""

    op: str
    dtype: str
    shape: tuple[int, ...]

    @property
    def key(self) -> str:
        return f"{self.op},{self.dtype},{'x'.join(map(str, self.shape))}"


def _factorisations(n: int, rng: np.random.Generator, count: int) -> list[tuple[int, ...]]:
    """Up to `count` distinct shapes of exactly n elements, rank 1-3, last dim a divisor."""
    divs = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    divs = sorted({*divs, *(n // d for d in divs)})
    out = {(n,)}
    for _ in range(8 * count):
        if len(out) >= count:
            break
        last = int(rng.choice(divs))
        rest = n // last
        if rng.random() < 0.5 or rest == 1:
            out.add((rest, last))
        else:
            sub = [d for d in divs if rest % d == 0 and d <= rest]
            mid = int(rng.choice(sub))
            out.add((rest // mid, mid, last))
    return sorted(out)


SMALL_LENGTHS = (160, 288, 416)
"""Lengths a quick sweep measures below its grid's second (544), in every dtype: the loop
of a 32-element op is hoisted into one kernel and not measured (`LoopCase.hoisted`), and
with nothing in between the trees put a 512-element f32 cosine at 0.6 us, between 0.1
(the hoisted row) and 2.8 (544; measured 2.2 at 416)."""


def elementwise_shapes(quick: bool, seed: int = 0) -> list[tuple[int, ...]]:
    """The shape sweep shared by every elementwise op (see the module docstring)."""
    rng = np.random.default_rng(seed)
    step1, step2, n_sizes, n_fact, top = (16, 4, 12, 2, 22) if quick else (1, 1, 40, 4, 24)
    shapes: set[tuple[int, ...]] = set()
    shapes.update((n,) for n in range(32, 8193, 32 * step1))
    dims = range(64, 1025, 64 * step2)
    shapes.update((a, b) for a in dims for b in dims)
    for n in np.unique(np.round(2.0 ** rng.uniform(10, top, n_sizes)).astype(int)):
        shapes.update(_factorisations(int(n), rng, n_fact))
    for k in range(7, 13, 2 if quick else 1):
        for last in (2**k - 1, 2**k, 2**k + 1):
            shapes.add((64, last))
    return sorted(shapes, key=lambda s: (math.prod(s), s))


def narrow_shapes(quick: bool, seed: int = 1) -> list[tuple[int, ...]]:
    """Rows whose last dim leaves a vector tail (`analysis.elementwise` vector_tail): XLA:CPU
    runs such a loop several times slower per element (4248x7 f32 add: 1.9 ns per element,
    22191x64: 0.3), and the main sweep's rows are nearly all multiples of 32."""
    rng = np.random.default_rng(seed)
    per_last = 2 if quick else 4
    shapes = set()
    for last in (3, 6, 10, 20, 45, 90, 250, 600):
        for n in 2.0 ** rng.uniform(10, 21, per_last):
            shapes.add((max(1, round(n / last)), last))
    return sorted(shapes, key=lambda s: (math.prod(s), s))


# Ops the narrow-row shapes are measured for: loops over rows (not library calls).
_NARROW_SKIP = frozenset({"sort", "fft", "transpose"})

LAYER_WIDTHS = (128, 256, 512, 1024, 4096)


def layer_shapes(quick: bool) -> list[tuple[int, ...]]:
    """Activations as models hold them: rows of a layer's width (a power of two) at 2^18,
    2^20 and 2^22 elements (the full sweep from 2^16 to 2^24). The grid's 2-D shapes stop at
    832 (quick) and its large sizes are random factorisations, so the trees had no row of
    4096 x 256 or 2048 x 1024: in a loop on the Zen 5 VM (2026-12-03, at the reference's
    speed) row sums of them took 56 and 90 us where the model said 69 and 144, tanh of
    4096 x 1024 808 us (model 1179), column sums of 4096 x 1024 241 (model 394)."""
    sizes = (2**18, 2**20, 2**22) if quick else tuple(2**k for k in range(16, 25, 2))
    return sorted(
        {(n // w, w) for n in sizes for w in LAYER_WIDTHS}, key=lambda s: (s[0] * s[1], s)
    )


# Ops the layer shapes are not measured for: sorts and FFTs of 4M elements take seconds.
_LAYER_SKIP = frozenset({"sort", "fft"})


# (input, output) channels of the convolution layers swept: equal counts (residual blocks)
# as well as widening layers (a 1x16x16x32 -> 32 3x3 layer was predicted at 75 us from its
# neighbours, measured 48; Xeon VM, 2026-12-01).
_CONV_CHANNELS = (
    (3, 16), (3, 32), (16, 16), (16, 32), (32, 32), (32, 64), (64, 64), (128, 128),
)  # fmt: skip


def matmul_specs(quick: bool) -> list[Spec]:
    """dot_general (batch, M, N, K), NHWC convolution and NDHWC conv3d layers for the host's
    matmul and convolution models."""
    sizes = (32, 96, 128, 256, 512) if quick else (16, 32, 64, 96, 128, 192, 256, 384, 512, 1024)
    gemm = {(1, m, n, k) for m in sizes for n in sizes for k in sizes if m * n * k <= 2**27}
    gemm |= {(8, 128, 128, 128), (4, 256, 64, 256), (16, 64, 64, 64)}
    if quick:
        gemm = set(sorted(gemm)[::3])
    # Skinny products (N or M of 1 or 16: matrix-vector-like) and small batched ones
    # (attention heads) are common in real programs and run far from the square grid's rate.
    thin = (32, 128, 512)
    gemm |= {(1, m, n, k) for m in thin for k in thin for n in (1, 16)}
    gemm |= {(1, m, n, k) for n in thin for k in thin for m in (1, 16)}
    gemm |= {(b, m, m, k) for b in (4, 16) for m in (16, 64) for k in (16, 64)}
    # Many small products in one call (vmap, attention's batch x heads): YNNPACK pays per
    # product, which 4 and 16 of them did not show (a vmap of 256 16x32 @ 32x16 products,
    # a benchmarks/unseen_programs.py program, was predicted at 69 us, measured 130-200).
    gemm |= {
        (b, m, m, k)
        for b in (32, 128, 512) for m in (8, 32, 64) for k in (16, 64)
        if b * m * m * k <= 2**24
    }  # fmt: skip
    gemm |= {(b, 64, 16, 64) for b in (32, 128)}
    # A few rows or columns (RNN steps, small-batch inference, narrow heads): between M or
    # N of 1 and 16 the trees had no rows, and 8x128 @ 128x128 was predicted at 8.0 us
    # against 2.9 measured, 128x128 @ 128x8 at 5.8 against 2.8 (Xeon VM, 2026-12-01).
    gemm |= {(1, m, n, k) for m in (2, 4, 8) for n in thin for k in thin}
    gemm |= {(1, m, n, k) for n in (2, 4, 8) for m in thin for k in thin}
    # Narrow heads with long K (a classifier's 2048 -> 10 layer, an MLP's last 256 -> 16):
    # YNNPACK runs N under 32 at 2-5x the ps a multiply-add of N = 32, N = 10 slower than
    # N = 16 in all (1 x 4096 @ 4096 x 10: 14.7 us, x 16: 7.5, x 32: 8.6), and the thin rows
    # stop at K = 512; the model had priced a CNN's 2x2048 @ 2048x10 at 1.9 us against 11-13
    # in a loop and a grid of 90 such shapes at 0.67x their time (Zen 4 VM, 2026-12-03).
    gemm |= {
        (1, m, n, k)
        for m in (1, 2, 8, 32, 128, 512) for n in (2, 10, 16, 24, 64) for k in (256, 1024, 4096)
        if m * n * k <= 2**26
    }  # fmt: skip
    # Operands stored transposed (einsum chains, gradients): XLA:CPU's library calls run
    # them at other rates (1024x64x256 f32: 0.42 ms as M x K times K x N, 1.27 ms with the
    # left operand K x M; with both transposed 1.3-2.3x; 2026-11-30, this VM).
    # Short K too (a weight gradient contracts over the batch, x^T dy: K x M times K x N),
    # where the transposed operand's copy weighs most against the FLOPs.
    # And between those edges: an einsum chain's 128x512 @ 512x512 with both operands
    # transposed ran 0.48 ms in a loop at sentinels 0.76x the reference's (0.63 ms at its
    # speed), which the model had priced at 0.49 ms from the edges (2026-12-03, this VM).
    for edges in ((64, 256, 1024), (128, 512)):
        gemm |= {
            (1, m, n, k, layout)
            for m in edges for n in edges for k in (16, 32, *edges) for layout in (1, 2, 3)
            if m * n * k <= 2**26
        }  # fmt: skip
    conv = set()
    # Power-of-two images too (CIFAR's 32, a ResNet stage's 16: the model had interpolated
    # 16x16 layers from 14 and 28, 11-19% slow for 32 -> 32 channels at batches 1-4), and
    # 5x5 windows (LeNet, Inception; an unseen 5x5 layer ran 1.3x the model's price).
    for hw in (14, 16, 28, 32, 56) if quick else (7, 14, 16, 28, 32, 56, 112):
        for c, o in _CONV_CHANNELS:
            for k in (1, 3, 5):
                if hw * hw * c * o * k * k <= 2**27:
                    conv.add((1, hw, hw, c, k, k, o, 1))
            # Batches and strides: XLA:CPU picks other code paths for them (a 2x32x32x3->16
            # layer ran 6x slower than a 1x28x28x3->32 one on the project's machine).
            for nb, stride in ((4, 1), (1, 2), (4, 2)):
                if nb * hw * hw * c * o * 9 <= 2**27:
                    conv.add((nb, hw, hw, c, 3, 3, o, stride))
        # Stems: an image's 1 or 3 channels in. XLA:CPU runs an odd number of input
        # channels into 32 or fewer outputs on a slow path (Zen 4 VM, 2026-12-04, 1x40x40,
        # 3x3: 3 -> 8, 16, 24, 32 at 340, 163, 312, 89 ps a multiply-add; 3 -> 40-128 at
        # 20-26; 1 -> 8, 16 at 730, 410, 1 -> 32, 64 at 27-29; 2, 4 or 6 -> 24 at 30-36),
        # and the grid's 3 -> 16 and 3 -> 32 alone had priced 3 -> 24 at a third of its
        # time and 3 -> 48 or 64 on the slow path. A few channels into 24 too, which the
        # stems alone would leave as the slow path's (4 -> 24 priced at 9x its time). 3 -> 16
        # and 3 -> 32 (the grid's own pairs) for their 7x7 stride-2 stems: a CNN's 3 -> 32
        # stem on 64x64 images ran 3.5x the model's price, which had only 3 -> 24 (306 ps a
        # multiply-add) and 3 -> 40 (26 ps) of that window to go by (Zen 4 VM, 2026-12-05).
        for c, o in (
            (1, 8), (1, 32), (3, 8), (3, 16), (3, 24), (3, 32), (3, 40), (3, 48), (3, 64),
            (4, 24), (8, 24), (24, 24),
        ):  # fmt: skip
            # 7x7 stride-2 stems of 4 images too: one image's rows alone priced a 3 -> 32
            # stem of 4 and 8 images at 0.72 and 0.58 of its time (Zen 4 VM, 2026-12-05).
            for nb, k, stride in (
                (1, 3, 1), (4, 3, 1), (1, 3, 2), (1, 5, 1), (1, 7, 2), (4, 7, 2),
            ):  # fmt: skip
                if nb * hw * hw * c * o * k * k <= 2**27:
                    conv.add((nb, hw, hw, c, k, k, o, stride))
        # Depthwise and grouped layers: XLA:CPU runs them on another code path.
        for c, g in (
            ((32, 32), (64, 64), (64, 8))
            if quick
            else ((16, 16), (32, 32), (64, 64), (128, 128), (64, 8))
        ):
            for nb in (1, 4):
                conv.add((nb, hw, hw, c, 3, 3, c, 1, g))
        # More channel and group counts, and stride 2 (MobileNet-style downsampling), one
        # image each: 18 rows over three dims left the grouped model at R² < 0 (CV by size).
        for c, g in ((16, 16), (32, 32), (64, 64), (128, 128), (64, 8), (128, 32)):
            for stride in (1, 2):
                conv.add((1, hw, hw, c, 3, 3, c, stride, g))
        # Wide groups (ResNeXt's, a grouped stem's): 16-64 channels a group, where XLA:CPU
        # runs about as fast a multiply-add as a dense layer's, and the grid's 1-8 a group
        # had priced them at 2.4-5x their time in a loop (Xeon VM, 2026-12-07: 1x32x32x128
        # -> 128 in 4 groups 1.28 ms, priced 6.3; 8 images of 32x32x64 in 4 groups 5.2 ms,
        # priced 12.6).
        for c, g in ((64, 4), (128, 8), (64, 2), (96, 3), (128, 4), (128, 2)):
            for stride in (1, 2):
                conv.add((1, hw, hw, c, 3, 3, c, stride, g))
    # Sequence convolutions (audio, text, a state-space model's conv1d), which XLA:CPU runs
    # as 1 x W images with 1 x K kernels: the square layers above never had a 1-high image
    # nor 3- or 7-tap windows alone. The middle of each range too (batch 8, width 1024, 64
    # channels, 5 taps), where the trees interpolated between corners. (A conv1d of 8 x 1024
    # x 64 -> 64 with 5 taps ran 1.5-1.8 ms in unseen_programs.py's rounds, priced 1.07, but
    # 0.89 ms as a program timed alone at sentinels 0.75x the reference's: the 15 ms sort in
    # the same rounds slowed it and the sentinels 1.5-1.6x; Zen 5 VM, 2026-12-03.)
    conv |= {
        (nb, 1, w, c, 1, k, c, 1)
        for nb in (1, 4, 8) for w in (256, 1024, 2048) for c in (32, 64, 128) for k in (3, 5, 7)
        if nb * w * c * c * k <= 2**28
    }  # fmt: skip
    specs = [Spec("dot_general", "f32", s) for s in sorted(gemm)]
    # bf16 and int8 (int32-accumulating, as quantised models call it) products run on other
    # code paths at other rates, and int8 ones on AMX/VNNI units gain more from longer N
    # and K (Xeon VM, 2026-12-01, int8: 4x64x64x64 6.4 us, a 4x64x256 @ 4x256x128
    # program 32 us, f32 of it 190 us): a cube and batched products of each. N of 128
    # too: int8 4x64x256 @ 4x256xN took 16, 17-27 and 67-74 us in a loop at N = 64, 128
    # and 256 (2026-12-02), so the batched rows' N of 64 and 256 alone left 128 a guess
    # (predicted 41 us). Batched products up to 2^26 multiply-adds, as far as batch-1 ones
    # reach: capped at 2^24, an int8 4x256x256 @ 4x256x128 (2^25) was priced at the largest
    # batched rows' rate, 442 us against 280 measured in a loop (Zen 4 VM, 2026-12-03;
    # 1x128x512x512, 2^25, ran at 7.8 ps a multiply-add, the 2^24 batched rows at 14).
    # i32 products (jnp's int arrays' @, index arithmetic) on a path of their own, 3.7-6.4x
    # the f32 product's time (`elementwise.dot_code`): priced as f32, a 256^3 one had run
    # 0.24-0.28x its price in a program (benchmarks/unseen_programs.py --set utilities).
    narrow = {(1, m, n, k) for m in thin for n in thin for k in thin}
    narrow |= {(b, m, m, k) for b in (4, 16) for m in (16, 64) for k in (16, 64)}
    narrow |= {
        (b, m, n, k)
        for b in (4, 16) for m in (16, 64, 256) for n in (64, 128, 256) for k in (64, 256)
        if b * m * n * k <= 2**26
    }  # fmt: skip
    specs += [Spec("dot_general", dt, s) for dt in _NARROW_GEMM for s in sorted(narrow)]
    specs += [Spec("convolution", "f32", s) for s in sorted(conv)]
    # Volumetric layers (video, medical images), NDHWC: XLA:CPU runs a 3x3x3 window on a
    # path of its own, 3.4-4.2x the time of a 2-D layer of the same implicit GEMM (Zen 4
    # VM, 2026-12-07, in a loop: 2x8x24x24x16 -> 24 7.6-8.5 ms, 16x24x24x48 -> 24 with a
    # 3x3 window 1.9; the 2-D rows alone priced the first at 2.0), and a 1x1x1 one as a
    # product (64 us), but not at stride 2 (a 3-D ResNet's projection shortcut:
    # 2x16x28x28x3 -> 8 223 us, 71 ns an output). A grid, and random layers beside it
    # (`volume_draws`): the grid alone priced 24 random ones at an error factor of 2.25
    # (stems of 1 or 4 channels at 0.2-0.3x, strided 1x1x1 layers at 0.03-0.3x, 5x5x5
    # windows at 0.2x).
    volumes = {
        (nb, d, hw, hw, c, k, o, stride)
        for nb in (1, 2)
        for d, hw in ((4, 16), (8, 16), (8, 32), (16, 32))
        for c, o in ((3, 16), (16, 16), (16, 32), (32, 32), (64, 64))
        for k in (1, 3)
        for stride in ((1, 2) if nb == 1 else (1,))
        if nb * d * hw * hw * c * o * k**3 <= 2**26 * stride**3
    }  # fmt: skip
    volumes |= volume_draws(192 if quick else 384)
    return specs + [Spec("conv3d", "f32", s) for s in sorted(volumes)]


def volume_draws(n: int, seed: int = 7) -> set[tuple[int, ...]]:
    """`n` random conv3d layers (N, D, H, W, C, K, O, stride), the same for a seed: batches
    1-4, depths 4-16, sides 8-40, 1-64 channels in, 8-96 out, 1x1x1, 3x3x3 (half the
    draws) or 5x5x5 windows, stride 1 or 2, 2^16-2^26 multiply-adds."""
    rng = np.random.default_rng(seed)
    out: set[tuple[int, ...]] = set()
    choices = (
        (1, 2, 4), (4, 6, 8, 12, 16), (8, 12, 16, 20, 24, 28, 32, 40),
        (1, 3, 4, 8, 16, 24, 32, 48, 64), (8, 16, 24, 32, 48, 64, 96), (1, 3, 3, 5), (1, 1, 2),
    )  # fmt: skip
    while len(out) < n:
        nb, d, hw, c, o, k, stride = (int(rng.choice(v)) for v in choices)
        if 2**16 <= nb * d * hw * hw * c * o * k**3 / stride**3 <= 2**26:
            out.add((nb, d, hw, hw, c, k, o, stride))
    return out


def window_specs(quick: bool, seed: int = 4) -> list[Spec]:
    """Max pools and cumulative sums (both stablehlo.reduce_window) for the host's window
    model: XLA:CPU loops over each output's window in a pool, but rewrites a cumulative
    window into a blocked scan (256x512 f32: 1.5 ms, not the 67M adds a naive window does).
    Beside the grid, random pools (batches 1-8, sides 4-112, 4-256 channels): the grid's
    channels are multiples of 16, and 2x2 pools of other counts run 2-4x slower a byte (one
    run held out of the sweep, Zen 5 VM, 2026-12-03: 4x28x28x4 11.5 us, 5x27x27x6 24.0,
    2x68x68x6 59.6, priced 2.9, 5.4 and 16.0). Scans keep to the grid: 12 random ones
    (non-power-of-two lengths, ~3 ns an element against the grid's ~2) moved a 128x1024
    cumprod's price from its measured time to 1.4x it."""
    sides = (8, 16, 32, 64) if quick else (8, 16, 32, 64, 112)
    channels = (16, 32, 64) if quick else (8, 16, 32, 64, 128)
    windows = ((2, 2), (3, 2), (3, 1)) if quick else ((2, 2), (3, 2), (3, 1), (5, 2))
    pools = {
        (nb, hw, hw, c, k, stride)
        for nb in (1, 4)
        for hw in sides
        for c in channels
        for k, stride in windows
        if nb * hw * hw * c * k * k <= 2**24
    }
    scans = set()
    for rows in (1, 16, 256) if quick else (1, 16, 64, 256, 1024):
        for length in (64, 128, 512, 2048) if quick else (32, 64, 128, 512, 2048, 8192):
            if rows * length <= 2**20:
                scans.update({(rows, length, 2), (length, rows, 1)})
    _draw_pools(pools, 48 if quick else 128, windows, seed, 2.0, lambda n, k: n * k * k <= 2**24)
    # Batches of 8 on the larger sides (after the draws, which they leave as they were): a 3x3
    # stride-2 pool of 8 x 64x64x64 ran 1.13 ms in a loop, 142 us an image where one image
    # takes 265-307 and four 227 each, and the grid's four had it priced at 2.0 ms (Zen 4
    # VM, 2026-12-05).
    pools |= {
        (8, hw, hw, c, k, stride)
        for hw in sides[-2:]
        for c in channels
        for k, stride in windows
        if 8 * hw * hw * c * k * k <= 2**25
    }
    # Running maxima too: a max scan costs about twice a sum's (512x512 along either axis
    # in a loop, Xeon VM, 2026-12-07: cumsum 545-659 us, cumprod 561, cummax 1123, cummin
    # 1226), where one op code for both had priced a cummax at 0.33x its time. And the same
    # pools summing (average pools): a 3x3 window sums in 0.5-0.6x a max pool's time, a
    # 2x2 one in 1.0-1.4x (Xeon VM, 2026-12-07: 8x56x56x48 3x3/2 428 us against 745).
    return [
        *(Spec(op, "f32", s) for op in ("reduce_window", "sum_pool") for s in sorted(pools)),
        *(Spec(op, "f32", s) for op in ("cumsum", "cummax") for s in sorted(scans)),
    ]


def pool_grad_specs(quick: bool, seed: int = 5) -> list[Spec]:
    """Max pools' gradients (N, H, W, C, K, stride), SAME padding: XLA:CPU rewrites a
    select_and_scatter into a reduce_window of the values and their four indices and a
    scatter of the source into a zero operand, an element at a time (Zen 4 VM, 2026-12-07,
    8x56x56x64 f32, 2x2 stride 2: 20 ms, 51 ns a source element, where the pool itself
    takes 0.5 ms; 4x56x56x64 3x3 stride 2: 6.4 ms). A grid of inputs up to 2^21 elements,
    then random pools (batches 1-8, sides 4-112, channels 3-256) beside it."""
    sides = (8, 16, 32, 56) if quick else (8, 16, 32, 56, 112)
    channels = (16, 64) if quick else (8, 16, 32, 64, 128)
    windows = ((2, 2), (3, 2), (3, 1))
    pools = {
        (nb, hw, hw, c, k, stride)
        for nb in (1, 4, 8)
        for hw in sides
        for c in channels
        for k, stride in windows
        if nb * hw * hw * c <= 2**21
    }
    _draw_pools(pools, 24 if quick else 64, windows, seed, 1.6, lambda n, _: n <= 2**21)
    return [Spec("pool_grad", "f32", s) for s in sorted(pools)]


def _draw_pools(
    pools: set[tuple[int, ...]],
    count: int,
    windows: Sequence[tuple[int, int]],
    seed: int,
    log2_channels: float,
    fits: Callable[[int, int], bool],
) -> None:
    """Add `count` random max pools (N, H, W, C, K, stride) to `pools`: batches 1-8, sides
    4-111, channels 2^log2_channels-256 (log-uniform), a window of `windows`, whose input's
    elements and window side `fits`."""
    rng = np.random.default_rng(seed)
    grid = len(pools)
    while len(pools) < grid + count:
        nb, hw, c = (
            round(float(2 ** rng.uniform(lo, hi)))
            for lo, hi in ((0, 3), (2, 6.8), (log2_channels, 8))
        )
        k, stride = windows[rng.integers(len(windows))]
        if fits(nb * hw * hw * c, k) and hw >= k:
            pools.add((nb, hw, hw, c, k, stride))


def topk_specs(quick: bool) -> list[Spec]:
    """lax.top_k of the last axis, (rows, length, k): XLA:CPU runs a TopK custom call whose
    cost the reduction model does not see (512x1000, k=8: ~3.7 ms, 0.2 ms by that model)."""
    rows = (1, 16, 128, 512) if quick else (1, 4, 16, 64, 128, 512, 2048)
    lengths = (128, 1000, 4096, 32768) if quick else (64, 128, 1000, 4096, 10000, 32768)
    ks = (1, 8, 64) if quick else (1, 2, 8, 32, 64, 128)
    return [
        Spec("top_k", "f32", (r, n, k))
        for r in rows
        for n in lengths
        for k in ks
        if k <= n and r * n <= QUICK_SORT_MAX
    ]


GATHER_MAX_OUT = 1 << 22
"""Largest gather result of a sweep (elements): 16 MiB of f32, below the 32 MiB outputs
whose pages a CPU call maps afresh each time."""


GATHER_MAX_TABLE_BYTES = 128 << 20
"""Largest gather table of a sweep's random draws: a 32,000 x 1024 f32 embedding."""


def gather_specs(dtypes: Sequence[str] = DTYPES, quick: bool = True, seed: int = 2) -> list[Spec]:
    """`table[idx]` row gathers, (table rows, row width, indices): an embedding lookup at
    widths 16-512, and single elements (width 1) as take_along_axis gathers them; then
    random draws (table rows 256-262,144, widths 1-1024, 16-65,536 indices, log-uniform) so
    that a size held out of the grid has neighbours (5-fold CV by size on the quick grid
    alone extrapolated: median rel err 34-51%, 2026-12-01)."""
    tables = (1000, 20000) if quick else (1000, 5000, 20000, 100000)
    widths = (1, 16, 128, 512) if quick else (1, 4, 16, 64, 128, 256, 512, 1024)
    counts = (64, 1024, 8192, 65536) if quick else (16, 64, 256, 1024, 4096, 8192, 65536)
    shapes = {(r, w, n) for r in tables for w in widths for n in counts}
    rng = np.random.default_rng(seed)
    draws = 24 if quick else 64
    while len(shapes) < len(tables) * len(widths) * len(counts) + draws:
        r, w, n = (round(float(2 ** rng.uniform(lo, hi))) for lo, hi in ((8, 18), (0, 10), (4, 16)))
        if n * w <= GATHER_MAX_OUT and r * w * 4 <= GATHER_MAX_TABLE_BYTES:
            shapes.add((r, w, n))
    return [
        Spec("gather", dtype, shape)
        for dtype in dtypes
        for shape in sorted(shapes)
        if shape[1] * shape[2] <= GATHER_MAX_OUT
    ]


def _by_size(shapes: set[tuple[int, ...]], cap: float = math.inf) -> list[tuple[int, ...]]:
    """The shapes of at most `cap` elements, smallest first (ties by shape)."""
    return sorted((s for s in shapes if math.prod(s) <= cap), key=lambda s: (math.prod(s), s))


def wide_column_shapes() -> list[tuple[int, ...]]:
    """Column sums (`sum_axis0`) of a few rows wider than the grid's (its widest is 9,223):
    XLA:CPU sums up to 16,384 columns at 0.1-0.3 ns an element and wider ones at 2.5-5 ns
    (Zen 4 VM, 2026-12-05, in loops: 8 x 16,384 f32 37 us, 8 x 17,000 368 us, 8 x 32,768
    656 us, 8 x 65,536 2.5 ms; bf16 alike), where the model priced 8 x 32,768 at 36 us."""
    rows = {(r, w) for r in (2, 8, 32) for w in (12288, 16384, 20480, 32768, 65536)}
    return _by_size(rows | {(128, 16384), (128, 32768)})


def batched_transpose_shapes() -> list[tuple[int, ...]]:
    """Rank-3 (batch, rows, columns) results of `transpose` (each batch's last two dims
    swapped), at most 2^22 elements: a vmapped outer product's or attention's per-example
    transposes, whose slices stay in the caches where the grid's 2-D transposes of the same
    size do not (in loops, 2026-12-05, Zen 4 VM: 16 fresh batched shapes at 0.18-0.56 ns an
    element, priced 0.83-2.9x, error factor 1.63; the grid's 1-4M-element 2-D ones 0.43-0.75).
    Sides 24, 96 and 320, batches 6, 40 and 300: none of those fresh shapes."""
    sides = (24, 96, 320)
    return _by_size({(b, m, n) for b in (6, 40, 300) for m in sides for n in sides}, 2**22)


def middle_axis_shapes() -> list[tuple[int, ...]]:
    """Rank-3 (outer, reduced, minor) inputs of `sum_axis1`, at most 2^22 elements: the
    middle-axis sums of pooling over a sequence and of embedding bags (the zoo's gathered
    64 x 8 x 128 rows summed over the 8), none of which the grid's 2-D rows show: in
    loops 4 x 8 x 32,768 took 0.35 ns an element where 8 x 32,768 summed over its rows took
    2.5 (Zen 4 VM, 2026-12-05)."""
    shapes = {(o, r, m) for o in (4, 32, 256) for r in (4, 32) for m in (64, 512, 4096, 32768)}
    return _by_size(shapes, 2**22)


def group_norm_shapes() -> list[tuple[int, ...]]:
    """(N, S, G, C) inputs of `sum_groups`, at most 2^22 elements: images of 64-4096 pixels
    in 8 or 32 groups of 2-32 channels. The grid's row sums alone priced a group norm's
    sums of 4 x 1024 x 8 x 8 f32 at 49 us against 121 in a loop (Xeon VM, 2026-12-07), read
    as 32 row sums of 8192."""
    shapes = {
        (n, s, g, c)
        for n in (1, 4)
        for s in (64, 256, 1024, 4096)
        for g in (8, 32)
        for c in (2, 8, 32)
    }
    return _by_size(shapes, 2**22)


# Ops whose shapes are not tensors of the elementwise grid: their own spec builders
# (quick, dtypes) -> specs, each filtered to the op asked for.
_FAMILIES: dict[str, Callable[[bool, Sequence[str]], list[Spec]]] = {
    "dot_general": lambda quick, _: matmul_specs(quick),
    "convolution": lambda quick, _: matmul_specs(quick),
    "conv3d": lambda quick, _: matmul_specs(quick),
    "reduce_window": lambda quick, _: window_specs(quick),
    "cumsum": lambda quick, _: window_specs(quick),
    "cummax": lambda quick, _: window_specs(quick),
    "sum_pool": lambda quick, _: window_specs(quick),
    "pool_grad": lambda quick, _: pool_grad_specs(quick),
    "top_k": lambda quick, _: topk_specs(quick),
    "gather": lambda quick, dtypes: gather_specs(dtypes, quick),
    "sum_axis1": lambda _, dtypes: [
        Spec("sum_axis1", dtype, shape) for dtype in dtypes for shape in middle_axis_shapes()
    ],
    "sum_groups": lambda _, dtypes: [Spec("sum_groups", "f32", s) for s in group_norm_shapes()],
}


# Grid ops with shapes of their own beside the grid's (each dtype).
_EXTRA_SHAPES: dict[str, Callable[[], list[tuple[int, ...]]]] = {
    "sum_axis0": wide_column_shapes,
    "transpose": batched_transpose_shapes,
}


def _over_cap(op: str, shape: tuple[int, ...], quick: bool) -> bool:
    """Whether a quick sweep leaves this shape out for `op` (`_CAPPED`: beyond QUICK_SORT_MAX)."""
    return op in _CAPPED and quick and math.prod(shape) > QUICK_SORT_MAX


def sweep(
    quick: bool, ops: Sequence[str] | None = None, dtypes: Sequence[str] = DTYPES
) -> list[Spec]:
    """Every Spec of a calibration run; `ops` defaults to all ops (quick: one or two per class)."""
    chosen = tuple(ops) if ops else (_QUICK_OPS if quick else OPS)
    unknown = [o for o in chosen if o not in OPS]
    if unknown:
        raise ValueError(f"unknown op(s) {', '.join(unknown)}; known: {', '.join(OPS)}")
    strange = [d for d in dtypes if d not in _JNP]
    if strange or not dtypes:
        raise ValueError(f"unknown dtype(s) {', '.join(strange)}; known: {', '.join(_JNP)}")
    shapes = elementwise_shapes(quick)
    small = [(n,) for n in SMALL_LENGTHS if quick]  # the full grid has them
    specs: list[Spec] = []
    for op in chosen:
        if op in _FAMILIES:
            specs += [s for s in _FAMILIES[op](quick, dtypes) if s.op == op]
            continue
        own = ("i32",) if op in _INTEGER_ROWS else dtypes[:1] if op in _FIRST_DTYPE_ONLY else dtypes
        for dtype in own:
            # Quick mode measures bf16 on every other shape: dtype is a feature, not a new trend.
            sub = shapes[::2] if quick and dtype != own[0] else shapes
            sub = [*small, *sub]
            for shape in sub:
                if op in _RANK_2 and (len(shape) < 2 or (op != "transpose" and shape[0] == 1)):
                    continue
                if _over_cap(op, shape, quick):
                    continue
                specs.append(Spec(op, dtype, shape))
            if op not in _NARROW_SKIP:
                specs += [Spec(op, dtype, shape) for shape in narrow_shapes(quick)]
            if op in _EXTRA_SHAPES:
                specs += [Spec(op, dtype, shape) for shape in _EXTRA_SHAPES[op]()]
            if op not in _LAYER_SKIP:
                grid = set(sub)
                specs += [
                    Spec(op, dtype, shape)
                    for shape in layer_shapes(quick)
                    if shape not in grid and not _over_cap(op, shape, quick)
                ]
    return specs


def op_and_inputs(
    spec: Spec, seed: int = 0
) -> tuple[Callable[..., jax.Array], tuple[jax.Array, ...]]:
    """`spec` as a function of its inputs, and the inputs (on the device)."""
    fn, make = _op_and_maker(spec, seed)
    args = make()
    jax.block_until_ready(args)
    return fn, args


def op_and_shapes(
    spec: Spec, seed: int = 0
) -> tuple[Callable[..., jax.Array], tuple[jax.ShapeDtypeStruct, ...]]:
    """`op_and_inputs` without the inputs, only their shapes and dtypes: enough to lower
    the op, and no random draws compiled and run for every shape."""
    fn, make = _op_and_maker(spec, seed)
    return fn, jax.eval_shape(make)


def _op_and_maker(
    spec: Spec, seed: int
) -> tuple[Callable[..., jax.Array], Callable[[], tuple[jax.Array, ...]]]:
    """`spec` as a function of its inputs, and a function drawing the inputs."""
    key = jax.random.key(seed)
    dt = _JNP[spec.dtype]
    if jnp.dtype(dt).itemsize == 8 and not jax.config.read("jax_enable_x64"):
        raise ValueError(f"{spec.key}: 64-bit rows need JAX's x64 mode (jax_enable_x64)")
    if spec.op == "dot_general":
        b, m, n, k, *layout = spec.shape
        lhs_t, rhs_t = divmod(layout[0] if layout else 0, 2)
        lhs, rhs = ("bkm" if lhs_t else "bmk"), ("bnk" if rhs_t else "bkn")
        eq = f"{lhs},{rhs}->bmn"
        acc = jnp.int32 if spec.dtype == "i8" else None
        fn: Callable[..., jax.Array] = lambda p, q: jnp.einsum(eq, p, q, preferred_element_type=acc)

        def make() -> tuple[jax.Array, ...]:
            return tuple(
                _random(key, tuple({"b": b, "m": m, "n": n, "k": k}[c] for c in dims), dt)
                for dims in (lhs, rhs)
            )

    elif spec.op == "convolution":
        nb, h, w, c, kh, kw, o, stride, *grouped = spec.shape
        groups = grouped[0] if grouped else 1

        def fn(p: jax.Array, q: jax.Array) -> jax.Array:
            return lax.conv_general_dilated(
                p,
                q,
                (stride, stride),
                "SAME",
                dimension_numbers=("NHWC", "HWIO", "NHWC"),
                feature_group_count=groups,
            )

        def make() -> tuple[jax.Array, ...]:
            return (
                jax.random.normal(key, (nb, h, w, c), dt),
                jax.random.normal(key, (kh, kw, c // groups, o), dt),
            )

    elif spec.op == "conv3d":
        nb, d, h, w, c, k, o, stride = spec.shape
        fn = lambda p, q: lax.conv_general_dilated(
            p, q, (stride,) * 3, "SAME", dimension_numbers=("NDHWC", "DHWIO", "NDHWC")
        )
        make = lambda: (
            jax.random.normal(key, (nb, d, h, w, c), dt),
            jax.random.normal(key, (k, k, k, c, o), dt),
        )
    elif spec.op in ("reduce_window", "sum_pool"):
        nb, h, w, c, k, stride = spec.shape
        init, body = (-np.inf, lax.max) if spec.op == "reduce_window" else (0.0, lax.add)
        fn = lambda p: lax.reduce_window(
            p, init, body, (1, k, k, 1), (1, stride, stride, 1), "SAME"
        )
        make = lambda: (jax.random.normal(key, (nb, h, w, c), dt),)
    elif spec.op == "pool_grad":
        nb, h, w, c, k, stride = spec.shape

        def fn(p: jax.Array, g: jax.Array) -> jax.Array:
            pool = lambda v: lax.reduce_window(
                v, -np.inf, lax.max, (1, k, k, 1), (1, stride, stride, 1), "SAME"
            )
            return jax.vjp(pool, p)[1](g)[0]

        def make() -> tuple[jax.Array, ...]:
            out = (nb, -(-h // stride), -(-w // stride), c)
            return jax.random.normal(key, (nb, h, w, c), dt), jax.random.normal(key, out, dt)

    elif spec.op in ("cumsum", "cummax"):
        a, b, axis = spec.shape
        scan = jnp.cumsum if spec.op == "cumsum" else lax.cummax
        fn = lambda p: scan(p, axis=axis - 1)
        make = lambda: (jax.random.normal(key, (a, b), dt),)
    elif spec.op == "top_k":
        r, n, k = spec.shape
        fn = lambda p: lax.top_k(p, k)[0]
        make = lambda: (jax.random.normal(key, (r, n), dt),)
    elif spec.op == "gather":
        rows, width, n = spec.shape
        fn = lambda t, i: t[i]

        def make() -> tuple[jax.Array, ...]:
            table = jax.random.normal(key, (rows, width), dt)
            return table, jax.random.randint(key, (n,), 0, rows, jnp.int32)

    elif spec.op == "convert":
        fn = lambda p: p.astype(dt)
        make = lambda: (jax.random.normal(key, spec.shape, _JNP[_other(spec.dtype)]),)
    elif spec.op == "transpose":
        src = (*spec.shape[:-2], spec.shape[-1], spec.shape[-2])
        perm = (*range(len(src) - 2), len(src) - 1, len(src) - 2)
        # Flattened so the data really moves: inside the timing loop XLA otherwise gives the
        # carried result the transposed layout and the "transpose" becomes a plain copy
        # (64x128x256 f32, 8 MiB: 215 us per iteration that way, 1,080 us flattened, 1,700 us
        # as a program of its own; 2026-11-30, this VM). A row-major 1-D result is what
        # the transposed tensor is in memory, so the program case is unchanged.
        fn = lambda p: lax.transpose(p, perm).reshape(-1)
        make = lambda: (jax.random.normal(key, src, dt),)
    else:
        arity, fn = _ELEMENTWISE[spec.op]

        def make() -> tuple[jax.Array, ...]:
            if spec.op in _INTEGER_ROWS:
                k1, k2 = jax.random.split(key)
                return (
                    jax.random.randint(k1, spec.shape, -(2**20), 2**20, dt),
                    jax.random.randint(k2, spec.shape, 1, 1001, dt),
                )
            args = tuple(jax.random.normal(k, spec.shape, dt) for k in jax.random.split(key, arity))
            if spec.op in _POSITIVE_INPUTS:
                args = tuple(jnp.abs(a) + 0.5 for a in args)
            return args

    return fn, make


def _random(key: jax.Array, shape: tuple[int, ...], dt: Any) -> jax.Array:
    """Normal samples, or small integers for an integer dtype."""
    if jnp.issubdtype(dt, jnp.integer):
        return jax.random.randint(key, shape, -8, 8, dt)
    return jax.random.normal(key, shape, dt)


def build_case(spec: Spec, seed: int = 0) -> Case:
    """Compile `spec` as a jitted single op with inputs already on the device."""
    fn, args = op_and_inputs(spec, seed)
    return Case(spec.key, jax.jit(fn).lower(*args).compile(), args)


def in_loop(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn` run `n` times in a while loop (n a runtime argument, so XLA cannot unroll it).

    The inputs pass through an optimization barrier in every iteration, so XLA cannot
    hoist the loop-invariant op out of the loop; the result (an array or a pytree of them)
    is a loop output, so all of it is computed in full.
    """

    def body(_: jax.Array, carry: tuple[tuple[jax.Array, ...], jax.Array]) -> Any:
        xs = lax.optimization_barrier(carry[0])
        return xs, fn(*xs)

    def run(n: jax.Array, *xs: jax.Array) -> Any:
        out0 = jax.tree_util.tree_map(
            lambda o: jnp.zeros(o.shape, o.dtype), jax.eval_shape(fn, *xs)
        )
        return lax.fori_loop(0, n, body, (xs, out0))[1]

    return run


@dataclass(frozen=True)
class LoopCase:
    """`spec` compiled inside a while loop whose trip count is the first argument."""

    spec: Spec
    fn: Callable[..., jax.Array]
    args: tuple[jax.Array, ...]

    @property
    def hoisted(self) -> bool:
        """Whether XLA:CPU compiled the whole loop into one kernel (`analysis.small_loops`):
        its trips then cost a few nanoseconds of inline code, not the op's kernel, so the
        loop measures nothing about the op (every 32-element row of the Xeon reference
        read the 0.1 us resolution floor; a cosine of 544 f32 took 2.8 us)."""
        return "xla_cpu_small_call" in self.fn.as_text()

    def at(self, trips: int) -> Case:
        """A timing case that runs the op `trips` times in one call."""
        n = jnp.asarray(trips, jnp.int32)
        return Case(f"{self.spec.key}@{trips}", self.fn, (n, *self.args))


def build_loop_case(spec: Spec, seed: int = 0) -> LoopCase:
    """Compile `spec` inside a runtime-trip-count loop: the difference between two trip
    counts is the op's cost *inside* a program (its kernel plus the executor's per-kernel
    work), free of the per-program overhead a single-op program measures."""
    return loop_case(spec, *op_and_inputs(spec, seed))


def loop_case(spec: Spec, fn: Callable[..., Any], args: tuple[jax.Array, ...]) -> LoopCase:
    """`fn` on `args` compiled inside a runtime-trip-count loop (`in_loop`), named by `spec`."""
    n = jnp.asarray(1, jnp.int32)
    return LoopCase(spec, jax.jit(in_loop(fn)).lower(n, *args).compile(), tuple(args))
