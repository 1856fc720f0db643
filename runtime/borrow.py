"""A calibration in a minute for a machine no shipped reference describes: the shipped host
reference whose machine ran the calibration's sentinel ops nearest this one's speed, its
times scaled class by class by what a sample of its rows takes here.

`stablehlo-perf-calibrate --target host --borrow` times the sentinel ops (three runs), picks
the reference, re-times six rows of each model class of it (`runtime.calibration_check`,
~70 s) and writes it as this machine's calibration in the user's cache: each row's in-loop
time times its class's ratio now / then, its program time times the class's program ratio,
header measurements and fused chains times the median ratio, labelled `# borrowed:` with the
source and the ratios so the report says where its numbers came from. One factor does not
do: on the Zen 4 VM (2026-12-03) the Zen 5 reference's classes ran 0.8-2.5x their times
there (binary 1.05, matmul 1.85, convolution 2.49) where its sentinel ops said 1.05-1.21;
three saved zoo runs (benchmarks/end_to_end.py --predict-from) priced at MAPE 13.1 / 12.3 /
11.9% borrowed class by class (10.8 / 10.3 / 10.3% with its own reference), 25.5 / 27.0 /
28.1% by the median ratio alone, and 37.7% (one run) by the fallback for an unknown
machine (the first reference's rows, none of its fitted parameters). A full calibration
(`--quick`, ~40 min) replaces it.

`--relevel` is the same for a machine that has a reference of its own but runs at another
speed today (a shared VM's level moved 0.82-1.05x between sessions): its own reference,
every time scaled by one factor, the median program-time ratio of six rows of each class
re-timed now (`relevel`; two factors with its program probes, below). One factor: on one
machine the classes' ratios are mostly the noise of six rows; scaled class by class (two
checks, 2026-12-06) the zoo's runs that morning scored MAPE 9.6-13.1%, Kendall tau
0.89-0.92, by one factor 9.8-11.5%, tau 0.91-0.92. The program ratio, not the in-loop one:
the zoo's level that morning was 0.81-0.84, the checks' program ratios 0.81-0.86 and their
in-loop ones 0.84-0.88; the sentinel ops' 0.63-0.89 track it worse. Its predictions are the reference's times the
factor: the learned models fit the reference's own rows and scale their times
(`calibration_files.relevel_of`), where trees refitted on the scaled rows had moved the
zoo's predictions 0.76-0.87x at x0.824 (Kendall tau 0.01 lower).

Two factors where the reference has program probes (all shipped ones do): kernel times by
the rows' median in-loop ratio, each program's time beyond its in-loop one by the probes'
median overhead ratio (`program_probes.overhead_ratio`). On the Xeon VM that afternoon the
probes' overheads ran 0.66-0.75x while the rows' kernels ran 0.83-0.87x; three same-run
re-levels (benchmarks/end_to_end.py --relevel) scored the zoo at MAPE 10.1 / 10.3 / 11.0%,
Kendall tau 0.920 / 0.926 / 0.913, where their program ratios as one factor gave 10.7 /
10.7 / 11.1%, tau 0.918 / 0.922 / 0.917 (the bf16 zoo 18.1% against 17.4%); the unseen
short calls (benchmarks/unseen_programs.py --set short, mostly overhead) went from an error
factor of 1.35 to 1.25, the other sets within 0.03 either way.
"""

from __future__ import annotations

import csv
import io
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from stablehlo_perf.analysis import calibration_files as cf
from stablehlo_perf.analysis import fused_loops

__all__ = ["Borrowed", "borrow", "nearest_by_speed", "reference_speeds", "relevel"]


@dataclass(frozen=True)
class Borrowed:
    """What `borrow` wrote: the source reference, and the ratios (time here / time in the
    reference) its rows were scaled by: per model class for the in-loop and the program
    time, and the median in-loop ratio that scales the classes not sampled and the rest."""

    source: Path
    kernel: Mapping[str, float]
    program: Mapping[str, float]
    overall: float
    # The factor of a program's time beyond its in-loop one (`relevel`'s probes), NaN: none.
    overhead: float = math.nan

    def factors(self, cls: str) -> dict[str, float]:
        """The factor of each time column of a row of model class `cls`: its class's in-loop
        and program ratios; the sentinel and dispatch times the overall ratio, the same for
        every row (readers scale a row by the file's median sentinel time over its own: a
        sentinel scaled by the row's class ratio would undo that ratio)."""
        kernel = self.kernel.get(cls, self.overall)
        program = self.program.get(cls, math.nan)
        return {
            "measured_us_median": kernel,
            "call_us_median": program if math.isfinite(program) else kernel,
            "dispatch_us": self.overall,
            cf.SENTINEL_COLUMN: self.overall,
        }

    def label(self) -> str:
        """The `# borrowed:` header value."""
        per = " ".join(
            f"{c}={self.kernel[c]:.3g}/{self.program.get(c, math.nan):.3g}"
            for c in sorted(self.kernel)
        )
        return (
            f"{self.source.name} x{self.overall:.3g} (in-loop/program time here over there, by "
            f"class: {per}; runtime/borrow.py)"
        )


def reference_speeds(names: Sequence[str] | None = None) -> list[tuple[Path, float]]:
    """The shipped host references (`calibration_files.shipped_names("host")`, or `names`) with
    the median sentinel time of their rows (us); those without sentinels left out."""
    from stablehlo_perf.runtime.calibration_check import calibration_sentinel_us

    paths = [cf.shipped_file(n) for n in (cf.shipped_names("host") if names is None else names)]
    speeds = [(p, calibration_sentinel_us(p)) for p in paths if p.is_file()]
    return [(p, s) for p, s in speeds if math.isfinite(s)]


def nearest_by_speed(here_us: float, refs: Sequence[tuple[Path, float]]) -> tuple[Path, float]:
    """The reference whose sentinel time is nearest `here_us` by ratio (|log|)."""
    if not refs:
        raise ValueError("no shipped host reference with sentinel times")
    return min(refs, key=lambda ref: abs(math.log(here_us / ref[1])))


def _scaled_chains(text: str, head: Callable[[list[str]], list[str]], factor: float) -> str:
    """A fused-chains CSV with its header lines passed through `head` and its times (and
    sentinel times) times `factor`."""
    lines = text.splitlines()
    reader = csv.DictReader(ln for ln in lines if not ln.startswith("#"))
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=reader.fieldnames or [], lineterminator="\n")
    writer.writeheader()
    for row in reader:
        for col in ("measured_us_median", cf.SENTINEL_COLUMN):
            if row.get(col) not in (None, ""):
                row[col] = f"{float(row[col]) * factor:.4f}"
        writer.writerow(row)
    return "\n".join(head([ln for ln in lines if ln.startswith("#")])) + "\n" + out.getvalue()


def borrow(out: Path, done: Borrowed, label: str = "") -> None:
    """Write `done.source` to `out` scaled to this machine by `done`'s ratios: each row's
    in-loop and program times by its class's (`Borrowed.factors`); the header measurements
    (small-loop and thunked-loop latencies, fused bf16 and transpose rates, the pool
    contention's cap) and the fused chains beside it (`fused_loops.chains_path`, when the
    source machine has shipped chains) by the overall ratio; the program probes follow the
    rows' sentinels. Where `done.overhead` is given, a row's and a probe's time beyond its
    in-loop one is scaled by it instead. The header names this machine and `# borrowed:` the
    source and ratios; its parameters are fitted again from the scaled rows
    (`calibrate.write_calibration`).
    `label` replaces the `# borrowed:` line (a re-level's, `relevel`)."""
    from stablehlo_perf.runtime import calibrate
    from stablehlo_perf.runtime.calibration_check import row_measurement

    f = done.overall
    label = label or f"# {cf.BORROWED_KEY}: {done.label()}"

    def head(lines: list[str]) -> list[str]:
        mine = f"# machine: {cf.machine_fingerprint()}"

        def line(ln: str) -> str:
            speed = cf.line_value([ln], cf.SPEED_KEY)
            if speed:  # the rows' sentinels are scaled: so is their speed
                return f"# {cf.SPEED_KEY}: {float(speed) * f:.6g}"
            return mine if ln.startswith("# machine:") else ln

        return [label, *map(line, lines)]

    lines = done.source.read_text().splitlines()
    rows = []
    kernel, call = (calibrate.COLUMNS.index(c) for c in ("measured_us_median", "call_us_median"))
    for fields in calibrate.read_partial(done.source).values():
        scale = done.factors(row_measurement(fields).model_class)
        row = [
            f"{float(v) * scale[col]:.4f}" if col in scale else v
            for col, v in zip(calibrate.COLUMNS, fields, strict=True)
        ]
        if math.isfinite(done.overhead):
            over = float(fields[call]) - float(fields[kernel])
            row[call] = f"{float(row[kernel]) + over * done.overhead:.4f}"
        rows.append(row)
    m = calibrate.measured_header(done.source, lines)
    probes = m.probes
    if math.isfinite(done.overhead):  # the fit reads them at the scaled rows' speed (x f)
        probes = [
            replace(p, program_ns=p.program_ns + p.overhead_ns * (done.overhead / f - 1.0))
            for p in probes
        ]
    thunked = {k: v / f if k.endswith("_gbps") else v * f for k, v in m.thunked.items()}
    contention = {k: v * f if k == "cap_ns" else v for k, v in m.pool_contention.items()}
    out.parent.mkdir(parents=True, exist_ok=True)
    calibrate.write_calibration(
        rows,
        out,
        head(
            [
                ln
                for ln in lines
                if ln.startswith("#") and not ln.startswith(calibrate.DERIVED_LINES)
            ]
        ),
        probes,
        m.bf16_fused_ns * f,
        {k: v * f for k, v in m.loops.items()},
        thunked,
        contention,
        m.transpose_fused_ns * f,
        m.transpose_aliased_ns * f,
        m.transpose_l2_ns * f,
    )
    chains = fused_loops.chains_path(out)
    shipped = [p for p in map(cf.shipped_file, fused_loops.SHIPPED) if p.is_file()]
    machine = cf.header_value(done.source, "machine")
    theirs = next((p for p in shipped if cf.header_value(p, "machine") == machine), None)
    if theirs is not None:
        chains.write_text(_scaled_chains(theirs.read_text(), head, f))
    else:
        chains.unlink(missing_ok=True)


def relevel(
    out: Path, source: Path, ratio: float, rows: int, overhead: tuple[float, int] | None = None
) -> None:
    """Write `source`, this machine's own reference, to `out` with every time scaled by `ratio`
    (its rows' times now over then, the median of `rows` re-timed: one factor, not a factor
    per class, which on one machine is mostly the noise of a few rows), labelled
    `# relevelled:` with the ratio and the time it was gauged. With `overhead` (the factor
    and how many program probes gave it: `program_probes.overhead_ratio`), each program's
    time beyond its in-loop one is scaled by that factor instead, rows and probes alike."""
    when = time.strftime(cf.RELEVEL_TIME_FORMAT, time.gmtime())
    ratio = float(f"{ratio:.3g}")  # the label's: the models scale by it (`cf.relevel_of`)
    sha = cf.header_value(source, "sha256")[:12]
    factor, gauged = math.nan, f"the median program time of {rows} of its rows"
    if overhead is not None:
        factor = float(f"{overhead[0]:.3g}")
        gauged = (
            f"{cf.RELEVEL_OVERHEAD}{factor:.3g}, the median in-loop time of {rows} of its rows"
            f" and the median per-call overhead of {overhead[1]} program probes"
        )
    label = (
        f"# {cf.RELEVELLED_KEY}: {source.name} x{ratio:.3g}, {gauged} re-timed {when} over"
        f" their calibrated time (runtime/borrow.py; reference sha256 {sha})"
    )
    borrow(out, Borrowed(source, {}, {}, ratio, factor), label)
