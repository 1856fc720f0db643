"""Measure LAPACK calls on this machine for `analysis.lapack.LapackModel`.

Each case is a `jax.lax.linalg` call (LU, Cholesky, triangular solve, QR's two halves,
symmetric eigendecomposition, SVD and nonsymmetric eigenvalues with and without vectors) of one
size and element type, compiled inside a while loop and timed by the runtime harness
(`runtime.timing.time_in_loop`, interleaved rounds, the calibration's sentinel ops beside
them). A row is the call alone: the loop's time per trip less what the pipeline prices the
program's other ops at (jax's checks of the call's `info`, the LU's permutation loop; a few
microseconds), so that a program priced by the pipeline does not pay them twice.

    python -m stablehlo_perf.runtime.lapack_sweep --out analysis/data/host_lapack_zen4.csv
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax._src.lax import linalg as lax_linalg

__all__ = ["QUICK_SIZES", "SIZES", "Case", "cases", "main", "measure", "write_csv"]

SIZES = (8, 16, 32, 64, 128, 256, 512, 1024)
_SLOW = frozenset({"syevd", "gesdd", "gesdd_n", "geev", "geev_n"})
_SLOW_MAX = 512


@dataclass(frozen=True)
class Case:
    """One measurement: `routine` (with `_n`: no vectors) on `batch` matrices of n x n (trsm:
    a triangle of n and `rhs` right-hand sides)."""

    routine: str
    dtype: str
    n: int
    batch: int = 1
    rhs: int = 0

    @property
    def key(self) -> str:
        return f"{self.routine},{self.dtype},{self.batch}x{self.n}x{self.rhs}"


def cases(sizes: tuple[int, ...] = SIZES, dtypes: tuple[str, ...] = ("f32", "f64")) -> list[Case]:
    """The sweep: every routine at every size (the slow drivers to `_SLOW_MAX`), triangular
    solves of 16 and n right-hand sides, and batches of 8 at 32 and 128 (where swept) for LU
    and Cholesky."""
    out = []
    for dtype in dtypes:
        for n in sizes:
            for r in (
                "getrf",
                "potrf",
                "geqrf",
                "orgqr",
                "syevd",
                "gesdd",
                "gesdd_n",
                "geev",
                "geev_n",
            ):
                if r not in _SLOW or n <= _SLOW_MAX:
                    out.append(Case(r, dtype, n))
            out += [Case("trsm", dtype, n, rhs=16), Case("trsm", dtype, n, rhs=n)]
        for n in sorted({32, 128} & set(sizes)):
            out += [Case("getrf", dtype, n, batch=8), Case("potrf", dtype, n, batch=8)]
    return out


def program(case: Case) -> tuple[Callable[..., Any], tuple[jax.Array, ...]]:
    """The function making `case`'s LAPACK call and its inputs (a well-conditioned matrix; an
    SPD one for Cholesky and the eigendecomposition; a lower triangle for the solve)."""
    dtype = {"f32": jnp.float32, "f64": jnp.float64}[case.dtype]
    shape = (case.batch, case.n, case.n) if case.batch > 1 else (case.n, case.n)
    a = np.random.default_rng(0).standard_normal(shape)
    spd = a @ np.swapaxes(a, -1, -2) + case.n * np.eye(case.n)
    x = jnp.asarray(a, dtype)
    r = case.routine
    if r == "getrf":
        return (lambda a: lax.linalg.lu(a)[0]), (x,)
    if r == "potrf":
        return (lambda a: lax.linalg.cholesky(a, symmetrize_input=False)), (
            jnp.asarray(spd, dtype),
        )
    if r == "trsm":
        b = jnp.asarray(np.random.default_rng(1).standard_normal((case.n, case.rhs)), dtype)
        tri = jnp.asarray(np.tril(spd), dtype)
        return (lambda t, b: lax.linalg.triangular_solve(t, b, left_side=True, lower=True)), (
            tri,
            b,
        )
    if r == "geqrf":
        return (lambda a: lax_linalg.geqrf(a)), (x,)
    if r == "orgqr":
        q, taus = jax.jit(lax_linalg.geqrf)(x)
        return (lambda q, t: lax_linalg.householder_product(q, t)), (q, taus)
    if r == "syevd":
        return (lambda a: lax.linalg.eigh(a, sort_eigenvalues=False)), (jnp.asarray(spd, dtype),)
    if r in ("gesdd", "gesdd_n"):
        uv = r == "gesdd"
        return (lambda a: lax.linalg.svd(a, full_matrices=False, compute_uv=uv)), (x,)
    if r == "geev":
        return jnp.linalg.eig, (x,)
    if r == "geev_n":
        return jnp.linalg.eigvals, (x,)
    raise ValueError(f"unknown LAPACK case {r!r}")


def _rest_us(fn: Callable[..., Any], args: tuple[jax.Array, ...]) -> tuple[list[Any], float]:
    """The program's LAPACK calls (`analysis.lapack.LapackCall`) and what the pipeline prices
    its other ops at, in microseconds (its kernels' time less the calls' own)."""
    import stablehlo_perf as sp
    from stablehlo_perf.analysis.lapack import lapack_call
    from stablehlo_perf.passes.extract import view_module

    result = sp.analyze(jax.jit(fn).lower(*args), target="host")
    view = view_module(result.module, "<lapack>")
    calls = [c for c in (lapack_call(r.info) for r in view.records) if c is not None]
    report = result.report
    own = sum(o.latency_ns for o in report.ops if o.name == "stablehlo.custom_call")
    return calls, max(report.total_latency_ns - report.call_overhead_ns - own, 0.0) / 1e3


REST_LIMIT = 0.9
"""The most of a case's in-loop time the pipeline may price its program's other ops at for
the call's own time to be kept: beyond it the difference is the pipeline's error, not the
call (the Xeon VM's calibration of 2026-12-05, with a stale model pricing the other ops, had
stored 0.01 us for every getrf, which takes 4.9-2180 us)."""


def measure(chosen: list[Case], repeats: int = 5) -> Iterator[tuple[Any, float, float]]:
    """(LapackCall, us per call net of the program's other ops, sentinel us) per case whose
    other ops the pipeline prices at most `REST_LIMIT` of its time; the others are named on
    stderr and left out."""
    from stablehlo_perf.runtime import sweeps
    from stablehlo_perf.runtime.calibrate import sentinel_cases, sentinel_time
    from stablehlo_perf.runtime.timing import time_in_loop

    one = jnp.asarray(1, jnp.int32)
    gauges = sentinel_cases()
    for case in chosen:
        fn, args = program(case)
        compiled = jax.jit(sweeps.in_loop(fn)).lower(one, *args).compile()
        spec = sweeps.Spec(case.routine, case.dtype, (case.batch, case.n, case.rhs))
        looped = [(case.key, sweeps.LoopCase(spec, compiled, args)), *gauges]
        per, _, _ = time_in_loop(looped, repeats=repeats)
        calls, rest = _rest_us(fn, args)
        if len(calls) != 1:
            raise RuntimeError(f"{case.key}: expected one LAPACK call, found {len(calls)}")
        loop_us = per[case.key][0].median_us
        if rest > REST_LIMIT * loop_us:
            print(
                f"{case.key}: left out: its other ops are priced at {rest:,.2f} us of the"
                f" {loop_us:,.2f} us it takes in a loop, which leaves the call's own time unknown",
                file=sys.stderr,
            )
            continue
        yield calls[0], loop_us - rest, sentinel_time(per, gauges)


QUICK_SIZES = (8, 32, 128, 512)
"""The sizes `stablehlo-perf-calibrate --quick` measures (`SIZES` without it)."""


def write_csv(path: Path, sizes: tuple[int, ...] = SIZES, repeats: int = 5, note: str = "") -> int:
    """Measure the sweep at `sizes` (f32 and f64: 64-bit types on for its duration only) and
    write it to `path` (`analysis.lapack.COLUMNS` under a provenance header), replacing it
    once complete (not at all where `measure` leaves every case out); the number of rows."""
    from stablehlo_perf.analysis.lapack import COLUMNS
    from stablehlo_perf.runtime import timing

    chosen = cases(sizes)
    lines = [
        *([f"# note: {note}"] if note else []),
        "# stablehlo-perf LAPACK calls (runtime/lapack_sweep.py)",
        *timing.provenance(),
        "# method: the call inside a while loop, per trip ("
        + timing.LOOP_METHOD
        + "), median over rounds, less the pipeline's price for the program's other ops",
        ",".join(COLUMNS),
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with jax.enable_x64(True), tmp.open("w") as f:
        f.write("\n".join(lines) + "\n")
        written = 0
        for i, (call, us, sentinel) in enumerate(measure(chosen, repeats), 1):
            written = i
            f.write(
                f"{call.routine},{call.dtype},{call.batch},{call.m},{call.n},{call.k},"
                f"{int(call.vectors)},{us:.4f},{sentinel:.4f}\n"
            )
            f.flush()
            print(f"[{i}/{len(chosen)}] {call.routine} {call.dtype} {call.batch}x{call.m}x{call.n}"
                  f" k={call.k}: {us:,.1f} us", file=sys.stderr)  # fmt: skip
    if written:
        tmp.replace(path)
    else:
        tmp.unlink()
        print(f"{path}: no LAPACK call could be measured; nothing written", file=sys.stderr)
    return written


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", type=Path, required=True, help="CSV to write")
    p.add_argument("--sizes", type=int, nargs="*", default=list(SIZES))
    p.add_argument("--repeats", type=int, default=5, help="interleaved timing rounds")
    p.add_argument("--note", default="", help="a `# note:` line for the header")
    a = p.parse_args(argv)
    write_csv(a.out, tuple(a.sizes), a.repeats, a.note)
    return 0


if __name__ == "__main__":
    sys.exit(main())
