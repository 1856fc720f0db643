"""SCALE-Sim 3.0.0 file formats: read its ``.cfg`` and topology CSVs, write its report CSVs.

Lets the systolic model stand in for SCALE-Sim without its users changing their files. Errors name
the file and the field, so a bad input is fixed from the message alone.
"""

from __future__ import annotations

import configparser
import contextlib
import csv
import io
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


_CFG_TEMPLATE = """[general]
run_name = run

[architecture_presets]
ArrayHeight : {rows}
ArrayWidth : {cols}
IfmapSramSzkB : {ifmap_kb}
FilterSramSzkB : {filter_kb}
OfmapSramSzkB : {ofmap_kb}
IfmapOffset : 0
FilterOffset : 10000000
OfmapOffset : 20000000
Bandwidth : {bandwidth}
Dataflow : {dataflow}
ReadRequestBuffer: 32
WriteRequestBuffer: 32

[layout]
IfmapCustomLayout: False
IfmapSRAMBankBandwidth: {ifmap_bw}
IfmapSRAMBankNum: 1
IfmapSRAMBankPort: 2
FilterCustomLayout: False
FilterSRAMBankBandwidth: {filter_bw}
FilterSRAMBankNum: 1
FilterSRAMBankPort: 2

[sparsity]
SparsitySupport : false
SparseRep : ellpack_block
OptimizedMapping : false
BlockSize : 8
RandomNumberGeneratorSeed : 40

[run_presets]
InterfaceBandwidth: {mode}
UseRamulatorTrace: False
"""


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


def write_config(path: str | Path, arr: ArrayConfig, run_name: str = "run") -> None:
    """A complete SCALE-Sim 3.0.0 cfg describing ``arr`` (every section its parser requires)."""
    Path(path).write_text(
        _CFG_TEMPLATE.replace("run_name = run", f"run_name = {run_name}").format(
            rows=arr.rows,
            cols=arr.cols,
            ifmap_kb=arr.ifmap_sram_kb,
            filter_kb=arr.filter_sram_kb,
            ofmap_kb=arr.ofmap_sram_kb,
            bandwidth=arr.bandwidth,
            dataflow=arr.dataflow,
            ifmap_bw=arr.ifmap_dram_bandwidth,
            filter_bw=arr.filter_dram_bandwidth,
            mode=arr.bandwidth_mode,
        )
    )


def write_topology(path: str | Path, layers: Sequence[tuple[int, ...]], gemm: bool) -> None:
    """A SCALE-Sim topology CSV: GEMM ``(M, N, K)`` rows or conv ``(H, W, R, S, C, N, stride)`` rows."""
    if gemm:
        lines = ["Layer, M, N, K,"] + [
            f"L{i}, {m}, {n}, {k}," for i, (m, n, k) in enumerate(layers)
        ]
    else:
        lines = ["Layer name, " + ", ".join(CONV_FIELDS) + ","]
        lines += [f"L{i}, " + ", ".join(map(str, layer)) + "," for i, layer in enumerate(layers)]
    Path(path).write_text("\n".join(lines) + "\n")


def read_reports(folder: str | Path) -> dict[str, list[dict[str, str]]]:
    """SCALE-Sim-format report CSVs in ``folder`` as lists of {column: value} rows."""
    out = {}
    for name in ("COMPUTE_REPORT", "BANDWIDTH_REPORT", "DETAILED_ACCESS_REPORT"):
        with open(Path(folder) / f"{name}.csv", newline="") as f:
            rows = list(csv.reader(f))
        header = [h.strip() for h in rows[0]]
        out[name] = [dict(zip(header, (v.strip() for v in row), strict=True)) for row in rows[1:]]
    return out


def run_scalesim(
    folder: str | Path, layers: Sequence[tuple[int, ...]], arr: ArrayConfig, gemm: bool
) -> dict[str, list[dict[str, str]]]:
    """Run SCALE-Sim 3.0.0 itself (in-process, quietly, no traces) on ``layers``; its reports.

    Writes ``scale.cfg``, ``topology.csv`` and ``layout.csv`` into ``folder`` and the reports
    into ``folder/out/run``. Needs the ``scalesim`` package (a test dependency).
    """
    from scalesim.scale_sim import scalesim

    folder = Path(folder)
    cfg, topo, layout = folder / "scale.cfg", folder / "topology.csv", folder / "layout.csv"
    write_config(cfg, arr)
    write_topology(topo, layers, gemm)
    layout.write_text("Layer name,\n")
    with contextlib.redirect_stdout(io.StringIO()):
        sim = scalesim(
            save_disk_space=True,
            verbose=False,
            config=str(cfg),
            topology=str(topo),
            layout=str(layout),
            input_type_gemm=gemm,
        )
        sim.run_scale(top_path=str(folder / "out"))
    return read_reports(folder / "out" / "run")
