"""Predicted (target host) vs measured latency of 32 small JAX programs that no model or
benchmark was fitted on: argmax, top_k, scatter, gathers, transposed and 1-D convs, FFT,
scans, bf16 loops, loops slicing their input, ...; with `--set short`, 18 calls of a few
microseconds of kernels (small dots, MLPs, convolutions, attention, sums, layer norms),
whose time is mostly what a call costs beyond its kernels (`Target.call_overhead_ns`);
with `--set rows`, 16 softmaxes, layer norms, attention and a cross-entropy over 1024-16384
rows (4096+: one YNNPACK fusion each on XLA:CPU); with `--set linalg`, 15 jnp.linalg calls
(LAPACK: solves, factorisations, eigen- and singular values); with `--set special`, 12
programs of CHLO special functions (random normals, the exact GELU, log-densities, angles);
with `--set scalar`, 12 programs of ops XLA:CPU runs an element at a time (sines of
positional encodings, softplus, ELU, powers, remainders, integer division); with `--set
half`, 14 f16 programs (MLP, norms, softmaxes, activations, losses, quantisation); with
`--set assorted`, 19 programs of other kinds (LSTM, mixture of experts, group norm, 3-D and
dilated convolutions, distance matrices, a KV-cache loop, argsort, ...); with `--set
volumes`, 30 random 3-D convolutions; with `--set training`, 17 gradients and optimiser
steps (backward convolutions and pools, embedding gradients, Adam, ...); with `--set
utilities`, 26 programs of jnp's utilities and index arithmetic (searchsorted, histograms,
rolls, integer products, grouped convolutions, running maxima, matrix exponentials, ...);
with `--set sums`, 13 sums over broadcasts (distances, products written out as sums) and one
full-input sum; with `--set layers`, 10 stacks of layers on stacked weights (Python loops over
`ws[i]`, and scans); with `--set idioms`, 10 common model pieces (causal attention, rotary
embeddings, a SwiGLU block, per-example gradients, top-2 routing, segment sums, ...).

    python benchmarks/unseen_programs.py
        [--set unseen|short|...|sums|layers|idioms]
        [--only NAME ...] [--rounds 7] [--json F] [--predict-from F]

Each program is analysed by `perf_jit(...).analyze(...)`; all are then timed by the
runtime harness in the same interleaved rounds (`--predict-from` re-scores a run saved
with `--json` instead: model changes compared on one measurement). Prints per program:
predicted, measured, their ratio, the measurement's spread, and unmodelled ops; then the
geometric mean of the error factor (max(r, 1/r)) and how many programs land within 1.5x
and 2x. The 2-vCPU development VM
moves these timings by up to 2x between runs: compare ratios, repeat, quote medians. The
calibration's sentinel ops, timed in loops in the programs' own rounds, say how fast the
machine ran against its calibration (`runtime/calibration_check.py: machine_speed`): the
programs slow it as well as its spells do (a 15 ms sort in the rounds slowed a conv1d and
the sentinels 1.5-1.6x on the Zen 5 VM, 2026-12-03), which sentinels timed before and after
the rounds, as earlier runs saved them, do not see.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from stablehlo_perf import perf_jit
from stablehlo_perf.runtime.calibrate import sentinel_cases, sentinel_time, sentinel_us
from stablehlo_perf.runtime.calibration_check import machine_speed
from stablehlo_perf.runtime.sweeps import volume_draws
from stablehlo_perf.runtime.timing import Case, time_in_loop

_KEY = jax.random.key(0)


def _r(*shape: int, dtype: Any = jnp.float32) -> jax.Array:
    return jax.random.normal(_KEY, shape, dtype)


def _nhwc_conv(x: jax.Array, w: jax.Array) -> jax.Array:
    return lax.conv_general_dilated(
        x, w, (1, 1), "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC")
    )


def programs() -> dict[str, tuple[Callable[..., Any], tuple[Any, ...]]]:
    """name -> (function, example inputs)."""
    idx = jnp.arange(2048) * 2 % 5000
    return {
        "argmax_rows": (lambda x: jnp.argmax(x, axis=-1), (_r(512, 1000),)),
        "argmax_cols": (lambda x: jnp.argmax(x, axis=0), (_r(512, 1000),)),
        "where_bcast": (lambda x, m: jnp.where(m[:, None] > 0, x, 0.0), (_r(1024, 512), _r(1024))),
        "one_hot_mm": (
            lambda i, w: jax.nn.one_hot(i, 1000) @ w,
            (jnp.arange(256) % 1000, _r(1000, 128)),
        ),
        "pad_conv": (
            lambda x, w: _nhwc_conv(jnp.pad(x, ((0, 0), (2, 2), (2, 2), (0, 0))), w),
            (_r(4, 32, 32, 16), _r(5, 5, 16, 32)),
        ),
        "concat4": (
            lambda a, b, c, d: jnp.concatenate([a, b, c, d], axis=1),
            (_r(512, 256), _r(512, 128), _r(512, 64), _r(512, 512)),
        ),
        "transpose021": (lambda x: jnp.transpose(x, (0, 2, 1)) * 2, (_r(64, 256, 128),)),
        # A lone transpose compiles to one of two XLA:CPU kernels: returned as is, a copy in
        # 16x16 tiles for any shape; flattened after it (as the calibration sweep times it, so
        # that a loop cannot give the carried result the transposed layout), a tiled copy only
        # where the result's minor dim is a power of two, else an element loop (jax 0.10.2's
        # compiled IR). Both are priced alike; their costs differ by shape, not by one factor
        # (square fori_loop carries, Zen 4 VM, 2026-12-03, ns an element as is / flattened:
        # 1000^2 0.36 / 0.54, 1023^2 1.39 / 1.00, 1536^2 0.89 / 1.43).
        "transpose_2d": (lambda x: x.T, (_r(1000, 1023),)),
        "transpose_flat": (lambda x: x.T.reshape(-1), (_r(1000, 1023),)),
        "scatter_add": (lambda g, i: jnp.zeros((5000, 128)).at[i].add(g), (_r(2048, 128), idx)),
        "take_rows": (
            lambda t, i: jnp.take(t, i, axis=0),
            (_r(20000, 256), jnp.arange(4096) * 3 % 20000),
        ),
        "rng_uniform": (lambda k: jax.random.uniform(k, (512, 512)), (jax.random.key(1),)),
        "sort_axis0": (lambda x: jnp.sort(x, axis=0), (_r(1024, 128),)),
        "global_avgpool": (lambda x: jnp.mean(x, axis=(1, 2)), (_r(8, 28, 28, 256),)),
        "batchnorm_train": (
            lambda x: (x - x.mean((0, 1, 2))) / jnp.sqrt(x.var((0, 1, 2)) + 1e-5),
            (_r(8, 28, 28, 128),),
        ),
        "softmax_axis0": (lambda x: jax.nn.softmax(x, axis=0), (_r(1000, 512),)),
        "conv_transpose": (
            lambda x, w: lax.conv_transpose(
                x, w, (2, 2), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")
            ),
            (_r(4, 16, 16, 64), _r(3, 3, 64, 32)),
        ),
        "conv1d": (
            lambda x, w: lax.conv_general_dilated(
                x, w, (1,), "SAME", dimension_numbers=("NWC", "WIO", "NWC")
            ),
            (_r(8, 1024, 64), _r(5, 64, 64)),
        ),
        "fft": (lambda x: jnp.abs(jnp.fft.rfft(x, axis=-1)), (_r(256, 1024),)),
        "norm": (lambda x: jnp.linalg.norm(x, axis=-1), (_r(4096, 256),)),
        "vmap_small_mm": (jax.vmap(lambda a, b: a @ b), (_r(256, 16, 32), _r(256, 32, 16))),
        "einsum3": (
            lambda a, b, c: jnp.einsum("ij,jk,kl->il", a, b, c),
            (_r(256, 512), _r(512, 512), _r(512, 128)),
        ),
        "int8_convert_mm": (
            lambda a, b: a.astype(jnp.float32) @ b,
            ((jnp.arange(512 * 512) % 127).astype(jnp.int8).reshape(512, 512), _r(512, 256)),
        ),
        "while_dyn": (
            lambda x: lax.while_loop(
                lambda c: c[1] < 50, lambda c: (jnp.tanh(c[0] @ c[0]), c[1] + 1), (x, 0)
            )[0],
            (_r(128, 128),),
        ),
        "dyn_slice_loop": (
            lambda x: lax.fori_loop(
                0,
                64,
                lambda i, acc: acc + lax.dynamic_slice_in_dim(x, i * 16, 16, 0).sum(0),
                jnp.zeros(512),
            ),
            (_r(1024, 512),),
        ),
        "cumprod": (lambda x: jnp.cumprod(x, axis=-1), (_r(128, 1024),)),
        "logsumexp": (lambda x: jax.nn.logsumexp(x, axis=-1), (_r(2048, 1000),)),
        "bf16_gelu": (
            lambda a, b: jax.nn.gelu(a * b + a),
            (_r(1024, 1024, dtype=jnp.bfloat16), _r(1024, 1024, dtype=jnp.bfloat16)),
        ),
        "rsqrt_big": (lambda x: lax.rsqrt(jnp.abs(x) + 1), (_r(4096, 1024),)),
        "reverse": (lambda x: x[:, ::-1] + 1, (_r(2048, 512),)),
        "clip_round": (lambda x: jnp.round(jnp.clip(x, -1, 1) * 127), (_r(2048, 1024),)),
        "top_k": (lambda x: lax.top_k(x, 8)[0], (_r(512, 1000),)),
    }


def short_calls() -> dict[str, tuple[Callable[..., Any], tuple[Any, ...]]]:
    """name -> (function, example inputs): programs whose kernels take 1-60 us in all, most
    of them library calls that wake XLA:CPU's thread pool (measured on the Zen 4 VM,
    2026-12-05: 1-83 us a call, net of dispatch)."""

    def mlp(x: jax.Array, *ws: jax.Array) -> jax.Array:
        for w in ws[:-1]:
            x = jax.nn.relu(x @ w)
        return x @ ws[-1]

    def attention(q: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array:
        return jax.nn.softmax(q @ k.T / 8.0) @ v

    def layer_norm(x: jax.Array) -> jax.Array:
        return (x - x.mean(-1, keepdims=True)) / jnp.sqrt(x.var(-1, keepdims=True) + 1e-5)

    def conv_same(x: jax.Array, w: jax.Array) -> jax.Array:
        dims = ("NHWC", "HWIO", "NHWC")
        return lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=dims)

    return {
        "dot_16x64": (lambda x, w: x @ w, (_r(16, 64), _r(64, 64))),
        "dot_64x128": (lambda x, w: x @ w, (_r(64, 128), _r(128, 128))),
        "dot_128": (lambda x, w: x @ w, (_r(128, 128), _r(128, 128))),
        "mlp2_32": (lambda x, a, b: jnp.tanh(x @ a) @ b, (_r(32, 64), _r(64, 64), _r(64, 64))),
        "mlp2_64": (mlp, (_r(64, 128), _r(128, 128), _r(128, 64))),
        "mlp3_16": (mlp, (_r(16, 128), _r(128, 128), _r(128, 128), _r(128, 10))),
        "gram_tanh": (lambda x: jnp.tanh(jnp.tanh(x @ x.T) @ x), (_r(64, 64),)),
        "conv_8": (conv_same, (_r(1, 8, 8, 16), _r(3, 3, 16, 16))),
        "conv_16": (
            lambda x, w: jax.nn.relu(conv_same(x, w)),
            (_r(1, 16, 16, 16), _r(3, 3, 16, 32)),
        ),
        "attention_16": (attention, (_r(16, 32), _r(16, 32), _r(16, 32))),
        "attention_64": (attention, (_r(64, 32), _r(64, 32), _r(64, 32))),
        "rowsum_64": (lambda x: jnp.sum(x, axis=1), (_r(64, 256),)),
        "colmean_128": (lambda x: jnp.mean(x, axis=0), (_r(128, 256),)),
        "layer_norm_32": (layer_norm, (_r(32, 64),)),
        "layer_norm_128": (layer_norm, (_r(128, 256),)),
        "fft_256": (lambda x: jnp.abs(jnp.fft.fft(x)), (_r(8, 256),)),
        "bmm_4x32": (lambda a, b: jnp.einsum("bij,bjk->bik", a, b), (_r(4, 32, 32), _r(4, 32, 32))),
        "dot_vector": (lambda x, w: jnp.tanh(x @ w) + 1, (_r(1, 256), _r(256, 256))),
    }


def many_rows() -> dict[str, tuple[Callable[..., Any], tuple[Any, ...]]]:
    """name -> (function, example inputs): softmaxes, layer norms, attention and a
    cross-entropy whose reduces have 4096+ results, which XLA:CPU runs as one YNNPACK
    fusion each (jax 0.10.2), and three of 1024-2048 rows, which it does not."""

    def layer_norm(x: jax.Array) -> jax.Array:
        m = x.mean(-1, keepdims=True)
        return (x - m) * lax.rsqrt(((x - m) ** 2).mean(-1, keepdims=True) + 1e-5)

    def attention(q: jax.Array, k: jax.Array, v: jax.Array, causal: bool = False) -> jax.Array:
        s = jnp.einsum("...qd,...kd->...qk", q, k) / 8.0
        if causal:
            n = s.shape[-1]
            s = jnp.where(jnp.tril(jnp.ones((n, n), bool)), s, -1e9)
        return jnp.einsum("...qk,...kd->...qd", jax.nn.softmax(s, axis=-1), v)

    def xent(x: jax.Array, y: jax.Array) -> jax.Array:
        return -(jax.nn.log_softmax(x, -1) * y).sum(-1).mean()

    bf16 = jnp.bfloat16
    return {
        "attention_8192": (attention, (_r(4, 8, 256, 64),) * 3),
        "attention_8192_bf16": (attention, (_r(4, 8, 256, 64, dtype=bf16),) * 3),
        "attention_4096_d32": (attention, (_r(16, 256, 32),) * 3),
        "attention_4096x128": (attention, (_r(4096, 64), _r(128, 64), _r(128, 64))),
        "causal_attention_8192": (lambda *a: attention(*a, causal=True), (_r(4, 8, 256, 64),) * 3),
        "layer_norm_4096": (layer_norm, (_r(4096, 256),)),
        "layer_norm_8192x512": (layer_norm, (_r(8192, 512),)),
        "scaled_norm_bf16": (
            lambda x, g: layer_norm(x) * g + 1.0,
            (_r(4096, 512, dtype=bf16), _r(512, dtype=bf16)),
        ),
        "residual_norm": (lambda x, w: layer_norm(x + x @ w), (_r(4096, 256), _r(256, 256))),
        "softmax_4096": (lambda x: jax.nn.softmax(x, -1), (_r(4096, 256),)),
        "softmax_8192_bf16": (lambda x: jax.nn.softmax(x, -1), (_r(8192, 128, dtype=bf16),)),
        "cross_entropy_4096": (xent, (_r(4096, 1000), _r(4096, 1000))),
        "rms_norm_16384": (
            lambda x: x * lax.rsqrt((x * x).mean(-1, keepdims=True) + 1e-6),
            (_r(16384, 128),),
        ),
        "layer_norm_2048": (layer_norm, (_r(2048, 256),)),
        "softmax_2048": (lambda x: jax.nn.softmax(x, -1), (_r(2048, 512),)),
        "attention_1024": (attention, (_r(4, 4, 128, 64),) * 3),
    }


def linear_algebra() -> dict[str, tuple[Callable[..., Any], tuple[Any, ...]]]:
    """name -> (function, example inputs): jnp.linalg calls (LAPACK on XLA:CPU), most of
    sizes between those `runtime/lapack_sweep.py` measured."""

    def spd(n: int, batch: tuple[int, ...] = ()) -> jax.Array:
        a = _r(*batch, n, n)
        return a @ jnp.swapaxes(a, -1, -2) + n * jnp.eye(n)

    return {
        "solve_200": (jnp.linalg.solve, (_r(200, 200), _r(200, 16))),
        "solve_1000": (jnp.linalg.solve, (_r(1000, 1000), _r(1000, 4))),
        "cholesky_300": (jnp.linalg.cholesky, (spd(300),)),
        "cholesky_16x48": (jnp.linalg.cholesky, (spd(48, (16,)),)),
        "inv_160": (jnp.linalg.inv, (_r(160, 160),)),
        "qr_384x96": (lambda x: jnp.linalg.qr(x)[0], (_r(384, 96),)),
        "eigh_96": (lambda x: jnp.linalg.eigh(x)[0], (spd(96),)),
        "eigh_320": (jnp.linalg.eigh, (spd(320),)),
        "svd_values_224": (lambda x: jnp.linalg.svd(x, compute_uv=False), (_r(224, 224),)),
        "svd_160": (lambda x: jnp.linalg.svd(x, full_matrices=False), (_r(160, 160),)),
        "det_384": (jnp.linalg.det, (_r(384, 384),)),
        "slogdet_256": (lambda x: jnp.linalg.slogdet(x)[1], (_r(256, 256),)),
        "eigvals_96": (jnp.linalg.eigvals, (_r(96, 96),)),
        "eig_80": (lambda x: jnp.linalg.eig(x)[1], (_r(80, 80),)),
        "pinv_112": (jnp.linalg.pinv, (_r(112, 112),)),
    }


def special_functions() -> dict[str, tuple[Callable[..., Any], tuple[Any, ...]]]:
    """name -> (function, example inputs): programs that use CHLO's special functions
    (random normals and initialisers: erf_inv; the exact GELU: erfc; log-densities: lgamma,
    digamma; angles: atan), at sizes and in compositions the sweep's single ops were not."""
    key = jax.random.PRNGKey(1)

    def gamma_logpdf(x: jax.Array, a: jax.Array) -> jax.Array:
        return (a - 1) * jnp.log(x) - x - lax.lgamma(a)

    def beta_grad(a: jax.Array, b: jax.Array) -> jax.Array:
        return lax.digamma(a) - lax.digamma(a + b)

    return {
        "normal_512": (lambda k: jax.random.normal(k, (512, 512)), (key,)),
        "trunc_normal_init": (
            lambda k: jax.random.truncated_normal(k, -2.0, 2.0, (768, 768)) * 0.02,
            (key,),
        ),
        "noise_add": (lambda k, x: x + 0.1 * jax.random.normal(k, x.shape), (key, _r(64, 4096))),
        "gelu_exact": (lambda x: jax.nn.gelu(x, approximate=False), (_r(128, 1024),)),
        "mlp_gelu_exact": (
            lambda x, w: jax.nn.gelu(x @ w, approximate=False),
            (_r(256, 256), _r(256, 1024)),
        ),
        "erf_300x200": (lambda x: lax.erf(x) * 0.5 + 0.5, (_r(300, 200),)),
        "erfinv_1d": (lambda x: lax.erf_inv(jnp.tanh(x)), (_r(100_000),)),
        "gamma_logpdf": (gamma_logpdf, (jnp.abs(_r(200, 300)) + 0.1, jnp.abs(_r(200, 300)) + 1)),
        "lgamma_bf16": (lambda x: lax.lgamma(x), (jnp.abs(_r(1000, 96, dtype=jnp.bfloat16)) + 1,)),
        "beta_grad": (beta_grad, (jnp.abs(_r(64, 777)) + 1, jnp.abs(_r(64, 777)) + 1)),
        "angle": (lambda x, y: jnp.arctan2(y, x), (_r(384, 384), _r(384, 384))),
        "atan_small": (lambda x: jnp.arctan(x) * 2.0, (_r(37, 64),)),
    }


def scalar_loops() -> dict[str, tuple[Callable[..., Any], tuple[Any, ...]]]:
    """name -> (function, example inputs): programs of ops XLA:CPU runs an element at a time
    (sines and cosines of positional encodings and rotary embeddings, softplus's log1p, ELU's
    expm1, powers, cube roots, float and integer remainders), in compositions the sweep's
    single ops were not."""
    ints = jax.random.randint(_KEY, (512, 512), 0, 1 << 30, jnp.int32)

    def positional(pos: jax.Array, freq: jax.Array) -> jax.Array:
        angle = pos[:, None] * freq[None, :]
        return jnp.concatenate([jnp.sin(angle), jnp.cos(angle)], axis=-1)

    def rotary(x: jax.Array, freq: jax.Array) -> jax.Array:
        angle = jnp.arange(x.shape[0], dtype=jnp.float32)[:, None] * freq[None, :]
        a, b = jnp.split(x, 2, axis=-1)
        c, s = jnp.cos(angle), jnp.sin(angle)
        return jnp.concatenate([a * c - b * s, a * s + b * c], axis=-1)

    return {
        "positional_1024x128": (positional, (jnp.arange(1024.0), jnp.abs(_r(128)) * 0.01)),
        "rotary_2048x64": (rotary, (_r(2048, 64), jnp.abs(_r(32)) * 0.01)),
        "sin_bf16": (lambda x: jnp.sin(x) * 2.0, (_r(700, 300, dtype=jnp.bfloat16),)),
        "softplus": (jax.nn.softplus, (_r(256, 1024),)),
        "elu": (jax.nn.elu, (_r(512, 512),)),
        "logistic_loss": (
            lambda z, y: jnp.log1p(jnp.exp(-y * z)).mean(),
            (_r(4096, 64), _r(4096, 64)),
        ),
        "angle_wrap": (lambda t: jnp.mod(t + jnp.pi, 2 * jnp.pi) - jnp.pi, (_r(100_000) * 10,)),
        "gamma_power": (lambda x, g: jnp.abs(x) ** g, (_r(256, 256, 3), jnp.abs(_r(3)) + 0.5)),
        "cbrt_scale": (lambda x: jnp.cbrt(x) * 3.0, (_r(300, 300),)),
        "hash_buckets": (lambda i, n: (i * 31 + 7) % n, (ints, jnp.int32(1000))),
        "floor_div": (lambda a, b: a // b, (ints, jnp.abs(ints[::-1]) % 97 + 1)),
        "tan_1d": (jnp.tan, (_r(50_000) * 0.5,)),
    }


def assorted_programs() -> dict[str, tuple[Callable[..., Any], tuple[Any, ...]]]:
    """name -> (function, example inputs): 19 programs of kinds the other sets lack (an LSTM,
    a mixture-of-experts router, group norm, average pools, separable, dilated and 3-D
    convolutions, distance matrices, a KV-cache update loop, resizing, segment sums, a 2-D
    FFT, Horner's rule, argsort, random normals, a bf16 MLP, a column cumsum, causal
    attention), first scored on 2026-12-07 before any change made for them."""

    def lstm(*args: jax.Array) -> jax.Array:
        xs, h0, c0, wx, wh, b = args

        def cell(hc: tuple[jax.Array, jax.Array], x: jax.Array) -> tuple[Any, jax.Array]:
            h, c = hc
            i, f, o, u = jnp.split(x @ wx + h @ wh + b, 4, -1)
            c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(u)
            h = jax.nn.sigmoid(o) * jnp.tanh(c)
            return (h, c), h

        return lax.scan(cell, (h0, c0), xs)[1]

    def moe(x: jax.Array, wr: jax.Array, we: jax.Array) -> jax.Array:
        p = jax.nn.softmax(x @ wr, -1)
        _, idx = lax.top_k(p, 2)
        dispatch = jax.nn.one_hot(idx, wr.shape[1]).sum(1) * p
        return jnp.einsum("te,tm,emn->tn", dispatch, x, we)

    def group_norm(x: jax.Array) -> jax.Array:
        n, h, w, c = x.shape
        g = x.reshape(n, h, w, 8, c // 8)
        m, v = g.mean((1, 2, 4), keepdims=True), g.var((1, 2, 4), keepdims=True)
        return ((g - m) * lax.rsqrt(v + 1e-5)).reshape(x.shape)

    def conv(x: jax.Array, w: jax.Array, layout: str = "NHWC", **kw: Any) -> jax.Array:
        spatial = len(layout) - 2
        kernel = layout[1:-1] + "IO"
        return lax.conv_general_dilated(
            x, w, (1,) * spatial, "SAME", dimension_numbers=(layout, kernel, layout), **kw
        )

    def unit(x: jax.Array) -> jax.Array:
        return x / jnp.linalg.norm(x, axis=-1, keepdims=True)

    def causal(q: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array:
        s = q @ k.transpose(0, 2, 1) / 8
        s = jnp.where(jnp.tril(jnp.ones(s.shape[-2:], bool)), s, -1e9)
        return jax.nn.softmax(s, -1) @ v

    def kv_update(cache: jax.Array, new: jax.Array) -> jax.Array:
        return lax.fori_loop(
            0, 16, lambda i, c: lax.dynamic_update_slice(c, new * i, (0, i * 8, 0)), cache
        )

    def resize(x: jax.Array) -> jax.Array:
        n, h, w, c = x.shape
        return jax.image.resize(x, (n, 2 * h, 2 * w, c), "bilinear")

    return {
        "lstm": (lstm, (_r(12, 16, 64), _r(16, 96), _r(16, 96), _r(64, 384), _r(96, 384), _r(384))),
        "moe": (moe, (_r(256, 128), _r(128, 8), _r(8, 128, 128))),
        "group_norm": (group_norm, (_r(4, 32, 32, 64),)),
        "avg_pool": (
            lambda x: lax.reduce_window(x, 0.0, lax.add, (1, 3, 3, 1), (1, 2, 2, 1), "SAME") / 9,
            (_r(8, 56, 56, 48),),
        ),
        "separable_conv": (
            lambda x, dw, pw: jax.nn.relu(conv(x, dw, feature_group_count=x.shape[-1])) @ pw,
            (_r(4, 28, 28, 96), _r(3, 3, 1, 96), _r(96, 160)),
        ),
        "dilated_conv": (
            lambda x, w: conv(x, w, rhs_dilation=(2, 2)),
            (_r(2, 40, 40, 32), _r(3, 3, 32, 48)),
        ),
        "conv3d": (lambda x, w: conv(x, w, "NDHWC"), (_r(2, 8, 24, 24, 16), _r(3, 3, 3, 16, 24))),
        "cosine_sim": (lambda a, b: unit(a) @ unit(b).T, (_r(700, 96), _r(500, 96))),
        "cdist": (
            lambda a, b: jnp.sqrt(jnp.maximum(((a[:, None] - b[None]) ** 2).sum(-1), 0)),
            (_r(300, 24), _r(200, 24)),
        ),
        "kv_update": (kv_update, (_r(4, 128, 256), _r(4, 8, 256))),
        "resize": (resize, (_r(2, 48, 48, 24),)),
        "segment_sum": (
            lambda d, ids: jax.ops.segment_sum(d, ids, num_segments=256),
            (_r(6000, 64), jnp.arange(6000) // 24),
        ),
        "fft2": (lambda x: jnp.abs(jnp.fft.fft2(x)), (_r(8, 96, 96),)),
        "polyval": (lambda x: jnp.polyval(jnp.arange(1.0, 9.0), x), (_r(3000, 300),)),
        "argsort": (lambda x: jnp.argsort(x, axis=-1), (_r(300, 700),)),
        "normal": (lambda k: jax.random.normal(k, (1024, 256)), (jax.random.key(3),)),
        "mlp_bf16": (
            lambda x, w1, w2: jax.nn.gelu(x @ w1) @ w2,
            tuple(_r(*s, dtype=jnp.bfloat16) for s in ((192, 384), (384, 768), (768, 384))),
        ),
        "cumsum_axis0": (lambda x: jnp.cumsum(x, axis=0), (_r(700, 600),)),
        "causal_attention": (causal, (_r(6, 96, 64), _r(6, 96, 64), _r(6, 96, 64))),
    }


def volumes(n: int = 30, seed: int = 13) -> dict[str, tuple[Callable[..., Any], tuple[Any, ...]]]:
    """name -> (function, example inputs): `n` random 3-D convolutions, NDHWC, drawn as
    `runtime.sweeps`' conv3d rows are (`volume_draws`) but from another seed: none is a row
    of the Zen 4 reference."""

    def conv(x: jax.Array, w: jax.Array, s: int) -> jax.Array:
        return lax.conv_general_dilated(
            x, w, (s,) * 3, "SAME", dimension_numbers=("NDHWC", "DHWIO", "NDHWC")
        )

    return {
        f"{nb}x{d}x{h}x{w}x{c}_k{k}_o{o}_s{s}": (
            functools.partial(conv, s=s), (_r(nb, d, h, w, c), _r(k, k, k, c, o))
        )
        for nb, d, h, w, c, k, o, s in sorted(volume_draws(n, seed))
    }  # fmt: skip


def half_programs() -> dict[str, tuple[Callable[..., Any], tuple[Any, ...]]]:
    """name -> (function, example inputs): f16 programs (XLA:CPU keeps f16 ops in f16 and runs
    some as a scalar call an element, where it widens bf16 to f32): MLP layers, norms,
    softmaxes, activations, losses and quantisation."""
    h = jnp.float16

    def layer_norm(x: jax.Array) -> jax.Array:
        mu = x.mean(-1, keepdims=True)
        return (x - mu) * lax.rsqrt(((x - mu) ** 2).mean(-1, keepdims=True) + 1e-5)

    def attention(q: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array:
        return jax.nn.softmax(q @ k.T / 8.0, axis=-1) @ v

    def gauss_logpdf(x: jax.Array, mu: jax.Array, s: jax.Array) -> jax.Array:
        return (-0.5 * ((x - mu) / s) ** 2 - jnp.log(s)).sum(-1)

    def sigmoid_xent(z: jax.Array, y: jax.Array) -> jax.Array:
        return (jnp.maximum(z, 0) - z * y + jnp.log1p(jnp.exp(-jnp.abs(z)))).mean()

    return {
        "mlp_gelu": (
            lambda x, w, b: jax.nn.gelu(x @ w + b),
            (_r(256, 512, dtype=h), _r(512, 512, dtype=h) * 0.05, _r(512, dtype=h)),
        ),
        "layer_norm": (layer_norm, (_r(1024, 512, dtype=h),)),
        "softmax": (lambda x: jax.nn.softmax(x, axis=-1), (_r(512, 512, dtype=h),)),
        "attention": (
            attention,
            (_r(256, 64, dtype=h), _r(256, 64, dtype=h), _r(256, 64, dtype=h)),
        ),
        "silu": (jax.nn.silu, (_r(512, 1024, dtype=h),)),
        "logsumexp": (lambda x: jax.nn.logsumexp(x, axis=-1), (_r(1024, 256, dtype=h),)),
        "l2_normalize": (
            lambda x: x / jnp.sqrt((x * x).sum(-1, keepdims=True)),
            (_r(2048, 128, dtype=h),),
        ),
        "fake_quant": (
            lambda x: jnp.clip(jnp.round(x * 32.0), -127, 127) / 32.0,
            (_r(1024, 1024, dtype=h),),
        ),
        "softplus": (jax.nn.softplus, (_r(512, 512, dtype=h),)),
        "gauss_logpdf": (
            gauss_logpdf,
            (_r(512, 256, dtype=h), _r(256, dtype=h), jnp.abs(_r(256, dtype=h)) + 0.5),
        ),
        "decay": (
            lambda x, t: x * jnp.exp(-t[:, None] * 0.1),
            (_r(1024, 256, dtype=h), _r(1024, dtype=h)),
        ),
        "sigmoid_xent": (sigmoid_xent, (_r(1024, 256, dtype=h), _r(1024, 256, dtype=h))),
        "bucketize": (lambda x: jnp.floor(x * 10.0), (_r(700, 700, dtype=h),)),
        "tanh_gelu": (lambda x: jax.nn.gelu(x, approximate=True), (_r(1024, 1024, dtype=h),)),
    }


def training_steps() -> dict[str, tuple[Callable[..., Any], tuple[Any, ...]]]:
    """name -> (function, example inputs): gradients and optimiser updates (backward
    convolutions and pools, scatter-adds of embedding gradients, backward scans, per-example
    gradients, rematerialisation, Adam, clipping by global norm), first scored on
    2026-12-07 before any change made for them."""

    def conv(x: jax.Array, w: jax.Array, groups: int = 1) -> jax.Array:
        return lax.conv_general_dilated(
            x,
            w,
            (1, 1),
            "SAME",
            dimension_numbers=("NHWC", "HWIO", "NHWC"),
            feature_group_count=groups,
        )

    def max_pool(x: jax.Array) -> jax.Array:
        return lax.reduce_window(x, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")

    def cnn_loss(p: dict[str, jax.Array], x: jax.Array, y: jax.Array) -> jax.Array:
        h = max_pool(jax.nn.relu(conv(x, p["c1"])))
        h = max_pool(jax.nn.relu(conv(h, p["c2"])))
        logits = h.reshape(h.shape[0], -1) @ p["w"]
        return -(jax.nn.log_softmax(logits) * y).sum(-1).mean()

    def sgd(loss: Callable[..., jax.Array]) -> Callable[..., Any]:
        def step(p: Any, *batch: jax.Array) -> Any:
            g = jax.grad(loss)(p, *batch)
            return jax.tree.map(lambda a, b: a - 0.01 * b, p, g)

        return step

    def mlp_loss(p: tuple[jax.Array, ...], x: jax.Array, y: jax.Array) -> jax.Array:
        w1, w2, w3 = p
        h = jax.nn.gelu(jax.nn.gelu(x @ w1) @ w2)
        return ((h @ w3 - y) ** 2).mean()

    def adam(p: Any, m: Any, v: Any, g: Any) -> Any:
        m = jax.tree.map(lambda a, b: 0.9 * a + 0.1 * b, m, g)
        v = jax.tree.map(lambda a, b: 0.999 * a + 0.001 * b * b, v, g)
        p = jax.tree.map(lambda a, b, c: a - 1e-3 * b / (jnp.sqrt(c) + 1e-8), p, m, v)
        return p, m, v

    def clip(g: Any) -> Any:
        norm = jnp.sqrt(sum(jnp.sum(a * a) for a in jax.tree.leaves(g)))
        return jax.tree.map(lambda a: a * jnp.minimum(1.0, 1.0 / norm), g)

    def embed_loss(e: jax.Array, ids: jax.Array, t: jax.Array) -> jax.Array:
        return ((e[ids].mean(1) - t) ** 2).sum()

    def rnn_loss(w: jax.Array, u: jax.Array, xs: jax.Array) -> jax.Array:
        def cell(h: jax.Array, x: jax.Array) -> tuple[jax.Array, jax.Array]:
            h = jnp.tanh(x @ u + h @ w)
            return h, h

        return lax.scan(cell, jnp.zeros((xs.shape[1], w.shape[0])), xs)[1].sum()

    def layer_norm(x: jax.Array, g: jax.Array) -> jax.Array:
        mu = x.mean(-1, keepdims=True)
        return (x - mu) * lax.rsqrt(((x - mu) ** 2).mean(-1, keepdims=True) + 1e-5) * g

    def attention(q: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array:
        return jax.nn.softmax(q @ k.transpose(0, 2, 1) / 8, -1) @ v

    def batch_norm(x: jax.Array, g: jax.Array) -> jax.Array:
        m, s = x.mean((0, 1, 2)), x.var((0, 1, 2))
        return jax.nn.relu((x - m) * lax.rsqrt(s + 1e-5) * g)

    def dropout_mlp(k: jax.Array, x: jax.Array, w: jax.Array) -> jax.Array:
        keep = jax.random.bernoulli(k, 0.9, (x.shape[0], w.shape[1]))
        return jnp.where(keep, jax.nn.relu(x @ w) / 0.9, 0.0)

    mlp_p = (_r(256, 512) * 0.05, _r(512, 512) * 0.05, _r(512, 64) * 0.05)
    cnn_p = {
        "c1": _r(3, 3, 3, 32) * 0.1,
        "c2": _r(3, 3, 32, 64) * 0.1,
        "w": _r(7 * 7 * 64, 10) * 0.01,
    }
    adam_p = [_r(512, 512), _r(512), _r(512, 2048), _r(2048), _r(2048, 512)]
    rows = lambda x, w: jnp.tanh(x @ w).sum()
    return {
        "cnn_sgd_step": (sgd(cnn_loss), (cnn_p, _r(32, 28, 28, 3), jax.nn.one_hot(jnp.arange(32) % 10, 10))),
        "max_pool_grad": (jax.grad(lambda x: max_pool(x).sum()), (_r(8, 56, 56, 64),)),
        "conv_weight_grad": (
            jax.grad(lambda w, x: (conv(x, w) ** 2).sum()),
            (_r(3, 3, 64, 64), _r(8, 28, 28, 64)),
        ),
        "conv_input_grad": (
            jax.grad(lambda x, w: (conv(x, w) ** 2).sum()),
            (_r(8, 28, 28, 64), _r(3, 3, 64, 64)),
        ),
        "depthwise_grad": (
            jax.grad(lambda w, x: jnp.tanh(conv(x, w, x.shape[-1])).sum()),
            (_r(3, 3, 1, 128), _r(4, 32, 32, 128)),
        ),
        "mlp_sgd_step": (sgd(mlp_loss), (mlp_p, _r(128, 256), _r(128, 64))),
        "mlp_remat_grad": (
            jax.grad(jax.checkpoint(mlp_loss)),
            (mlp_p, _r(128, 256), _r(128, 64)),
        ),
        "per_example_grads": (
            jax.vmap(jax.grad(rows), in_axes=(0, None)),
            (_r(64, 128), _r(128, 256)),
        ),
        "adam_update": (adam, (adam_p, adam_p, [jnp.abs(a) for a in adam_p], adam_p)),
        "clip_global_norm": (clip, (adam_p,)),
        "embedding_grad": (
            jax.grad(embed_loss),
            (_r(20000, 64), jnp.arange(512 * 8).reshape(512, 8) * 7 % 20000, _r(512, 64)),
        ),
        "rnn_bptt": (jax.grad(rnn_loss), (_r(128, 128) * 0.1, _r(64, 128) * 0.1, _r(24, 32, 64))),
        "layer_norm_grad": (
            jax.grad(lambda x, g: layer_norm(x, g).sum(), argnums=(0, 1)),
            (_r(2048, 512), _r(512)),
        ),
        "attention_grad": (
            jax.grad(lambda q, k, v: attention(q, k, v).sum(), argnums=(0, 1, 2)),
            (_r(8, 128, 64), _r(8, 128, 64), _r(8, 128, 64)),
        ),
        "batch_norm_grad": (
            jax.grad(lambda x, g: batch_norm(x, g).sum(), argnums=(0, 1)),
            (_r(16, 28, 28, 64), _r(64)),
        ),
        "xent_grad": (
            jax.grad(lambda z, y: -(jax.nn.log_softmax(z) * y).sum()),
            (_r(1024, 1000), jax.nn.one_hot(jnp.arange(1024) % 1000, 1000)),
        ),
        "dropout_mlp": (dropout_mlp, (jax.random.key(5), _r(512, 256), _r(256, 512))),
    }  # fmt: skip


def utilities() -> dict[str, tuple[Callable[..., Any], tuple[Any, ...]]]:
    """name -> (function, example inputs): 26 programs of jnp's utilities and index
    arithmetic (searchsorted, histograms, bincounts, interpolation, medians and quantiles,
    rolls, tiles, repeats, Kronecker products, integer and complex matmuls, bit twiddling,
    NCHW, grouped and strided stem convolutions, running maxima, matrix powers and
    exponentials, nearest-centroid assignment), first scored on 2026-12-07 before any change
    made for them."""
    ints = jax.random.randint(_KEY, (1 << 20,), 0, 1 << 30, jnp.int32)

    def conv(x: jax.Array, w: jax.Array, dims: tuple[str, str, str], **kw: Any) -> jax.Array:
        return lax.conv_general_dilated(
            x, w, kw.pop("strides", (1, 1)), "SAME", dimension_numbers=dims, **kw
        )

    def nearest(x: jax.Array, c: jax.Array) -> jax.Array:
        d = (x * x).sum(-1, keepdims=True) - 2 * x @ c.T + (c * c).sum(-1)
        return jnp.argmin(d, axis=-1)

    def bits(i: jax.Array) -> jax.Array:
        return lax.population_count((i >> 3) ^ (i & 0xFF) | ~i)

    nhwc = ("NHWC", "HWIO", "NHWC")
    return {
        "searchsorted": (jnp.searchsorted, (jnp.sort(_r(100_000)), _r(20_000))),
        "histogram": (lambda x: jnp.histogram(x, bins=64, range=(-4, 4))[0], (_r(200_000),)),
        "bincount": (lambda i: jnp.bincount(i, length=1000), (ints[:100_000] % 1000,)),
        "interp": (
            lambda x, xp, fp: jnp.interp(x, xp, fp),
            (_r(100_000), jnp.linspace(-4, 4, 1000), _r(1000)),
        ),
        "median_rows": (lambda x: jnp.median(x, axis=-1), (_r(256, 1001),)),
        "quantiles": (lambda x: jnp.quantile(x, jnp.array([0.1, 0.5, 0.9])), (_r(100_000),)),
        "take_along": (
            lambda x, i: jnp.take_along_axis(x, i, axis=1),
            (_r(512, 1000), jnp.arange(512 * 16).reshape(512, 16) * 37 % 1000),
        ),
        "gather_2d": (
            lambda x, i, j: x[i, j],
            (_r(1000, 1000), jnp.arange(10_000) * 7 % 1000, jnp.arange(10_000) * 13 % 1000),
        ),
        "roll": (lambda x: jnp.roll(x, 7, axis=1), (_r(1024, 1024),)),
        "tile": (lambda x: jnp.tile(x, (4, 2)) + 1, (_r(256, 256),)),
        "repeat": (lambda x: jnp.repeat(x, 3, axis=0), (_r(512, 256),)),
        "kron": (jnp.kron, (_r(32, 32), _r(32, 32))),
        "triu": (jnp.triu, (_r(1024, 1024),)),
        "diff": (lambda x: jnp.diff(x, axis=0), (_r(2048, 512),)),
        "any_all": (
            lambda x: (jnp.abs(x) > 3).any(-1) & (x > -5).all(-1),
            (_r(2048, 512),),
        ),
        "int_matmul": (
            lambda a, b: a @ b,
            (ints[: 256 * 256].reshape(256, 256) % 100, ints[-256 * 256 :].reshape(256, 256) % 100),
        ),
        "bit_twiddle": (bits, (ints,)),
        "complex_mm": (
            lambda a, b: a @ b,
            (lax.complex(_r(128, 128), _r(128, 128)), lax.complex(_r(128, 128), _r(128, 128))),
        ),
        "nchw_conv": (
            lambda x, w: conv(x, w, ("NCHW", "OIHW", "NCHW")),
            (_r(8, 32, 32, 32), _r(64, 32, 3, 3)),
        ),
        "grouped_conv": (
            lambda x, w: conv(x, w, nhwc, feature_group_count=4),
            (_r(8, 32, 32, 64), _r(3, 3, 16, 64)),
        ),
        "stem_conv": (
            lambda x, w: jax.nn.relu(conv(x, w, nhwc, strides=(2, 2))),
            (_r(2, 224, 224, 3), _r(7, 7, 3, 64)),
        ),
        "cummax": (lambda x: lax.cummax(x, axis=1), (_r(512, 512),)),
        "matrix_power": (lambda x: jnp.linalg.matrix_power(x, 8), (_r(256, 256) * 0.06,)),
        "expm": (jax.scipy.linalg.expm, (_r(64, 64) * 0.1,)),
        "nearest_centroid": (nearest, (_r(4096, 32), _r(64, 32))),
        "convolve_1d": (lambda a, b: jnp.convolve(a, b, mode="same"), (_r(10_000), _r(64))),
    }  # fmt: skip


def broadcast_sums() -> dict[str, tuple[Callable[..., Any], tuple[Any, ...]]]:
    """name -> (function, example inputs): 13 sums over broadcasts (pairwise squared and L1
    distances, cdist, products written out as sums over the last or a middle dimension,
    attention scores written out) and a full-input sum of squares beside them, of 1M-67M
    summed elements: the programs behind
    `analysis/contractions.py` and the sums past the chains' sizes (2026-12-07; seen while
    that change was made, kept to check it on other machines)."""

    def sqd(a: jax.Array, b: jax.Array) -> jax.Array:
        return ((a[:, None] - b[None]) ** 2).sum(-1)

    return {
        "sqd_300x200x24": (sqd, (_r(300, 24), _r(200, 24))),
        "sqd_512x512x8": (sqd, (_r(512, 8), _r(512, 8))),
        "sqd_1000x500x64": (sqd, (_r(1000, 64), _r(500, 64))),
        "l1_128x128x256": (
            lambda a, b: jnp.abs(a[:, None] - b[None]).sum(-1),
            (_r(128, 256), _r(128, 256)),
        ),
        "cdist_300x200x24": (lambda a, b: jnp.sqrt(sqd(a, b)), (_r(300, 24), _r(200, 24))),
        "rows_sq_60000x24": (lambda x: (x * x).sum(-1), (_r(60000, 24),)),
        **{
            f"last_{m}x{k}x{n}": (
                lambda a, b: (a[:, None, :] * b[None]).sum(-1),
                (_r(m, k), _r(n, k)),
            )
            for m, k, n in ((256, 128, 256), (64, 512, 1024), (1024, 64, 1024))
        },
        **{
            f"mid_{m}x{k}x{n}": (
                lambda a, b: (a[:, :, None] * b[None]).sum(1),
                (_r(m, k), _r(k, n)),
            )
            for m, k, n in ((256, 128, 256), (128, 512, 512), (1024, 64, 1024))
        },
        "scores_8x64x64x32": (
            lambda q, k: (q[:, :, None, :] * k[:, None]).sum(-1),
            (_r(8, 64, 32), _r(8, 64, 32)),
        ),
        "scores_scaled": (
            lambda q, k: jax.nn.softmax((q[:, :, None, :] * k[:, None]).sum(-1) * 0.125, -1),
            (_r(8, 128, 64), _r(8, 128, 64)),
        ),
    }


def layer_stacks() -> dict[str, tuple[Callable[..., Any], tuple[Any, ...]]]:
    """name -> (function, example inputs): 10 stacks of 8-16 layers whose weights are one
    stacked array, written as Python loops over its slices (`ws[i]`: XLA:CPU runs every slice
    first, not where it is used, and splits those of 256 KiB or more over its threads) and as
    scans over it (2026-12-07; seen while `analysis.critical_path.level_order` was made)."""

    def unrolled(act: Callable[[jax.Array], jax.Array]) -> Callable[..., jax.Array]:
        def run(x: jax.Array, ws: jax.Array) -> jax.Array:
            for i in range(ws.shape[0]):
                x = act(x @ ws[i])
            return x

        return run

    def scanned(x: jax.Array, ws: jax.Array) -> jax.Array:
        return lax.scan(lambda h, w: (jnp.tanh(h @ w), None), x, ws)[0]

    def biased(x: jax.Array, ws: jax.Array, bs: jax.Array) -> jax.Array:
        for i in range(ws.shape[0]):
            x = jax.nn.relu(x @ ws[i] + bs[i])
        return x

    def stack(m: int, d: int, layers: int = 16) -> tuple[jax.Array, jax.Array]:
        return _r(m, d) * 0.1, _r(layers, d, d) * (1.0 / d**0.5)

    return {
        **{f"tanh_{m}x{d}": (unrolled(jnp.tanh), stack(m, d)) for m, d in ((32, 128), (64, 256), (128, 256), (256, 512))},
        **{f"scan_{m}x{d}": (scanned, stack(m, d)) for m, d in ((32, 128), (128, 256))},
        **{f"linear_{m}x{d}": (unrolled(lambda v: v), stack(m, d)) for m, d in ((32, 128), (64, 256))},
        "relu_bias_128x256": (biased, (*stack(128, 256, 8), _r(8, 256) * 0.1)),
        "gelu_16x512": (unrolled(jax.nn.gelu), stack(16, 512, 8)),
    }  # fmt: skip


def idioms() -> dict[str, tuple[Callable[..., Any], tuple[Any, ...]]]:
    """name -> (function, example inputs): 10 pieces of common models (2026-12-07; seen while
    outer products were made multiplies, `passes.extract._outer_product`): causal attention,
    rotary embeddings, an RMS-normed SwiGLU block, per-example weight gradients (an outer
    product per example), top-2 expert routing, a segment sum, label-smoothed cross-entropy,
    row normalisation, a cumulative sum and ranks by double argsort."""

    def causal_attention(q: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array:
        s = jnp.einsum("bhqd,bhkd->bhqk", q, k) * 0.125
        n = q.shape[2]
        s = jnp.where(jnp.arange(n)[:, None] >= jnp.arange(n)[None], s, -1e9)
        return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(s, -1), v)

    def rope(x: jax.Array) -> jax.Array:
        d = x.shape[-1] // 2
        t = jnp.arange(x.shape[0])[:, None] / (10000 ** (jnp.arange(d) / d))[None]
        c, s = jnp.cos(t), jnp.sin(t)
        return jnp.concatenate([x[:, :d] * c - x[:, d:] * s, x[:, :d] * s + x[:, d:] * c], -1)

    def swiglu(
        x: jax.Array, g: jax.Array, w1: jax.Array, w3: jax.Array, w2: jax.Array
    ) -> jax.Array:
        h = x * lax.rsqrt((x * x).mean(-1, keepdims=True) + 1e-6) * g
        return x + (jax.nn.silu(h @ w1) * (h @ w3)) @ w2

    def sq_loss(w: jax.Array, x: jax.Array, y: jax.Array) -> jax.Array:
        return ((jnp.tanh(x @ w) - y) ** 2).sum()

    def route(x: jax.Array, wg: jax.Array) -> tuple[jax.Array, jax.Array]:
        v, i = lax.top_k(x @ wg, 2)
        return jax.nn.softmax(v, -1), i

    def smoothed_xent(logits: jax.Array, labels: jax.Array) -> jax.Array:
        n = logits.shape[-1]
        target = jax.nn.one_hot(labels, n) * 0.9 + 0.1 / n
        return -(target * jax.nn.log_softmax(logits)).sum(-1).mean()

    segments = jnp.asarray(np.random.default_rng(0).integers(0, 64, 4096), jnp.int32)
    return {
        "causal_attention": (causal_attention, (_r(4, 4, 128, 64), _r(4, 4, 128, 64), _r(4, 4, 128, 64))),
        "rope_512x128": (rope, (_r(512, 128),)),
        "swiglu_64x256": (swiglu, (_r(64, 256), _r(256), _r(256, 688), _r(256, 688), _r(688, 256))),
        "per_example_grads_32": (jax.vmap(jax.grad(sq_loss), in_axes=(None, 0, 0)), (_r(64, 32), _r(32, 64), _r(32, 32))),
        "route_512x256x16": (route, (_r(512, 256), _r(256, 16))),
        "segment_sum_4096x64": (lambda x, i: jax.ops.segment_sum(x, i, num_segments=64), (_r(4096, 64), segments)),
        "smoothed_xent_256x1000": (smoothed_xent, (_r(256, 1000), jnp.zeros((256,), jnp.int32))),
        "l2_normalise_4096x128": (lambda x: x / jnp.linalg.norm(x, axis=-1, keepdims=True), (_r(4096, 128),)),
        "cumsum_256x1024": (lambda x: jnp.cumsum(x, axis=1), (_r(256, 1024),)),
        "rank_64x512": (lambda x: jnp.argsort(jnp.argsort(x, axis=-1), axis=-1), (_r(64, 512),)),
    }  # fmt: skip


SETS = {
    "unseen": programs,
    "half": half_programs,
    "short": short_calls,
    "rows": many_rows,
    "linalg": linear_algebra,
    "special": special_functions,
    "scalar": scalar_loops,
    "assorted": assorted_programs,
    "volumes": volumes,
    "training": training_steps,
    "utilities": utilities,
    "sums": broadcast_sums,
    "layers": layer_stacks,
    "idioms": idioms,
}


def _measure(
    names: list[str], runs: list[tuple[Callable[..., Any], tuple[Any, ...]]], rounds: int
) -> tuple[dict[str, dict[str, float]], float]:
    """All programs, the dispatch floor and the sentinel ops (in loops) timed in the same
    interleaved rounds (`runtime/timing.py`), so drift over the run hits them alike: each
    program's median net of dispatch, and the sentinels' time (us, geometric mean)."""
    cases = [Case(n, step, tuple(args)) for n, (step, args) in zip(names, runs, strict=True)]
    gauges = sentinel_cases()
    loops, timings, _ = time_in_loop(gauges, repeats=rounds, extra=cases)
    measured = {n: {"median_ns": t.median_us * 1e3, "spread": t.spread} for n, t in timings.items()}
    return measured, sentinel_time(loops, gauges)


def main(argv: list[str] | None = None) -> dict[str, float]:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--set", choices=sorted(SETS), default="unseen", help="which programs")
    p.add_argument("--only", nargs="*", default=None, help="program names to run")
    p.add_argument("--rounds", type=int, default=7, help="interleaved timing rounds")
    p.add_argument("--json", type=Path, default=None, help="save the measurements here")
    p.add_argument(
        "--predict-from",
        type=Path,
        default=None,
        help="measure nothing: score today's predictions against a run saved with --json",
    )
    a = p.parse_args(argv)
    progs = SETS[a.set]()
    names = a.only or list(progs)
    predicted: dict[str, float] = {}
    unmodelled: dict[str, str] = {}
    runs = []
    for name in names:
        fn, args = progs[name]
        step = perf_jit(fn, target="host")
        res = step.analyze(*args)
        if res.partial:
            print(f"{name}: analysis partial: {res.reason}", file=sys.stderr)
            continue
        predicted[name] = res.predicted_ns
        unmodelled[name] = ", ".join(
            u["name"] if isinstance(u, dict) else str(u)
            for u in res.to_dict().get("unmodelled", [])
        )
        if a.predict_from is None:
            jax.block_until_ready(step(*args))  # compile before the timed rounds
            runs.append((step, args))
    if a.predict_from is not None:
        saved = json.loads(a.predict_from.read_text())
        measured, sentinels = saved["measured"], saved.get("sentinel_us_before_after")
        in_rounds = saved.get("sentinel_us_in_rounds")
        source = f"saved run {a.predict_from.name}"
    else:
        before = sentinel_us()
        measured, in_rounds = _measure(list(predicted), runs, a.rounds)
        sentinels = [before, sentinel_us()]
        source = f"this run, {a.rounds} interleaved rounds"
    if a.json is not None:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        saved = {
            "measured": measured,
            "predicted_ns": predicted,
            "sentinel_us_before_after": sentinels,
            "sentinel_us_in_rounds": in_rounds,
        }
        a.json.write_text(json.dumps(saved, indent=1))
    print(f"measured: {source} (runtime/timing.py, median net of dispatch)\n")
    print("| program | predicted µs | measured µs | ratio | spread | unmodelled |")
    print("|---|---:|---:|---:|---:|---|")
    ratios: dict[str, float] = {}
    for name, pred_ns in predicted.items():
        if name not in measured:
            continue
        pred, meas = pred_ns / 1e3, measured[name]["median_ns"] / 1e3
        ratios[name] = pred / meas
        print(
            f"| {name} | {pred:,.1f} | {meas:,.1f} | {pred / meas:.2f} "
            f"| {measured[name]['spread']:.2f} | {unmodelled[name]} |"
        )
    if ratios:
        factor = np.exp(np.abs(np.log(np.array(list(ratios.values())))))
        print(
            f"\n{len(factor)} programs: error factor geometric mean {np.exp(np.log(factor).mean()):.2f}, "
            f"median {np.median(factor):.2f}; within 1.5x: {(factor <= 1.5).sum()}, "
            f"within 2x: {(factor <= 2).sum()}; worst: "
            f"{max(ratios, key=lambda k: abs(math.log(ratios[k])))}"
        )
        if sentinels and in_rounds:
            print(
                f"sentinel ops before and after the rounds: {machine_speed(sentinels):.2f}x "
                f"their time in the calibration; in the rounds: {machine_speed([in_rounds]):.2f}x"
            )
        gauge = [in_rounds] if in_rounds else sentinels
        speed = machine_speed(gauge) if gauge else math.nan
        if math.isfinite(speed):
            # A diagnostic: what the error would be had the model known the machine's speed.
            scaled = np.exp(np.abs(np.log(np.array(list(ratios.values())) * speed)))
            print(
                f"machine speed: sentinel ops {speed:.2f}x their time in the calibration; "
                f"predictions x that: error factor geometric mean "
                f"{np.exp(np.log(scaled).mean()):.2f}, within 1.5x: {(scaled <= 1.5).sum()}"
            )
    return ratios


if __name__ == "__main__":
    main()
