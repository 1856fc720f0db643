"""CC4CS: GOF selection, moment matching, characterisation, intervals, the LASSO (CLRA)."""

from __future__ import annotations

import csv
import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import stablehlo_perf as sp
from stablehlo_perf.analysis import calibration_files as cf
from stablehlo_perf.analysis import cc4cs
from stablehlo_perf.analysis.opinfo import OpInfo, TensorType
from stablehlo_perf.analysis.targets import load_target


def test_gof_selects_lognormal_for_lognormal_and_normal_for_normal_samples():
    rng = np.random.default_rng(1)
    for criterion in ("nlogl", "aic", "bic", "aicc"):
        logn = rng.lognormal(mean=-2.0, sigma=0.8, size=2000)
        best, fits = cc4cs.select_distribution(logn, criterion)
        assert best.family == "lognorm", {f.family: f.score(criterion) for f in fits}
        norm = rng.normal(loc=10.0, scale=2.0, size=2000)
        assert cc4cs.select_distribution(norm, criterion)[0].family == "norm"


def test_gof_scores_follow_their_definitions_and_exclude_impossible_families():
    x = np.random.default_rng(2).normal(0.0, 1.0, size=50)  # has negatives
    fits = {f.family: f for f in cc4cs.fit_candidates(x)}
    assert math.isinf(fits["lognorm"].nlogl) and math.isinf(fits["gamma"].bic)
    f = fits["norm"]
    assert f.nlogl == pytest.approx(
        -np.sum(-0.5 * ((x - x.mean()) / x.std()) ** 2 - np.log(x.std() * math.sqrt(2 * math.pi)))
    )
    assert f.aic == pytest.approx(4 + 2 * f.nlogl)
    assert f.bic == pytest.approx(2 * math.log(50) + 2 * f.nlogl)
    assert f.aicc == pytest.approx(f.aic + 12 / 47)
    with pytest.raises(ValueError, match="criterion"):
        cc4cs.select_distribution(x, "r2")


def test_moment_matching_recovers_lognormal_parameters():
    x = np.random.default_rng(3).lognormal(mean=-3.0, sigma=0.3, size=20000)
    mu, sigma = cc4cs.moment_match_lognormal(x)
    assert mu == pytest.approx(-3.0, abs=0.01) and sigma == pytest.approx(0.3, abs=0.01)
    # Exact on a sample whose moments are known: mean 1, mean square e^{0.25}.
    mu, sigma = cc4cs.moment_match_lognormal(
        [1 - math.sqrt(math.exp(0.25) - 1), 1 + math.sqrt(math.exp(0.25) - 1)]
    )
    assert sigma == pytest.approx(0.5) and mu == pytest.approx(-0.125)


def _synthetic(target: str, cls: str, floor_ns: float, mu: float, sigma: float, n: int, seed: int):
    rng = np.random.default_rng(seed)
    work = np.concatenate([np.full(n // 10, 1.0), np.logspace(4, 7, n - n // 10)])
    metric = rng.lognormal(mu, sigma, size=n)
    ns = floor_ns + metric * work  # clock 1 GHz: cycles == ns
    return [
        cc4cs.MeasuredOp(target, cls, float(w), float(t)) for w, t in zip(work, ns, strict=True)
    ]


def test_characterise_recovers_floor_and_metric_of_synthetic_ops():
    recs = _synthetic("t", "matmul", 900.0, math.log(2e-3), 0.25, 600, 4)
    recs += _synthetic("t", "binary", 500.0, math.log(5e-2), 0.1, 300, 5)
    recs += _synthetic("other-target", "binary", 1.0, 0.0, 0.1, 300, 6)
    ch = cc4cs.characterise(recs, "t", clock_ghz=1.0, source="synthetic")
    assert set(ch.classes) == {"matmul", "binary"}
    mm = ch.classes["matmul"]
    assert mm.family == "lognorm" and mm.unit == "flop" and mm.n == 600
    assert mm.floor_cycles == pytest.approx(900.0, rel=0.01)
    assert mm.params[0] == pytest.approx(math.log(2e-3), abs=0.05)
    assert mm.params[1] == pytest.approx(0.25, abs=0.03)
    assert ch.classes["binary"].metric_quantile(0.5) == pytest.approx(5e-2, rel=0.03)
    mma = cc4cs.characterise(recs, "t", 1.0, "synthetic", lognormal="mma").classes["matmul"]
    assert mma.estimator == "mma" and mma.params[1] == pytest.approx(0.25, abs=0.03)
    # Round trip through the stored JSON form.
    import json

    again = cc4cs.TargetCharacterisation.from_dict(json.loads(ch.to_json()))
    assert again.classes["matmul"] == mm


def test_tpu_v4_characterisation_is_stored_and_covers_the_measurements():
    from pathlib import Path

    ch = cc4cs.load_characterisation("tpu-v4")
    assert ch is not None and ch.clock_ghz == load_target("tpu-v4").clock_ghz
    assert {"matmul", "binary", "compare_select"} <= set(ch.classes)
    data = Path(__file__).resolve().parents[2] / "shared" / "data" / "tpu_v4"
    if not data.is_dir():
        pytest.skip("shared TPU v4 data not present")
    recs = cc4cs.tpu_v4_records(data)
    for cls, dist in ch.classes.items():
        w = np.array([r.work for r in recs if r.op_class == cls])
        t = np.array([r.latency_ns * ch.clock_ghz for r in recs if r.op_class == cls])
        inside = (t >= dist.cycles(w, 0.1)) & (t <= dist.cycles(w, 0.9))
        assert 0.6 <= inside.mean() <= 1.0, (cls, inside.mean())


def _op(name: str, shape: tuple[int, ...], n_operands: int = 2) -> OpInfo:
    t = TensorType(shape, "f32")
    return OpInfo.build(0, name, [t] * n_operands, [t])


def test_service_and_intervals_on_a_characterised_target():
    tpu = load_target("tpu-v4")
    model = cc4cs.CC4CSModel()
    big, small = _op("stablehlo.add", (1024, 1024)), _op("stablehlo.add", (8,))
    assert model.supports(big, tpu) and not model.supports(_op("stablehlo.sort", (8,), 1), tpu)
    assert not model.supports(big, load_target("tpu-v5e"))  # no data: no statistical claim
    c_big, c_small = model.predict([big, small], tpu)
    assert (
        c_big.model == "cc4cs"
        and c_big.extra["latency_p10_ns"] < c_big.latency_ns < c_big.extra["latency_p90_ns"]
    )
    assert c_small.latency_ns < c_big.latency_ns
    # TPU v4 add is ~0.87 us + ~0.018 ns/element (shared/data/tpu_v4/README.md).
    assert c_big.latency_ns == pytest.approx(870 + 0.018 * 1024 * 1024, rel=0.25)
    assert c_big.cycles == round(c_big.latency_ns * tpu.clock_ghz)
    ivs = cc4cs.intervals_for(
        [big, small, _op("stablehlo.sort", (8,), 1)], "tpu-v4", [2000.0, 900.0, 50.0]
    )
    lo, hi = ivs[0]
    assert lo < 2000.0 < hi and ivs[2] is None
    assert cc4cs.intervals_for([big], "tpu-v5e", [1.0]) == [None]


def test_stored_characterisation_and_lasso_are_this_machines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The host ships one characterisation (and LASSO) per reference calibration: the one
    recording this machine answers, else one of its CPU on other threads, else the untagged
    file."""
    ch = cc4cs.load_characterisation("host")
    lasso = cc4cs.load_module_lasso("host")
    assert ch is not None and lasso is not None
    for tag, cpu, clock in (
        ("", "CPU A, 2 cores, x86_64", 1.5),
        ("_b", "CPU B, 2 cores, x86_64", 3.0),
    ):
        (tmp_path / f"cc4cs_host{tag}.json").write_text(
            replace(ch, machine=cpu, clock_ghz=clock).to_json()
        )
        (tmp_path / f"cc4cs_lasso_host{tag}.json").write_text(
            replace(lasso, machine=cpu, intercept=clock).to_json()
        )
    (tmp_path / "cc4cs_host_ops.csv").write_text("not a characterisation")
    monkeypatch.setattr(cc4cs.resources, "files", lambda package: tmp_path)
    try:
        for cpu, clock in (
            ("CPU B, 2 cores, x86_64", 3.0),
            ("CPU B, 1 cores, x86_64", 3.0),
            ("CPU C, 2 cores, x86_64", 1.5),
        ):
            monkeypatch.setattr(cf, "machine_fingerprint", lambda cpu=cpu: cpu)
            cc4cs.load_characterisation.cache_clear()
            cc4cs.load_module_lasso.cache_clear()
            got, got_lasso = cc4cs.load_characterisation("host"), cc4cs.load_module_lasso("host")
            assert got is not None and got.clock_ghz == clock
            assert got_lasso is not None and got_lasso.intercept == clock
            assert cc4cs.load_characterisation("tpu-v5e") is None
    finally:
        cc4cs.load_characterisation.cache_clear()
        cc4cs.load_module_lasso.cache_clear()


def test_host_characterisation_keeps_ops_with_models_of_their_own_apart():
    """Sort, argmax, pools/scans, top_k, FFT and gathers are characterised in classes of their
    own (`metric_class`), not inside their op class: XLA:CPU's comparator sort of 320x576 f32
    took ~30 ms in the reference where a sum of it took ~28 us."""
    ch = cc4cs.load_characterisation("host")
    assert ch is not None
    assert {"sort", "reduce_variadic", "reduce_window", "top_k", "fft", "gather"} <= set(ch.classes)
    sort = _op("stablehlo.sort", (320, 576), 1)
    total = OpInfo.build(
        1, "stablehlo.reduce", [TensorType((320, 576), "f32"), TensorType((), "f32")],
        [TensorType((320,), "f32")], {"dimensions": (1,)},
    )  # fmt: skip
    assert [cc4cs.metric_class(o) for o in (sort, total)] == ["sort", "reduction"]
    c_sort, c_sum = cc4cs.CC4CSModel().predict([sort, total], load_target("host"))
    assert c_sort.latency_ns > 100 * c_sum.latency_ns


def test_error_metrics_definitions():
    m = cc4cs.error_metrics([100.0, 200.0, 400.0], [90.0, 220.0, 400.0])
    assert m["pe"] == pytest.approx((10 - 10 + 0) / 3)
    assert m["mape"] == pytest.approx((10 + 10 + 0) / 3)
    assert m["reliability"] == pytest.approx(1.0)
    assert m["r2"] == pytest.approx(1 - (100 + 400) / np.var([100, 200, 400]) / 3)


def test_clra_recovers_known_coefficients_and_drops_irrelevant_features():
    rng = np.random.default_rng(7)
    X = rng.uniform(0, 100, size=(300, 5))
    y = 50.0 + 3.0 * X[:, 0] + 0.5 * X[:, 2] + rng.normal(0, 0.5, size=300)
    est = cc4cs.CLRA(relative=False).fit(X, y)
    assert est.coef_[0] == pytest.approx(3.0, abs=0.05) and est.coef_[2] == pytest.approx(
        0.5, abs=0.05
    )
    assert np.all(np.abs(est.coef_[[1, 3, 4]]) < 0.02)
    assert est.intercept_ == pytest.approx(50.0, abs=2.0)
    pred = est.predict(X)
    assert cc4cs.error_metrics(y, pred)["mape"] < 1.0
    rel = cc4cs.CLRA().fit(X, y)
    assert rel.coef_[0] == pytest.approx(3.0, abs=0.1) and np.all(rel.coef_ >= 0)


def test_module_features_count_executions_and_work():
    dot = OpInfo.build(
        0,
        "stablehlo.dot_general",
        [TensorType((4, 8), "f32"), TensorType((8, 2), "f32")],
        [TensorType((4, 2), "f32")],
    )
    ex = OpInfo.build(
        1, "stablehlo.exponential", [TensorType((4, 2), "f32")], [TensorType((4, 2), "f32")]
    )
    f = cc4cs.module_features([(dot, 3.0), (ex, 1.0), (ex, 2.0)])
    assert f["n_matmul"] == 3 and f["w_matmul"] == 3 * 2 * 4 * 2 * 8
    assert f["n_transcendental"] == 3 and f["w_transcendental"] == 3 * 8
    assert f["n_binary"] == 0 and len(f) == 2 * len(cc4cs.FEATURE_CLASSES)


def test_executed_ops_count_loop_trips_branches_and_calls():
    import jax
    import jax.numpy as jnp
    from jax import lax
    from stablehlo_perf.passes.executed import executed_ops
    from stablehlo_perf.passes.extract import view_module
    from stablehlo_perf.runtime.cc4cs_host import result_features

    @jax.jit
    def inner(v):
        return jnp.sin(v)

    def f(x, a):
        y = lax.fori_loop(0, 7, lambda i, v: jnp.tanh(a @ v), x)
        z = lax.cond(jnp.sum(y) > 0, lambda t: jnp.exp(t), lambda t: jnp.log(t), y)
        return inner(z) + inner(y)

    res = sp.analyze(jax.jit(f).lower(jnp.ones(64), jnp.ones((64, 64))), target="host")
    counts = {}
    for info, times in executed_ops(view_module(res.module, "<t>")):
        counts.setdefault(info.name, []).append(times)
    assert counts["stablehlo.tanh"] == [7.0] and counts["stablehlo.dot_general"] == [7.0]
    assert counts["stablehlo.exponential"] == [0.5] and counts["stablehlo.log"] == [0.5]
    assert sum(counts["stablehlo.sine"]) == 2.0
    feats = result_features(res)
    assert feats["n_matmul"] == 7 and feats["w_matmul"] == 7 * 2 * 64 * 64
    assert feats["n_transcendental"] == 7 + 0.5 + 0.5 + 2
    assert res.report.one_kernel_loops == [] and feats["n_small_loop"] == 0


def test_ops_of_a_one_kernel_loop_are_their_own_lasso_class():
    """A loop XLA:CPU compiles into one kernel (8 floats, an 8x8 matrix: 320 bytes) runs its
    ops as a few instructions a trip: they count as class small_loop, not as 7 matmuls."""
    import jax
    import jax.numpy as jnp
    from jax import lax
    from stablehlo_perf.runtime.cc4cs_host import result_features

    def f(x, a):
        y = lax.fori_loop(0, 7, lambda i, v: jnp.tanh(a @ v), x)
        return jnp.exp(y)

    res = sp.analyze(jax.jit(f).lower(jnp.ones(8), jnp.ones((8, 8))), target="host")
    [loop] = res.report.one_kernel_loops
    assert next(o for o in res.report.ops if o.id == loop).name == "stablehlo.while"
    feats = result_features(res)
    assert feats["n_matmul"] == 0 and feats["n_transcendental"] == 1  # the exp after the loop
    # the test i < 7 runs 8 times; the dot, the tanh and i + 1 run 7 times each
    assert feats["n_small_loop"] == 8 + 3 * 7
    assert feats["w_small_loop"] == 8 * 1 + 7 * (2 * 8 * 8 + 8 + 1)


def test_registered_cc4cs_service_writes_intervals_through_the_pass(monkeypatch):
    import jax
    import jax.numpy as jnp
    from stablehlo_perf.analysis import service
    from stablehlo_perf.passes import annotate_cycles

    def with_cc4cs() -> service.Registry:
        # CC4CS as the only specialised service (in the default chain the learned
        # elementwise models answer these ops on tpu-v4 before this fallback).
        from stablehlo_perf.analysis.roofline import RooflineModel

        reg = service.Registry(fallback=RooflineModel())
        reg.register(cc4cs.CC4CSModel(), kinds=("tpu",))
        return reg

    monkeypatch.setattr(annotate_cycles, "default_registry", with_cc4cs)
    lowered = jax.jit(lambda a, b: jnp.maximum(a * b, 0.0)).lower(
        jnp.ones((256, 256)), jnp.ones((256, 256))
    )
    res = sp.analyze(lowered, target="tpu-v4")
    ops = {o.name: o for o in res.report.ops}
    # The model name may carry a fusion prefix (`fused-loop:cc4cs`).
    assert ops["stablehlo.multiply"].model.endswith("cc4cs")
    assert ops["stablehlo.maximum"].model.endswith("cc4cs")
    ir_text = res.annotated_ir
    assert ir_text.count("perf.latency_p10_ns") >= 2 and ir_text.count("perf.latency_p90_ns") >= 2
    other = sp.analyze(lowered, target="tpu-v5e").report.ops
    assert not any(o.model.endswith("cc4cs") for o in other)


def test_convolutions_take_the_dots_distribution_where_only_dots_were_characterised():
    """The host characterises convolutions apart ("convolution", "grouped_conv"); tpu-v4's
    data has GEMMs only, so a convolution there takes the "matmul" distribution (both per
    FLOP) rather than losing its interval."""
    conv = OpInfo.build(
        0, "stablehlo.convolution",
        [TensorType((1, 28, 28, 64), "f32"), TensorType((3, 3, 64, 64), "f32")],
        [TensorType((1, 28, 28, 64), "f32")],
        {"input_batch_dim": 0, "input_feature_dim": 3, "input_spatial_dims": (1, 2),
         "kernel_input_feature_dim": 2, "kernel_output_feature_dim": 3,
         "kernel_spatial_dims": (0, 1), "output_batch_dim": 0, "output_feature_dim": 3,
         "output_spatial_dims": (1, 2)},
    )  # fmt: skip
    tpu, host = cc4cs.load_characterisation("tpu-v4"), cc4cs.load_characterisation("host")
    assert tpu is not None and host is not None
    assert cc4cs.metric_class(conv) == "convolution" and "convolution" not in tpu.classes
    assert tpu.distribution(conv) is tpu.classes["matmul"]
    assert host.distribution(conv) is host.classes["convolution"]
    (iv,) = cc4cs.intervals_for([conv], "tpu-v4", [5000.0])
    assert iv is not None and iv[0] < 5000.0 < iv[1]


def test_special_functions_have_a_distribution_of_their_own_or_the_transcendentals():
    """erf, lgamma and their kin cost 10-30x a tanh per element: the Zen 4 reference, which
    has rows of them, characterises them apart ("special"); a characterisation without them
    gives them the transcendentals' distribution rather than no interval."""
    erf = OpInfo.build(
        0, "chlo.erf", [TensorType((256, 256), "f32")], [TensorType((256, 256), "f32")]
    )
    zen4 = cf.shipped_file("cc4cs_host_zen4.json")
    ch = cc4cs.TargetCharacterisation.from_dict(json.loads(zen4.read_text()))
    assert cc4cs.metric_class(erf) == "special" and ch.distribution(erf) is ch.classes["special"]
    special, trans = ch.classes["special"], ch.classes["transcendental"]
    # Per element of a 256x256 f32 tensor (special's work is bytes, the transcendentals'
    # elements): 20x on the reference's rows (2.6M cycles against 125K).
    assert special.cycles(4 * 65536, 0.5) > 5 * trans.cycles(65536, 0.5)
    older = replace(ch, classes={k: v for k, v in ch.classes.items() if k != "special"})
    assert older.distribution(erf) is trans


def test_the_host_characterisation_cli_reads_f64_rows(tmp_path: Path) -> None:
    """`python -m stablehlo_perf.runtime.cc4cs_host` lowers every calibration row's op to read
    its class and work: a calibration with f64 rows (the Zen 4 reference has 1122) needs JAX's
    x64 mode, which the CLI turns on, else the f64 row is refused by name. Six f32 and two f64
    adds are all records: work their elements, times as the rows give them (ns)."""
    import jax
    from stablehlo_perf.runtime import cc4cs_host

    sizes = (4096, 8192, 16384, 32768, 65536, 131072)
    rows = [f"add,f32,{n},{n / 2e3:.3f}" for n in sizes]
    rows += [f"add,f64,{n},{n / 1e3:.3f}" for n in sizes[:2]]
    calibration = tmp_path / "c.csv"
    calibration.write_text("op,dtype,shape,measured_us_median\n" + "\n".join(rows) + "\n")
    x64 = jax.config.jax_enable_x64
    try:
        cc4cs_host.main(["--out", str(tmp_path), "--calibration", str(calibration), "--tag", "t"])
    finally:  # the CLI sets x64 for its process: later tests run without it
        jax.config.update("jax_enable_x64", x64)
    with open(tmp_path / "cc4cs_host_ops_t.csv") as f:
        records = list(csv.DictReader(f))
    assert len(records) == 8 and {r["source"] for r in records} == {"calibration:add"}
    work = [float(r["work"]) for r in records]
    ns = [float(r["latency_ns"]) for r in records]
    assert work == [*map(float, sizes), 4096.0, 8192.0]
    assert ns[-2:] == pytest.approx([4096.0, 8192.0]) and ns[0] == pytest.approx(2048.0)
    assert (tmp_path / "cc4cs_host_t.json").is_file()
