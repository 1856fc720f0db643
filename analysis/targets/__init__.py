"""Hardware descriptions (targets): loading, validation and the built-in list.

A target is a TOML file (`analysis/targets/<name>.toml` for the built-in ones,
or any path a user gives). Every number carries its source in the file's
`[sources]` table. A malformed file is rejected naming the file, the key and
the reason.
"""

from __future__ import annotations

import functools
import math
import os
import platform
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stablehlo_perf.analysis.opinfo import is_integer, real_part

if TYPE_CHECKING:
    from stablehlo_perf.analysis.calibration_files import Relevel
    from stablehlo_perf.analysis.host_params import HostParams

__all__ = [
    "DEFAULT_TARGET",
    "Target",
    "TargetError",
    "l1_data_mib",
    "l2_mib",
    "list_targets",
    "load_target",
]

DEFAULT_TARGET = "tpu-v5e"
_KINDS = ("tpu", "gpu", "cpu")


class TargetError(ValueError):
    """A target name that does not exist or a description file that is malformed."""


@dataclass(frozen=True)
class Target:
    """One accelerator (or the host CPU) as the cost models see it."""

    name: str
    kind: str
    description: str
    clock_ghz: float
    launch_overhead_ns: float
    cores: int
    peak_tflops: Mapping[str, float]
    vector_tflops: Mapping[str, float]
    memory_capacity_gib: float
    memory_bandwidth_gbps: float
    matrix_units_per_core: int = 0
    matrix_unit_rows: int = 0
    matrix_unit_cols: int = 0
    onchip_mib: Mapping[str, float] = field(default_factory=dict)
    l2_bandwidth_gbps: float = 0.0
    # What one call of a compiled program costs beyond its kernels (and the dispatch a
    # 1-element program pays): a fixed part; on a CPU the larger of the thread pool's
    # wake-up, paid once a call handed to the pool (`inline_flops`) runs a kernel of at
    # least `parallel_kernel_ns`, or a call runs a library call (a dot, a convolution, an
    # FFT; a YNNPACK reduce above `reduce_wake_bytes`) or a loop kernel XLA splits over
    # threads by its HLO cost (at most `threadpool_wake_slope` times the time of the call's
    # kernels on the pool: `analysis.host_params.wake_slope_fit`), and `multi_kernel_ns`,
    # paid once a call that wakes the pool runs more than one kernel (its probes all wake
    # it: on the Xeon VM, 2026-12-06, two-kernel programs of no pool kernel paid 29-31 us
    # beyond their kernels, the base, and ones with a dot or a YNNPACK sum 46-52);
    # `kernel_dispatch_ns` per kernel of the entry function; and
    # `output_ns_per_mib` per MiB the call returns (fresh output buffers' first-touch
    # pages); a long call's ramp in its kernels' time (`analysis.host_params.long_call_ns`,
    # fitted on calls of one kernel); `reduce_rewake_ns` once for a second YNNPACK
    # reduce that wakes the pool (`runtime.program_probes.REDUCE_KINDS`); and `rewake_ns`
    # for each split loop kernel or Eigen dot on the pool that finds it idle for
    # `rewake_gap_ns` (a first Eigen dot too: `passes.critical_path`); and
    # `handoff_ns_per_mib` per MiB a split loop kernel writes for a YNNPACK kernel to read,
    # on at most `handoff_cap_bytes`, once a call (its largest handoff); and
    # `fresh_page_ns_per_mib` per MiB of a temporary arena or output the allocator maps
    # afresh. Zero where unknown.
    # A program of fewer XLA flops than `inline_flops` runs on the calling thread and pays
    # neither the fixed part nor `multi_kernel_ns` (`analysis.host_params.INLINE_FLOPS`).
    program_overhead_ns: float = 0.0
    inline_flops: float = 0.0
    threadpool_wake_ns: float = 0.0
    threadpool_wake_slope: float = math.inf
    # Input bytes above which a YNNPACK reduce wakes the pool, and then all of the wake
    # (`analysis.host_params.reduce_wake_fit`): 0, every one, where unknown.
    reduce_wake_bytes: float = 0.0
    # What a call pays once for a second YNNPACK reduce that wakes the pool (0 where unknown).
    reduce_rewake_ns: float = 0.0
    # The wake a call running a loop kernel split over the pool pays, all of it whatever the
    # kernel's time (`analysis.host_params.fit_host_params`; NaN: `threadpool_wake_ns`).
    split_wake_ns: float = math.nan
    parallel_kernel_ns: float = math.inf
    multi_kernel_ns: float = 0.0
    kernel_dispatch_ns: float = 0.0
    output_ns_per_mib: float = 0.0
    long_call_start_ns: float = math.inf
    long_call_slope: float = 0.0
    long_call_cap_ns: float = math.inf
    rewake_ns: float = 0.0
    rewake_gap_ns: float = math.inf
    handoff_ns_per_mib: float = 0.0
    handoff_cap_bytes: float = math.inf
    # What a call pays per MiB of an allocation of at least `fresh_map_bytes` (its
    # temporary arena, an output buffer), which the allocator maps afresh each call and the
    # kernels fault in page by page (runtime/page_probes.py, `analysis.temp_arena`). Zero
    # where unknown.
    fresh_page_ns_per_mib: float = 0.0
    fresh_map_bytes: float = math.inf
    # How much longer, as a fraction of its own time, a kernel takes when it follows a
    # YNNPACK dot or pool in the entry function (the call's threads still poll for work on
    # the same cores: runtime/contention_probes.py, passes.critical_path._leaves_pollers),
    # and the most the kernels between two such calls pay for it. Zero where unknown. The
    # fraction measured after an int8 dot (NaN where unknown: as an f32 dot's).
    pool_contention: float = 0.0
    pool_contention_cap_ns: float = 0.0
    pool_contention_int8: float = math.nan
    # The fraction the kernels of a while loop's body pay after its dot (NaN where unknown:
    # `pool_contention`; runtime/contention_probes.py's loop probe).
    pool_contention_loop: float = math.nan
    # What the first YNNPACK convolution after an Eigen convolution that hands its work to the
    # pool pays for starting while that pool's threads still spin (runtime/contention_probes.py's
    # handoff probe; passes.critical_path._eigen_handoffs). Zero where unknown.
    eigen_handoff_ns: float = 0.0
    # ns per element each op of a fused bf16 loop costs at least (XLA:CPU widens to f32 and
    # rounds back per op: runtime/fused_probes.py). Zero where unknown.
    bf16_fused_ns_per_element: float = 0.0
    # ns per element of a loop kernel that transposes and computes (XLA:CPU runs it element
    # by element, reading across the input; runtime/fused_probes.py), and of one whose reads
    # alias in the cache (`fusion_cost.ALIASED_STRIDE_BYTES`). Zero where unknown (an
    # unknown aliased rate: the other's).
    transpose_fused_ns_per_element: float = 0.0
    transpose_fused_aliased_ns_per_element: float = 0.0
    # ns per element of one whose reads miss a core's L2 (`fusion_cost.transpose_footprint_bytes`
    # past twice the L2; runtime/fused_probes.py). Zero where unknown.
    transpose_fused_l2_ns_per_element: float = 0.0
    # What one trip of a loop XLA:CPU compiles into one kernel costs: `base` for the loop
    # itself, and each op's latency on one element by short name, its cost a trip on 16 as
    # `name@16` (runtime/small_loop_probes.py). Empty where unknown.
    small_loop_latency_ns: Mapping[str, float] = field(default_factory=dict)
    # What a kernel of a loop XLA:CPU runs thunk by thunk costs (runtime/thunked_loop_probes.py):
    # `base` ns a trip of the loop itself, `kernel` ns a kernel's fixed cost, and the GB/s its
    # bytes move at in a core's L1 and L2 (`l1_gbps`, `l2_gbps`). Empty where unknown.
    thunked_loop: Mapping[str, float] = field(default_factory=dict)
    calibrated: bool = False
    calibration_note: str = ""
    # The shipped reference a host calibration was borrowed from and scaled to this machine's
    # speed (runtime/borrow.py), "" for one measured here.
    borrowed_from: str = ""
    # This machine's own reference scaled to the speed it ran at when last gauged
    # (runtime/borrow.py: relevel), "" for a calibration read as measured.
    relevelled: str = ""
    sources: Mapping[str, str] = field(default_factory=dict)
    path: str = ""

    def call_overhead_ns(
        self,
        longest_kernel_ns: float,
        kernels: int = 1,
        output_bytes: int = 0,
        wakes: bool = False,
        kernels_ns: float = 0.0,
        rewakes: int = 0,
        handoff_bytes: float = 0.0,
        pool_ns: float = math.inf,
        xla_flops: float = math.inf,
        wakes_whole: bool = False,
        reduce_rewakes: int = 0,
        split: bool = False,
        arena_bytes: float = 0.0,
        output_sizes: Sequence[float] = (),
    ) -> float:
        """Per-call cost beyond the kernels' own for a program whose longest kernel that can
        wake the pool by its time (`analysis.host_params.wakes_by_time`) takes this long,
        whose entry function runs `kernels` kernels, returns `output_bytes`, with
        `wakes` runs a kernel that wakes XLA:CPU's thread pool whatever its time
        (`analysis.host_params.wakes_pool`), whose kernels take `kernels_ns` in all (the
        long-call ramp's argument: `long_call_ns`), and
        whose entry wakes the pool `rewakes` times more after `rewake_gap_ns` without
        parallel work and hands `handoff_bytes` from split loop kernels to YNNPACK kernels;
        its kernels on the pool take `pool_ns` in all (each run of a loop's counted), of
        which the wake costs at most `threadpool_wake_slope` times (all of it where it
        `wakes_whole`: it runs a YNNPACK reduce that wakes the pool or a loop kernel split over
        it, `split_wake_ns` where it runs a split loop kernel; `reduce_rewakes` 1 where a second
        such reduce follows its first), whose compiled module counts `xla_flops`
        (`analysis.host_params.xla_cpu_flops`), whose temporaries take `arena_bytes`
        (`analysis.temp_arena.arena_bytes`) and whose results `output_sizes`: each
        allocation of `fresh_map_bytes` or more is faulted in afresh."""
        from stablehlo_perf.analysis.host_params import long_call_ns

        handed = xla_flops >= self.inline_flops
        # A long kernel wakes the pool only in a call handed to it: one run on the calling
        # thread (`inline_flops`) pays nothing for its time (`host_params._step_fit`).
        woke = wakes or (handed and longest_kernel_ns >= self.parallel_kernel_ns)
        own = split and math.isfinite(self.split_wake_ns)
        wake = (self.split_wake_ns if own else self.threadpool_wake_ns) if woke else 0.0
        multi = self.multi_kernel_ns if kernels >= 2 and handed and woke else 0.0
        woken = max(wake, multi)
        if math.isfinite(self.threadpool_wake_slope) and not wakes_whole:
            # A short call pays its share of the multi-kernel cost as of the wake: the Zen 4
            # reference's two-kernel dense probe (a 16x64 dot and its tanh) paid 0.3-4.4 us
            # beyond its kernels where the base and the 16 us multi-kernel term add to 18
            # (runtime.program_probes, 2026-12-06).
            woken = min(woken, self.threadpool_wake_slope * pool_ns)
        return (
            (self.program_overhead_ns if handed else 0.0)
            + woken
            + self.kernel_dispatch_ns * kernels
            + self.output_ns_per_mib * output_bytes / 2**20
            + long_call_ns(
                kernels_ns,
                self.long_call_start_ns,
                self.long_call_slope,
                self.long_call_cap_ns,
            )
            + self.rewake_ns * rewakes
            + self.reduce_rewake_ns * reduce_rewakes
            + self.handoff_ns_per_mib * handoff_bytes / 2**20
            + self.fresh_page_ns_per_mib
            * sum(b for b in (arena_bytes, *output_sizes) if b >= self.fresh_map_bytes)
            / 2**20
        )

    def peak_flops(self, element_type: str, matrix: bool) -> float:
        """Peak FLOP/s for `element_type` on the matrix unit (matrix=True) or the vector unit."""
        table = self.peak_tflops if matrix else self.vector_tflops
        key = _dtype_key(element_type)
        for k in (key, "f32", "bf16"):
            if k in table:
                return table[k] * 1e12
        return next(iter(table.values())) * 1e12

    @property
    def memory_bandwidth(self) -> float:
        """Main-memory bandwidth in bytes per second."""
        return self.memory_bandwidth_gbps * 1e9


def _dtype_key(element_type: str) -> str:
    t = real_part(element_type)  # a complex type runs at its parts' type's rate
    if t.startswith("f8"):
        return "f8"
    if t in ("i8", "ui8", "si8", "i4", "ui4"):
        return "int8"
    if is_integer(t):
        return "int32"
    return t


# key -> (type, required); nested tables are spelled "table.key".
_SCHEMA: dict[str, tuple[type | tuple[type, ...], bool]] = {
    "name": (str, True),
    "kind": (str, True),
    "description": (str, True),
    "clock_ghz": ((int, float), True),
    "launch_overhead_ns": ((int, float), True),
    "calibrated": (bool, False),
    "calibration_note": (str, False),
    "compute.cores": (int, True),
    "compute.matrix_units_per_core": (int, False),
    "compute.matrix_unit_rows": (int, False),
    "compute.matrix_unit_cols": (int, False),
    "peak_tflops": (dict, True),
    "vector_tflops": (dict, True),
    "memory.capacity_gib": ((int, float), True),
    "memory.bandwidth_gbps": ((int, float), True),
    "onchip_mib": (dict, False),
    "l2.bandwidth_gbps": ((int, float), False),
    "program.overhead_ns": ((int, float), False),
    "program.inline_flops": ((int, float), False),
    "program.threadpool_wake_ns": ((int, float), False),
    "program.threadpool_wake_slope": ((int, float), False),
    "program.reduce_wake_bytes": ((int, float), False),
    "program.reduce_rewake_ns": ((int, float), False),
    "program.split_wake_ns": ((int, float), False),
    "program.parallel_kernel_ns": ((int, float), False),
    "program.multi_kernel_ns": ((int, float), False),
    "program.kernel_dispatch_ns": ((int, float), False),
    "program.output_ns_per_mib": ((int, float), False),
    "program.long_call_start_ns": ((int, float), False),
    "program.long_call_slope": ((int, float), False),
    "program.long_call_cap_ns": ((int, float), False),
    "program.rewake_ns": ((int, float), False),
    "program.rewake_gap_ns": ((int, float), False),
    "program.handoff_ns_per_mib": ((int, float), False),
    "program.handoff_cap_bytes": ((int, float), False),
    "program.fresh_page_ns_per_mib": ((int, float), False),
    "program.fresh_map_bytes": ((int, float), False),
    "sources": (dict, True),
}
_TABLES = {"compute", "memory", "l2", "program"}
_NUMBER_TABLES = {"peak_tflops", "vector_tflops", "onchip_mib"}


def _flatten(data: Mapping[str, Any], where: str) -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in data.items():
        if key in _TABLES:
            if not isinstance(value, dict):
                raise TargetError(f"{where}: key '{key}': expected a table, got {value!r}")
            for sub, v in value.items():
                flat[f"{key}.{sub}"] = v
        else:
            flat[key] = value
    return flat


def _validate(flat: dict[str, Any], where: str) -> None:
    for key, value in flat.items():
        if key not in _SCHEMA:
            raise TargetError(f"{where}: unknown key '{key}'")
        typ, _ = _SCHEMA[key]
        if isinstance(value, bool) and typ is not bool:
            raise TargetError(f"{where}: key '{key}': expected a number, got {value!r}")
        if not isinstance(value, typ):
            want = typ.__name__ if isinstance(typ, type) else "a number"
            raise TargetError(f"{where}: key '{key}': expected {want}, got {value!r}")
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value <= 0:
            raise TargetError(f"{where}: key '{key}': must be positive, got {value!r}")
        if key in _NUMBER_TABLES:
            if key != "onchip_mib" and not value:
                raise TargetError(f"{where}: key '{key}': needs at least one entry")
            for sub, v in value.items():
                if isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0:
                    raise TargetError(
                        f"{where}: key '{key}.{sub}': must be a positive number, got {v!r}"
                    )
        if key == "sources":
            for sub, v in value.items():
                if not isinstance(v, str):
                    raise TargetError(f"{where}: key 'sources.{sub}': expected a string")
    for key, (_, required) in _SCHEMA.items():
        if required and key not in flat:
            raise TargetError(f"{where}: missing required key '{key}'")
    if flat["kind"] not in _KINDS:
        raise TargetError(f"{where}: key 'kind': must be one of {', '.join(_KINDS)}")


def _from_mapping(data: Mapping[str, Any], where: str) -> Target:
    flat = _flatten(data, where)
    _validate(flat, where)
    return Target(
        name=flat["name"],
        kind=flat["kind"],
        description=flat["description"],
        clock_ghz=float(flat["clock_ghz"]),
        launch_overhead_ns=float(flat["launch_overhead_ns"]),
        cores=flat["compute.cores"],
        matrix_units_per_core=flat.get("compute.matrix_units_per_core", 0),
        matrix_unit_rows=flat.get("compute.matrix_unit_rows", 0),
        matrix_unit_cols=flat.get("compute.matrix_unit_cols", 0),
        peak_tflops={k: float(v) for k, v in flat["peak_tflops"].items()},
        vector_tflops={k: float(v) for k, v in flat["vector_tflops"].items()},
        memory_capacity_gib=float(flat["memory.capacity_gib"]),
        memory_bandwidth_gbps=float(flat["memory.bandwidth_gbps"]),
        onchip_mib={k: float(v) for k, v in flat.get("onchip_mib", {}).items()},
        l2_bandwidth_gbps=float(flat.get("l2.bandwidth_gbps", 0.0)),
        program_overhead_ns=float(flat.get("program.overhead_ns", 0.0)),
        inline_flops=float(flat.get("program.inline_flops", 0.0)),
        threadpool_wake_ns=float(flat.get("program.threadpool_wake_ns", 0.0)),
        threadpool_wake_slope=float(flat.get("program.threadpool_wake_slope", math.inf)),
        reduce_wake_bytes=float(flat.get("program.reduce_wake_bytes", 0.0)),
        reduce_rewake_ns=float(flat.get("program.reduce_rewake_ns", 0.0)),
        split_wake_ns=float(flat.get("program.split_wake_ns", math.nan)),
        parallel_kernel_ns=float(flat.get("program.parallel_kernel_ns", math.inf)),
        multi_kernel_ns=float(flat.get("program.multi_kernel_ns", 0.0)),
        kernel_dispatch_ns=float(flat.get("program.kernel_dispatch_ns", 0.0)),
        output_ns_per_mib=float(flat.get("program.output_ns_per_mib", 0.0)),
        long_call_start_ns=float(flat.get("program.long_call_start_ns", math.inf)),
        long_call_slope=float(flat.get("program.long_call_slope", 0.0)),
        long_call_cap_ns=float(flat.get("program.long_call_cap_ns", math.inf)),
        rewake_ns=float(flat.get("program.rewake_ns", 0.0)),
        rewake_gap_ns=float(flat.get("program.rewake_gap_ns", math.inf)),
        handoff_ns_per_mib=float(flat.get("program.handoff_ns_per_mib", 0.0)),
        handoff_cap_bytes=float(flat.get("program.handoff_cap_bytes", math.inf)),
        fresh_page_ns_per_mib=float(flat.get("program.fresh_page_ns_per_mib", 0.0)),
        fresh_map_bytes=float(flat.get("program.fresh_map_bytes", math.inf)),
        calibrated=flat.get("calibrated", False),
        calibration_note=flat.get("calibration_note", ""),
        sources=dict(flat["sources"]),
        path=where,
    )


def _builtin_dir() -> Path:
    return Path(str(resources.files("stablehlo_perf.analysis.targets")))


def list_targets() -> list[str]:
    """Names of the built-in targets."""
    return sorted(p.stem for p in _builtin_dir().glob("*.toml"))


def load_target(name_or_path: str | os.PathLike[str] | None = None) -> Target:
    """Load a built-in target by name, or a description file by path (default: DEFAULT_TARGET)."""
    spec = str(name_or_path) if name_or_path is not None else DEFAULT_TARGET
    builtin = _builtin_dir() / f"{spec}.toml"
    if builtin.is_file():
        path = builtin
    elif spec.endswith(".toml") or os.sep in spec or Path(spec).is_file():
        path = Path(spec)
    else:
        raise TargetError(
            f"unknown target '{spec}'; valid targets: {', '.join(list_targets())} "
            "(or a path to a .toml description)"
        )
    try:
        text = path.read_text()
    except OSError as e:
        raise TargetError(f"{path}: cannot read target description: {e.strerror}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise TargetError(f"{path}: malformed TOML: {e}") from None
    target = _from_mapping(data, str(path))
    if target.name == "host" and path == builtin:
        target = _calibrated_host(_describe_host(target))
    return target


def _calibrated_host(base: Target) -> Target:
    """The host with the bandwidth, matrix rate and kernel overhead fitted from a calibration
    measured on this machine (the user's, or the shipped reference if it was measured here)."""
    from stablehlo_perf.analysis.calibration_files import training_files
    from stablehlo_perf.analysis.host_params import (
        HANDOFF_CAP_BYTES,
        HANDOFF_NS_PER_MIB,
        INLINE_FLOPS,
        REWAKE_GAP_NS,
    )
    from stablehlo_perf.analysis.temp_arena import MMAP_THRESHOLD_BYTES

    found = training_files("host")
    if found is None or not found[1]:
        return base
    params, when, latencies, thunked, contention, fresh, borrowed, relevelled, level = _host_header(
        str(found[0]), found[0].stat().st_mtime_ns
    )
    if params is None:
        return base
    change: dict[str, object] = {}
    if latencies:
        change["small_loop_latency_ns"] = latencies
    if thunked:
        change["thunked_loop"] = thunked
    if math.isfinite(params.bandwidth_gbps):
        change["memory_bandwidth_gbps"] = params.bandwidth_gbps
    if math.isfinite(params.f32_tflops):
        peaks = dict(base.peak_tflops)
        peaks.update({k: params.f32_tflops for k in ("f32", "bf16", "f16")})
        change["peak_tflops"] = peaks
    if math.isfinite(params.kernel_overhead_ns):
        change["launch_overhead_ns"] = params.kernel_overhead_ns
    if math.isfinite(params.program_overhead_ns) and math.isfinite(params.threadpool_wake_ns):
        change["program_overhead_ns"] = params.program_overhead_ns
        change["inline_flops"] = INLINE_FLOPS
        change["threadpool_wake_ns"] = params.threadpool_wake_ns
        change["parallel_kernel_ns"] = params.parallel_kernel_ns
        if math.isfinite(params.threadpool_wake_slope):
            change["threadpool_wake_slope"] = params.threadpool_wake_slope
        if math.isfinite(params.reduce_wake_bytes):
            change["reduce_wake_bytes"] = params.reduce_wake_bytes
        if math.isfinite(params.split_wake_ns):
            change["split_wake_ns"] = params.split_wake_ns
    if math.isfinite(params.output_ns_per_mib):
        change["output_ns_per_mib"] = params.output_ns_per_mib
    if math.isfinite(params.long_call_start_ns) and params.long_call_slope > 0.0:
        change["long_call_start_ns"] = params.long_call_start_ns
        change["long_call_slope"] = params.long_call_slope
        change["long_call_cap_ns"] = params.long_call_cap_ns
    if math.isfinite(params.multi_kernel_ns) and math.isfinite(params.kernel_dispatch_ns):
        change["multi_kernel_ns"] = params.multi_kernel_ns
        change["kernel_dispatch_ns"] = params.kernel_dispatch_ns
    if math.isfinite(params.rewake_ns):
        change["rewake_ns"] = params.rewake_ns
        change["rewake_gap_ns"] = REWAKE_GAP_NS
        change["handoff_ns_per_mib"] = HANDOFF_NS_PER_MIB
        change["handoff_cap_bytes"] = HANDOFF_CAP_BYTES
    if math.isfinite(params.reduce_rewake_ns):
        change["reduce_rewake_ns"] = params.reduce_rewake_ns
    if math.isfinite(params.bf16_fused_ns_per_elem):
        change["bf16_fused_ns_per_element"] = params.bf16_fused_ns_per_elem
    if math.isfinite(params.transpose_fused_ns_per_elem):
        change["transpose_fused_ns_per_element"] = params.transpose_fused_ns_per_elem
    if math.isfinite(params.transpose_fused_aliased_ns_per_elem):
        change["transpose_fused_aliased_ns_per_element"] = (
            params.transpose_fused_aliased_ns_per_elem
        )
    if math.isfinite(params.transpose_fused_l2_ns_per_elem):
        change["transpose_fused_l2_ns_per_element"] = params.transpose_fused_l2_ns_per_elem
    if {"fraction", "cap_ns"} <= contention.keys():
        change["pool_contention"] = contention["fraction"]
        change["pool_contention_cap_ns"] = contention["cap_ns"]
        if "int8_fraction" in contention:
            change["pool_contention_int8"] = contention["int8_fraction"]
        if "loop_fraction" in contention:
            change["pool_contention_loop"] = contention["loop_fraction"]
    if "eigen_handoff_ns" in contention:
        change["eigen_handoff_ns"] = contention["eigen_handoff_ns"]
    if math.isfinite(fresh.get("ns_per_mib", math.nan)):
        change["fresh_page_ns_per_mib"] = fresh["ns_per_mib"]
        change["fresh_map_bytes"] = float(MMAP_THRESHOLD_BYTES)
    note = (
        f"calibrated on this machine ({when}) from {found[0].name}: "
        + ", ".join(sorted(change))
        + " measured; other values from the OS"
        if not borrowed
        else f"borrowed from a reference of another machine scaled to this one's speed "
        f"({borrowed}): " + ", ".join(sorted(change)) + " from it; other values from the OS"
    )
    if borrowed:
        change["borrowed_from"] = borrowed
    if relevelled:
        change["relevelled"] = relevelled
        if level is not None and "rewake_ns" in change:  # constants, not fitted: scaled
            change["rewake_gap_ns"] = REWAKE_GAP_NS * level.factor  # the pool idle: kernels'
            change["handoff_ns_per_mib"] = HANDOFF_NS_PER_MIB * level.overhead
        note += f"; every time re-levelled to this machine's speed then ({relevelled})"
    return Target(**{**base.__dict__, **change, "calibrated": True, "calibration_note": note})


@functools.lru_cache(maxsize=8)
def _host_header(
    path: str, mtime_ns: int
) -> tuple[
    HostParams | None,
    str,
    dict[str, float],
    dict[str, float],
    dict[str, float],
    dict[str, float],
    str,
    str,
    Relevel | None,
]:
    """A calibration's fitted host parameters, date, small-loop latencies, thunked-loop costs,
    pool contention, fresh-page cost, where it was borrowed from ("" if measured here), its
    re-level's label ("" if none) and its `Relevel` (`relevel_of`), read once per file version
    (every pass loads its target)."""
    from stablehlo_perf.analysis.calibration_files import (
        BORROWED_KEY,
        RELEVELLED_KEY,
        header_value,
        relevel_of,
    )
    from stablehlo_perf.analysis.host_params import (
        CONTENTION_KEY,
        FRESH_PAGES_KEY,
        HOST_PARAMS_KEY,
        HostParams,
    )
    from stablehlo_perf.analysis.small_loops import LATENCY_KEY, THUNKED_KEY, parse_latencies

    p = Path(path)
    return (
        HostParams.parse(header_value(p, HOST_PARAMS_KEY)),
        header_value(p, "date"),
        parse_latencies(header_value(p, LATENCY_KEY)),
        parse_latencies(header_value(p, THUNKED_KEY)),
        parse_latencies(header_value(p, CONTENTION_KEY)),
        parse_latencies(header_value(p, FRESH_PAGES_KEY)),
        header_value(p, BORROWED_KEY),
        header_value(p, RELEVELLED_KEY),
        relevel_of(p),
    )


_SIZE_UNITS_MIB = {"K": 1 / 1024, "M": 1.0, "G": 1024.0}


def _cache_mib(
    cache: Path = Path("/sys/devices/system/cpu/cpu0/cache"), level: int = 2
) -> float | None:
    """One core's data (or unified) cache of this `level` in MiB, from sysfs (None where the
    OS does not say)."""
    for index in sorted(cache.glob("index*")):
        try:
            if (index / "level").read_text().strip() != str(level):
                continue
            if (index / "type").read_text().strip() == "Instruction":
                continue
            size = (index / "size").read_text().strip()
        except OSError:
            continue
        if size[-1:] in _SIZE_UNITS_MIB and size[:-1].isdigit():
            return int(size[:-1]) * _SIZE_UNITS_MIB[size[-1]]
    return None


def l1_data_mib() -> float | None:
    """This machine's per-core L1 data cache in MiB (None where the OS does not say)."""
    return _cache_mib(level=1)


def l2_mib() -> float | None:
    """This machine's per-core L2 cache in MiB (None where the OS does not say)."""
    return _cache_mib(level=2)


def _describe_host(base: Target) -> Target:
    """Fill the host target with this machine's core count (those XLA:CPU runs on), clock and
    SIMD width."""
    from stablehlo_perf.analysis.calibration_files import xla_cpu_threads

    cores = xla_cpu_threads()
    mhz, flags = 0.0, set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("cpu MHz") and not mhz:
                mhz = float(line.split(":")[1])
            elif line.startswith("flags") and not flags:
                flags = set(line.split(":")[1].split())
    except OSError:
        pass
    clock = mhz / 1000 if mhz else base.clock_ghz
    # FP32 FLOPs per cycle per core: two FMA ports of 16 (AVX-512) or 8 (AVX2) lanes.
    per_cycle = 64 if "avx512f" in flags else 32 if {"avx2", "fma"} <= flags else 8
    f32 = cores * clock * per_cycle / 1000
    peaks = {"f32": f32, "bf16": f32, "f16": f32, "f64": f32 / 2, "int8": f32, "int32": f32}
    onchip = dict(base.onchip_mib)
    levels = (("l1", l1_data_mib()), ("l2", l2_mib()), ("llc", _cache_mib(level=3)))
    for name, size in levels:
        if size:
            onchip[name] = size
    return Target(
        **{
            **base.__dict__,
            "onchip_mib": onchip,
            "description": f"{base.description} ({platform.machine()}, {cores} cores, "
            f"{clock:.2f} GHz, {per_cycle} FP32 FLOP/cycle/core)",
            "clock_ghz": clock,
            "cores": cores,
            "peak_tflops": peaks,
            "vector_tflops": peaks,
        }
    )
