"""Re-time chosen rows of a finished calibration: `stablehlo-perf-calibrate --remeasure REGEX`.

A row measured in a VM's slow or fast spell that its sentinel ops did not follow stays wrong
in every prediction that leans on it (the Zen 4 reference's int8 4x256x128x256 product,
stored at 389 us, ran 290, 285 and 307 in three later runs beside its sentinels, 2026-12-04).
The rows whose `op,dtype,shape` key matches a pattern are measured `runs` times as a sweep
measures them (`calibrate.measure`: in loops, interleaved, beside the sentinel ops); each
keeps the run whose time, taken to the file's speed by its sentinels, is the median of the
runs (a real run's row, not a blend), every other row and the probes stay as they were, and
the header's parameters are fitted again (`calibrate.refit`) under a note of what changed.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path

from stablehlo_perf.analysis import calibration_files as cf
from stablehlo_perf.analysis.elementwise import row_speed_factors
from stablehlo_perf.runtime import calibrate, sweeps
from stablehlo_perf.runtime.calibration_check import row_measurement

__all__ = ["Remeasured", "median_run", "remeasure", "scaled_us", "select", "table"]


@dataclasses.dataclass(frozen=True)
class Remeasured:
    """One re-timed row: its key, the stored and each run's time at the file's speed (us),
    and which run's row it keeps."""

    key: str
    stored_us: float
    runs_us: tuple[float, ...]
    kept: int

    @property
    def change(self) -> float:
        """New over stored time at the file's speed."""
        return self.runs_us[self.kept] / self.stored_us


def scaled_us(row: Sequence[str], ref: float) -> float:
    """A calibration row's in-loop time taken to the speed whose sentinel time is `ref`, as the
    models read it (`analysis.elementwise.row_speed_factors`)."""
    m = row_measurement(row)
    return m.latency_us * row_speed_factors([(m.op, m.dtype, m.shape)], [float(row[-1])], ref)[0]


def select(rows: Mapping[str, Sequence[str]], pattern: str) -> list[str]:
    """The keys of `rows` (`op,dtype,shape`) in which `pattern` (a regular expression) is
    found; ValueError for a malformed pattern or one that matches no row."""
    try:
        rx = re.compile(pattern)
    except re.error as e:
        raise ValueError(f"--remeasure {pattern!r}: not a regular expression ({e})") from None
    keys = sorted(k for k in rows if rx.search(k))
    if not keys:
        raise ValueError(f"--remeasure {pattern!r}: matches no row of the calibration")
    return keys


def median_run(times: Sequence[float]) -> int:
    """Index of the run holding the median of `times` (the lower median of an even count)."""
    order = sorted(range(len(times)), key=lambda i: (times[i], i))
    return order[(len(times) - 1) // 2]


def remeasure(
    path: Path,
    pattern: str,
    runs: int = 3,
    repeats: int = 7,
    note: str = "",
    progress: bool = True,
) -> list[Remeasured]:
    """Measure the rows of the calibration at `path` that `pattern` selects `runs` times,
    keep each row's median run, and refit the file with a note naming them (see the module
    docstring). ValueError for a pattern that selects nothing or runs below 1."""
    if runs < 1:
        raise ValueError(f"--runs {runs}: at least one run is needed")
    rows = calibrate.read_partial(path)
    keys = select(rows, pattern)
    specs = [sweeps.Spec(m.op, m.dtype, m.shape) for m in (row_measurement(rows[k]) for k in keys)]
    ref = cf.file_speed(path, [float(r[-1]) for r in rows.values()])
    measured: list[Mapping[str, list[str]]] = []
    for i in range(runs):
        partial = path.with_name(f"{path.stem}.remeasure{i}.partial.csv")
        partial.unlink(missing_ok=True)
        measured.append(calibrate.measure(specs, partial, repeats=repeats, progress=progress))
        partial.unlink(missing_ok=True)
    done, kept_rows = [], {}
    for key in keys:
        got = [m[key] for m in measured if key in m]
        if not got:  # XLA ran its loop as one kernel this time: nothing to replace it with
            continue
        times = tuple(scaled_us(r, ref) for r in got)
        k = median_run(times)
        kept_rows[key] = got[k]
        done.append(Remeasured(key, scaled_us(rows[key], ref), times, k))
    sentinels = [float(r[-1]) for m in measured for r in m.values()]
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%MZ")
    changes = [d.change for d in done]
    summary = (
        f"{now}: rows matching {pattern!r} re-measured ({len(done)} rows, {runs} runs beside "
        f"the sentinel ops at {min(sentinels, default=float('nan')):.1f}-"
        f"{max(sentinels, default=float('nan')):.1f} us; each row from the run at the median "
        f"sentinel-scaled time): new / stored time median "
        f"{statistics.median(changes) if changes else float('nan'):.3f}"
    )
    calibrate.refit(path, f"{summary}; {note}" if note else summary, kept_rows)
    return done


def table(done: Sequence[Remeasured]) -> str:
    """The re-timed rows: stored and each run's time at the file's speed, and the change."""
    lines = ["| row | stored us | runs us (kept *) | new / stored |", "|---|---:|---|---:|"]
    for d in done:
        runs = ", ".join(f"{t:.1f}{'*' if i == d.kept else ''}" for i, t in enumerate(d.runs_us))
        lines.append(f"| {d.key} | {d.stored_us:.1f} | {runs} | {d.change:.3f} |")
    return "\n".join(lines)
