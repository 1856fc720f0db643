"""SCALE-Sim 3.0.0 file formats: read its ``.cfg`` and topology CSVs, write its report CSVs.

Lets the systolic model stand in for SCALE-Sim without its users changing their files. Errors name
the file and the field, so a bad input is fixed from the message alone.
"""

from __future__ import annotations

import configparser
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from stablehlo_perf.analysis.systolic import ArrayConfig, LayerResult, simulate_conv

CONV_FIELDS = (
    "IFMAP Height",
    "IFMAP Width",
    "Filter Height",
    "Filter Width",
    "Channels",
    "Num Filter",
    "Strides",
)
GEMM_FIELDS = ("M", "N", "K")

COMPUTE_HEADER = (
    "LayerID, Total Cycles (incl. prefetch), Total Cycles, Stall Cycles, Overall Util %,"
    " Mapping Efficiency %, Compute Util %,\n"
)
BANDWIDTH_HEADER = (
    "LayerID, Avg IFMAP SRAM BW, Avg FILTER SRAM BW, Avg OFMAP SRAM BW, "
    "Avg IFMAP DRAM BW, Avg FILTER DRAM BW, Avg OFMAP DRAM BW,\n"
)
DETAIL_HEADER = (
    "LayerID, "
    + "".join(
        f"{level} {op} Start Cycle, {level} {op} Stop Cycle, {level} {op} {access}, "
        for level in ("SRAM", "DRAM")
        for op, access in (("IFMAP", "Reads"), ("Filter", "Reads"), ("OFMAP", "Writes"))
    )
    .rstrip(" ")
    .rstrip(",")
    + ",\n"
)


class ScaleSimInputError(ValueError):
    """A malformed SCALE-Sim input file; the message names the file and the field."""


@dataclass(frozen=True)
class RunConfig:
    """What a SCALE-Sim cfg says: the array, the run name (report sub-folder) and its topology."""

    array: ArrayConfig
    run_name: str
    topology: str


@dataclass(frozen=True)
class Layer:
    """One topology row as a SCALE-Sim conv layer (GEMM rows are mapped the way SCALE-Sim does)."""

    name: str
    ifmap_h: int
    ifmap_w: int
    filter_h: int
    filter_w: int
    channels: int
    num_filters: int
    stride_h: int
    stride_w: int

    def simulate(self, arr: ArrayConfig) -> LayerResult:
        return simulate_conv(
            self.ifmap_h,
            self.ifmap_w,
            self.filter_h,
            self.filter_w,
            self.channels,
            self.num_filters,
            self.stride_h,
            self.stride_w,
            arr,
        )


def _get(
    cp: configparser.ConfigParser, path: Path, section: str, key: str, default: str | None
) -> str:
    if cp.has_option(section, key):
        return cp.get(section, key).strip()
    if default is None:
        raise ScaleSimInputError(f"{path}: [{section}] {key}: missing")
    return default


def _int(path: Path, where: str, text: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise ScaleSimInputError(
            f"{path}: {where}: expected an integer, got {text.strip()!r}"
        ) from None


def read_config(path: str | Path) -> RunConfig:
    """Parse a SCALE-Sim ``.cfg``; missing optional keys take SCALE-Sim's defaults."""
    path = Path(path)
    cp = configparser.ConfigParser()
    try:
        with open(path) as f:
            cp.read_file(f)
    except configparser.Error as err:
        raise ScaleSimInputError(f"{path}: not a valid cfg file: {err.message}") from None
    arch = "architecture_presets"
    if not cp.has_section(arch):
        raise ScaleSimInputError(f"{path}: [{arch}]: missing section")

    def number(section: str, key: str, default: str | None = None) -> int:
        return _int(path, f"[{section}] {key}", _get(cp, path, section, key, default))

    mode = _get(cp, path, "run_presets", "InterfaceBandwidth", "CALC")
    if mode not in ("CALC", "USER"):
        raise ScaleSimInputError(
            f"{path}: [run_presets] InterfaceBandwidth: expected CALC or USER, got {mode!r}"
        )
    for section, key in (
        ("sparsity", "SparsitySupport"),
        ("layout", "IfmapCustomLayout"),
        ("layout", "FilterCustomLayout"),
    ):
        if _get(cp, path, section, key, "false").lower() == "true":
            raise ScaleSimInputError(
                f"{path}: [{section}] {key}: True is not supported by the model"
            )
    bandwidth = 10
    if mode == "USER":
        first = _get(cp, path, arch, "Bandwidth", None).split(",")[0]
        bandwidth = _int(path, f"[{arch}] Bandwidth", first)
    values = {
        "rows": number(arch, "ArrayHeight"),
        "cols": number(arch, "ArrayWidth"),
        "dataflow": _get(cp, path, arch, "Dataflow", None),
        "ifmap_sram_kb": number(arch, "IfmapSramSzkB"),
        "filter_sram_kb": number(arch, "FilterSramSzkB"),
        "ofmap_sram_kb": number(arch, "OfmapSramSzkB"),
        "bandwidth_mode": mode,
        "bandwidth": bandwidth,
        "ifmap_dram_bandwidth": number("layout", "IfmapSRAMBankBandwidth", "10"),
        "filter_dram_bandwidth": number("layout", "FilterSRAMBankBandwidth", "10"),
    }
    try:
        array = ArrayConfig(**values)
    except ValueError as err:
        raise ScaleSimInputError(f"{path}: {err}") from None
    topology = _get(cp, path, "network_presets", "TopologyCsvLoc", "").strip('"')
    return RunConfig(array, _get(cp, path, "general", "run_name", "scale_run"), topology)


def read_topology(path: str | Path, gemm: bool = False) -> list[Layer]:
    """Parse a SCALE-Sim topology CSV (conv rows, or ``M, N, K`` rows when ``gemm``).

    Like SCALE-Sim: the first line is a header, a conv row has one stride for both directions,
    an optional trailing ``N:M`` sparsity field is ignored, and a conv whose name contains "DP"
    (depthwise) becomes one single-channel layer per channel.
    """
    path = Path(path)
    fields = GEMM_FIELDS if gemm else CONV_FIELDS
    try:
        lines = path.read_text().splitlines()
    except UnicodeDecodeError:
        raise ScaleSimInputError(f"{path}: not a text file") from None
    layers: list[Layer] = []
    for lineno, line in enumerate(lines[1:], start=2):
        cells = [c.strip() for c in line.strip().split(",")]
        if cells and cells[-1] == "":
            cells.pop()
        if not cells:
            continue
        if cells[-1].count(":") == 1 and len(cells) == len(fields) + 2:
            cells.pop()
        name = cells[0]
        if len(cells) != len(fields) + 1:
            raise ScaleSimInputError(
                f"{path}:{lineno}: layer {name!r}: expected {len(fields)} values "
                f"({', '.join(fields)}), got {len(cells) - 1}"
            )
        dims = [
            _int(path, f"line {lineno}: {field}", cell)
            for field, cell in zip(fields, cells[1:], strict=True)
        ]
        for field, value in zip(fields, dims, strict=True):
            if value <= 0:
                raise ScaleSimInputError(
                    f"{path}: line {lineno}: {field}: must be positive, got {value}"
                )
        if gemm:
            m, n, k = dims
            layers.append(Layer(name, m, k, 1, k, 1, n, 1, 1))
            continue
        h, w, r, s, c, n, stride = dims
        if r > h or s > w:
            bad = "Filter Height" if r > h else "Filter Width"
            raise ScaleSimInputError(f"{path}: line {lineno}: {bad}: filter larger than the ifmap")
        if "DP" in name:
            layers += [
                Layer(f"{name}Channel_{i}", h, w, r, s, 1, n, stride, stride) for i in range(c)
            ]
        else:
            layers.append(Layer(name, h, w, r, s, c, n, stride, stride))
    if not layers:
        raise ScaleSimInputError(f"{path}: no layers after the header line")
    return layers


def _cycle(value: int) -> str:
    """SCALE-Sim prints start/stop cycles from float trace matrices, e.g. ``-66.0``."""
    return str(float(value))


def write_reports(folder: str | Path, results: Sequence[LayerResult]) -> None:
    """Write COMPUTE_REPORT.csv, BANDWIDTH_REPORT.csv and DETAILED_ACCESS_REPORT.csv like SCALE-Sim."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    compute, bandwidth, detail = [COMPUTE_HEADER], [BANDWIDTH_HEADER], [DETAIL_HEADER]
    for i, r in enumerate(results):
        items = [
            r.total_cycles_incl_prefetch,
            r.total_cycles,
            r.stall_cycles,
            r.overall_util_pct,
            r.mapping_eff_pct,
            r.compute_util_pct,
        ]
        compute.append(f"{i}, " + ", ".join(map(str, items)) + ",\n")
        bandwidth.append(f"{i}, " + ", ".join(map(str, r.avg_bandwidths)) + ",\n")
        cells = []
        for level in ("sram", "dram"):
            for op, access in (("ifmap", "reads"), ("filter", "reads"), ("ofmap", "writes")):
                cells += [
                    _cycle(getattr(r, f"{op}_{level}_start_cycle")),
                    _cycle(getattr(r, f"{op}_{level}_stop_cycle")),
                    str(getattr(r, f"{op}_{level}_{access}")),
                ]
        detail.append(f"{i}, " + ", ".join(cells) + ",\n")
    for name, lines in (
        ("COMPUTE_REPORT.csv", compute),
        ("BANDWIDTH_REPORT.csv", bandwidth),
        ("DETAILED_ACCESS_REPORT.csv", detail),
    ):
        (folder / name).write_text("".join(lines))
