"""Small, real JAX programs whose StableHLO lowerings form the test corpus.

Each entry of :data:`PROGRAMS` is a zero-argument factory returning ``(fn, args)``
where ``args`` are :class:`jax.ShapeDtypeStruct` values, so
``jax.jit(fn).lower(*args)`` is deterministic and needs no data. Weights are
arguments (not captured constants) so the modules carry no large literals.

This module is imported by path (``importlib``), not as part of a package.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

Program = tuple[Callable[..., Any], tuple[Any, ...]]

F32 = jnp.float32
BF16 = jnp.bfloat16


def _s(shape: tuple[int, ...], dtype: Any = F32) -> jax.ShapeDtypeStruct:
    """Abstract argument of the given shape and dtype."""
    return jax.ShapeDtypeStruct(shape, dtype)


def _dense(x: jax.Array, w: jax.Array, b: jax.Array) -> jax.Array:
    return jnp.dot(x, w) + b


def _layer_norm(x: jax.Array, g: jax.Array, b: jax.Array, eps: float = 1e-5) -> jax.Array:
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True)
    return (x - mean) * lax.rsqrt(var + eps) * g + b


def _mha(
    x: jax.Array,
    wq: jax.Array,
    wk: jax.Array,
    wv: jax.Array,
    wo: jax.Array,
    heads: int,
) -> jax.Array:
    """Multi-head self-attention over ``x`` of shape (seq, d_model)."""
    seq, d = x.shape
    hd = d // heads

    def split(t: jax.Array) -> jax.Array:
        return t.reshape(seq, heads, hd).transpose(1, 0, 2)

    q, k, v = split(x @ wq), split(x @ wk), split(x @ wv)
    scores = jnp.einsum("hqd,hkd->hqk", q, k) / math.sqrt(hd)
    probs = jax.nn.softmax(scores, axis=-1)
    out = jnp.einsum("hqk,hkd->hqd", probs, v).transpose(1, 0, 2).reshape(seq, d)
    return out @ wo


def mlp() -> Program:
    """Three dense layers with bias and ReLU: (32, 64) -> 128 -> 128 -> 10."""

    def fn(x, w1, b1, w2, b2, w3, b3):
        h = jax.nn.relu(_dense(x, w1, b1))
        h = jax.nn.relu(_dense(h, w2, b2))
        return _dense(h, w3, b3)

    args = (_s((32, 64)), _s((64, 128)), _s((128,)), _s((128, 128)), _s((128,)))
    return fn, args + (_s((128, 10)), _s((10,)))


def attention() -> Program:
    """Four-head self-attention with softmax on a (16, 64) sequence."""

    def fn(x, wq, wk, wv, wo):
        return _mha(x, wq, wk, wv, wo, heads=4)

    return fn, (_s((16, 64)),) + tuple(_s((64, 64)) for _ in range(4))


def transformer_block() -> Program:
    """Pre-LN transformer block: LN, 4-head MHA, residual, LN, GELU MLP, residual.

    Activations are f32; the matmul weights are bf16, so the block also mixes
    dtypes through converts.
    """
    seq, d, ff = 16, 64, 256

    def fn(x, g1, b1, wq, wk, wv, wo, g2, b2, w1, c1, w2, c2):
        h = _layer_norm(x, g1, b1).astype(BF16)
        x = x + _mha(h, wq, wk, wv, wo, heads=4).astype(F32)
        h = _layer_norm(x, g2, b2).astype(BF16)
        h = jax.nn.gelu(_dense(h, w1, c1), approximate=True)
        return x + _dense(h, w2, c2).astype(F32)

    ln = (_s((d,)), _s((d,)))
    attn = tuple(_s((d, d), BF16) for _ in range(4))
    ffn = (_s((d, ff), BF16), _s((ff,), BF16), _s((ff, d), BF16), _s((d,), BF16))
    return fn, (_s((seq, d)),) + ln + attn + ln + ffn


_NHWC = ("NHWC", "HWIO", "NHWC")


def conv_net() -> Program:
    """Small CNN (NHWC): SAME 3x3 conv, stride-2 conv, ReLU, max and avg pooling, dense head."""

    def fn(x, k1, k2, w, b):
        h = lax.conv_general_dilated(x, k1, (1, 1), "SAME", dimension_numbers=_NHWC)
        h = jax.nn.relu(h)
        h = lax.conv_general_dilated(h, k2, (2, 2), "SAME", dimension_numbers=_NHWC)
        h = jax.nn.relu(h)
        h = lax.reduce_window(h, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
        h = lax.reduce_window(h, 0.0, lax.add, (1, 4, 4, 1), (1, 4, 4, 1), "VALID") / 16.0
        return _dense(h.reshape(h.shape[0], -1), w, b)

    return fn, (_s((2, 16, 16, 3)), _s((3, 3, 3, 8)), _s((3, 3, 8, 16)), _s((16, 10)), _s((10,)))


def layer_norm() -> Program:
    """Layer normalisation over the last axis of a (32, 128) input."""
    return _layer_norm, (_s((32, 128)), _s((128,)), _s((128,)))


def scan() -> Program:
    """Elman RNN cell ``h = tanh(x_t W + h U + b)`` scanned over 8 steps."""

    def fn(xs, h0, w, u, b):
        def cell(h, x):
            h = jnp.tanh(x @ w + h @ u + b)
            return h, h

        return lax.scan(cell, h0, xs)

    return fn, (_s((8, 4, 16)), _s((4, 32)), _s((16, 32)), _s((32, 32)), _s((32,)))


def fori_loop() -> Program:
    """``lax.fori_loop`` with static bounds (0, 10): ten damped matrix-vector updates."""

    def fn(x, a):
        return lax.fori_loop(0, 10, lambda i, v: 0.5 * v + jnp.tanh(a @ v), x)

    return fn, (_s((32,)), _s((32, 32)))


def while_dynamic() -> Program:
    """``lax.while_loop`` halving a vector until its norm drops below 1 (data-dependent trips)."""

    def fn(x):
        def cond(state):
            v, _ = state
            return jnp.sum(v * v) > 1.0

        def body(state):
            v, n = state
            return v * 0.5, n + 1

        return lax.while_loop(cond, body, (x, jnp.int32(0)))

    return fn, (_s((64,)),)


def cond() -> Program:
    """``lax.cond`` choosing between a matmul branch and an elementwise branch."""

    def fn(x, w):
        return lax.cond(jnp.sum(x) > 0, lambda t: t @ w, lambda t: jnp.sin(t) * 2.0, x)

    return fn, (_s((16, 16)), _s((16, 16)))


def switch() -> Program:
    """``lax.switch`` over three branches selected by an int32 index."""

    def fn(i, x):
        branches = (lambda t: t + 1.0, lambda t: t * t, lambda t: jnp.exp(t))
        return lax.switch(i, branches, x)

    return fn, (_s((), jnp.int32), _s((64,)))


def gather() -> Program:
    """Embedding lookup ``table[ids]`` plus column fancy indexing ``x[:, cols]``."""

    def fn(table, ids, x, cols):
        return table[ids], x[:, cols]

    return fn, (_s((100, 32)), _s((12,), jnp.int32), _s((8, 64)), _s((5,), jnp.int32))


def scatter() -> Program:
    """Scatter-add of rows into a zero buffer via ``.at[idx].add``."""

    def fn(idx, vals):
        return jnp.zeros((50, 16), F32).at[idx].add(vals)

    return fn, (_s((20,), jnp.int32), _s((20, 16)))


def sort() -> Program:
    """``jnp.sort``, ``jnp.argsort`` and ``lax.top_k`` over the last axis."""

    def fn(x):
        return jnp.sort(x, axis=-1), jnp.argsort(x, axis=0), lax.top_k(x, 4)

    return fn, (_s((8, 32)),)


@jax.jit
def _inner_dense(x: jax.Array, w: jax.Array, b: jax.Array) -> jax.Array:
    return jax.nn.relu(x @ w + b)


@jax.jit
def _inner_head(x: jax.Array, w: jax.Array) -> jax.Array:
    return jnp.tanh(x @ w)


def nested_call() -> Program:
    """Jitted ``_inner_dense`` called twice and ``_inner_head`` once (func.call to private funcs)."""

    def fn(x, w1, b1, w2, b2, wh):
        return _inner_head(_inner_dense(_inner_dense(x, w1, b1), w2, b2), wh)

    d = _s((32, 32))
    return fn, (_s((8, 32)), d, _s((32,)), d, _s((32,)), _s((32, 4)))


def dot_only() -> Program:
    """Only dot_generals (plus data movement): matmul, batched einsum, contraction over two axes."""

    def fn(a, b, q, k, t, u):
        return (
            a @ b,
            jnp.einsum("bhqd,bhkd->bhqk", q, k),
            jnp.einsum("ijk,jkl->il", t, u),
        )

    qk = _s((2, 4, 16, 8))
    return fn, (_s((32, 48)), _s((48, 24)), qk, qk, _s((6, 5, 4)), _s((5, 4, 7)))


def conv_only() -> Program:
    """Only convolutions: SAME, stride 2, rhs dilation, depthwise groups, and NCHW/OIHW layout."""

    def fn(x, k_same, k_s2, k_dil, k_dw, x_nchw, k_oihw):
        conv = lax.conv_general_dilated
        same = conv(x, k_same, (1, 1), "SAME", dimension_numbers=_NHWC)
        strided = conv(x, k_s2, (2, 2), "SAME", dimension_numbers=_NHWC)
        dilated = conv(x, k_dil, (1, 1), "VALID", rhs_dilation=(2, 2), dimension_numbers=_NHWC)
        depthwise = conv(
            x, k_dw, (1, 1), "SAME", dimension_numbers=_NHWC, feature_group_count=x.shape[-1]
        )
        nchw = conv(
            x_nchw, k_oihw, (1, 1), ((1, 1), (1, 1)), dimension_numbers=("NCHW", "OIHW", "NCHW")
        )
        return same, strided, dilated, depthwise, nchw

    return fn, (
        _s((2, 16, 16, 8)),
        _s((3, 3, 8, 16)),
        _s((3, 3, 8, 16)),
        _s((3, 3, 8, 8)),
        _s((3, 3, 1, 8)),
        _s((2, 4, 12, 12)),
        _s((8, 4, 3, 3)),
    )


def mixed_dtypes() -> Program:
    """bf16 and f16 arithmetic, an int8 x int8 -> int32 dot, int32 ops and converts back to f32."""

    def fn(a, b, c, qa, qb, n):
        h_bf16 = jnp.tanh(a * b + a)
        h_f16 = c * c - c.astype(jnp.float16).max()
        q = lax.dot(qa, qb, preferred_element_type=jnp.int32)
        n2 = (n * 3 + q.sum(axis=0)) >> 1
        return (
            h_bf16.astype(F32) + h_f16.astype(F32),
            q.astype(F32) * 0.01,
            n2.astype(jnp.int8),
        )

    return fn, (
        _s((16, 16), BF16),
        _s((16, 16), BF16),
        _s((16, 16), jnp.float16),
        _s((16, 32), jnp.int8),
        _s((32, 16), jnp.int8),
        _s((16,), jnp.int32),
    )


def reduce_ops() -> Program:
    """Sum, max, min, mean and argmax over different axes of a (4, 8, 16) tensor."""

    def fn(x):
        return (
            jnp.sum(x, axis=0),
            jnp.max(x, axis=1),
            jnp.min(x, axis=(1, 2)),
            jnp.mean(x),
            jnp.argmax(x, axis=-1),
        )

    return fn, (_s((4, 8, 16)),)


DEEP_TRANSFORMER_OPS_PER_LAYER = 113
"""Operations (counted by walking the parsed module) that each layer of :func:`deep_transformer` adds.

Measured with jax 0.10.2; independent of ``d_model``/``seq``/``heads``, which only change shapes.
"""

DEEP_TRANSFORMER_BASE_OPS = 3
"""Operations present at any depth: ``builtin.module``, ``func.func`` and ``func.return``."""


def deep_transformer_layers_for(n_ops: int) -> int:
    """Smallest ``n_layers`` for which :func:`deep_transformer` has at least ``n_ops`` operations."""
    return max(1, -(-(n_ops - DEEP_TRANSFORMER_BASE_OPS) // DEEP_TRANSFORMER_OPS_PER_LAYER))


def deep_transformer(n_layers: int, d_model: int = 64, seq: int = 16, heads: int = 4) -> Program:
    """Unrolled (Python loop, not scan) stack of ``n_layers`` transformer blocks.

    Written with plain ``jnp``/``lax`` ops and no nested jit, so every layer is
    inlined into ``main`` and the module has exactly
    ``DEEP_TRANSFORMER_BASE_OPS + DEEP_TRANSFORMER_OPS_PER_LAYER * n_layers``
    operations (3 + 113 n): 27 layers give 3,054 ops, 266 layers give 30,061.
    Use :func:`deep_transformer_layers_for` to pick ``n_layers``. Each layer's
    weights are separate arguments (8 per layer); lowering takes about 0.01 s
    per layer.
    """
    hd = d_model // heads
    ff = 4 * d_model

    def ln(x: jax.Array) -> jax.Array:
        mean = jnp.mean(x, axis=-1, keepdims=True)
        var = jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True)
        return (x - mean) * lax.rsqrt(var + 1e-5)

    def softmax(s: jax.Array) -> jax.Array:
        e = jnp.exp(s - lax.stop_gradient(jnp.max(s, axis=-1, keepdims=True)))
        return e / jnp.sum(e, axis=-1, keepdims=True)

    def gelu(x: jax.Array) -> jax.Array:
        return 0.5 * x * (1.0 + jnp.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))

    def heads_first(t: jax.Array) -> jax.Array:
        return t.reshape(seq, heads, hd).transpose(1, 0, 2)

    def fn(x, *params):
        for i in range(n_layers):
            wq, wk, wv, wo, w1, c1, w2, c2 = params[8 * i : 8 * i + 8]
            h = ln(x)
            q, k, v = heads_first(h @ wq), heads_first(h @ wk), heads_first(h @ wv)
            p = softmax(jnp.einsum("hqd,hkd->hqk", q, k) * (1.0 / math.sqrt(hd)))
            a = jnp.einsum("hqk,hkd->hqd", p, v).transpose(1, 0, 2).reshape(seq, d_model)
            x = x + a @ wo
            x = x + gelu(ln(x) @ w1 + c1) @ w2 + c2
        return x

    layer = (_s((d_model, d_model)),) * 4 + (
        _s((d_model, ff)),
        _s((ff,)),
        _s((ff, d_model)),
        _s((d_model,)),
    )
    return fn, (_s((seq, d_model)),) + layer * n_layers


PROGRAMS: dict[str, Callable[[], Program]] = {
    "mlp": mlp,
    "attention": attention,
    "transformer_block": transformer_block,
    "conv_net": conv_net,
    "layer_norm": layer_norm,
    "scan": scan,
    "fori_loop": fori_loop,
    "while_dynamic": while_dynamic,
    "cond": cond,
    "switch": switch,
    "gather": gather,
    "scatter": scatter,
    "sort": sort,
    "nested_call": nested_call,
    "dot_only": dot_only,
    "conv_only": conv_only,
    "mixed_dtypes": mixed_dtypes,
    "reduce_ops": reduce_ops,
}
