"""benchmarks/end_to_end.py and unseen_programs.py --predict-from: a saved run scored again
without measuring gives that run's own numbers (same measurements, same predictions)."""

import json
import math
import os
from pathlib import Path

import pytest
from conftest import benchmark_module


def test_predict_from_a_saved_run_reproduces_its_scores(tmp_path: Path) -> None:
    e2e = benchmark_module("end_to_end")
    saved = tmp_path / "run.json"
    args = ["--only", "mlp_fwd", "layer_norm", "cond", "--scales", "1", "--rounds", "2"]
    measured = e2e.main([*args, "--split", "--json", str(saved)])
    again = e2e.main([*args, "--predict-from", str(saved)])
    assert again["programs"] == measured["programs"] == 3
    # --split timed each program inside a loop in the programs' own rounds.
    assert all(r["in_loop_ns"] > 0 for r in json.loads(saved.read_text())["rows"])
    assert again["noise_floor_mape"] == measured["noise_floor_mape"]
    for key in ("mape", "pe", "r2"):
        assert again["pipeline"][key] == pytest.approx(measured["pipeline"][key], rel=1e-9)
    # The sentinel ops were timed around the zoo, and the saved run keeps them.
    assert len(measured["sentinel_us_before_after"]) == 2
    assert min(measured["sentinel_us_before_after"]) > 0
    assert again["machine_speed_vs_calibration"] == pytest.approx(
        measured["machine_speed_vs_calibration"], nan_ok=True
    )  # NaN while the shipped reference predates sentinels
    # The run's own level: the geometric mean of measured over predicted.
    rows = json.loads(saved.read_text())["rows"]
    logs = [math.log(r["measured_ns"] / r["predicted_ns"]) for r in rows]
    assert again["own_level"] == pytest.approx(math.exp(sum(logs) / len(logs)), rel=1e-9)
    assert again["pipeline_at_own_level"]["mape"] > 0
    # A saved run that lacks a program drops it rather than scoring it against nothing.
    fewer = e2e.main(
        ["--only", "mlp_fwd", "fori_loop", "--scales", "1", "--predict-from", str(saved)]
    )
    assert fewer["programs"] == 1


def test_the_zoo_runs_in_bf16_and_a_saved_run_keeps_its_dtype(tmp_path: Path) -> None:
    """`--dtype bf16` casts every float input (the labels and ids stay integers) and the ops
    follow; a run saved in bf16 scores bf16 predictions and is refused for f32 ones."""
    import jax
    import jax.numpy as jnp

    e2e = benchmark_module("end_to_end")
    _, specs = e2e.softmax_xent(1)
    logits, labels = e2e.in_dtype(specs, jnp.bfloat16)
    assert (logits.dtype, labels.dtype) == (jnp.bfloat16, jnp.int32)
    fn, specs = e2e.mlp_fwd(1)
    text = jax.jit(fn).lower(*e2e.in_dtype(specs, jnp.bfloat16)).as_text()
    assert "bf16" in text and "f32" not in text
    saved = tmp_path / "bf16.json"
    args = ["--only", "mlp_fwd", "--scales", "1", "--rounds", "2"]
    measured = e2e.main([*args, "--dtype", "bf16", "--json", str(saved)])
    assert measured["dtype"] == "bf16"
    again = e2e.main([*args, "--dtype", "bf16", "--predict-from", str(saved)])
    assert again["pipeline"]["mape"] == pytest.approx(measured["pipeline"]["mape"], rel=1e-9)
    with pytest.raises(SystemExit, match="in bf16, not f32"):
        e2e.main([*args, "--predict-from", str(saved)])


def test_unseen_programs_score_a_saved_run_without_measuring(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--predict-from` divides today's prediction by the saved measurement: a run saved at
    half the prediction scores 2.0, and a program the run lacks is left out."""
    from stablehlo_perf import perf_jit
    from stablehlo_perf.analysis.calibration_files import training_files
    from stablehlo_perf.runtime import calibration_check
    from stablehlo_perf.runtime.calibration_check import calibration_sentinel_us

    unseen = benchmark_module("unseen_programs")
    fn, args = unseen.programs()["argmax_rows"]
    pred = perf_jit(fn, target="host").analyze(*args).predicted_ns
    saved = tmp_path / "unseen.json"
    saved.write_text(
        json.dumps({"measured": {"argmax_rows": {"median_ns": pred / 2, "spread": 0.1}}})
    )
    ratios = unseen.main(["--only", "argmax_rows", "norm", "--predict-from", str(saved)])
    assert ratios == pytest.approx({"argmax_rows": 2.0})
    assert "| argmax_rows |" in capsys.readouterr().out
    # Saved with the sentinel ops at half their time in the calibration (the machine ran
    # twice as fast): predictions scaled by 0.5 meet the measurement exactly.
    src = training_files("host")
    then = calibration_sentinel_us(src[0])
    if not math.isfinite(then):  # a calibration without sentinels: the line is left out
        unseen.main(["--only", "argmax_rows", "--predict-from", str(saved)])
        assert "machine speed" not in capsys.readouterr().out
        then = 150.0
        monkeypatch.setattr(calibration_check, "calibration_sentinel_us", lambda _: then)
    half = then / 2
    run = json.loads(saved.read_text()) | {"sentinel_us_before_after": [half, half]}
    saved.write_text(json.dumps(run))
    unseen.main(["--only", "argmax_rows", "--predict-from", str(saved)])
    out = capsys.readouterr().out
    assert "sentinel ops 0.50x their time in the calibration" in out
    assert "predictions x that: error factor geometric mean 1.00" in out
    # Sentinels timed in the programs' rounds say how fast they ran, not those around them.
    run |= {"sentinel_us_before_after": [then, then], "sentinel_us_in_rounds": half}
    saved.write_text(json.dumps(run))
    unseen.main(["--only", "argmax_rows", "--predict-from", str(saved)])
    out = capsys.readouterr().out
    assert "before and after the rounds: 1.00x their time in the calibration" in out
    assert "in the rounds: 0.50x" in out
    assert "predictions x that: error factor geometric mean 1.00" in out


def test_the_short_calls_are_modelled_and_scored_like_the_unseen(tmp_path: Path) -> None:
    """`--set short` scores its own programs the same way: every op of each is modelled (no
    random weights drawn inside a traced function), and a run saved at a quarter of the
    prediction scores 4.0."""
    from stablehlo_perf import perf_jit

    unseen = benchmark_module("unseen_programs")
    progs = unseen.short_calls()
    assert len(progs) == 18 and not set(progs) & set(unseen.programs())
    for name, (fn, args) in progs.items():
        assert not perf_jit(fn, target="host").analyze(*args).to_dict().get("unmodelled"), name
    fn, args = progs["mlp2_32"]
    pred = perf_jit(fn, target="host").analyze(*args).predicted_ns
    saved = tmp_path / "short.json"
    saved.write_text(json.dumps({"measured": {"mlp2_32": {"median_ns": pred / 4, "spread": 0.1}}}))
    ratios = unseen.main(["--set", "short", "--only", "mlp2_32", "--predict-from", str(saved)])
    assert ratios == pytest.approx({"mlp2_32": 4.0})


def test_the_many_rows_programs_are_modelled_and_one_kernel_past_4096_rows() -> None:
    """`--set rows`: every op of each program is modelled, and the plan of each whose
    reduces have 4096+ results is one kernel (XLA:CPU's YNNPACK fusion, jax 0.10.2), beside
    the call's free ops; the causal mask's select and the scaling of the cross-entropy's
    mean stand apart, and the three programs of 1024-2048 rows keep 3-5 groups."""
    from stablehlo_perf import perf_jit

    unseen = benchmark_module("unseen_programs")
    progs = unseen.many_rows()
    assert len(progs) == 16 and not set(progs) & (
        set(unseen.programs()) | set(unseen.short_calls())
    )
    kernels = {}
    for name, (fn, args) in progs.items():
        res = perf_jit(fn, target="host").analyze(*args)
        assert not res.to_dict().get("unmodelled"), name
        kernels[name] = sum(g["kind"] != "free" for g in res.report.fusion_groups)
    apart = {"causal_attention_8192": 3, "cross_entropy_4096": 2}
    small = {"layer_norm_2048": 5, "softmax_2048": 3, "attention_1024": 4}
    assert kernels == {n: apart.get(n, small.get(n, 1)) for n in progs}


def test_the_linear_algebra_programs_are_priced_by_measured_lapack_calls() -> None:
    """`--set linalg`: each program's LAPACK calls are priced by the host's measured calls
    (`lapack-host`), none left to the fallback, and each program makes at least one."""
    from stablehlo_perf import perf_jit

    unseen = benchmark_module("unseen_programs")
    progs = unseen.linear_algebra()
    assert len(progs) == 15
    for name, (fn, args) in progs.items():
        res = perf_jit(fn, target="host").analyze(*args)
        assert not res.to_dict().get("unmodelled"), name
        calls = [o for o in res.report.ops if o.name == "stablehlo.custom_call"]
        assert calls and all(o.model.endswith("lapack-host") for o in calls), name


def test_the_half_programs_are_f16_and_modelled() -> None:
    """`--set half`: 14 programs of f16 inputs, every op of each modelled."""
    import jax.numpy as jnp
    from stablehlo_perf import perf_jit

    unseen = benchmark_module("unseen_programs")
    progs = unseen.half_programs()
    assert len(progs) == 14
    for name, (fn, args) in progs.items():
        assert all(a.dtype == jnp.float16 for a in args), name
        res = perf_jit(fn, target="host").analyze(*args)
        assert not res.to_dict().get("unmodelled"), name


def test_relevel_scores_the_zoo_from_the_reference_re_levelled_in_the_same_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--relevel` re-levels this machine's reference into a temporary cache before the rounds
    (the check stubbed: programs at half their calibrated time) and scores its predictions,
    half the pipeline's, beside them; the calibration in use afterwards is the one before."""
    import numpy as np
    from stablehlo_perf.analysis import calibration_files as cf
    from stablehlo_perf.analysis.targets import load_target
    from stablehlo_perf.runtime import calibration_check

    e2e = benchmark_module("end_to_end")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    xeon = cf.shipped_file("host_reference_xeon.csv")
    machine = cf.header_value(xeon, "machine")
    monkeypatch.setattr(cf, "machine_fingerprint", lambda: machine)

    def check(path: Path, **_: object) -> calibration_check.DriftReport:
        drift = calibration_check.ClassDrift("binary", 6, 50.0, 0.5, 0.5)
        return calibration_check.DriftReport(path, [drift], 0.5, (0.4, 0.6), 0.5, 0.5)

    monkeypatch.setattr(calibration_check, "check", check)
    saved = tmp_path / "run.json"
    args = ["--only", "mlp_fwd", "cond", "--scales", "1", "--rounds", "2"]
    summary = e2e.main([*args, "--relevel", "--json", str(saved)])
    assert summary["relevel"].startswith("host_reference_xeon.csv x0.5, ")
    rows = json.loads(saved.read_text())["rows"]
    y = np.array([r["measured_ns"] for r in rows])
    half = 0.5 * np.array([r["predicted_ns"] for r in rows])
    assert [r["relevelled_ns"] for r in rows] == pytest.approx(half, rel=1e-3)
    mape = 100 * np.mean(np.abs(half / y - 1))
    assert summary["pipeline_relevelled"]["mape"] == pytest.approx(mape, rel=1e-2)
    assert os.environ["XDG_CACHE_HOME"] == str(tmp_path / "cache")
    assert load_target("host").relevelled == "" and not cf.calibration_path("host").exists()
    with pytest.raises(SystemExit):
        e2e.main([*args, "--relevel", "--predict-from", str(saved)])


def test_several_saved_runs_pool_into_the_median_of_runs_at_their_common_level(
    tmp_path: Path,
) -> None:
    """`--predict-from A B C` scales each run to the runs' common level, then takes the
    median over runs: a run on a VM twice as slow weighs as much as one at speed, and one
    run's outlier is outvoted. Each run stands as a round (the noise is the run-to-run
    spread); runs of different machines are refused."""
    e2e = benchmark_module("end_to_end")
    only = ["--only", "mlp_fwd", "layer_norm", "cond", "--scales", "1"]
    keys = [("mlp_fwd", 1), ("layer_norm", 1), ("cond", 1)]

    def save(name: str, measured: list[float], machine: str = "vm") -> Path:
        rows = [
            {"family": f, "scale": s, "measured_ns": m, "noise": 0.0, "in_loop_ns": 0.5 * m}
            for (f, s), m in zip(keys, measured, strict=True)
        ]
        summary = {"method": "m", "noise_floor_mape": 1.0, "machine": machine}
        path = tmp_path / name
        path.write_text(json.dumps({"summary": summary, "rows": rows}))
        return path

    out = tmp_path / "pred.json"
    e2e.main([*only, "--predict-from", str(save("ones.json", [1.0] * 3)), "--json", str(out)])
    pred = [r["predicted_ns"] for r in json.loads(out.read_text())["rows"]]
    a = save("a.json", pred)
    b = save("b.json", [2 * p for p in pred])  # the VM at half speed: the same profile
    c = save("c.json", [1.3 * pred[0], *pred[1:]])  # one program slow in one run
    pooled = e2e.main([*only, "--predict-from", str(a), str(b), str(c), "--json", str(out)])
    level = (2 * 1.3 ** (1 / 3)) ** (1 / 3)  # the runs' geometric levels: 1, 2, 1.3^(1/3)
    rows = json.loads(out.read_text())["rows"]
    assert [r["measured_ns"] for r in rows] == pytest.approx([level * p for p in pred])
    assert [r["in_loop_ns"] for r in rows] == pytest.approx([0.5 * level * p for p in pred])
    assert pooled["own_level"] == pytest.approx(level)
    assert pooled["pipeline_at_own_level"]["mape"] == pytest.approx(0.0, abs=1e-9)
    assert pooled["pipeline_kendall_tau"] == pytest.approx(1.0)
    assert pooled["run_kendall_taus"][:2] == pytest.approx([1.0, 1.0])
    # Run c's values scaled to the common level: 1.3^(2/3) of the median for the slow
    # program, 1.3^(-1/3) for the others; the noise floor is the mean spread over programs.
    spread = [(1.3 ** (2 / 3) - 1) / 3, (1 - 1.3 ** (-1 / 3)) / 3, (1 - 1.3 ** (-1 / 3)) / 3]
    assert pooled["noise_floor_mape"] == pytest.approx(100 * sum(spread) / 3)
    with pytest.raises(SystemExit, match="different machines"):
        e2e.main([*only, "--predict-from", str(a), str(save("x.json", pred, "other"))])
