"""LAPACK calls on the host: what each computes, and a model of their time fitted on this
machine's measurements.

jax lowers `jnp.linalg` on a CPU to `stablehlo.custom_call @lapack_<t><routine>_ffi`
(t: s/d/c/z for f32/f64/c64/c128; routines getrf, potrf, trsm, geqrf, orgqr/ungqr,
syevd/heevd, gesdd, geev, ...), one call per batch of matrices, which the FFI handler runs
one matrix after another. XLA counts no FLOPs for a custom call, and the roofline fallback
priced them by their bytes: 5-100x under on the Zen 4 VM (jax 0.10.2: an `eigh` of 512x512
f32 16.5 ms, priced 0.57 ms; an `svd` 19.2 ms, priced 0.15).

`lapack_flops` counts a call's FLOPs by the operation counts of LAPACK Working Note 41
(Blackford & Dongarra, "Installation Guide for LAPACK", Appendix C: multiplications plus
additions, leading terms; a complex FLOP counted as four real ones) and the Golub & Van
Loan estimates for the eigen- and singular value drivers (Matrix Computations, 4th ed.,
Figure 8.6.1: symmetric eigenvalues 4n^3/3, with vectors 9n^3; SVD values 4mn^2 - 4n^3/3,
with vectors 4m^2n + 8mn^2 + 9n^3; nonsymmetric eigenvalues 10n^3, with vectors 25n^3).
The model interpolates the measured time per matrix against those FLOPs, per routine and
element type, in log-log (`LapackModel`); past its largest measurement, time grows with
FLOPs at the rate measured there.
"""

from __future__ import annotations

import csv
import math
import re
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from stablehlo_perf.analysis.service import OpCost

if TYPE_CHECKING:
    from stablehlo_perf.analysis.opinfo import OpInfo
    from stablehlo_perf.analysis.targets import Target

__all__ = [
    "COLUMNS",
    "COMPLEX_AS_REAL",
    "SHIPPED",
    "LapackCall",
    "LapackModel",
    "lapack_call",
    "lapack_flops",
    "lapack_path",
    "read_rows",
]

SHIPPED = ("host_lapack_zen4.csv", "host_lapack_xeon.csv")
"""Measured LAPACK calls shipped in analysis/data, one file per machine
(`runtime/lapack_sweep.py`: the Zen 4 VM's 174 calls of 8-1024, the Xeon VM's 74 of 32, 128
and 512), the first answering for any other; a host calibration's own (`lapack_path`) comes
first."""

COLUMNS = ("routine", "dtype", "batch", "m", "n", "k", "vectors", "us", "sentinel_us")
"""A measurement row: the call (`LapackCall`'s fields), its time in microseconds per call in
a loop, and the calibration's sentinel ops' time around it."""

_TARGET = re.compile(r"^lapack_([sdcz])([a-z]+?)(?:_ffi)?$")
_DTYPES = {"s": "f32", "d": "f64", "c": "c64", "z": "c128"}
_SAME = {"ungqr": "orgqr", "heevd": "syevd", "hetrd": "sytrd", "unmqr": "ormqr"}
_REAL = {"c64": "f32", "c128": "f64"}
"""The real type whose measured calls price a complex call without rows of its own (at
`COMPLEX_AS_REAL` times the real call's FLOPs). Zen 4 VM, 2026-12-05,
9 complex jnp.linalg programs in a loop (solve, inv, cholesky, qr, eigh, svd, eigvals of
64-256): priced by the roofline fallback at 0.00-0.31x their time (error factor 26)."""
COMPLEX_AS_REAL = 2.5
"""How many times the real call's FLOPs a complex call costs at the real type's rate: its
arithmetic is four real FLOPs per complex one (`lapack_flops`), but those 9 programs ran
at 0.50-0.67x the real curve read at 4x (median 0.63: loads, stores and the
factorisations' bookkeeping do not quadruple), i.e. at the real type's time for ~2.5x."""
_BORROWED = f"(complex: the real type's calls at {COMPLEX_AS_REAL}x FLOPs)"


@dataclass(frozen=True)
class LapackCall:
    """One LAPACK custom call: routine (real name: `ungqr` is `orgqr`), element type, the
    number of matrices, and its sizes: m x n for the matrix it factors (for trsm, the
    right-hand sides' m x n with k = m or n the triangle's side; for orgqr, k reflectors),
    and whether it computes vectors (syevd, gesdd, geev)."""

    routine: str
    dtype: str
    batch: int
    m: int
    n: int
    k: int = 0
    vectors: bool = True

    @property
    def key(self) -> tuple[str, str, bool]:
        return self.routine, self.dtype, self.vectors


def _mode(attrs: dict, key: str = "mode") -> str:
    """A character option of the call's backend config (`mode = 86 : ui8` is 'V')."""
    found = re.search(rf"\b{key} = (\d+)", str(attrs.get("mhlo.backend_config", "")))
    return chr(int(found.group(1))) if found else ""


def lapack_call(op: OpInfo) -> LapackCall | None:
    """The LAPACK call an op makes, or None (not a LAPACK custom call, or a shape unknown)."""
    if op.short_name != "custom_call" or not op.operands:
        return None
    found = _TARGET.match(str(op.attrs.get("call_target_name", "")))
    if found is None or not all(t.is_static and t.shape for t in op.operands):
        return None
    dtype, routine = _DTYPES[found.group(1)], found.group(2)
    routine = _SAME.get(routine, routine)
    a = op.operands[0].shape
    if len(a) < 2:  # type: ignore[arg-type]
        return None
    batch = math.prod(a[:-2])  # type: ignore[index]
    m, n = a[-2], a[-1]  # type: ignore[index]
    k, vectors = 0, True
    if routine == "trsm" and len(op.operands) > 1:
        b = op.operands[1].shape
        k = m
        m, n = b[-2], b[-1]  # type: ignore[index]
        if _mode(op.attrs, "side") == "R":
            k = n
    elif routine == "orgqr" and len(op.operands) > 1:
        k = op.operands[1].shape[-1]  # type: ignore[index]
    elif routine in ("syevd", "gesdd", "geev"):
        mode = _mode(op.attrs) or _mode(op.attrs, "compute_right")
        vectors = mode not in ("N", "")
    return LapackCall(routine, dtype, int(batch), int(m), int(n), int(k), vectors)  # type: ignore[arg-type]


def lapack_flops(call: LapackCall) -> float:
    """FLOPs of one matrix of the call (LAWN 41 and Golub & Van Loan counts: module docstring);
    0 for a routine without a count here."""
    m, n, k = float(call.m), float(call.n), float(call.k)
    lo, hi = min(m, n), max(m, n)
    r = call.routine
    if r == "getrf":
        flops = 2 * hi * lo * lo - 2 * lo**3 / 3
    elif r == "potrf":
        flops = n**3 / 3
    elif r == "trsm":
        flops = k * k * (n if k == m else m)
    elif r == "geqrf":
        flops = 2 * hi * lo * lo - 2 * lo**3 / 3
    elif r == "orgqr":
        flops = 4 * m * n * k - 2 * (m + n) * k * k + 4 * k**3 / 3
    elif r == "syevd":
        flops = 9 * n**3 if call.vectors else 4 * n**3 / 3
    elif r == "gesdd":
        if call.vectors:
            flops = 4 * hi * hi * lo + 8 * hi * lo * lo + 9 * lo**3
        else:
            flops = 4 * hi * lo * lo - 4 * lo**3 / 3
    elif r == "geev":
        flops = (25 if call.vectors else 10) * n**3
    elif r == "sytrd":
        flops = 4 * n**3 / 3
    else:
        return 0.0
    return max(flops, 1.0) * (4.0 if call.dtype.startswith("c") else 1.0)


def lapack_path(calibration: Path) -> Path:
    """Where `stablehlo-perf-calibrate` writes the LAPACK calls it measures with a calibration."""
    return calibration.with_name(calibration.stem + ".lapack.csv")


def read_rows(path: Path) -> list[tuple[LapackCall, float]]:
    """(call, microseconds per call) rows of a measurement CSV (`COLUMNS`; `#` lines are its
    header); a malformed row is a ValueError naming the file and line."""
    out = []
    with path.open() as f:
        lines = [(i, line) for i, line in enumerate(f, 1) if line.strip() and line[0] != "#"]
    reader = csv.reader(line for _, line in lines)
    header = next(reader, None)
    if header is None or tuple(header) != COLUMNS:
        raise ValueError(f"{path}: expected the columns {','.join(COLUMNS)}")
    for (lineno, _), row in zip(lines[1:], reader, strict=True):
        try:
            routine, dtype, batch, m, n, k, vectors, us = row[:8]
            call = LapackCall(routine, dtype, int(batch), int(m), int(n), int(k), vectors == "1")
            out.append((call, float(us)))
        except ValueError as e:
            raise ValueError(f"{path}:{lineno}: bad LAPACK row {','.join(row)!r}: {e}") from e
    return out


class LapackModel:
    """Time of a LAPACK call: batch x the time per matrix, interpolated in log-log against
    `lapack_flops` between this machine's measurements of the same routine, element type
    and vectors option (`runtime/lapack_sweep.py`); below the smallest, that time; past the
    largest, growing with FLOPs at the rate measured there. Routines it has no rows for are
    left to the fallback, and so named in the report."""

    name = "lapack-host"

    def __init__(self, path: Path | None = None) -> None:
        self._fits: dict[tuple[str, str, bool], tuple[np.ndarray, np.ndarray]] = {}
        self.same_machine = True
        self.source = ""
        if path is not None:
            self.source = path.name
            self.fit(read_rows(path))
            return
        from stablehlo_perf.analysis import calibration_files as cf

        mine = lapack_path(cf.calibration_path("host"))
        found = cf.nearest_machine([cf.header_value(mine, "machine")]) if mine.is_file() else None
        if found is not None and found[1]:
            try:
                self.fit(read_rows(mine))
                self.source = mine.name
                return
            except (OSError, ValueError) as e:
                warnings.warn(f"LAPACK calls not used: {e}", stacklevel=2)
        shipped = cf.nearest_shipped(SHIPPED)
        if shipped is not None:
            path, self.same_machine = shipped
            self.source = path.name
            self.fit(read_rows(path))

    def fit(self, rows: Iterable[tuple[LapackCall, float]]) -> LapackModel:
        """Per (routine, dtype, vectors): log FLOPs -> log ns per matrix, the median of rows
        of one size."""
        points: dict[tuple[str, str, bool], dict[float, list[float]]] = {}
        for call, us in rows:
            flops = lapack_flops(call)
            if flops <= 0 or us <= 0 or call.batch < 1:
                continue
            per = points.setdefault(call.key, {}).setdefault(math.log(flops), [])
            per.append(math.log(us * 1e3 / call.batch))
        self._fits = {}
        for key, by_size in points.items():
            xs = np.array(sorted(by_size))
            self._fits[key] = xs, np.array([float(np.median(by_size[x])) for x in xs])
        return self

    def _fit_of(self, call: LapackCall) -> tuple[np.ndarray, np.ndarray, float] | None:
        """The curve that prices `call` and the factor on its FLOPs where the curve is read:
        its own (1), or for a complex type without rows the real type's (`_REAL`, at
        `COMPLEX_AS_REAL` times the real call's FLOPs)."""
        if call.key in self._fits:
            return (*self._fits[call.key], 1.0)
        real = (call.routine, _REAL.get(call.dtype, ""), call.vectors)
        if real in self._fits:
            return (*self._fits[real], COMPLEX_AS_REAL / 4.0)
        return None

    def supports(self, op: OpInfo, target: Target) -> bool:
        call = lapack_call(op)
        return target.name == "host" and call is not None and self._fit_of(call) is not None

    def per_matrix_ns(self, call: LapackCall) -> float:
        """Predicted nanoseconds for one matrix of `call` (its routine must have rows)."""
        found = self._fit_of(call)
        assert found is not None
        xs, ys, scale = found
        x = math.log(max(lapack_flops(call) * scale, 1.0))
        if x <= xs[-1] or len(xs) == 1:
            return math.exp(float(np.interp(x, xs, ys)))
        return math.exp(float(ys[-1]) + (x - float(xs[-1])))

    def predict(self, ops: Sequence[OpInfo], target: Target) -> list[OpCost]:
        out = []
        for op in ops:
            call = lapack_call(op)
            assert call is not None
            ns = call.batch * self.per_matrix_ns(call)
            extra: dict[str, float | str | bool] = {"lapack_flops": call.batch * lapack_flops(call)}
            if not self.same_machine:
                extra["same_machine"] = False
            out.append(
                OpCost(
                    cycles=round(ns * target.clock_ghz),
                    latency_ns=ns,
                    dram_bytes=int(op.bytes or 0),
                    model=self.name if call.key in self._fits else f"{self.name}{_BORROWED}",
                    extra=extra,
                )
            )
        return out
