"""Predicted (target host) vs measured latency of every corpus program on this CPU.

For each program of test_ir/corpus/programs.py: the default pipeline's total
latency (fusion-aware), the same without perf-fusion (every op its own
kernel), and the latency measured through jax with the runtime harness
(interleaved rounds, dispatch subtracted). Prints the table, the repeat noise
measured in the same run (median relative deviation of a round from its
program's median), MAPE and Kendall's tau across programs for both
predictions — whether fusion-awareness pays.

    python benchmarks/end_to_end_host.py [--repeats 11] [--only mlp attention ...]
"""

from __future__ import annotations

import argparse
import sys

import jax
import jax.numpy as jnp
import numpy as np
import stablehlo_perf as sp
from _corpus import corpus_programs
from scipy.stats import kendalltau
from stablehlo_perf.runtime.timing import Case, device_description, time_cases

UNFUSED = (
    "builtin.module(perf-op-info,perf-annotate-cycles{target=host},perf-critical-path{target=host})"
)


class _Ready:
    """What the harness blocks on once every output of a call is ready."""

    def block_until_ready(self) -> _Ready:
        return self


def concrete(args, key=0):
    """Random device arrays for ShapeDtypeStruct arguments (integers small and non-negative)."""
    keys = jax.random.split(jax.random.PRNGKey(key), len(args))
    out = []
    for k, a in zip(keys, args, strict=True):
        if not isinstance(a, jax.ShapeDtypeStruct):
            out.append(a)
        elif jnp.issubdtype(a.dtype, jnp.integer):
            out.append(jax.random.randint(k, a.shape, 0, 4).astype(a.dtype))
        elif a.dtype == jnp.bool_:
            out.append(jax.random.bernoulli(k, 0.5, a.shape))
        else:
            out.append(jax.random.normal(k, a.shape).astype(a.dtype))
    return tuple(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=11)
    ap.add_argument("--only", nargs="*")
    args = ap.parse_args(argv)
    programs = corpus_programs().PROGRAMS
    names = sorted(args.only or programs)
    cases, predicted = [], {}
    for name in names:
        fn, fargs = programs[name]()
        lowered = jax.jit(fn).lower(*fargs)
        fused = sp.analyze(lowered, target="host").report.total_latency_ns / 1e3
        unfused = sp.analyze(lowered, target="host", pipeline=UNFUSED).report.total_latency_ns / 1e3
        predicted[name] = (fused, unfused)
        compiled = lowered.compile()
        data = concrete(fargs)

        def call(*a, compiled=compiled):
            jax.block_until_ready(compiled(*a))
            return _Ready()

        cases.append(Case(name, call, data))
    timings, dispatch = time_cases(cases, repeats=args.repeats)
    print(
        f"device: {device_description()}; dispatch {dispatch.median_us:.1f} us per call (subtracted)"
    )
    print(f"{'program':18s} {'measured us':>11s} {'noise':>6s} {'fused us':>9s} {'err':>7s} "
          f"{'unfused us':>10s} {'err':>7s}")  # fmt: skip
    meas, fus, unf, noise = [], [], [], []
    for name in names:
        t = timings[name]
        f, u = predicted[name]
        rounds = np.array(t.rounds_us)
        dev = (
            float(np.median(np.abs(rounds - t.median_us) / abs(t.median_us)))
            if t.median_us
            else 0.0
        )
        meas.append(t.median_us)
        fus.append(f)
        unf.append(u)
        noise.append(dev)
        print(f"{name:18s} {t.median_us:11.1f} {dev:6.1%} {f:9.1f} {(f - t.median_us) / t.median_us:+7.0%} "
              f"{u:10.1f} {(u - t.median_us) / t.median_us:+7.0%}")  # fmt: skip
    m, f, u = np.array(meas), np.array(fus), np.array(unf)
    floor = float(np.median(noise))
    mape_f = float(np.mean(np.abs(f - m) / m))
    mape_u = float(np.mean(np.abs(u - m) / m))
    print()
    print(f"repeat noise floor (median over programs): {floor:.1%}")
    print(f"fusion-aware: MAPE {mape_f:.1%} ({mape_f / floor:.1f}x noise), Kendall tau "
          f"{kendalltau(f, m).statistic:.2f}")  # fmt: skip
    print(f"op by op:     MAPE {mape_u:.1%} ({mape_u / floor:.1f}x noise), Kendall tau "
          f"{kendalltau(u, m).statistic:.2f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
