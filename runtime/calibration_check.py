"""Does a calibration still describe this machine? Re-measure a sample of its rows and compare.

A shared or virtual machine's speed moves (other tenants, host migration, frequency
policy): on the project's 2-vCPU VM the same programs ran at 0.62x their earlier times a
day later, which no model fitted on the earlier rows can know. `check` re-times a few rows
of every model class with the calibration's own harness (`calibrate.measure`) and reports
measured / calibrated per class, for the kernels in a loop and for the op as a program,
and the sentinel ops (`calibrate.SENTINELS`) now over the file's speed (`cf.file_speed`).
With `probes`, it re-times the calibration's program probes too: a call's overhead beyond its
kernels drifts apart from them (`program_probes.overhead_ratio`).
"""

from __future__ import annotations

import math
import tempfile
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from stablehlo_perf.analysis import calibration_files as cf
from stablehlo_perf.analysis.elementwise import Measurement, row_speed_factors
from stablehlo_perf.runtime import calibrate, program_probes, sweeps

__all__ = [
    "ClassDrift",
    "DriftReport",
    "calibration_sentinel_us",
    "check",
    "machine_speed",
    "row_measurement",
    "sample",
]

# Rows shorter than this are mostly timer jitter; longer ones make the check slow
# (the loop harness runs each row ~1 ms x trips x rounds).
_MIN_US, _MAX_US = 5.0, 5000.0
# Within this band of 1.0 the calibration is taken to still describe the machine: wider than
# the same-run repeat spread of a row (median ~3-10% on the VM), narrower than a slow spell.
TOLERANCE = (0.8, 1.25)
PROBE_PASSES = 3
"""Passes of the program probes a check with `probes` times: their median overheads' ratio
moved 0.75-0.77 between two runs of three passes on the project's Xeon VM (2026-12-06)."""


@dataclass(frozen=True)
class ClassDrift:
    """One model class: rows re-measured, median calibrated time, median ratios now / then."""

    cls: str
    rows: int
    calibrated_us: float
    kernel_ratio: float
    call_ratio: float


@dataclass(frozen=True)
class DriftReport:
    """Per-class drift and the median over all re-measured rows (kernel and program)."""

    path: Path
    classes: list[ClassDrift]
    kernel_ratio: float
    kernel_ratio_iqr: tuple[float, float]
    call_ratio: float
    sentinel_ratio: float  # the sentinel ops now over the file's speed (NaN: none recorded)
    # The program probes' median per-call overhead now over then, and how many answered
    # (NaN, 0: not re-timed or none).
    overhead_ratio: float = math.nan
    overhead_probes: int = 0

    @property
    def within_tolerance(self) -> bool:
        lo, hi = TOLERANCE
        overhead = self.overhead_ratio
        return (
            lo <= self.kernel_ratio <= hi
            and lo <= self.call_ratio <= hi
            and (math.isnan(overhead) or lo <= overhead <= hi)
        )

    def table(self) -> str:
        """Markdown table of the classes, then the overall line and the verdict."""
        lines = [
            "| class | rows | calibrated µs (median) | kernel now/then | program now/then |",
            "|---|---:|---:|---:|---:|",
        ]
        for c in self.classes:
            lines.append(
                f"| {c.cls} | {c.rows} | {c.calibrated_us:,.1f} | {c.kernel_ratio:.2f}"
                f" | {c.call_ratio:.2f} |"
            )
        lo, hi = self.kernel_ratio_iqr
        lines.append(
            f"\nall rows: kernel {self.kernel_ratio:.2f} (IQR {lo:.2f}-{hi:.2f}),"
            f" program {self.call_ratio:.2f}; "
            + (
                f"sentinel ops {self.sentinel_ratio:.2f}"
                if math.isfinite(self.sentinel_ratio)
                else "no sentinel ops recorded in this calibration"
            )
            + (
                f"; per-call overhead {self.overhead_ratio:.2f} ({self.overhead_probes}"
                " program probes)"
                if math.isfinite(self.overhead_ratio)
                else ""
            )
        )
        if self.within_tolerance:
            lines.append(f"{self.path}: still describes this machine (within {TOLERANCE})")
        else:
            lines.append(
                f"{self.path}: this machine now runs at {self.kernel_ratio:.2f}x the calibrated"
                " kernel times"
                + (
                    f" and {self.overhead_ratio:.2f}x its per-call overhead"
                    if math.isfinite(self.overhead_ratio)
                    else ""
                )
                + "; predictions from it are off by that much: rerun"
                " stablehlo-perf-calibrate (--relevel scales this machine's shipped reference"
                " to its speed now in a minute and a half)"
            )
        return "\n".join(lines)


def row_measurement(fields: Sequence[str]) -> Measurement:
    """A calibration row (split fields) as the models read it: op, dtype, shape, in-loop time."""
    shape = tuple(int(d) for d in fields[2].split("x"))
    return Measurement(fields[0], fields[1], shape, float(fields[4]))


def sample(rows: Sequence[Sequence[str]], per_class: int = 3) -> list[list[str]]:
    """`per_class` f32 rows of each model class, evenly spread over its sizes, whose calibrated
    time lies in [_MIN_US, _MAX_US]; deterministic (sorted by time, then key)."""
    by_class: dict[str, list[list[str]]] = defaultdict(list)
    for r in rows:
        if r[1] == "f32" and _MIN_US <= float(r[4]) <= _MAX_US:
            by_class[row_measurement(r).model_class].append(list(r))
    picked = []
    for cls in sorted(by_class):
        group = sorted(by_class[cls], key=lambda r: (float(r[4]), r[:3]))
        n = min(per_class, len(group))
        picked += [group[round((i + 0.5) * len(group) / n - 0.5)] for i in range(n)]
    return picked


def calibration_sentinel_us(path: Path) -> float:
    """The sentinel time a calibration's rows are read at (`cf.file_speed`): the speed its
    models describe (NaN for a file measured without sentinels)."""
    return cf.file_speed(path, [float(r[-1]) for r in calibrate.read_partial(path).values()])


def machine_speed(sentinels: Sequence[float], target: str = "host") -> float:
    """Sentinel times measured around a benchmark (geometric mean) over the speed of the
    target's calibration in use (`calibration_sentinel_us`): > 1 when the machine runs slower
    than when calibrated. NaN when that calibration has no sentinel column."""
    src = cf.training_files(target)
    then = calibration_sentinel_us(src[0]) if src else math.nan
    return math.exp(float(np.mean(np.log(sentinels)))) / then


def check(
    path: Path,
    per_class: int = 3,
    repeats: int = 7,
    progress: bool = False,
    probes: bool = False,
) -> DriftReport:
    """Re-measure `sample(path's rows)` now and compare with the calibrated values (each at the
    file's speed, as the models read them); with `probes`, the file's program probes too
    (`program_probes.measure_probes`, `PROBE_PASSES` passes: ~20 s on the project's VM)."""
    rows = list(calibrate.read_partial(path).values())
    picked = sample(rows, per_class)
    if not picked:
        raise ValueError(f"{path}: no f32 rows between {_MIN_US} and {_MAX_US} us to re-measure")
    key = ",".join
    sentinels = [float(r[-1]) for r in rows]
    measured = [row_measurement(r) for r in rows]
    ref = cf.file_speed(path, sentinels)
    factors = row_speed_factors([(m.op, m.dtype, m.shape) for m in measured], sentinels, ref)
    speed = dict(zip((key(r[:3]) for r in rows), factors, strict=True))
    specs = [sweeps.Spec(m.op, m.dtype, m.shape) for m in map(row_measurement, picked)]
    with tempfile.TemporaryDirectory() as tmp:
        fresh = calibrate.measure(specs, Path(tmp) / "check.csv", repeats, progress=progress)
    K, C = calibrate.COLUMNS.index("measured_us_median"), calibrate.COLUMNS.index("call_us_median")

    def then(col: int, group: Sequence[list[str]]) -> np.ndarray:
        """The calibrated times, at the file's speed as the models read them."""
        return np.array([float(r[col]) * speed[key(r[:3])] for r in group])

    def ratios(col: int, group: Sequence[list[str]]) -> np.ndarray:
        return np.array([float(fresh[key(r[:3])][col]) for r in group]) / then(col, group)

    by_class: dict[str, list[list[str]]] = defaultdict(list)
    for r in picked:
        by_class[row_measurement(r).model_class].append(r)
    classes = [
        ClassDrift(
            cls,
            len(group),
            float(np.median(then(K, group))),
            float(np.median(ratios(K, group))),
            float(np.median(ratios(C, group))),
        )
        for cls, group in sorted(by_class.items())
    ]
    kernel = ratios(K, picked)
    q1, q3 = np.percentile(kernel, [25, 75])
    now_sentinel = float(next(iter(fresh.values()))[-1])
    overhead = (math.nan, 0)
    if probes:
        calibrated = calibrate.measured_header(path, path.read_text().splitlines()).probes
        if calibrated:
            now = program_probes.measure_probes(repeats=repeats, passes=PROBE_PASSES)
            overhead = program_probes.overhead_ratio(calibrated, now, ref)
    return DriftReport(
        path,
        classes,
        float(np.median(kernel)),
        (float(q1), float(q3)),
        float(np.median(ratios(C, picked))),
        now_sentinel / ref,
        *overhead,
    )
