"""Chains of elementwise ops that XLA:CPU fuses into one loop kernel, and their in-loop time.

The calibration's sweep times single ops; a real program's loop kernels fuse several
(a bias add and an activation, a normalisation's subtract, scale and shift), and their
time is not the members' sum: on the project's 2-vCPU Xeon VM (jax 0.10.2, 2026-12-01)
`tanh(v) * 0.5 + v` on 8192 f32 took 15-16 us in a loop on 512x16 and 256x32 and 4-5 us
on 128x64, 1024x8 and 8192; `tanh(v) + v` 5 us on all; chains without a transcendental
on (n, 1) ran 4-11x faster than their members' single-op times priced them. A chain is a
sequence of ops from `VOCAB` applied to x (its shape the kernel's), some reading a second
full-size input y, a row vector (the last dimension, broadcast) or a column vector (the
leading dimensions, broadcast); `draw` picks them from a seed, `measure` times them
inside a while loop with the calibration's sentinels, and `write_csv` (or
`python -m stablehlo_perf.runtime.fused_chains --out FILE`) stores the rows that
`analysis.fused_loops` fits.
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from stablehlo_perf.analysis.fusion import YNN_REDUCE_MIN_ELEMENTS
from stablehlo_perf.runtime import sweeps, timing

__all__ = [
    "CHEAP_STEPS",
    "COLUMNS",
    "INPUTS_STEPS",
    "INT_VOCAB",
    "LARGE_SHAPES",
    "LONG_STEPS",
    "MORE_INPUT_STEPS",
    "TRAINING_SHAPES",
    "VOCAB",
    "Chain",
    "build",
    "draw",
    "draw_bf16",
    "draw_cheap",
    "draw_inputs",
    "draw_ints",
    "draw_long",
    "draw_reduces",
    "main",
    "measure",
    "write_csv",
]

Step = Callable[[jax.Array, dict[str, jax.Array]], jax.Array]

VOCAB: dict[str, Step] = {
    "add_c": lambda v, a: v + 0.5,
    "mul_c": lambda v, a: v * 0.9,
    "max0": lambda v, a: jnp.maximum(v, 0.0),
    "min_c": lambda v, a: jnp.minimum(v, 0.5),
    "neg": lambda v, a: -v,
    "abs": lambda v, a: jnp.abs(v),
    "round": lambda v, a: jnp.round(v),
    "clip": lambda v, a: jnp.clip(v, -1.0, 1.0),
    "add_y": lambda v, a: v + a["y"],
    "mul_y": lambda v, a: v * a["y"],
    "div_y": lambda v, a: v / a["y"],
    "where_y": lambda v, a: jnp.where(v > 0, v, a["y"]),
    "mul_row": lambda v, a: v * a["row"],
    "sub_col": lambda v, a: v - a["col"],
    "where_col": lambda v, a: jnp.where(a["col"] > 0, v, 0.0),
    "tanh": lambda v, a: jnp.tanh(v),
    "exp": lambda v, a: jnp.exp(v),
    "log": lambda v, a: jnp.log(v),
    "rsqrt": lambda v, a: lax.rsqrt(v),
    "sigmoid": lambda v, a: jax.nn.sigmoid(v),
    "sin": lambda v, a: jnp.sin(v),
    "sq": lambda v, a: jnp.square(v),
    "add_z": lambda v, a: v + a["z"],
    "mul_z": lambda v, a: v * a["z"],
    "sub_w": lambda v, a: v - a["w"],
    "mul_w": lambda v, a: v * a["w"],
}
"""Chain steps by name: `_c` with a constant, `_y` with the second full-size input (`_z`,
`_w` with a third and a fourth: `MORE_INPUT_STEPS`),
`_row` / `_col` with a broadcast vector, the rest unary (`clip` a maximum and a minimum,
`sigmoid` a negate, exp, add and divide, `where_*` a compare and a select, `sq` a square)."""

INT_VOCAB: dict[str, Step] = {
    "iadd_y": lambda v, a: v + a["y"],
    "ixor_y": lambda v, a: v ^ a["y"],
    "ior_y": lambda v, a: v | a["y"],
    "iadd_c": lambda v, a: v + jnp.uint32(0x9E3779B9),
    "imul_c": lambda v, a: v * jnp.uint32(0x85EBCA6B),
    "iand_c": lambda v, a: v & jnp.uint32(0x007FFFFF),
    "shl_c": lambda v, a: v << jnp.uint32(13),
    "shr_c": lambda v, a: v >> jnp.uint32(17),
    "rotl": lambda v, a: (v << jnp.uint32(13)) | (v >> jnp.uint32(19)),
    "ixor_row": lambda v, a: v ^ a["row"],
}
"""Chain steps on uint32 tensors (`Chain.dtype` "u32"): what a counter-based random number
generator's rounds do (JAX's threefry: adds, rotations, xors of two words, keys broadcast
from scalars); `rotl` is a shift left, a logical shift right and an or."""

MORE_INPUT_STEPS = ("add_z", "mul_z", "sub_w", "mul_w")
"""Steps on a third and a fourth full-size input (`draw_inputs`)."""

LOOP_STEPS = tuple(sorted(set(VOCAB) - {"sq", *MORE_INPUT_STEPS}))
"""The steps `draw` picks loop chains from (the vocabulary the shipped chains' seeds drew)."""

REDUCES: dict[str, Callable[[jax.Array], jax.Array]] = {
    "sum_rows": lambda v: jnp.sum(v, axis=-1),
    "sum_lead": lambda v: jnp.sum(v, axis=tuple(range(v.ndim - 1))),
}
"""A reduce chain's last step: a sum over the last dimension (a row mean, a layer norm's
variance, a softmax's denominator) or over all the others (a bias gradient, a batch norm's
statistics). XLA:CPU runs an f32 sum of 4096+ elements as one YNNPACK kernel with the
elementwise steps before it (`analysis.fusion._YNN_ELEMENTWISE`)."""

LONG_STEPS = (
    "abs", "add_c", "add_y", "max0", "min_c", "mul_c", "mul_row", "mul_y", "neg", "round",
    "sigmoid", "sub_col", "tanh",
)  # fmt: skip
"""The steps `draw_long` picks: those whose values stay finite and normal however many follow
one another (no exp, log, rsqrt or divide). A fused loop of 100-odd dependent steps runs at
their latency, not the bytes it moves: 5 x 4 rounds of `x + y; y = max(y * 0.5, 0.1) - 0.2x;
y * x` (115 f32 ops, one kernel) on 256x256 took 146 us in a loop (Zen 4 VM, 2026-12-05),
where the member rule, for want of chains that long, priced 23."""

CHEAP_STEPS = (
    "abs", "add_c", "add_y", "clip", "max0", "min_c", "mul_c", "mul_row", "mul_y", "neg",
    "round", "sub_col", "where_col", "where_y",
)  # fmt: skip
"""The steps `draw_cheap` picks: arithmetic, clamps and selects, one or two instructions an
element each. Drawn from all of `LOOP_STEPS` or `LONG_STEPS`, a chain of 9 or more steps
without a transcendental is rare (1 in 15 of 8 steps, 1 in 170 of 30), and the model priced
such kernels at up to 3x their time (a Horner polynomial of 8 terms on 256x256 and 1024x1024
f32 in a loop, Zen 4 VM, 2026-12-05: 7.3 and 91 us, priced 19 and 275)."""

REDUCE_STEPS = tuple(s for s in sorted(VOCAB) if s not in ("clip", "sin", "where_col", "where_y"))
"""The steps `draw_reduces` picks from: those YNNPACK's fusion takes into a sum's kernel
(a clamp, a sine, a compare and a select end it in a loop kernel of their own)."""

COLUMNS = ("chain", "dtype", "shape", "measured_us_median", "spread", "sentinel_us")

_LAST_DIMS = (1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 100, 128, 256, 512, 1000, 1024, 2048)
_SIZES = (1024, 4096, 16384, 65536, 262144, 1048576)
TRAINING_SHAPES: tuple[tuple[int, ...], ...] = tuple(
    [(n // d, d) for n in _SIZES for d in _LAST_DIMS if d < n and n % d == 0]
    + [(n // 1000, 1000) for n in _SIZES if n >= 16384]
    + [(n // 100, 100) for n in _SIZES if n >= 4096]
    + [(n,) for n in _SIZES]
)
"""Shapes the training chains run on: every last dimension of `_LAST_DIMS` that divides
each size, and the flat arrays."""

_LARGE_SIZES = (1572864, 2097152, 3145728, 4194304)
_LARGE_LAST_DIMS = (1, 16, 64, 128, 256, 1024, 2048)
LARGE_SHAPES: tuple[tuple[int, ...], ...] = tuple(
    [(n // d, d) for n in _LARGE_SIZES for d in _LARGE_LAST_DIMS]
    + [(n // 1000, 1000) for n in _LARGE_SIZES]
    + [(n,) for n in _LARGE_SIZES]
)
"""Loop chains' shapes beyond `TRAINING_SHAPES`, of 1.5M-4M f32 elements (12-64 MiB a kernel
moves): where a fused loop leaves the last-level cache (32 MiB on the Zen 5 VM) for DRAM. The
member rule priced such kernels at the bandwidth fitted on single binary ops, which XLA:CPU
runs as lone kernels about half as fast as a fused chain of the same traffic from the cache
(2026-12-03, in a loop, one run: x + y on 1024x1024 f32 217 us, x * y + 1 111 us, x + y + 1
132; on 4096x1024, 48 MiB, 1008 and 935). On 36 held-out chains of these sizes (seed 99,
through the pipeline, times at the reference's speed by their sentinels) it scored an error
factor of 2.22 (0.08-4.2x; a sine's cost, scaled from other transcendentals, 0.08-0.13x), the
model with 144 of them (seed 10, four a shape) 1.29."""


@dataclass(frozen=True)
class Chain:
    """Ops from `VOCAB` (`INT_VOCAB` for a "u32" chain) applied in order to x of `shape`, the
    last one possibly a sum (`REDUCES`)."""

    ops: tuple[str, ...]
    shape: tuple[int, ...]
    dtype: str = "f32"

    @property
    def key(self) -> str:
        """`ops.joined.by.dots/shape` (the CSV's chain and shape columns, joined)."""
        return f"{'.'.join(self.ops)}/{'x'.join(map(str, self.shape))}"


def draw(
    shapes: Sequence[tuple[int, ...]],
    per_shape: int,
    seed: int,
    lengths: tuple[int, int] = (1, 8),
    steps: Sequence[str] = LOOP_STEPS,
) -> list[Chain]:
    """`per_shape` different chains of `lengths` (inclusive) ops from `steps` on every shape,
    the same for a seed (a chain drawn twice for a shape is drawn again)."""
    return _draw([(tuple(s), ()) for s in shapes], steps, per_shape, seed, lengths)


def draw_long(shapes: Sequence[tuple[int, ...]], per_shape: int, seed: int) -> list[Chain]:
    """`per_shape` chains of 17-48 steps from `LONG_STEPS` on every shape, the same for a
    seed."""
    return draw(shapes, per_shape, seed, (17, 48), LONG_STEPS)


def draw_cheap(
    shapes: Sequence[tuple[int, ...]],
    per_shape: int,
    seed: int,
    lengths: tuple[int, int] = (2, 32),
) -> list[Chain]:
    """`per_shape` chains of `lengths` (inclusive) steps from `CHEAP_STEPS` on every shape, the
    same for a seed."""
    return draw(shapes, per_shape, seed, lengths, CHEAP_STEPS)


INPUTS_STEPS = (*CHEAP_STEPS, *MORE_INPUT_STEPS, "div_y", "exp", "tanh")
"""The steps `draw_inputs` picks: the cheap ones, those on a third and fourth input, and a few
costlier. The other draws read at most two full-size tensors (x and y), and the model left a
kernel of more to its members' rule, which priced it by its bytes at the DRAM bandwidth
(x + 0.3 (y - x) + 0.2 (z - x) + 0.1 (w - x) on 256x256 f32 in a loop, Zen 4 VM, 2026-12-05:
8.5 us, priced 28; max(x * y + z, 0) * 2 - w 10 us, priced 28)."""


def draw_inputs(
    shapes: Sequence[tuple[int, ...]],
    per_shape: int,
    seed: int,
    lengths: tuple[int, int] = (2, 12),
) -> list[Chain]:
    """`per_shape` chains of `lengths` (inclusive) steps from `INPUTS_STEPS` on every shape,
    the same for a seed."""
    return draw(shapes, per_shape, seed, lengths, INPUTS_STEPS)


def draw_bf16(
    shapes: Sequence[tuple[int, ...]],
    per_shape: int,
    seed: int,
    steps: Sequence[str] = LOOP_STEPS,
    lengths: tuple[int, int] = (1, 16),
) -> list[Chain]:
    """`per_shape` bf16 chains of `lengths` (inclusive) steps from `steps` on every shape, the
    same for a seed. XLA:CPU computes bf16 in f32, widening and rounding around ops, at a
    cost no f32 chain shows and that grows faster than the chain (65536 elements in a loop,
    Zen 4 VM, 2026-12-05: 1, 2, 4, 8 and 16 steps of a multiply and an add of constants 11,
    17, 37, 81 and 221 us; in f32 5-9 us)."""
    return [Chain(c.ops, c.shape, "bf16") for c in draw(shapes, per_shape, seed, lengths, steps)]


def draw_ints(
    shapes: Sequence[tuple[int, ...]],
    per_shape: int,
    seed: int,
    lengths: tuple[int, int] = (1, 40),
) -> list[Chain]:
    """`per_shape` different uint32 chains of `lengths` (inclusive) steps from `INT_VOCAB` on
    every shape, the same for a seed: long ones too, as a threefry kernel's 50-100 ops."""
    chains = _draw([(tuple(s), ()) for s in shapes], sorted(INT_VOCAB), per_shape, seed, lengths)
    return [Chain(c.ops, c.shape, "u32") for c in chains]


def reduce_shapes(shapes: Sequence[tuple[int, ...]]) -> list[tuple[tuple[int, ...], str]]:
    """(shape, sum) pairs for `draw_reduces`: each shape of `YNN_REDUCE_MIN_ELEMENTS` or more
    with a sum over its rows (a flat array: all of it) where they are longer than one
    element (XLA drops a sum over a dimension of 1), and over its leading dimensions where
    there are several rows and more than one column."""
    out = []
    for shape in shapes:
        if math.prod(shape) < YNN_REDUCE_MIN_ELEMENTS:
            continue
        if shape[-1] > 1:
            out.append((tuple(shape), "sum_rows"))
        if len(shape) > 1 and math.prod(shape[:-1]) > 1 and shape[-1] > 1:
            out.append((tuple(shape), "sum_lead"))
    return out


def draw_reduces(
    shapes: Sequence[tuple[int, ...]],
    per_shape: int,
    seed: int,
    lengths: tuple[int, int] = (1, 4),
) -> list[Chain]:
    """`per_shape` different chains of `lengths` (inclusive) steps from `REDUCE_STEPS`,
    then each sum of `reduce_shapes`, the same for a seed."""
    cases = [(shape, (total,)) for shape, total in reduce_shapes(shapes)]
    return _draw(cases, REDUCE_STEPS, per_shape, seed, lengths)


def _draw(
    cases: Sequence[tuple[tuple[int, ...], tuple[str, ...]]],
    steps: Sequence[str],
    per_shape: int,
    seed: int,
    lengths: tuple[int, int],
) -> list[Chain]:
    """For each (shape, last steps) case, `per_shape` different chains of `lengths` steps
    drawn from `steps`, then its last steps."""
    rng = np.random.default_rng(seed)
    out = []
    for shape, tail in cases:
        drawn: set[tuple[str, ...]] = set()
        while len(drawn) < per_shape:
            n = int(rng.integers(lengths[0], lengths[1] + 1))
            ops = (*(str(o) for o in rng.choice(steps, size=n)), *tail)
            if ops not in drawn:
                drawn.add(ops)
                out.append(Chain(ops, shape))
    return out


def build(chain: Chain) -> tuple[Callable[..., jax.Array], tuple[jax.Array, ...]]:
    """The chain as a function of (x, y, row, col), and z and w where a step reads them, and
    standard normal inputs (random bits for a uint32 chain)."""
    key = jax.random.key(0)
    shape = chain.shape

    def sample(i: int, shape: tuple[int, ...]) -> jax.Array:
        k = jax.random.fold_in(key, i)
        if chain.dtype == "u32":
            return jax.random.bits(k, shape, jnp.uint32)
        return jax.random.normal(k, shape, {"f32": jnp.float32, "bf16": jnp.bfloat16}[chain.dtype])

    x, y = sample(1, shape), sample(2, shape)
    row, col = sample(3, shape[-1:]), sample(4, (*shape[:-1], 1))
    more = (sample(5, shape), sample(6, shape)) if set(chain.ops) & set(MORE_INPUT_STEPS) else ()
    steps = INT_VOCAB if chain.dtype == "u32" else VOCAB

    def fn(x: jax.Array, y: jax.Array, row: jax.Array, col: jax.Array, *zw: jax.Array) -> jax.Array:
        args = {"y": y, "row": row, "col": col, **dict(zip("zw", zw, strict=False))}
        v = x
        for op in chain.ops:
            v = REDUCES[op](v) if op in REDUCES else steps[op](v, args)
        return v

    return fn, (x, y, row, col, *more)


def measure(chains: Sequence[Chain], repeats: int = 5) -> list[dict[str, Any]]:
    """Each chain's in-loop time (runtime.timing.time_in_loop, interleaved rounds) with the
    calibration's sentinel ops timed in the same rounds (their geometric mean per row). A
    time under `calibrate.RESOLUTION_US` (the difference of two programs' times, which
    jitter can make negative on a chain of a few hundred elements) is recorded as that value,
    as the sweep's rows are: a negative time made the whole chain file unreadable. A chain
    drawn twice (a short bf16 chain of cheap steps comes from both bf16 draws) is measured
    and recorded once."""
    from stablehlo_perf.runtime import calibrate

    unique = {f"{c.dtype}:{c.key}": c for c in chains}
    looped = []
    for key, c in unique.items():
        spec = sweeps.Spec(f"chain:{c.key}", c.dtype, c.shape)
        looped.append((key, sweeps.loop_case(spec, *build(c))))
    sentinels = calibrate.sentinel_cases()
    out, _, _ = timing.time_in_loop(looped + sentinels, repeats=repeats)
    speed = calibrate.sentinel_time(out, sentinels)
    return [
        {
            "chain": ".".join(c.ops),
            "dtype": c.dtype,
            "shape": "x".join(map(str, c.shape)),
            "measured_us_median": max(out[key][0].median_us, calibrate.RESOLUTION_US),
            "spread": out[key][0].spread,
            "sentinel_us": speed,
        }
        for key, c in unique.items()
    ]


def write_csv(rows: Sequence[dict[str, Any]], path: Path, note: str = "") -> None:
    """Rows under a header naming the machine, date, versions and method."""
    lines = [
        "# stablehlo-perf fused-chain latencies (runtime/fused_chains.py)",
        *([f"# note: {note}"] if note else []),
        *timing.provenance(),
        f"# method: {timing.LOOP_METHOD}; sentinel_us as in the op calibration",
    ]
    with path.open("w", newline="") as f:
        f.write("\n".join(lines) + "\n")
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        for r in rows:
            w.writerow({k: (f"{r[k]:.4f}" if isinstance(r[k], float) else r[k]) for k in COLUMNS})


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Time fused elementwise chains inside a loop.")
    p.add_argument("--out", type=Path, required=True, help="CSV to write")
    p.add_argument("--per-shape", type=int, default=2, help="chains per training shape")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repeats", type=int, default=5, help="interleaved rounds")
    p.add_argument("--note", default="", help="a line of provenance for the header")
    kind = p.add_mutually_exclusive_group()
    kind.add_argument("--reduces", action="store_true", help="chains that end in a sum")
    kind.add_argument("--large", action="store_true", help="loop chains on LARGE_SHAPES")
    kind.add_argument(
        "--large-reduces", action="store_true", help="chains that end in a sum, on LARGE_SHAPES"
    )
    kind.add_argument("--ints", action="store_true", help="uint32 loop chains (draw_ints)")
    kind.add_argument("--long", action="store_true", help="loop chains of 17-48 steps")
    kind.add_argument("--cheap", action="store_true", help="loop chains of 2-32 cheap steps")
    kind.add_argument("--inputs", action="store_true", help="loop chains of up to four inputs")
    kind.add_argument("--bf16", action="store_true", help="bf16 loop chains of 1-16 steps")
    kind.add_argument("--bf16-cheap", action="store_true", help="the same of cheap steps")
    a = p.parse_args(argv)
    if a.large:
        chains = draw(LARGE_SHAPES, a.per_shape, a.seed)
    elif a.large_reduces:
        chains = draw_reduces(LARGE_SHAPES, a.per_shape, a.seed)
    elif a.ints:
        chains = draw_ints(TRAINING_SHAPES, a.per_shape, a.seed)
    elif a.long:
        chains = draw_long(TRAINING_SHAPES, a.per_shape, a.seed)
    elif a.cheap:
        chains = draw_cheap(TRAINING_SHAPES, a.per_shape, a.seed)
    elif a.inputs:
        chains = draw_inputs(TRAINING_SHAPES, a.per_shape, a.seed)
    elif a.bf16 or a.bf16_cheap:
        steps = CHEAP_STEPS if a.bf16_cheap else LOOP_STEPS
        chains = draw_bf16(TRAINING_SHAPES, a.per_shape, a.seed, steps)
    else:
        pick = draw_reduces if a.reduces else draw
        chains = pick(TRAINING_SHAPES, a.per_shape, a.seed)
    rows = measure(chains, a.repeats)
    write_csv(rows, a.out, a.note)
    bad = [r for r in rows if not math.isfinite(r["measured_us_median"])]
    print(f"{a.out}: {len(rows)} chains measured", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
