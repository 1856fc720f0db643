"""benchmarks/end_to_end.py --predict-from: a saved run scored again without measuring
gives that run's own numbers (same measurements, same predictions)."""

from pathlib import Path

import pytest
from conftest import benchmark_module


def test_predict_from_a_saved_run_reproduces_its_scores(tmp_path: Path) -> None:
    e2e = benchmark_module("end_to_end")
    saved = tmp_path / "run.json"
    args = ["--only", "mlp_fwd", "layer_norm", "cond", "--scales", "1", "--rounds", "2"]
    measured = e2e.main([*args, "--json", str(saved)])
    again = e2e.main([*args, "--predict-from", str(saved)])
    assert again["programs"] == measured["programs"] == 3
    assert again["noise_floor_mape"] == measured["noise_floor_mape"]
    for key in ("mape", "pe", "r2"):
        assert again["pipeline"][key] == pytest.approx(measured["pipeline"][key], rel=1e-9)
    # A saved run that lacks a program drops it rather than scoring it against nothing.
    fewer = e2e.main(
        ["--only", "mlp_fwd", "fori_loop", "--scales", "1", "--predict-from", str(saved)]
    )
    assert fewer["programs"] == 1
