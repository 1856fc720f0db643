"""Predicted (target host) vs measured in-loop latency of fused elementwise kernels: chains
of 2-6 elementwise ops (constants, a second full-size input, broadcast rows and columns,
transcendentals) that XLA:CPU compiles into one loop kernel, on shapes whose last
dimension runs from 1 to 1024; and chains of 1-4 that end in a sum over the last
dimension or over the others, which it compiles into one YNNPACK kernel (a layer norm's
variance, a batch norm's statistics); and chains of 17-48 steps and of uint32 steps (a
random generator's rounds).

    python benchmarks/fused_chains.py [--rounds 5] [--json F] [--predict-from F]

The calibration times single ops; a fused kernel is priced from its members
(`analysis/fusion_cost.py`: the group's bytes at the streaming bandwidth plus each member's
compute) or, where this machine's chains were measured, by the fused-chain model
(`analysis/fused_loops.py`, trained on other chains and shapes). This checks both on
kernels no single op shows; the model column says which priced each. Each chain runs inside a
while loop (`runtime.sweeps.in_loop`), timed by the runtime harness in interleaved rounds
with the calibration's sentinel ops (`runtime.calibrate.SENTINELS`, their time beside the
reference's says how fast the machine was). Per chain: its shape, XLA's kernel count for
the chain (1 where it fused), predicted and measured time and their ratio; then the
geometric mean of the error factor max(r, 1/r) and the median ratio, overall and by the
chain's last dimension, length and whether it has a transcendental (the loops), and by
the sum's kind (the sums: "all" is the loops). The chains are drawn
from a fixed seed, so runs measure the same programs; `--json` saves the measurement,
`--predict-from` scores the current code on a saved one.
"""

from __future__ import annotations

import argparse
import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import jax
import numpy as np
from _xla_kernels import xla_kernels
from small_loops import geomean_factor
from stablehlo_perf import perf_jit
from stablehlo_perf.analysis.fused_loops import SHORT_STEPS
from stablehlo_perf.runtime import fused_chains
from stablehlo_perf.runtime.fused_chains import Chain

TRANSCENDENTAL = frozenset({"tanh", "exp", "log", "rsqrt", "sigmoid", "sin"})
LAST_DIMS = (1, 8, 16, 32, 64, 128, 512, 1024)
SIZES = (4096, 32768, 262144)
SHAPES = [(n // d, d) for n in SIZES for d in LAST_DIMS if d <= n] + [(n,) for n in SIZES]
SUM_NAMES = {"sum_rows": "sums over the last dimension", "sum_lead": "sums over the others"}
SEED = 20261201
"""Not a seed of the shipped training chains (`analysis/data/host_fused_xeon.csv`: 0;
`host_fused_zen5.csv`: 0-3; `host_fused_zen4.csv`: 0-2 and 10), on sizes between theirs:
these chains are held out."""


def chains() -> list[Chain]:
    """The benchmark's chains, the same on every run: three of 2-6 ops per shape, then two
    of 1-4 ops ending in a sum per shape and sum (`fused_chains.draw_reduces`), then one of
    17-48 steps (`draw_long`), one of uint32 steps (`draw_ints`), one of 2-32 cheap steps
    (`draw_cheap`), one of up to four inputs (`draw_inputs`) and one of bf16 and one of cheap
    bf16 steps (`draw_bf16`) per shape."""
    loops = fused_chains.draw(SHAPES, 3, SEED, lengths=(2, 6))
    sums = fused_chains.draw_reduces(SHAPES, 2, SEED, lengths=(1, 4))
    return (
        loops
        + sums
        + fused_chains.draw_long(SHAPES, 1, SEED)
        + fused_chains.draw_ints(SHAPES, 1, SEED)
        + cheap_chains()
        + input_chains()
        + fused_chains.draw_bf16(SHAPES, 1, SEED)
        + fused_chains.draw_bf16(SHAPES, 1, SEED, fused_chains.CHEAP_STEPS)
    )


def cheap_chains() -> list[Chain]:
    """The benchmark's chains of 2-32 cheap steps (`fused_chains.draw_cheap`), one a shape."""
    return fused_chains.draw_cheap(SHAPES, 1, SEED)


def input_chains() -> list[Chain]:
    """The benchmark's chains of up to four inputs (`fused_chains.draw_inputs`), one a shape."""
    return fused_chains.draw_inputs(SHAPES, 1, SEED)


def measure(rounds: int) -> dict[str, Any]:
    """In-loop time of every chain and the sentinels' time, in the same rounds."""
    cs = chains()
    rows = fused_chains.measure(cs, rounds)
    return {
        "sentinel_us": rows[0]["sentinel_us"],
        "rows": {
            c.key: {"measured_us": r["measured_us_median"], "spread": r["spread"]}
            for c, r in zip(cs, rows, strict=True)
        },
    }


def _last_dim_bucket(shape: tuple[int, ...]) -> str:
    d = shape[-1] if len(shape) > 1 else 0
    return "1-D" if d == 0 else f"last {d}"


def main(argv: list[str] | None = None) -> dict[str, float]:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=5, help="interleaved timing rounds")
    p.add_argument("--json", type=Path, default=None, help="save the measurement here")
    p.add_argument("--predict-from", type=Path, default=None, help="score a saved measurement")
    a = p.parse_args(argv)
    data = json.loads(a.predict_from.read_text()) if a.predict_from else measure(a.rounds)
    if a.json:
        a.json.write_text(json.dumps(data, indent=1))
    print(
        "| chain | shape | XLA kernels | model | predicted µs | measured µs | ratio | spread |\n"
        "|---|---|---:|---|---:|---:|---:|---:|"
    )
    groups: dict[str, list[float]] = defaultdict(list)
    cheap, inputs = set(cheap_chains()), set(input_chains())
    for c in chains():
        row = data["rows"].get(c.key)
        if row is None:
            continue
        shape, ops = c.shape, c.ops
        fn, args = fused_chains.build(c)
        res = perf_jit(fn, target="host").analyze(*args)
        pred = (res.predicted_ns - res.result.report.call_overhead_ns) / 1e3
        kernel = max(res.result.report.fusion_groups, key=lambda g: g["latency_ns"])
        meas = row["measured_us"]
        kernels = len(xla_kernels(jax.jit(fn).lower(*args).compile().as_text()).kernels)
        r = pred / meas if meas > 0 else math.nan
        print(
            f"| {'.'.join(ops)} | {'x'.join(map(str, shape))} | {kernels} | {kernel['model']} "
            f"| {pred:,.1f} "
            f"| {meas:,.1f} | {r:.2f} | {row['spread']:.2f} |"
        )
        if kernels != 1 or not math.isfinite(r) or r <= 0:
            continue
        if ops[-1] in fused_chains.REDUCES:
            groups["sums"].append(r)
            groups[SUM_NAMES[ops[-1]]].append(r)
            continue
        if c in cheap or c in inputs:
            groups["chains of 2-32 cheap steps" if c in cheap else "chains of 2-4 inputs"].append(r)
            continue
        if c.dtype != "f32" or len(ops) > SHORT_STEPS:
            name = {"u32": "uint32 chains", "bf16": "bf16 chains"}.get(c.dtype, "")
            groups[name or "chains of 17-48 steps"].append(r)
            continue
        groups["all"].append(r)
        groups[_last_dim_bucket(shape)].append(r)
        groups[f"{len(ops)} ops"].append(r)
        groups[
            "with a transcendental" if TRANSCENDENTAL & set(ops) else "no transcendental"
        ].append(r)
    speed = data["sentinel_us"]
    print(f"\nsentinel ops {speed:.1f} us (the op reference's median: the speed it was fitted at)")
    print("\n| chains (one XLA kernel) | n | error factor | median ratio |\n|---|---:|---:|---:|")
    order = ["all", "1-D", *(f"last {d}" for d in LAST_DIMS), *(f"{k} ops" for k in range(2, 7))]
    order += ["with a transcendental", "no transcendental", "sums", *SUM_NAMES.values()]
    order += ["chains of 17-48 steps", "uint32 chains", "chains of 2-32 cheap steps"]
    order += ["chains of 2-4 inputs", "bf16 chains"]
    summary = {}
    for name in order:
        rs = groups.get(name, [])
        if rs:
            summary[name] = geomean_factor(rs)
            print(f"| {name} | {len(rs)} | {geomean_factor(rs):.2f} | {float(np.median(rs)):.2f} |")
    return summary


if __name__ == "__main__":
    main()
