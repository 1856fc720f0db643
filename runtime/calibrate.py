"""`stablehlo-perf-calibrate`: measure this machine's op latencies, store and fit them.

    stablehlo-perf-calibrate --target host [--ops add,exponential,...] [--quick] [--check]
    stablehlo-perf-calibrate --out FILE --remeasure REGEX [--runs 3]   (runtime.remeasure)

Measures the sweep (runtime.sweeps) on JAX's default backend with the timing
harness: each op inside a runtime-trip-count loop, so that what is stored is its
cost within a program (`runtime.timing.time_in_loop`), and as a program of its own
in the same rounds (what a call costs beyond its kernels: `analysis.host_params`);
then multi-kernel probe programs (`runtime.program_probes`), the fused bf16 chain and fused
transposes (`runtime.fused_probes`), the latencies of ops in small loops
(`runtime.small_loop_probes`), the costs of kernels in loops run thunk by thunk
(`runtime.thunked_loop_probes`; these four `PROBE_RUNS` times, the median kept), how much
slower kernels run after a library call (`runtime.contention_probes`) and, for the host,
chains of elementwise ops fused into one loop kernel and chains that end in a sum YNNPACK
runs with them (`runtime.fused_chains`,
written beside the calibration as `analysis.fused_loops.chains_path`,
`QUICK_CHAINS_PER_SHAPE` of each per training shape with --quick, three times as many
without, and a third as many of each per shape on `fused_chains.LARGE_SHAPES`) and
LAPACK calls (`runtime.lapack_sweep`, beside it as `analysis.lapack.lapack_path`; 96 calls
with --quick, ~2 min, 174 without; timed after the rows are written, so that each call's
program's other ops are priced by this machine's rows).
Each interleaved chunk is appended to a partial CSV, so an interrupted run resumes
where it stopped. The finished calibration goes to the user's cache
(`analysis.calibration_files.calibration_path`) with a header naming machine, device,
date, versions and a sha256 of the rows; the `hgb` service picks it up for that
target from then on. A cached file whose checksum does not match (corrupted or
edited) is reported, removed and measured again, never used.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import hashlib
import math
import statistics
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np
from stablehlo_perf.analysis import calibration_files as cf
from stablehlo_perf.analysis import elementwise as ew
from stablehlo_perf.analysis import fused_loops
from stablehlo_perf.analysis.host_params import HOST_PARAMS_KEY, fit_host_params
from stablehlo_perf.analysis.lapack import lapack_path
from stablehlo_perf.analysis.small_loops import (
    LATENCY_KEY,
    THUNKED_KEY,
    format_latencies,
    parse_latencies,
)
from stablehlo_perf.analysis.targets import l1_data_mib, l2_mib
from stablehlo_perf.runtime import (
    contention_probes,
    fused_chains,
    fused_probes,
    lapack_sweep,
    page_probes,
    program_probes,
    small_loop_probes,
    sweeps,
    thunked_loop_probes,
    timing,
)
from tqdm import tqdm

__all__ = [
    "COLUMNS",
    "DERIVED_LINES",
    "PROBE_RUNS",
    "QUICK_CHAINS_PER_SHAPE",
    "RESOLUTION_US",
    "SENTINELS",
    "HeaderMeasurements",
    "add_rows",
    "main",
    "measure",
    "measured_header",
    "median_of_runs",
    "merge",
    "read_partial",
    "refit",
    "sentinel_cases",
    "sentinel_time",
    "sentinel_us",
    "write_calibration",
]

COLUMNS = (
    "op",
    "dtype",
    "shape",
    "numel",
    "measured_us_median",
    "spread",
    "call_us_median",
    "dispatch_us",
    "repeats",
    cf.SENTINEL_COLUMN,
)
# Timed in every chunk's rounds beside the chunk's rows (in a loop, as they are): a gauge of
# the machine's speed at that moment. A memory-bound add, a compute-bound exp and a library
# GEMM, so that a change in any of the three shows; their geometric mean is the row's
# sentinel_us (`analysis.calibration_files.speed_factors`).
SENTINELS = (
    sweeps.Spec("add", "f32", (512, 1024)),
    sweeps.Spec("exponential", "f32", (256, 1024)),
    sweeps.Spec("dot_general", "f32", (1, 256, 256, 256)),
)
QUICK_CHAINS_PER_SHAPE = 3
"""Fused chains `--quick` measures per training shape (three times as many without it). On
the Zen 5 VM (2026-12-02; 53-80 s per 170-255 chains) one per shape (85 chains) priced 78
held-out chains (benchmarks/fused_chains.py) at an error factor of 1.88, three (255) at 1.62,
nine (765) at 1.54; the zoo's pipeline MAPE on four saved runs 25.0 / 16.9 / 18.0 / 24.2%,
22.9 / 14.4 / 17.0 / 21.6% and 22.4 / 13.9 / 16.8 / 21.0%."""
PROBE_RUNS = 3
"""Runs of each short header probe (fused bf16, fused transposes, small loops, thunked loops;
~2-5 s a run), whose per-quantity median the header keeps. One run can fall in a VM's slow
spell: the Zen 4 reference's small-loop table, measured once, priced tanh on 16 f32 at 56 ns
a trip where two of three later runs gave 34-35 ns (the third, in a slow spell, 51), and
over-priced the e2e `small_loop` family's smallest program by 19-71% in six saved runs; its
thunked-loop fit, measured once, had a trip's base at 40 ns where three later runs gave 8-19
(2026-12-03)."""


def median_of_runs(measure: Callable[[int], Any], runs: int = PROBE_RUNS) -> Any:
    """The median over `runs` calls of `measure(seed)`, seeds 0, 1, ...: of each quantity
    of a mapping, else of each entry of a tuple, or of the one number."""
    results = [measure(seed) for seed in range(runs)]
    if isinstance(results[0], Mapping):
        return {k: float(np.median([r[k] for r in results])) for k in results[0]}
    med = np.median(np.array(results, dtype=float), axis=0)
    return tuple(float(v) for v in med) if med.ndim else float(med)


# Per-iteration times below this are indistinguishable from zero (the difference of two
# programs' times, each with microseconds of jitter); they are recorded as this value.
RESOLUTION_US = 0.1


def read_partial(path: Path) -> dict[str, list[str]]:
    """Rows of a partial sweep by Spec key; a truncated or malformed line is dropped (re-measured).
    A row's program time may be `nan` (unknown: `analysis.host_params.fit_host_params` leaves
    the row out of the per-call terms)."""
    rows: dict[str, list[str]] = {}
    if not path.is_file():
        return rows
    call = COLUMNS.index("call_us_median") - 3  # its index among the numeric fields
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith(("#", "op,")):
            continue
        fields = line.split(",")
        if len(fields) == len(COLUMNS) - 1:
            fields.append("nan")  # measured before sentinels: taken as at the median speed
        if len(fields) != len(COLUMNS):
            continue
        try:
            nums = [float(v) for v in fields[3:]]
        except ValueError:
            continue
        known = [v for k, v in enumerate(nums[:-1]) if k != call]
        if all(math.isfinite(v) for v in known) and nums[1] > 0 and not math.isinf(nums[call]):
            rows[",".join(fields[:3])] = fields
    return rows


OFF_SPEED = 1.25
"""A chunk whose sentinel ops ran more than this factor slower (or faster) than the sweep's
median is measured once more at the sweep's end (`measure`). The rows' times are scaled by
their chunk's sentinels (`analysis.calibration_files.speed_factors`), but a VM's slow spells
do not slow every op alike: on the project's Zen 5 VM (2026-12-02) the reference's f32 add
chunk ran with its sentinels 1.48x the median and its rows, so scaled, still took 1.7x what
the same adds took in a loop at the median speed later (576x576: 106 us scaled; 512x512
50 us now)."""


def _measure_chunk(
    part: Sequence[sweeps.Spec],
    gauges: list[tuple[str, sweeps.LoopCase]],
    repeats: int,
    bar: tqdm,
) -> list[list[str]]:
    """CSV rows of the specs of one chunk, timed in interleaved rounds beside the sentinel
    ops; a spec whose loop XLA compiles into one kernel (`sweeps.LoopCase.hoisted`) is named
    and left out."""
    cases = [(s, sweeps.build_loop_case(s)) for s in part]
    hoisted = [s.key for s, lc in cases if lc.hoisted]
    if hoisted:
        bar.write(f"not measured (XLA runs the loop as one kernel): {', '.join(hoisted)}")
        bar.update(len(hoisted))
    looped = [(s.key, lc) for s, lc in cases if s.key not in hoisted]
    part = [s for s in part if s.key not in hoisted]
    if not part:
        return []
    alone = [sweeps.build_case(s) for s in part]
    results, programs, disp = timing.time_in_loop([*looped, *gauges], repeats=repeats, extra=alone)
    sentinel = sentinel_time(results, gauges)
    rows = []
    for s in part:
        per, _ = results[s.key]
        rows.append(
            [
                *s.key.split(","),
                str(math.prod(s.shape)),
                f"{max(per.median_us, RESOLUTION_US):.4f}",
                f"{per.spread:.4f}",
                f"{programs[s.key].median_us:.4f}",
                f"{disp.median_us:.4f}",
                str(repeats),
                f"{sentinel:.4f}",
            ]
        )
    return rows


def _off_speed(rows: dict[str, list[str]], keys: set[str]) -> tuple[float, list[list[str]]]:
    """The median sentinel time of all `rows`, and the keys of `keys` grouped by the chunk
    they were measured in (their sentinel time) for the chunks that ran more than
    `OFF_SPEED` away from it."""
    ref = cf.median_sentinel([float(r[-1]) for r in rows.values()])
    chunks: dict[str, list[str]] = {}
    for key in keys:
        if _off_by(float(rows[key][-1]), ref) > math.log(OFF_SPEED):
            chunks.setdefault(rows[key][-1], []).append(key)
    return ref, [sorted(keys) for keys in chunks.values()]


def measure(
    specs: Sequence[sweeps.Spec],
    partial: Path,
    repeats: int = 7,
    chunk: int = 48,
    progress: bool = True,
) -> dict[str, list[str]]:
    """Measure the specs not yet in `partial`, a chunk at a time (interleaved within a chunk);
    a spec whose loop XLA compiles into one kernel (`sweeps.LoopCase.hoisted`) is named and
    left out: its loop times inline code, not the op's kernel. Then each chunk of `specs`
    whose sentinels ran more than `OFF_SPEED` from the median is measured once more, and a
    row is replaced where its new chunk ran nearer the median."""
    done = read_partial(partial)
    todo = [s for s in specs if s.key not in done]
    by_key = {s.key: s for s in specs}
    gauges = sentinel_cases() if todo else []
    partial.parent.mkdir(parents=True, exist_ok=True)
    if not partial.is_file() or partial.stat().st_size == 0:
        partial.write_text(",".join(COLUMNS) + "\n")
    elif not partial.read_bytes().endswith(b"\n"):
        # A killed run left half a line: end it so the next row starts on its own line.
        with partial.open("a") as f:
            f.write("\n")

    def keep(rows: list[list[str]]) -> None:
        for row in rows:
            done[",".join(row[:3])] = row
        with partial.open("a") as f:
            f.writelines(",".join(row) + "\n" for row in rows)

    with tqdm(total=len(specs), initial=len(specs) - len(todo), disable=not progress,
              desc="calibrating", unit="shape") as bar:  # fmt: skip
        for start in range(0, len(todo), chunk):
            rows = _measure_chunk(todo[start : start + chunk], gauges, repeats, bar)
            keep(rows)
            bar.update(len(rows))
    ref, again = _off_speed(done, set(by_key) & set(done))
    if not again:
        return done
    print(
        f"measuring again {sum(map(len, again))} shapes of {len(again)} chunks whose sentinel "
        f"ops ran more than {OFF_SPEED}x from the median",
        file=sys.stderr,
    )
    gauges = gauges or sentinel_cases()
    with tqdm(total=sum(map(len, again)), disable=not progress, desc="measuring again",
              unit="shape") as bar:  # fmt: skip
        for keys in again:
            rows = _measure_chunk([by_key[k] for k in keys], gauges, repeats, bar)
            old = {k: float(done[k][-1]) for k in keys}
            keep(
                [r for r in rows if _off_by(float(r[-1]), ref) < _off_by(old[",".join(r[:3])], ref)]
            )
            bar.update(len(rows))
    return done


def _off_by(gauge: float, ref: float) -> float:
    """How far a chunk's sentinel time is from `ref`, by ratio (|log|); NaN where either is
    unknown, which no comparison takes."""
    ok = all(math.isfinite(v) and v > 0 for v in (gauge, ref))
    return abs(math.log(gauge / ref)) if ok else math.nan


def sentinel_cases() -> list[tuple[str, sweeps.LoopCase]]:
    """The sentinel ops compiled in loops, for `timing.time_in_loop` beside other cases (keys
    apart from any sweep row's)."""
    return [(f"__sentinel__{s.key}", sweeps.build_loop_case(s)) for s in SENTINELS]


def sentinel_time(
    results: dict[str, tuple[timing.Timing, timing.Timing]],
    cases: Sequence[tuple[str, sweeps.LoopCase]],
) -> float:
    """Geometric mean in-loop time (us) of the sentinel `cases` in `time_in_loop` results."""
    return math.exp(float(np.mean([math.log(results[k][0].median_us) for k, _ in cases])))


def sentinel_us(repeats: int = 7) -> float:
    """The sentinel ops' in-loop time now (us, geometric mean), as a calibration chunk times them."""
    cases = sentinel_cases()
    return sentinel_time(timing.time_in_loop(cases, repeats=repeats)[0], cases)


def header(target: str, note: str = "") -> list[str]:
    """The provenance lines every calibration CSV starts with."""
    return [
        *([f"# note: {note}"] if note else []),
        "# stablehlo-perf calibration (measured op latencies; see runtime/calibrate.py)",
        f"# target: {target}",
        *timing.provenance(),
        (
            f"# method: {timing.LOOP_METHOD}; median over rounds; call_us_median is the op as a"
            f" program of its own, timed in the same rounds ({timing.METHOD}); {cf.SENTINEL_COLUMN}"
            f" is the geometric mean in-loop time of {' '.join(s.key for s in SENTINELS)} in the"
            " row's rounds; readers scale a row's times by the file's median sentinel_us over"
            " the row's"
        ),
    ]


def write_calibration(
    rows: Sequence[list[str]],
    path: Path,
    head: Sequence[str],
    probes: Sequence[program_probes.Probe] = (),
    bf16_fused_ns: float = math.nan,
    loop_latencies: Mapping[str, float] | None = None,
    thunked_loop: Mapping[str, float] | None = None,
    pool_contention: Mapping[str, float] | None = None,
    transpose_fused_ns: float = math.nan,
    transpose_aliased_ns: float = math.nan,
    transpose_l2_ns: float = math.nan,
    fresh_pages: Mapping[str, float] | None = None,
) -> None:
    """Write rows under `head`, the probes, the dispatch floor, the roofline parameters they
    imply (`analysis.host_params`, with the per-call terms fitted from `probes` where given:
    all their measurements together; `bf16_fused_ns` from `runtime.fused_probes`;
    `loop_latencies` from `runtime.small_loop_probes`; `thunked_loop` from
    `runtime.thunked_loop_probes`; `pool_contention` from `runtime.contention_probes`;
    `transpose_fused_ns` and `transpose_aliased_ns` from
    `runtime.fused_probes.measure_transpose_fused`, `transpose_l2_ns` from its
    `measure_transpose_l2`; `fresh_pages` from `runtime.page_probes`) and a
    `# sha256:` of the body, atomically (tmp + rename)."""
    body = ",".join(COLUMNS) + "\n" + "".join(",".join(r) + "\n" for r in sorted(rows))
    digest = hashlib.sha256(body.encode()).hexdigest()
    disp = np.median([float(r[COLUMNS.index("dispatch_us")]) for r in rows])
    sentinels = [float(r[-1]) for r in rows]
    stored = cf.line_value(head, cf.SPEED_KEY)
    # Rounded as the header keeps it, so that a refit reads back the speed this fit used.
    ref = float(stored or f"{cf.median_sentinel(sentinels):.6g}")
    speed = cf.speed_factors(sentinels, ref)
    params = fit_host_params(
        [
            (r[0], r[1], tuple(int(d) for d in r[2].split("x")), f * float(r[4]), f * float(r[6]))
            for r, f in zip(rows, speed, strict=True)
        ]
    )
    if probes:
        base = params.program_overhead_ns if math.isfinite(params.program_overhead_ns) else 0.0
        fit = program_probes.fit_probes([p.at_speed(ref) for p in probes], base, params.long_call)
        params = dataclasses.replace(
            params,
            multi_kernel_ns=fit.multi_kernel_ns,
            kernel_dispatch_ns=fit.kernel_dispatch_ns,
            rewake_ns=fit.rewake_ns,
            reduce_rewake_ns=fit.reduce_rewake_ns,
        )
    params = dataclasses.replace(
        params,
        bf16_fused_ns_per_elem=bf16_fused_ns,
        transpose_fused_ns_per_elem=transpose_fused_ns,
        transpose_fused_aliased_ns_per_elem=transpose_aliased_ns,
        transpose_fused_l2_ns_per_elem=transpose_l2_ns,
    )
    text = "\n".join(
        [
            *head,
            *([f"# {cf.SPEED_KEY}: {ref:.6g}"] if not stored and math.isfinite(ref) else []),
            *(p.line() for p in probes),
            *(
                [f"# {fused_probes.KEY}: {bf16_fused_ns:.6g}"]
                if math.isfinite(bf16_fused_ns)
                else []
            ),
            *(
                [f"# {fused_probes.TRANSPOSE_KEY}: {transpose_fused_ns:.6g}"]
                if math.isfinite(transpose_fused_ns)
                else []
            ),
            *(
                [f"# {fused_probes.ALIASED_KEY}: {transpose_aliased_ns:.6g}"]
                if math.isfinite(transpose_aliased_ns)
                else []
            ),
            *(
                [f"# {fused_probes.L2_KEY}: {transpose_l2_ns:.6g}"]
                if math.isfinite(transpose_l2_ns)
                else []
            ),
            *([f"# {LATENCY_KEY}: {format_latencies(loop_latencies)}"] if loop_latencies else []),
            *([f"# {THUNKED_KEY}: {format_latencies(thunked_loop)}"] if thunked_loop else []),
            *(
                [f"# {contention_probes.KEY}: {format_latencies(pool_contention)}"]
                if pool_contention
                else []
            ),
            *([f"# {page_probes.KEY}: {format_latencies(fresh_pages)}"] if fresh_pages else []),
            f"# dispatch_us: {disp:.3f}",
            f"# {HOST_PARAMS_KEY}: {params.header()}",
            f"# sha256: {digest}",
        ]
    )
    text += "\n" + body
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(path)


DERIVED_LINES = (
    f"# {program_probes.PROBE_KEY}: ",
    f"# {fused_probes.KEY}:",
    f"# {fused_probes.TRANSPOSE_KEY}:",
    f"# {fused_probes.ALIASED_KEY}:",
    f"# {fused_probes.L2_KEY}:",
    f"# {LATENCY_KEY}:",
    f"# {THUNKED_KEY}:",
    f"# {contention_probes.KEY}:",
    f"# {page_probes.KEY}:",
    "# dispatch_us:",
    f"# {HOST_PARAMS_KEY}:",
    "# sha256:",
)
"""Header lines `write_calibration` writes from its measurements (the rest is provenance)."""


def refit(path: Path, note: str = "", rows: Mapping[str, list[str]] | None = None) -> None:
    """Fit the header's roofline parameters again from a finished calibration's rows and
    probe measurements, measuring nothing (after a change to the fit); the header is kept
    and `note` joins its notes. `rows` (partial-sweep rows by key) join the file's first."""
    lines = path.read_text().splitlines()
    head = [ln for ln in lines if ln.startswith("#") and not ln.startswith(DERIVED_LINES)]
    if note:
        notes = [i for i, ln in enumerate(head) if ln.startswith("# note: ")]
        head.insert(notes[-1] + 1 if notes else 0, f"# note: {note}")
    m = measured_header(path, lines)
    write_calibration(
        list({**read_partial(path), **(rows or {})}.values()),
        path,
        head,
        m.probes,
        m.bf16_fused_ns,
        m.loops,
        m.thunked,
        m.pool_contention,
        m.transpose_fused_ns,
        m.transpose_aliased_ns,
        m.transpose_l2_ns,
        m.fresh_pages,
    )


def add_rows(
    path: Path,
    specs: Sequence[sweeps.Spec],
    repeats: int = 7,
    note: str = "",
    progress: bool = True,
) -> int:
    """Measure the `specs` a finished calibration lacks and add them to it, measuring no probe:
    a sweep that grew (new shapes of one op) extends a calibration without moving what its
    probes measured. The new rows are timed beside the sentinel ops, which take them to the
    file's speed as every row; the header's parameters are fitted again (`refit`). Returns how
    many rows were added."""
    have = read_partial(path)
    todo = [s for s in specs if s.key not in have]
    partial = path.with_name(path.stem + ".rows.partial.csv")
    new = measure(todo, partial, repeats=repeats, progress=progress) if todo else {}
    refit(path, note, new)
    partial.unlink(missing_ok=True)
    return len(new)


@dataclasses.dataclass(frozen=True)
class HeaderMeasurements:
    """What a finished calibration's header holds beyond its rows: the program probes, the
    fused bf16 chain cost (NaN if absent), small-loop and thunked-loop latencies, the pool
    contention's fraction and cap, the fused transposes' costs (NaN if absent), the fresh
    pages' cost (`runtime.page_probes`; empty if absent)."""

    probes: list[program_probes.Probe]
    bf16_fused_ns: float
    loops: dict[str, float]
    thunked: dict[str, float]
    pool_contention: dict[str, float]
    transpose_fused_ns: float
    transpose_aliased_ns: float
    transpose_l2_ns: float = math.nan
    fresh_pages: dict[str, float] = dataclasses.field(default_factory=dict)


def measured_header(path: Path, lines: Sequence[str]) -> HeaderMeasurements:
    """The header measurements of the calibration at `path`, whose text is `lines`."""
    kept = cf.header_value(path, fused_probes.KEY)
    transpose = cf.header_value(path, fused_probes.TRANSPOSE_KEY)
    aliased = cf.header_value(path, fused_probes.ALIASED_KEY)
    l2 = cf.header_value(path, fused_probes.L2_KEY)
    return HeaderMeasurements(
        [p for ln in lines if (p := program_probes.Probe.parse(ln))],
        float(kept) if kept else math.nan,
        parse_latencies(cf.header_value(path, LATENCY_KEY)),
        parse_latencies(cf.header_value(path, THUNKED_KEY)),
        parse_latencies(cf.header_value(path, contention_probes.KEY)),
        float(transpose) if transpose else math.nan,
        float(aliased) if aliased else math.nan,
        float(l2) if l2 else math.nan,
        parse_latencies(cf.header_value(path, page_probes.KEY)),
    )


_MERGED = ("measured_us_median", "call_us_median", "dispatch_us", cf.SENTINEL_COLUMN)
"""Columns `merge` takes the geometric mean of (a row's times and its chunk's sentinel time
alike, so that a row's time relative to its sentinel is the geometric mean of the files'; the
arithmetic mean of call times where one reads <= 0)."""


_PROVENANCE = ("# stablehlo-perf", "# target:", "# machine:", "# device:", "# date:",
               "# versions:", "# method:")  # fmt: skip
"""Header lines `merge` takes from its first file (its date line listing every file's)."""


def _geomean(values: Sequence[float]) -> float:
    """Geometric mean of the positive finite `values` (NaN if there is none)."""
    ok = [v for v in values if math.isfinite(v) and v > 0]
    return statistics.geometric_mean(ok) if ok else math.nan


def _merged_row(rows: Sequence[list[str]]) -> list[str]:
    """One shape's row from its rows in several calibrations (`merge`)."""
    out = list(rows[0])
    for col in _MERGED:
        k = COLUMNS.index(col)
        values = [float(r[k]) for r in rows]
        # A call time is net of dispatch and reads <= 0 for the tiniest ops: the geometric
        # mean has no value there (it wrote nan, and later reads dropped the row).
        mean = _geomean(values) if min(values) > 0 else statistics.fmean(values)
        out[k] = f"{mean:.4f}"
    spread, repeats = COLUMNS.index("spread"), COLUMNS.index("repeats")
    out[spread] = max((r[spread] for r in rows), key=float)
    out[repeats] = str(sum(int(float(r[repeats])) for r in rows))
    return out


def _merged_latencies(tables: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Each key's geometric mean over the tables that have it."""
    keys = dict.fromkeys(k for t in tables for k in t)
    return {k: _geomean([t[k] for t in tables if k in t]) for k in keys}


def merge(paths: Sequence[Path], out: Path, note: str = "") -> int:
    """Combine finished calibrations of one machine, measured at different times, into `out`,
    measuring nothing: a shape's in-loop, call, dispatch and sentinel times become the
    geometric mean over the files that hold it, the probes of all are fitted together and the
    header's parameters fitted again. Returns the rows written; raises ValueError naming a file
    that is missing, corrupted or of another machine.

    One measurement describes the VM's state of its hours: the Zen 5 VM's reference measured
    again four hours later (2026-12-02) ran its rows at a median 0.8x (0.56-0.94x by op) their
    first times beyond what the two measurements' sentinels explain. Over the zoo's 11 saved
    runs (benchmarks/end_to_end.py --predict-from) the first priced them at a mean MAPE of
    15.2%, the second at 20.4% (17.3% on run L, measured 20 minutes after it), their merge at
    13.7% (10.5% on L), better than the first on 8 of the 11; two runs an hour later, in a
    spell 1.2x slower, went the other way (20.7 / 16.3% with the first, 28.3 / 23.2% merged).
    """
    if not paths:
        raise ValueError("no calibrations to merge")
    machine = ""
    notes: list[str] = []
    head: list[str] = []
    dates: list[str] = []
    probes: list[program_probes.Probe] = []
    by_key: dict[str, list[list[str]]] = {}
    measured: list[HeaderMeasurements] = []
    for path in paths:
        if not path.is_file() or not cf.checksum_ok(path):
            raise ValueError(f"{path}: no valid calibration (missing, or its checksum fails)")
        here = cf.header_value(path, "machine")
        if machine and here != machine:
            raise ValueError(f"{path}: measured on {here!r}, not {machine!r} as {paths[0]}")
        machine = here
        lines = path.read_text().splitlines()
        notes += [ln for ln in lines if ln.startswith("# note: ") and ln not in notes]
        head = head or [ln for ln in lines if ln.startswith(_PROVENANCE)]
        dates.append(cf.header_value(path, "date"))
        measured.append(measured_header(path, lines))
        probes += [p for p in measured[-1].probes if p not in probes]
        for key, row in read_partial(path).items():
            by_key.setdefault(key, []).append(row)
    merged = (
        f"# note: merged from {len(paths)} calibrations ({', '.join(dates)}): each shape's times"
        " the geometric mean of theirs (runtime/calibrate.merge)"
    )
    head = [
        *notes,
        *([f"# note: {note}"] if note else []),
        merged,
        *(f"# date: {', '.join(dates)}" if ln.startswith("# date:") else ln for ln in head),
    ]
    rows = [_merged_row(rs) for rs in by_key.values()]
    bf16 = _geomean([m.bf16_fused_ns for m in measured])
    loops = _merged_latencies([m.loops for m in measured])
    thunked = _merged_latencies([m.thunked for m in measured])
    contention = _merged_latencies([m.pool_contention for m in measured])
    transpose = _geomean([m.transpose_fused_ns for m in measured])
    aliased = _geomean([m.transpose_aliased_ns for m in measured])
    l2 = _geomean([m.transpose_l2_ns for m in measured])
    fresh = _merged_latencies([m.fresh_pages for m in measured])
    write_calibration(
        rows, out, head, probes, bf16, loops, thunked, contention, transpose, aliased, l2, fresh
    )
    return len(rows)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="stablehlo-perf-calibrate",
        description="Measure op latencies on the local JAX device and fit the learned models.",
    )
    p.add_argument("--target", default="host", help="target the calibration is for (default host)")
    p.add_argument("--ops", help="comma-separated StableHLO op names (default: the sweep's ops)")
    p.add_argument(
        "--dtypes",
        default=",".join(sweeps.DTYPES),
        help="comma-separated element types of the elementwise ops (default f32,bf16; the"
        " second and later on every other shape with --quick; f64 enables JAX's x64 mode)",
    )
    p.add_argument("--quick", action="store_true", help="strided sweep that runs in minutes")
    p.add_argument("--repeats", type=int, default=7, help="interleaved rounds per shape")
    p.add_argument("--out", type=Path, help="CSV to write (default: the user cache entry)")
    p.add_argument("--fresh", action="store_true", help="discard earlier results and re-measure")
    p.add_argument("--note", default="", help="a line of provenance for the header")
    p.add_argument(
        "--refit",
        action="store_true",
        help="measure nothing: fit the header's parameters again from the file's rows and probes",
    )
    p.add_argument(
        "--rows-only",
        action="store_true",
        help="measure only the sweep's shapes the calibration (--out or the cache entry) lacks"
        " and add them, keeping its probes; the header's parameters are fitted again",
    )
    p.add_argument(
        "--merge",
        nargs="+",
        type=Path,
        metavar="CSV",
        help="measure nothing: combine these calibrations of one machine (measured in different"
        " sessions) into --out, each shape's times the geometric mean of theirs",
    )
    p.add_argument(
        "--check",
        action="store_true",
        help="measure a few rows of each class of the calibration in use (or --out) and say"
        " whether it still describes this machine (exit 1 if not)",
    )
    p.add_argument(
        "--borrow",
        action="store_true",
        help="measure the sentinel ops and six rows of each class (~1 min) and store the shipped"
        " host reference nearest this machine's speed, its times scaled class by class to"
        " what they take here, as this machine's calibration",
    )
    p.add_argument(
        "--relevel",
        action="store_true",
        help="measure six rows of each class of the shipped host reference measured on this"
        " machine and its program probes (~1.5 min) and store it, its kernel times scaled by"
        " the rows' in-loop times now over then and its per-call overhead by the probes', as"
        " this machine's calibration: the reference at the speed the machine runs at today",
    )
    p.add_argument(
        "--remeasure",
        metavar="REGEX",
        help="re-time the rows of the calibration (--out or the cache entry) whose"
        " op,dtype,shape key matches REGEX, --runs times beside the sentinel ops, each keeping"
        " its median run; other rows and the probes stay, the header's parameters are refitted",
    )
    p.add_argument(
        "--runs", type=int, default=3, help="runs of each row --remeasure times (default 3)"
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


def _no_calibration(path: Path, action: str) -> bool:
    """True, after the CLI's error line, where `path` holds no valid calibration to `action`
    (missing, or its checksum fails)."""
    if path.is_file() and cf.checksum_ok(path):
        return False
    print(f"stablehlo-perf-calibrate: error: {path}: no valid calibration to {action}",
          file=sys.stderr)  # fmt: skip
    return True


def _remeasure(args: argparse.Namespace, path: Path) -> int:
    """`--remeasure REGEX`: `runtime.remeasure` on the calibration at `path`, its rows' table."""
    from stablehlo_perf.runtime import remeasure

    if _no_calibration(path, "re-measure"):
        return 2
    try:
        done = remeasure.remeasure(
            path, args.remeasure, args.runs, args.repeats, args.note, not args.no_progress
        )
    except ValueError as e:
        print(f"stablehlo-perf-calibrate: error: {path}: {e}", file=sys.stderr)
        return 2
    print(remeasure.table(done))
    print(f"{path}: {len(done)} rows re-measured ({cf.header_value(path, HOST_PARAMS_KEY)})")
    return 0


def _check(args: argparse.Namespace) -> int:
    from stablehlo_perf.runtime import calibration_check

    found = (args.out, True) if args.out else cf.training_files(args.target)
    if found is None or not found[0].is_file() or not cf.checksum_ok(found[0]):
        where = args.out or f"target {args.target}"
        print(f"stablehlo-perf-calibrate: error: {where}: no valid calibration to check",
              file=sys.stderr)  # fmt: skip
        return 2
    report = calibration_check.check(
        found[0].resolve(), repeats=args.repeats, progress=not args.no_progress, probes=True
    )
    print(report.table())
    return 0 if report.within_tolerance else 1


def _borrow(args: argparse.Namespace, path: Path) -> int:
    """`--borrow`: the sentinel ops timed here (median of three runs) pick the shipped host
    reference nearest this machine's speed; a sample of its rows re-timed here
    (`calibration_check.check`) gives each class's ratio; it is written to `path` scaled by
    them (`runtime/borrow.py`)."""
    from stablehlo_perf.runtime import borrow, calibration_check

    if _refuses(args, path, "--borrow", "a borrowed one"):
        return 2
    own = cf.nearest_shipped(cf.shipped_names("host"))
    if own is not None and own[1]:
        print(f"{own[0].name} was measured on this machine and answers for it: nothing to borrow"
              " (--relevel scales it to the speed the machine runs at today)")  # fmt: skip
        return 0
    here = statistics.median(sentinel_us(args.repeats) for _ in range(3))
    source, there = borrow.nearest_by_speed(here, borrow.reference_speeds())
    drift = calibration_check.check(
        source, per_class=6, repeats=args.repeats, progress=not args.no_progress
    )
    done = borrow.Borrowed(
        source,
        {c.cls: c.kernel_ratio for c in drift.classes},
        {c.cls: c.call_ratio for c in drift.classes},
        drift.kernel_ratio,
    )
    borrow.borrow(path, done)
    print(drift.table().split("\n\n")[0])
    print(f"{path}: borrowed {source.name} (sentinel ops {here:.1f} us here, {there:.1f} us in "
          f"its rows), its rows' times scaled by the ratios above (median {done.overall:.2f}); "
          "run --quick to measure this machine")  # fmt: skip
    return 0


def _relevel(args: argparse.Namespace, path: Path) -> int:
    """`--relevel`: the shipped host reference measured on this machine, a sample of its rows
    re-timed (`calibration_check.check`) and, where it has them, its program probes, written
    to `path` with every kernel time scaled by the rows' median in-loop ratio and every
    per-call overhead by the probes' median (`borrow.relevel`; without probes, every time by
    the rows' median program ratio)."""
    from stablehlo_perf.runtime import borrow, calibration_check

    if _refuses(args, path, "--relevel", "the re-levelled reference"):
        return 2
    own = cf.nearest_shipped(cf.shipped_names("host"))
    if own is None or not own[1]:
        print("stablehlo-perf-calibrate: error: no shipped host reference was measured on this "
              "machine: --borrow scales the nearest one class by class, --quick measures it",
              file=sys.stderr)  # fmt: skip
        return 2
    drift = calibration_check.check(
        own[0], per_class=6, repeats=args.repeats, progress=not args.no_progress, probes=True
    )
    rows = sum(c.rows for c in drift.classes)
    print(drift.table().split("\n\n")[0])
    if math.isfinite(drift.overhead_ratio):
        overhead = (drift.overhead_ratio, drift.overhead_probes)
        borrow.relevel(path, own[0], drift.kernel_ratio, rows, overhead)
        print(f"{path}: {own[0].name} re-levelled, kernel times x{drift.kernel_ratio:.3f} (in "
              f"a loop, {rows} rows now over then, median), per-call overhead "
              f"x{overhead[0]:.3f} ({overhead[1]} program probes, median; programs "
              f"{drift.call_ratio:.3f})")  # fmt: skip
        return 0
    borrow.relevel(path, own[0], drift.call_ratio, rows)
    print(f"{path}: {own[0].name} re-levelled, every time x{drift.call_ratio:.3f} (program time "
          f"of {rows} rows now over then, median; in a loop {drift.kernel_ratio:.3f})")  # fmt: skip
    return 0


def _refuses(args: argparse.Namespace, path: Path, flag: str, replacement: str) -> bool:
    """True, after the CLI's error line, where `flag` (--borrow, --relevel) may not write
    `path`: a target other than the host (the shipped references are host calibrations), or
    a calibration measured here, which only --fresh replaces (a borrowed or re-levelled one
    is replaced)."""
    if args.target != "host":
        print(f"stablehlo-perf-calibrate: error: {flag} is for --target host (the shipped "
              "references are host calibrations)", file=sys.stderr)  # fmt: skip
        return True
    scaled = path.is_file() and (
        cf.header_value(path, cf.BORROWED_KEY) or cf.header_value(path, cf.RELEVELLED_KEY)
    )
    if path.is_file() and not scaled and not args.fresh:
        print(f"stablehlo-perf-calibrate: error: {path} holds a calibration measured on this "
              f"machine; --fresh to replace it with {replacement}", file=sys.stderr)  # fmt: skip
        return True
    return False


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `stablehlo-perf-calibrate`."""
    args = _parser().parse_args(argv)
    if args.check:
        return _check(args)
    path: Path = args.out or cf.calibration_path(args.target)
    if args.merge:
        try:
            n = merge(args.merge, path, args.note)
        except ValueError as e:
            print(f"stablehlo-perf-calibrate: error: {e}", file=sys.stderr)
            return 2
        print(f"{path}: {n} shapes merged ({cf.header_value(path, HOST_PARAMS_KEY)})")
        return 0
    if args.borrow:
        return _borrow(args, path)
    if args.relevel:
        return _relevel(args, path)
    if args.remeasure is not None:
        return _remeasure(args, path)
    if args.refit:
        if _no_calibration(path, "refit"):
            return 2
        refit(path, args.note)
        print(f"{path}: refitted ({cf.header_value(path, HOST_PARAMS_KEY)})")
        return 0
    try:
        dtypes = tuple(args.dtypes.split(","))
        specs = sweeps.sweep(args.quick, args.ops.split(",") if args.ops else None, dtypes)
        if "f64" in dtypes:
            jax.config.update("jax_enable_x64", True)  # else JAX makes f64 arrays f32
    except ValueError as e:
        print(f"stablehlo-perf-calibrate: error: {e}", file=sys.stderr)
        return 2
    if args.rows_only:
        if _no_calibration(path, "add rows to"):
            return 2
        n = add_rows(path, specs, args.repeats, args.note, not args.no_progress)
        print(f"{path}: {n} shapes added ({cf.header_value(path, HOST_PARAMS_KEY)})")
        return 0
    partial = path.with_name(path.stem + ".partial.csv")
    path.parent.mkdir(parents=True, exist_ok=True)
    if args.fresh:
        partial.unlink(missing_ok=True)
    if path.is_file() and not cf.checksum_ok(path):
        print(f"{path}: corrupted calibration (checksum mismatch); re-measuring", file=sys.stderr)
        path.unlink()
    elif path.is_file() and not args.fresh and not partial.is_file():
        # Resume from the finished file: its rows count as measured, its notes are kept.
        partial.write_text("".join(ln + "\n" for ln in path.read_text().splitlines()))
    text = partial.read_text(errors="replace") if partial.is_file() else ""
    earlier = [ln for ln in text.splitlines() if ln.startswith("# note: ")]
    earlier_probes = [p for ln in text.splitlines() if (p := program_probes.Probe.parse(ln))]
    rows = measure(specs, partial, repeats=args.repeats, progress=not args.no_progress)
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    before = sentinel_us(args.repeats)
    fresh = program_probes.measure_probes(args.repeats, measured=now)
    gauge = math.sqrt(before * sentinel_us(args.repeats))
    fresh = [dataclasses.replace(p, sentinel_us=gauge) for p in fresh]
    probes = program_probes.pooled(earlier_probes, fresh)
    bf16 = median_of_runs(
        lambda seed: fused_probes.measure_bf16_fused(repeats=args.repeats, seed=seed)
    )
    transpose, aliased = median_of_runs(
        lambda seed: fused_probes.measure_transpose_fused(repeats=args.repeats, seed=seed)
    )
    l2_bytes = (l2_mib() or 0.0) * 2**20
    l2 = (
        median_of_runs(lambda seed: fused_probes.measure_transpose_l2(l2_bytes, args.repeats, seed))
        if l2_bytes
        else math.nan
    )
    loops = median_of_runs(
        lambda seed: small_loop_probes.measure_loop_latencies(repeats=args.repeats, seed=seed)
    )
    l1_bytes = (l1_data_mib() or 0.0) * 2**20
    thunked = None
    if l1_bytes:
        fit = thunked_loop_probes.ThunkedLoopFit(
            *median_of_runs(
                lambda seed: dataclasses.astuple(
                    thunked_loop_probes.measure_thunked_loops(l1_bytes, args.repeats, seed)[0]
                )
            )
        )
        ref = cf.median_sentinel([float(r[-1]) for r in rows.values()])
        speed = ref / gauge if math.isfinite(ref) and math.isfinite(gauge) else 1.0
        thunked = fit.at_speed(speed).pairs()  # at the rows' median speed, as the probes
    if args.target == "host":
        per_shape = QUICK_CHAINS_PER_SHAPE if args.quick else 3 * QUICK_CHAINS_PER_SHAPE
        shapes = fused_chains.TRAINING_SHAPES
        chains = fused_chains.draw(shapes, per_shape, seed=0)
        chains += fused_chains.draw_reduces(shapes, per_shape, seed=0)
        # A third as many on the large shapes: each takes ~1.6 s to time there (~1 min --quick;
        # as many sums, ~30 s), and as many uint32 chains, chains of 17-48 steps (~1 min each
        # --quick), chains of 2-32 cheap steps, of up to four inputs, of bf16 and of cheap bf16
        # (~20 s each --quick).
        third = max(1, per_shape // 3)
        chains += fused_chains.draw(fused_chains.LARGE_SHAPES, third, seed=0)
        chains += fused_chains.draw_reduces(fused_chains.LARGE_SHAPES, third, seed=0)
        chains += fused_chains.draw_ints(shapes, third, seed=0)
        chains += fused_chains.draw_long(shapes, third, seed=0)
        chains += fused_chains.draw_cheap(shapes, third, seed=0)
        chains += fused_chains.draw_inputs(shapes, third, seed=0)
        chains += fused_chains.draw_bf16(shapes, third, seed=0)
        chains += fused_chains.draw_bf16(shapes, third, seed=0, steps=fused_chains.CHEAP_STEPS)
        measured = fused_chains.measure(chains, args.repeats)
        fused_chains.write_csv(measured, fused_loops.chains_path(path), args.note)
    head = earlier + [ln for ln in header(args.target, args.note) if ln not in earlier]
    # A dot and the kernels after it, on the host's thread pools (~35 s).
    contention = (
        contention_probes.measure_pool_contention().pairs() if args.target == "host" else None
    )
    # A temporary arena past the allocator's mmap threshold, as a call and in a loop (~20 s).
    fresh = (
        median_of_runs(lambda seed: page_probes.measure_fresh_pages(seed=seed).pairs())
        if args.target == "host"
        else None
    )
    write_calibration(
        list(rows.values()),
        path,
        head,
        probes,
        bf16,
        loops,
        thunked,
        contention,
        transpose,
        aliased,
        l2,
        fresh,
    )
    partial.unlink()
    if args.target == "host":
        # After the rows are written: each call is timed net of the pipeline's price for its
        # program's other ops, which must come from this machine's rows, not the model in use
        # before (the Xeon VM's stale reference priced every getrf's other ops above the
        # whole loop's time, and the sweep stored 0.01 us for them, 2026-12-05).
        sizes = lapack_sweep.QUICK_SIZES if args.quick else lapack_sweep.SIZES
        lapack_sweep.write_csv(lapack_path(path), sizes, min(args.repeats, 5), args.note)
    models = ew.fit_class_models(ew.load_measurements(path))
    print(f"{path}: {len(rows)} shapes; fitted classes: {', '.join(sorted(models))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
