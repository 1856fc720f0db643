"""Where calibration data for the learned latency models lives, and whether it can be trusted.

Kept apart from the models (and scikit-learn) so the service registry can ask
whether a target has data without importing them.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import os
import platform
import statistics
import warnings
from collections.abc import Iterable, Sequence
from importlib import resources
from pathlib import Path
from typing import NamedTuple

__all__ = [
    "BORROWED_KEY",
    "RELEVELLED_KEY",
    "RELEVEL_TIME_FORMAT",
    "SENTINEL_COLUMN",
    "SPEED_KEY",
    "Relevel",
    "cache_dir",
    "calibration_path",
    "checksum_ok",
    "cpu_name",
    "file_speed",
    "has_learned_data",
    "header_value",
    "line_value",
    "machine_fingerprint",
    "median_sentinel",
    "nearest_machine",
    "nearest_shipped",
    "relevel_of",
    "shipped_file",
    "shipped_names",
    "speed_factors",
    "training_files",
    "xla_cpu_threads",
]

BORROWED_KEY = "borrowed"
"""The header line of a calibration borrowed from a shipped reference of another machine and
scaled to this one's speed (`runtime/borrow.py`): the source file, the median ratio and each
model class's ratios."""

RELEVELLED_KEY = "relevelled"
"""The header line of a calibration that is this machine's own shipped reference with every
time scaled by what a sample of its rows takes now over then (`runtime/borrow.py`,
`stablehlo-perf-calibrate --relevel`): the source file, the ratio and when it was gauged."""

RELEVEL_OVERHEAD = "overhead x"
"""How a re-level's label gives the factor of its per-call overhead, after the kernels' one
("NAME xF, overhead xG, ..."; `relevel_of`)."""

RELEVEL_TIME_FORMAT = "%Y-%m-%dT%H:%MZ"
"""How a re-level's label writes the time it was gauged (UTC), after "re-timed "."""

SENTINEL_COLUMN = "sentinel_us"
"""Calibration column: the in-loop time of fixed sentinel ops (`runtime.calibrate.SENTINELS`,
geometric mean) timed in the same rounds as the row, a gauge of the machine's speed then."""

SPEED_KEY = "speed_sentinel_us"
"""Header line of a calibration: the sentinel time its rows are scaled to (`speed_factors`).
Written with the file (its rows' median sentinel then) and kept when rows are added or
re-measured, so rows timed later in another spell of the VM do not move every other row's
speed: the median of a file's rows had moved ~1% with each batch of added rows."""


def cache_dir() -> Path:
    """The user's cache folder for calibrations ($XDG_CACHE_HOME or ~/.cache)."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "stablehlo-perf"


def xla_cpu_threads() -> int:
    """Threads XLA:CPU gives its pools in this process: PJRT_NPROC, else NPROC, else the CPUs
    the process may run on (openxla/xla `DefaultThreadPoolSize`), at least one. Timings
    depend on it more than on the core count: on the project's 2-vCPU VM a transformer
    program ran 3.1x faster with PJRT_NPROC=1 (849 -> 271 us, 2026-12-01)."""
    for var in ("PJRT_NPROC", "NPROC"):
        value = os.environ.get(var, "").strip()
        if value.lstrip("-").isdigit():
            return max(int(value), 1)
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def cpu_name(cpuinfo: str) -> str:
    """The CPU of a /proc/cpuinfo text: its model name with its family and model numbers
    (x86) or implementer and part (Arm), "" if it names none. A VM's model name alone can
    hide the generation: the project's "AMD EPYC" VM was a Zen 5 (family 26 model 2) on
    2026-12-02 and another EPYC when its reference was measured, whose calibration took
    the zoo's pipeline MAPE to 82.7% there (benchmarks/end_to_end.py; 14-23% on the
    machines it was measured on)."""
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        key = key.strip()
        if not sep:
            if fields:
                break  # the end of the first processor's block
            continue
        fields.setdefault(key, value.strip())
    name = fields.get("model name", "")
    if "cpu family" in fields and "model" in fields:
        return f"{name or 'x86'} (family {fields['cpu family']} model {fields['model']})"
    if "CPU implementer" in fields and "CPU part" in fields:
        ident = f"(implementer {fields['CPU implementer']} part {fields['CPU part']})"
        return f"{name} {ident}" if name else ident
    return name


def machine_fingerprint() -> str:
    """Short description of this machine (CPU model and generation, the cores XLA:CPU runs
    on, arch), used to match calibrations: the same CPU under `taskset` or PJRT_NPROC is
    another machine."""
    try:
        model = cpu_name(Path("/proc/cpuinfo").read_text())
    except OSError:
        model = ""
    model = (model or platform.processor() or "unknown-cpu").replace(",", " ")
    return f"{model}, {xla_cpu_threads()} cores, {platform.machine()}"


def calibration_path(target: str) -> Path:
    """Where `stablehlo-perf-calibrate --target TARGET` stores its calibration CSV."""
    tag = hashlib.sha256(machine_fingerprint().encode()).hexdigest()[:10]
    return cache_dir() / f"{target}-{tag}.csv"


def shipped_file(name: str) -> Path:
    """A CSV shipped in analysis/data: the installed package data, else the source tree
    (an editable install links modules but not data files until package-data lists them)."""
    try:
        installed = Path(str(resources.files("stablehlo_perf.analysis.data"))) / name
    except ModuleNotFoundError:
        installed = None
    if installed is not None and installed.is_file():
        return installed
    return Path(__file__).resolve().parent / "data" / name


_SHIPPED: dict[str, tuple[str, ...]] = {
    "tpu-v4": ("tpu_v4_elementwise.csv",),
    # One reference per machine the project has run on; the first answers for any other.
    "host": (
        "host_reference.csv",
        "host_reference_xeon.csv",
        "host_reference_xeon_1t.csv",
        "host_reference_zen5.csv",
        "host_reference_zen4.csv",
    ),
}


def shipped_names(target: str) -> tuple[str, ...]:
    """The calibration files shipped for `target`, the first answering for an unknown machine."""
    return _SHIPPED.get(target, (f"{target}.csv",))


def checksum_ok(path: Path) -> bool:
    """True when a cached calibration's `# sha256:` header matches its body (not corrupted)."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError):
        return False
    lines = text.splitlines(keepends=True)
    want = line_value(lines, "sha256")
    body = "".join(ln for ln in lines if not ln.startswith("#"))
    return bool(want) and hashlib.sha256(body.encode()).hexdigest() == want


def training_files(target: str) -> tuple[Path, bool] | None:
    """(CSV, measured on this machine?) for a target: a valid user calibration first, then the
    shipped reference measured on this machine, then one of the same CPU, then the target's
    first shipped one; None if there is none."""
    cached = calibration_path(target)
    if cached.is_file():
        if checksum_ok(cached):
            return cached, True
        warnings.warn(
            f"{cached}: corrupted calibration (checksum mismatch) ignored; "
            f"rerun stablehlo-perf-calibrate --target {target}",
            stacklevel=2,
        )
    return nearest_shipped(shipped_names(target))


def nearest_shipped(names: Sequence[str]) -> tuple[Path, bool] | None:
    """(file, measured on this machine?) among these shipped files (`shipped_file`): the one
    whose `# machine:` line is this machine's, else one of its CPU (`nearest_machine`), else
    the first present; None if none is present."""
    shipped = [path for name in names if (path := shipped_file(name)).is_file()]
    if not shipped:
        return None
    k, exact = nearest_machine([_header_machine(p) for p in shipped]) or (0, False)
    return shipped[k], exact


def nearest_machine(machines: Sequence[str]) -> tuple[int, bool] | None:
    """Which of these `machine_fingerprint`s answers for this machine, and whether it is this
    machine: the first equal to it, else the first of its CPU on other threads; None if
    none is of its CPU."""
    here = machine_fingerprint()
    for k, m in enumerate(machines):
        if m == here:
            return k, True
    same_cpu = [k for k, m in enumerate(machines) if _cpu_of(m) == _cpu_of(here)]
    return (same_cpu[0], False) if same_cpu else None


def _cpu_of(fingerprint: str) -> tuple[str, str]:
    """(CPU model, arch) of a `machine_fingerprint`, without its thread count."""
    parts = [p.strip() for p in fingerprint.split(",")]
    return (", ".join(parts[:-2]), parts[-1]) if len(parts) >= 3 else (fingerprint, "")


def header_value(path: Path, key: str) -> str:
    """The value of `# key: value` in a calibration's header ("" if absent); reads only the
    header lines."""
    with path.open() as f:
        return line_value(itertools.takewhile(lambda line: line.startswith("#"), f), key)


def line_value(lines: Iterable[str], key: str) -> str:
    """The value of the first `# key: value` among header `lines` ("" if none)."""
    prefix = f"# {key}:"
    return next((ln[len(prefix) :].strip() for ln in lines if ln.startswith(prefix)), "")


def _header_machine(path: Path) -> str:
    return header_value(path, "machine")


class Relevel(NamedTuple):
    """A re-levelled calibration's source reference and factors (`relevel_of`): its kernels'
    times are the reference's times `factor`, its per-call overhead's `overhead`."""

    source: Path
    factor: float
    overhead: float


def relevel_of(path: Path) -> Relevel | None:
    """The `Relevel` of a re-levelled calibration or of its fused chains (the
    `RELEVELLED_KEY` header: "NAME xF[, overhead xG], ..."; G is F where the label has none),
    None for any other file or a reference no longer shipped. The learned models fit the
    reference's own rows and scale their predictions by F: boosted trees fitted on rows
    scaled by F do not predict exactly F times (the Xeon's matmul trees moved 0.66-0.98x on
    rows scaled by 0.824). A reference that changed since (its sha256 is not the label's)
    answers None too: the file's own scaled rows then stand."""
    try:
        value = header_value(path, RELEVELLED_KEY)
    except (OSError, UnicodeDecodeError):  # unreadable: the reader reports it in its words
        return None
    name, _, rest = value.partition(" x")
    parts = rest.split(", ")
    try:
        factor = float(parts[0])
        given = len(parts) > 1 and parts[1].startswith(RELEVEL_OVERHEAD)
        overhead = float(parts[1][len(RELEVEL_OVERHEAD) :]) if given else factor
    except ValueError:
        return None
    source = shipped_file(name)
    if not (source.is_file() and all(math.isfinite(f) and f > 0 for f in (factor, overhead))):
        return None
    sha = header_value(source, "sha256")[:12]
    return Relevel(source, factor, overhead) if sha and f"sha256 {sha}" in value else None


def has_learned_data(target: str) -> bool:
    """Whether `target` has measurements to learn from (the user's own or shipped)."""
    return training_files(target) is not None


def speed_factors(sentinel_us: Sequence[float], ref: float | None = None) -> list[float]:
    """Per row, the file's median sentinel time (or `ref`) over the row's own (1.0 where a row
    has none): a row's times multiplied by it are what they would have been at that speed.

    A shared VM's speed moves by whole factors while a calibration runs (2026-12-01, the
    project's VM: one 25-minute run switched from 12 to 29 us dispatch and kernels 1.5x
    slower between two chunks), which no feature of a shape can explain."""
    ref = median_sentinel(sentinel_us) if ref is None else ref
    if not math.isfinite(ref):
        return [1.0] * len(sentinel_us)
    return [ref / s if math.isfinite(s) and s > 0 else 1.0 for s in sentinel_us]


def file_speed(path: Path, sentinel_us: Sequence[float]) -> float:
    """The sentinel time a calibration's rows are read at: its header's `SPEED_KEY`, else the
    median of its rows' `sentinel_us` (a file written before the key)."""
    try:
        stored = float(header_value(path, SPEED_KEY) or "nan")
    except ValueError:
        stored = math.nan
    return stored if math.isfinite(stored) and stored > 0 else median_sentinel(sentinel_us)


def median_sentinel(sentinel_us: Sequence[float]) -> float:
    """The median of the rows' known sentinel times: the speed a calibration describes (NaN
    for rows measured without sentinels)."""
    known = [s for s in sentinel_us if math.isfinite(s) and s > 0]
    return statistics.median(known) if known else math.nan
