"""SCALE-Sim file reading/writing and the ``stablehlo-perf-systolic`` drop-in command."""

from __future__ import annotations

from pathlib import Path

import pytest
from stablehlo_perf.analysis import scalesim_io, systolic, systolic_cli
from stablehlo_perf.analysis.scalesim_io import read_reports, run_scalesim
from stablehlo_perf.analysis.systolic import ArrayConfig


def compare_reports(ours: dict, theirs: dict) -> None:
    """Same reports, rows and columns; numbers equal (floats to 1e-12 relative)."""
    assert ours.keys() == theirs.keys()
    for name, rows in ours.items():
        assert len(rows) == len(theirs[name]), name
        for mine, ref in zip(rows, theirs[name], strict=True):
            assert list(mine) == list(ref), name
            for column in ref:
                if ref[column] == "":
                    continue
                assert float(mine[column]) == pytest.approx(float(ref[column]), rel=1e-12), (
                    name,
                    column,
                )


@pytest.mark.parametrize("gemm", [False, True], ids=["conv", "gemm"])
def test_cli_reports_match_scalesim(tmp_path: Path, gemm: bool) -> None:
    arr = ArrayConfig(8, 8, "os", 64, 64, 64)
    layers = (
        [(64, 10, 32), (1, 100, 17), (33, 8, 9)]
        if gemm
        else [(12, 12, 3, 3, 4, 8, 1), (9, 9, 1, 1, 16, 20, 1), (8, 10, 2, 2, 3, 5, 2)]
    )
    theirs = run_scalesim(tmp_path, layers, arr, gemm)
    cfg, topo = tmp_path / "scale.cfg", tmp_path / "topology.csv"
    argv = ["-c", str(cfg), "-t", str(topo), "-p", str(tmp_path / "ours")]
    assert systolic_cli.main(argv + (["-i", "gemm"] if gemm else [])) == 0
    compare_reports(read_reports(tmp_path / "ours" / "run"), theirs)
    # The header lines are SCALE-Sim's, byte for byte.
    for name in ("COMPUTE_REPORT", "BANDWIDTH_REPORT", "DETAILED_ACCESS_REPORT"):
        ours_head = (tmp_path / "ours" / "run" / f"{name}.csv").read_text().splitlines()[0]
        ref_head = (tmp_path / "out" / "run" / f"{name}.csv").read_text().splitlines()[0]
        assert ours_head == ref_head


def test_read_config_and_topology(tmp_path: Path) -> None:
    arr = ArrayConfig(
        16, 8, "is", 2, 4, 8, bandwidth_mode="USER", bandwidth=3, ifmap_dram_bandwidth=5
    )
    cfg, topo = tmp_path / "s.cfg", tmp_path / "t.csv"
    scalesim_io.write_config(cfg, arr)
    scalesim_io.write_topology(topo, [(5, 5, 3, 3, 2, 4, 2)], gemm=False)
    assert scalesim_io.read_config(cfg).array == arr
    assert scalesim_io.read_config(cfg).run_name == "run"
    [layer] = scalesim_io.read_topology(topo)
    assert layer == scalesim_io.Layer("L0", 5, 5, 3, 3, 2, 4, 2, 2)
    assert layer.simulate(arr) == systolic.simulate_conv(5, 5, 3, 3, 2, 4, 2, 2, arr)


def test_depthwise_rows_split_per_channel(tmp_path: Path) -> None:
    """SCALE-Sim turns a conv named *DP* into one single-channel layer per channel."""
    topo = tmp_path / "t.csv"
    topo.write_text("name, H, W, R, S, C, N, stride,\nconvDP1, 8, 8, 3, 3, 3, 1, 1,\n")
    names = [layer.name for layer in scalesim_io.read_topology(topo)]
    assert names == ["convDP1Channel_0", "convDP1Channel_1", "convDP1Channel_2"]


def test_gemm_rows_map_like_scalesim(tmp_path: Path) -> None:
    topo = tmp_path / "g.csv"
    topo.write_text("Layer, M, N, K,\nfc, 7, 9, 11, 1:1,\n")
    [layer] = scalesim_io.read_topology(topo, gemm=True)
    assert layer == scalesim_io.Layer("fc", 7, 11, 1, 11, 1, 9, 1, 1)
    assert layer.simulate(ArrayConfig()) == systolic.simulate_gemm(7, 9, 11, ArrayConfig())


GOOD_CFG = """[general]
run_name = r
[architecture_presets]
ArrayHeight : 8
ArrayWidth : 8
IfmapSramSzkB : 64
FilterSramSzkB : 64
OfmapSramSzkB : 64
Dataflow : ws
"""


@pytest.mark.parametrize(
    ("cfg_text", "topo_text", "message"),
    [
        (GOOD_CFG.replace("ArrayHeight : 8", "ArrayHeight : eight"), None, "ArrayHeight"),
        (GOOD_CFG.replace("ArrayWidth : 8\n", ""), None, "ArrayWidth: missing"),
        (GOOD_CFG.replace("Dataflow : ws", "Dataflow : rs"), None, "dataflow"),
        (GOOD_CFG.replace("IfmapSramSzkB : 64", "IfmapSramSzkB : 0"), None, "ifmap_sram_kb"),
        (GOOD_CFG + "[run_presets]\nInterfaceBandwidth: FAST\n", None, "InterfaceBandwidth"),
        (GOOD_CFG + "[run_presets]\nInterfaceBandwidth: USER\n", None, "Bandwidth: missing"),
        ("not a cfg", None, "not a valid cfg"),
        (GOOD_CFG, "h,\nL0, 8, 8, 3, 3, 1,\n", "expected 7 values"),
        (GOOD_CFG, "h,\nL0, 8, 8, 3, x, 1, 4, 1,\n", "Filter Width"),
        (GOOD_CFG, "h,\nL0, 8, 8, 3, 3, 1, 0, 1,\n", "Num Filter"),
        (GOOD_CFG, "h,\nL0, 2, 8, 3, 3, 1, 4, 1,\n", "Filter Height"),
        (GOOD_CFG, "header only\n", "no layers"),
    ],
)
def test_cli_bad_input(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    cfg_text: str,
    topo_text: str | None,
    message: str,
) -> None:
    cfg, topo = tmp_path / "bad.cfg", tmp_path / "bad.csv"
    cfg.write_text(cfg_text)
    topo.write_text(topo_text or "h,\nL0, 8, 8, 3, 3, 1, 4, 1,\n")
    assert systolic_cli.main(["-c", str(cfg), "-t", str(topo), "-p", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("stablehlo-perf-systolic: error: ")
    assert message in err
    assert str(cfg if topo_text is None else topo) in err
    assert "Traceback" not in err
    assert not (tmp_path / "o").exists()


def test_cli_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert systolic_cli.main(["-c", str(tmp_path / "nope.cfg"), "-t", "x.csv"]) == 1
    assert "nope.cfg" in capsys.readouterr().err
