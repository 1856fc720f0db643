"""Timing harness, sweeps and the calibration CLI on the local JAX device.

Live timings are noisy on a shared machine, so these tests check only robust
facts (positive medians, a computed spread, resumed sweeps skipping measured
rows, corrupted cache entries re-measured), never a time threshold.
"""

from __future__ import annotations

import math
import time
from dataclasses import replace
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from stablehlo_perf.analysis import calibration_files as cf
from stablehlo_perf.analysis import elementwise as ew
from stablehlo_perf.analysis import fused_loops
from stablehlo_perf.analysis.host_params import HOST_PARAMS_KEY, HostParams, fit_host_params
from stablehlo_perf.analysis.lapack import LapackModel, lapack_path, read_rows
from stablehlo_perf.analysis.opinfo import OpInfo, TensorType
from stablehlo_perf.analysis.small_loops import LATENCY_KEY, parse_latencies
from stablehlo_perf.analysis.targets import l1_data_mib, load_target
from stablehlo_perf.runtime import (
    calibrate,
    calibration_check,
    contention_probes,
    fused_chains,
    fused_probes,
    lapack_sweep,
    program_probes,
    remeasure,
    small_loop_probes,
    sweeps,
    thunked_loop_probes,
    timing,
)

TINY = [
    sweeps.Spec("add", "f32", (256, 256)),
    sweeps.Spec("exponential", "f32", (64, 512)),
    sweeps.Spec("convert", "bf16", (8, 128)),
    sweeps.Spec("transpose", "f32", (64, 32)),
    sweeps.Spec("reduce", "f32", (32, 64)),
    sweeps.Spec("dot_general", "f32", (2, 32, 16, 8)),
    sweeps.Spec("convolution", "f32", (1, 8, 8, 4, 3, 3, 8, 1)),
]


def test_time_cases_reports_medians_spread_and_dispatch() -> None:
    x = jnp.ones((512, 512), jnp.float32)
    big = timing.Case("big", jax.jit(lambda a: a * 2).lower(x).compile(), (x,))
    out, disp = timing.time_cases([big], repeats=5, target_round_us=500, max_iters=20)
    t = out["big"]
    assert len(t.rounds_us) == 5 and 1 <= t.iters <= 20
    assert t.call_us > 0 and disp.median_us > 0
    assert math.isfinite(t.spread) and t.spread >= 0
    assert t.median_us == pytest.approx(float(np.median(t.rounds_us)))
    # Kernel time is call time minus dispatch, round by round.
    assert t.median_us < t.call_us


def test_round_warmup_times_a_case_warm_after_another_ran() -> None:
    """A case whose first call after another case's sleeps 3 ms (a cold start): with one call
    a round, every timed call is a cold one; with one untimed call first, none is."""
    last: list[str] = [""]

    def call(key: str, cold_s: float) -> float:
        if last[0] != key:
            time.sleep(cold_s)
        last[0] = key
        return 0.0

    cases = [
        timing.Case("a", lambda: call("a", 3e-3), ()),
        timing.Case("b", lambda: call("b", 0.0), ()),
    ]
    cold, _ = timing.time_cases(cases, repeats=5, target_round_us=1.0, max_iters=1)
    warm, _ = timing.time_cases(cases, repeats=5, target_round_us=1.0, max_iters=1, round_warmup=1)
    assert cold["a"].iters == 1 and cold["a"].call_us > 3000.0
    assert warm["a"].call_us < 1000.0


def test_time_cases_rejects_zero_repeats() -> None:
    with pytest.raises(ValueError, match="repeats"):
        timing.time_cases([], repeats=0)


def test_time_cases_rejects_repeated_keys() -> None:
    """Two cases of one key would mix their rounds (and crash past the first): refused
    before anything is timed."""
    x = jnp.ones((8,), jnp.float32)
    case = timing.Case("twice", jax.jit(lambda a: a + 1).lower(x).compile(), (x,))
    with pytest.raises(ValueError, match="repeated: twice"):
        timing.time_cases([case, case], repeats=1)


@pytest.mark.parametrize("spec", TINY, ids=lambda s: s.op)
def test_loop_case_runs_the_op_in_full_every_trip(spec: sweeps.Spec) -> None:
    """The looped program returns exactly the single op's result, whatever the trip count,
    and XLA keeps the op inside the loop (not hoisted as loop-invariant)."""
    single = sweeps.build_case(spec)
    want = np.asarray(single.fn(*single.args), np.float32)
    looped = sweeps.build_loop_case(spec)
    for trips in (1, 5):
        case = looped.at(trips)
        assert case.key == f"{spec.key}@{trips}"
        got = np.asarray(case.fn(*case.args), np.float32)
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    assert np.count_nonzero(np.asarray(looped.at(0).fn(*looped.at(0).args))) == 0


def test_time_in_loop_differences_two_trip_counts() -> None:
    """Per-iteration time comes from the 1-trip and N-trip programs of the same rounds."""
    spec = sweeps.Spec("exponential", "f32", (256, 1024))
    alone = sweeps.build_case(spec)
    out, extra, dispatch = timing.time_in_loop(
        [(spec.key, sweeps.build_loop_case(spec))], repeats=3, extra=[alone]
    )
    assert len(dispatch.rounds_us) == 3
    per, one = out[spec.key]
    assert len(extra[spec.key].rounds_us) == 3
    assert per.iters >= 9 and len(per.rounds_us) == 3 and len(one.rounds_us) == 3
    assert per.median_us == pytest.approx(float(np.median(per.rounds_us)))
    # 262,144 exponentials take far longer than a microsecond on any CPU.
    assert per.median_us > 1.0


@pytest.mark.parametrize("spec", TINY, ids=lambda s: s.op)
def test_build_case_compiles_the_op_with_the_recorded_shape(spec: sweeps.Spec) -> None:
    case = sweeps.build_case(spec)
    out = case.fn(*case.args)
    if spec.op in ("add", "exponential", "convert"):
        assert out.shape == spec.shape
    if spec.op == "transpose":  # flattened, so the data moves inside the timing loop too
        assert out.shape == (math.prod(spec.shape),)
    if spec.op == "convert":
        assert out.dtype == jnp.bfloat16
    if spec.op == "reduce":
        assert case.args[0].shape == spec.shape and out.shape == spec.shape[:-1]
    if spec.op == "dot_general":
        assert out.shape == (2, 32, 16)
    if spec.op == "convolution":
        assert out.shape == (1, 8, 8, 8)


def _nhwc_conv(
    lhs: tuple[int, ...], rhs: tuple[int, ...], out: tuple[int, ...], **attrs: object
) -> OpInfo:
    """A SAME-padded 3x3 NHWC / HWIO convolution as the StableHLO front end records it."""
    dims = {"input_batch_dim": 0, "input_feature_dim": 3, "input_spatial_dims": (1, 2),
            "kernel_input_feature_dim": 2, "kernel_output_feature_dim": 3,
            "kernel_spatial_dims": (0, 1), "output_batch_dim": 0, "output_feature_dim": 3,
            "output_spatial_dims": (1, 2), "padding": ((1, 1), (1, 1))}  # fmt: skip
    return OpInfo.build(
        0,
        "stablehlo.convolution",
        [TensorType(lhs, "f32"), TensorType(rhs, "f32")],
        [TensorType(out, "f32")],
        {**dims, **attrs},
    )


def test_sweep_specs_features_match_the_ops_they_build() -> None:
    """A calibration row's features equal those the service computes for the same op."""
    dot = OpInfo.build(
        0,
        "stablehlo.dot_general",
        [TensorType((2, 32, 8), "f32"), TensorType((2, 8, 16), "f32")],
        [TensorType((2, 32, 16), "f32")],
        {"lhs_batch_dims": (0,), "rhs_batch_dims": (0,), "lhs_contracting_dims": (2,),
         "rhs_contracting_dims": (1,)},
    )  # fmt: skip
    conv = _nhwc_conv((1, 8, 8, 4), (3, 3, 4, 8), (1, 8, 8, 8))
    rows = [ew.Measurement(s.op, s.dtype, s.shape, 1.0) for s in TINY[-2:]]
    assert np.array_equal(ew.measurement_features(rows), ew.features([dot, conv]))


def test_grouped_convolution_specs_build_and_match_the_service_features() -> None:
    """A depthwise layer (groups = C = O = 8) runs with the recorded shape, and its row's
    features (8 GEMMs of N = 1, K = 9) are those of the StableHLO convolution it builds."""
    spec = sweeps.Spec("convolution", "f32", (2, 6, 6, 8, 3, 3, 8, 1, 8))
    case = sweeps.build_case(spec)
    assert case.args[1].shape == (3, 3, 1, 8)
    assert case.fn(*case.args).shape == (2, 6, 6, 8)
    conv = _nhwc_conv((2, 6, 6, 8), (3, 3, 1, 8), (2, 6, 6, 8), feature_group_count=8)
    row = ew.measurement_features([ew.Measurement(spec.op, spec.dtype, spec.shape, 1.0)])
    assert np.array_equal(row, ew.features([conv]))
    assert row[0, 0] == 2 * 72 * 8 * 9  # FLOPs: 72 outputs x 8 channels x 9 taps, x2
    depthwise = [s for s in sweeps.sweep(quick=True) if len(s.shape) == 9]
    assert depthwise and all(s.shape[3] == s.shape[6] for s in depthwise)


def test_convolution_rows_carry_input_channels_and_the_sweep_measures_stems() -> None:
    """A convolution's input channels per group (its K over its window taps) take their own
    slot, as the service computes them: 3 for an image's stem (XLA:CPU's slow path into 32
    or fewer outputs), 1 for a depthwise layer, 4 for 32 channels in 8 groups; the quick
    sweep measures stems on both sides of that path and a few channels into 24."""
    slot = ew.FEATURE_NAMES.index("last_mod_unroll")
    for spec, weights, out, groups, channels in (
        (sweeps.Spec("convolution", "f32", (1, 8, 8, 3, 5, 5, 24, 1)), (5, 5, 3, 24), 24, 1, 3),
        (sweeps.Spec("convolution", "f32", (2, 6, 6, 8, 3, 3, 8, 1, 8)), (3, 3, 1, 8), 8, 8, 1),
        (sweeps.Spec("convolution", "f32", (1, 6, 6, 32, 3, 3, 32, 1, 8)), (3, 3, 4, 32), 32, 8, 4),
    ):
        n, h, w, c = spec.shape[:4]
        conv = _nhwc_conv((n, h, w, c), weights, (n, h, w, out), feature_group_count=groups)
        row = ew.measurement_features([ew.Measurement(spec.op, spec.dtype, spec.shape, 1.0)])
        assert row[0, slot] == channels and np.array_equal(row, ew.features([conv]))
    dot = ew.measurement_features([ew.Measurement("dot_general", "f32", (1, 64, 32, 48), 1.0)])
    assert dot[0, slot] == 0.0
    convs = {s.shape for s in sweeps.sweep(quick=True, ops=["convolution"])}
    for c, o in ((3, 24), (3, 48), (1, 8), (4, 24)):
        assert {(1, 28, 28, c, 3, 3, o, 1), (4, 28, 28, c, 3, 3, o, 1)} <= convs


def test_quick_sweep_covers_every_class_and_the_paper_grids() -> None:
    specs = sweeps.sweep(quick=True)
    classes = {ew.Measurement(s.op, s.dtype, s.shape, 1.0).model_class for s in specs}
    assert classes == {
        "binary", "compare_select", "transcendental", "convert", "movement", "transpose",
        "reduction", "sort", "reduce_variadic", "top_k", "reduce_window", "select_and_scatter",
        "fft", "gather", "matmul", "convolution", "grouped_conv",
    }  # fmt: skip
    adds = {s.shape for s in specs if s.op == "add" and s.dtype == "f32"}
    assert (32,) in adds and (64, 64) in adds and (832, 832) in adds
    assert {(64, 127), (64, 128), (64, 129)} <= adds
    sizes = [math.prod(s) for s in adds]
    # Several factorisations of one size.
    assert max(sizes.count(n) for n in set(sizes)) >= 2
    assert len({s.key for s in specs}) == len(specs)
    full = sweeps.sweep(quick=False, ops=["add"], dtypes=("f32",))
    assert {(n,) for n in range(32, 8193, 32)} <= {s.shape for s in full}


def test_integer_division_rows_are_i32_and_other_dtypes_are_asked_for() -> None:
    """Integer division is swept in i32 on divisors 1-1000 whatever the dtypes asked for; f64
    rows are the second dtype's (every other shape, --quick) and real f64 (x64 mode on);
    an unknown dtype is refused by name."""
    specs = sweeps.sweep(True, ["integer_divide", "add"], ("f32", "f64"))
    by = {(s.op, s.dtype) for s in specs}
    assert by == {("integer_divide", "i32"), ("add", "f32"), ("add", "f64")}
    adds = [s for s in specs if s.op == "add"]
    f32, f64 = (sum(s.dtype == d for s in adds) for d in ("f32", "f64"))
    assert f64 < f32 and [s.shape for s in specs if s.op == "integer_divide"] == [
        s.shape for s in adds if s.dtype == "f32"
    ]
    fn, (a, b) = sweeps.op_and_inputs(sweeps.Spec("integer_divide", "i32", (64, 64)))
    assert a.dtype == jnp.int32 and int(b.min()) >= 1 and int(b.max()) <= 1000
    assert "stablehlo.divide" in jax.jit(fn).lower(a, b).as_text()
    with pytest.raises(ValueError, match="add,f64,8: 64-bit rows need JAX's x64 mode"):
        sweeps.op_and_inputs(sweeps.Spec("add", "f64", (8,)))
    with jax.enable_x64(True):
        _, (x, _) = sweeps.op_and_inputs(sweeps.Spec("add", "f64", (8,)))
    assert x.dtype == jnp.float64
    with pytest.raises(ValueError, match="unknown dtype.*f128"):
        sweeps.sweep(True, ["add"], ("f32", "f128"))


def test_root_and_log_rows_are_measured_on_positive_inputs() -> None:
    """rsqrt, sqrt and log see no NaN (a NaN input takes other paths); rsqrt is timed as
    rsqrt(x + 1e-5), as a normalisation computes it."""
    for op in ("rsqrt", "sqrt", "log"):
        fn, (x,) = sweeps.op_and_inputs(sweeps.Spec(op, "f32", (64, 64)))
        assert float(x.min()) >= 0.5
        assert bool(np.isfinite(np.asarray(fn(x))).all())
    fn, (x,) = sweeps.op_and_inputs(sweeps.Spec("rsqrt", "f32", (8,)))
    text = jax.jit(fn).lower(x).as_text()
    assert "stablehlo.rsqrt" in text and "stablehlo.add" in text
    quick = {s.op for s in sweeps.sweep(quick=True)}
    assert {"rsqrt", "sqrt", "log", "multiply", "divide"} <= quick


def test_sweep_rejects_unknown_ops() -> None:
    with pytest.raises(ValueError, match="unknown op"):
        sweeps.sweep(quick=True, ops=["add", "frobnicate"])


def test_measure_is_resumable_and_drops_broken_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    partial = tmp_path / "p.csv"
    monkeypatch.setattr(calibrate, "OFF_SPEED", math.inf)  # no chunk measured again here
    # The first is also a sentinel op: timed twice in one chunk under keys of their own.
    specs = [calibrate.SENTINELS[0], *TINY[:2]]
    rows = calibrate.measure(specs[:2], partial, repeats=3, progress=False)
    assert set(rows) == {s.key for s in specs[:2]}
    assert all(float(r[4]) >= calibrate.RESOLUTION_US for r in rows.values())
    # Both rows were timed in one chunk, beside the same sentinel ops (a positive gauge).
    sentinels = {r[-1] for r in rows.values()}
    assert len(sentinels) == 1 and float(sentinels.pop()) > 0
    # A run killed mid-write leaves a truncated line: it is re-measured, not trusted.
    with partial.open("a") as f:
        f.write("exponential,f32,64x512,32768,0.5")
    built: list[str] = []
    real = sweeps.build_loop_case
    monkeypatch.setattr(sweeps, "build_loop_case", lambda s: built.append(s.key) or real(s))
    rows = calibrate.measure(specs, partial, repeats=3, progress=False)
    assert built == [*(s.key for s in calibrate.SENTINELS), specs[2].key]
    assert set(calibrate.read_partial(partial)) == {s.key for s in specs}
    assert len(rows) == 3


@pytest.mark.parametrize("again_us", [110.0, 260.0])
def test_a_chunk_measured_off_speed_is_measured_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, again_us: float
) -> None:
    """Three chunks of two shapes whose sentinel ops took 100, 105 and 200 us: the third ran
    more than `OFF_SPEED` from the median and is measured once more at the end; its rows are
    replaced where the new chunk ran nearer the median (110 us), kept where not (260 us)."""
    specs = [sweeps.Spec("add", "f32", (n,)) for n in range(1000, 1006)]
    gauges = iter([100.0, 105.0, 200.0, again_us])
    timed: list[list[str]] = []

    def chunk(part, gauges_, repeats, bar):
        g = next(gauges)
        timed.append([s.key for s in part])
        return [[*s.key.split(","), "1", f"{g / 100:.4f}", "0.1", "1", "1", "3", f"{g:.4f}"]
                for s in part]  # fmt: skip

    monkeypatch.setattr(calibrate, "_measure_chunk", chunk)
    monkeypatch.setattr(calibrate, "sentinel_cases", list)
    rows = calibrate.measure(specs, tmp_path / "p.csv", chunk=2, progress=False)
    assert timed == [[s.key for s in specs[i : i + 2]] for i in (0, 2, 4)] + [
        sorted(s.key for s in specs[4:])
    ]
    last = {float(rows[s.key][-1]) for s in specs[4:]}
    assert last == {min(again_us, 200.0, key=lambda g: abs(math.log(g / 105.0)))}
    # What the file holds reads back the same (the later line of a key wins).
    assert calibrate.read_partial(tmp_path / "p.csv") == rows


def test_a_row_whose_program_time_is_unknown_is_kept_out_of_the_per_call_fit(
    tmp_path: Path,
) -> None:
    """A row may record its program time as nan (rows added a day after the probes, whose
    per-call overheads the sentinels do not take to the file's speed): it is read back, and
    the per-call terms are fitted as without it; a malformed or infinite one is dropped."""
    # 20 adds of 1-20 us whose calls each pay 40 us beyond their kernel (by hand).
    adds = [
        f"add,f32,{n},{n},{n / 1e3:.4f},0.1,{n / 1e3 + 40:.4f},5,7,100"
        for n in range(1000, 21000, 1000)
    ]
    unknown, infinite = (
        "sine,f32,4096,4096,20.0,0.1,nan,5,7,100",
        "sine,f32,8,8,1.0,0.1,inf,5,7,100",
    )
    path = tmp_path / "c.csv"
    path.write_text("\n".join([",".join(calibrate.COLUMNS), *adds, unknown, infinite]) + "\n")
    read_rows = calibrate.read_partial(path)
    assert "sine,f32,4096" in read_rows and "sine,f32,8" not in read_rows
    parsed = [
        (r[0], r[1], tuple(int(d) for d in r[2].split("x")), float(r[4]), float(r[6]))
        for r in read_rows.values()
    ]
    with_it, without = fit_host_params(parsed), fit_host_params(parsed[:-1])
    assert parsed[-1][0] == "sine"
    assert with_it.program_overhead_ns == without.program_overhead_ns == pytest.approx(40_000)


def test_measure_leaves_out_ops_whose_loop_xla_runs_as_one_kernel(tmp_path: Path) -> None:
    """A loop of 32 f32 adds is hoisted into one kernel (its state is under XLA:CPU's
    1024-byte small-call limit), one of 544 is not: only the latter is a measurement."""
    hoisted, kept = sweeps.Spec("add", "f32", (32,)), sweeps.Spec("add", "f32", (544,))
    assert sweeps.build_loop_case(hoisted).hoisted
    assert not sweeps.build_loop_case(kept).hoisted
    rows = calibrate.measure([hoisted, kept], tmp_path / "p.csv", repeats=3, progress=False)
    assert set(rows) == {kept.key}
    assert set(calibrate.read_partial(tmp_path / "p.csv")) == {kept.key}


def test_calibrate_cli_end_to_end_and_corrupted_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    specs = [sweeps.Spec("add", "f32", (n,)) for n in (4096, 65536, 1 << 20)]
    monkeypatch.setattr(sweeps, "sweep", lambda quick, ops=None, dtypes=(): specs)
    monkeypatch.setattr(program_probes, "CHAIN_LENGTHS", (1, 2, 3))
    monkeypatch.setattr(program_probes, "BRANCH_COUNTS", (2,))
    monkeypatch.setattr(
        small_loop_probes, "OPS", {k: small_loop_probes.OPS[k] for k in ("add", "tanh")}
    )
    sizes = ((300, 1), (300, 2), (1024, 1), (16384, 1), (16384, 2))
    monkeypatch.setattr(thunked_loop_probes, "SIZES", sizes)
    monkeypatch.setattr(fused_chains, "TRAINING_SHAPES", ((64, 16), (1024,), (64, 64)))
    monkeypatch.setattr(fused_chains, "LARGE_SHAPES", ((128, 64),))
    # Choleskys of 128 (~45 us): the few rows here price a call's other ops at 2-8 us, more
    # than a call of 8 takes, and an LU's pivots-to-permutation loop above the LU itself
    # (`lapack_sweep.REST_LIMIT`).
    two = [lapack_sweep.Case("potrf", "f32", 128), lapack_sweep.Case("potrf", "f64", 128)]
    monkeypatch.setattr(lapack_sweep, "cases", lambda sizes: two)
    # The LAPACK sweep runs once the rows are written: its calls are timed net of the other
    # ops' price, which must come from this machine's rows (`calibrate.main`).
    written_before: list[bool] = []
    sweep = lapack_sweep.write_csv
    monkeypatch.setattr(
        lapack_sweep,
        "write_csv",
        lambda *a, **k: (
            written_before.append(cf.checksum_ok(cf.calibration_path("host"))) or sweep(*a, **k)
        ),
    )
    first = ["--target", "host", "--quick", "--repeats", "3", "--no-progress"]
    assert calibrate.main([*first, "--note", "first run"]) == 0
    path = cf.calibration_path("host")
    text = path.read_text()
    assert "# machine: " + cf.machine_fingerprint() in text
    assert "# versions: python" in text and "jax 0.10.2" in text
    assert cf.checksum_ok(path)
    assert cf.training_files("host") == (path, True)
    assert not path.with_name(path.stem + ".partial.csv").exists()
    assert len(ew.load_measurements(path)) == 3
    dispatch = ew.calibrated_dispatch_ns("host")
    assert dispatch is not None and dispatch > 0
    # The roofline parameters the rows imply are in the header, and the host target uses them.
    params = HostParams.parse(cf.header_value(path, HOST_PARAMS_KEY))
    assert params is not None and params.bandwidth_gbps > 0
    assert params.kernel_dispatch_ns >= 0 and params.multi_kernel_ns >= 0  # probes ran
    # The fused bf16 chain probe ran (~0.2 ns per element per op on the project's VM).
    bf16 = float(cf.header_value(path, fused_probes.KEY))
    assert 0.01 < bf16 < 10 and params.bf16_fused_ns_per_elem == pytest.approx(bf16, rel=1e-5)
    # So did the fused transpose probe (~0.6 ns per element on the project's VM, ~1.5 where
    # its reads alias in the L1 cache).
    strided = float(cf.header_value(path, fused_probes.TRANSPOSE_KEY))
    assert 0.05 < strided < 20 and params.transpose_fused_ns_per_elem == pytest.approx(
        strided, rel=1e-5
    )
    aliased = float(cf.header_value(path, fused_probes.ALIASED_KEY))
    assert 0.05 < aliased < 20 and params.transpose_fused_aliased_ns_per_elem == pytest.approx(
        aliased, rel=1e-5
    )
    # And the one past the L2 (~3.2 ns an element on the project's VM).
    l2 = float(cf.header_value(path, fused_probes.L2_KEY))
    assert 0.05 < l2 < 50 and params.transpose_fused_l2_ns_per_elem == pytest.approx(l2, rel=1e-5)
    host = load_target("host")
    assert host.transpose_fused_l2_ns_per_element == pytest.approx(l2, rel=1e-5)
    assert host.calibrated and host.memory_bandwidth_gbps == pytest.approx(
        params.bandwidth_gbps, rel=1e-5
    )
    assert host.transpose_fused_ns_per_element == pytest.approx(strided, rel=1e-5)
    assert host.transpose_fused_aliased_ns_per_element == pytest.approx(aliased, rel=1e-5)
    # The small-loop probe ran: a trip's own cost and each op's latency, which the host uses
    # (tanh of one f32 ~18 ns a trip on the project's VM, an add ~1), and on 16 (scalar
    # code: tanh ~45 ns a trip).
    loops = parse_latencies(cf.header_value(path, LATENCY_KEY))
    assert set(loops) == {"base", "add", "tanh", "add@16", "tanh@16"}
    assert 1.0 < loops["tanh"] < 500.0 and loops["tanh"] < loops["tanh@16"] < 16 * 500.0
    assert host.small_loop_latency_ns == loops
    # The thunked-loop probe ran (where the OS gives the L1 size): a kernel's fixed cost and
    # its bytes' rates, which the host uses.
    thunked = parse_latencies(cf.header_value(path, thunked_loop_probes.KEY))
    if l1_data_mib():
        assert set(thunked) == {"base", "kernel", "l1_gbps", "l2_gbps"}
        assert host.thunked_loop == thunked
    # The contention probe ran: a fraction of a kernel's time and a cap, the fractions
    # after an int8 dot and in a loop's body, and the Eigen-to-YNNPACK convolution handoff
    # (~45 us on the project's VM), which the host uses.
    contention = parse_latencies(cf.header_value(path, contention_probes.KEY))
    assert set(contention) == {
        "fraction", "cap_ns", "int8_fraction", "loop_fraction", "eigen_handoff_ns"
    }  # fmt: skip
    # What the pair pays beyond its parts: a median of differences floored at 0 (45 us on
    # the project's VM), not a millisecond.
    assert 0.0 <= contention["eigen_handoff_ns"] < 1e6
    assert (
        host.pool_contention,
        host.pool_contention_cap_ns,
        host.pool_contention_int8,
        host.pool_contention_loop,
        host.eigen_handoff_ns,
    ) == (
        contention["fraction"], contention["cap_ns"], contention["int8_fraction"],
        contention["loop_fraction"], contention["eigen_handoff_ns"],
    )  # fmt: skip
    # Fused chains were measured beside it (QUICK_CHAINS_PER_SHAPE per shape with --quick,
    # a third as many on the large shapes, and as many uint32 chains, chains of 17-48 steps,
    # chains of 2-32 cheap steps, of up to four inputs and of bf16 per training shape), and the
    # host's fused-loop model is fitted from them, not from the shipped chains; so are sum
    # chains, of the 4096-element shape and the large one (a sum over its rows and one over
    # its columns each), and their model.
    chains = fused_loops.chains_path(path)
    drawn = fused_chains.draw_cheap(fused_chains.TRAINING_SHAPES, 1, seed=0)
    drawn += fused_chains.draw_inputs(fused_chains.TRAINING_SHAPES, 1, seed=0)
    short = sum(len(c.ops) <= fused_loops.SHORT_STEPS for c in drawn)
    drawn += fused_chains.draw_bf16(fused_chains.TRAINING_SHAPES, 1, seed=0)
    drawn += fused_chains.draw_bf16(
        fused_chains.TRAINING_SHAPES, 1, seed=0, steps=fused_chains.CHEAP_STEPS
    )
    X, y = fused_loops.load_chains(chains)
    assert len(y) == 3 * calibrate.QUICK_CHAINS_PER_SHAPE + 1 + short and (y > 0).all()
    _, every = fused_loops.load_chains(chains, extended=True)
    assert len(every) == len(y) + 2 * 3 + len(drawn) - short
    rows = [r.split(",") for r in chains.read_text().splitlines() if r[:1] not in ("#", "")]
    assert sum(r[1] == "u32" for r in rows[1:]) == 3
    keys = {f"{r[0]}/{r[2]}" for r in rows[1:]}
    assert {c.key for c in drawn} <= keys
    longest = sum(len(c.ops) >= 17 and c.dtype == "f32" for c in drawn)
    assert sum(r[1] == "f32" and r[0].count(".") >= 16 for r in rows[1:]) == 3 + longest
    assert (X[:, 0] == 128 * 64).sum() == 1
    _, sums = fused_loops.load_chains(chains, reduces=True)
    assert len(sums) == 2 * calibrate.QUICK_CHAINS_PER_SHAPE + 2 and (sums > 0).all()
    assert "# machine: " + cf.machine_fingerprint() in chains.read_text()
    fused = fused_loops.model_for_host()
    assert fused.source == chains.name and fused.reduce_regressor is not None
    assert fused.wide_regressor is not None
    # So were LAPACK calls (here two: Choleskys in f32 and f64), and the host's LAPACK
    # model reads them, not the shipped ones.
    calls = read_rows(lapack_path(path))
    assert [(c.routine, c.dtype, c.n) for c, _ in calls] == [
        ("potrf", "f32", 128),
        ("potrf", "f64", 128),
    ]
    assert all(us > 0 for _, us in calls)
    assert LapackModel().source == lapack_path(path).name
    assert written_before == [True]
    # Corrupt one value: detected, reported, re-measured.
    assert "\nadd,f32,4096,4096," in text
    path.write_text(text.replace("\nadd,f32,4096,4096,", "\nadd,f32,4096,4097,", 1))
    assert not cf.checksum_ok(path)
    built: list[str] = []
    real = sweeps.build_loop_case
    monkeypatch.setattr(sweeps, "build_loop_case", lambda s: built.append(s.key) or real(s))
    remeasure = ["--target", "host", "--repeats", "3", "--no-progress", "--note", "re-measured"]
    assert calibrate.main(remeasure) == 0
    assert "corrupted calibration" in capsys.readouterr().err
    gauges = {s.key for s in calibrate.SENTINELS}  # timed with every chunk and the probes
    assert sorted(k for k in built if k not in gauges) == sorted(s.key for s in specs)
    assert cf.checksum_ok(path)
    probe_lines = [ln for ln in path.read_text().splitlines() if ln.startswith("# probe: ")]
    assert len(probe_lines) == 3 * 4 + 1  # chains of 1-3 of four kinds, two branches
    # Each probe carries the sentinel time measured around the probes (a positive gauge).
    assert all(float(ln.split()[-1]) > 0 and len(ln.split()) == 9 for ln in probe_lines)
    # A valid cache entry is reused: nothing is measured again, and its notes are kept.
    built.clear()
    again = ["--target", "host", "--repeats", "3", "--no-progress", "--note", "again"]
    assert calibrate.main(again) == 0
    assert set(built) <= gauges  # no row: only the sentinels timed around the probes
    notes = [ln for ln in path.read_text().splitlines() if ln.startswith("# note: ")]
    assert notes == ["# note: re-measured", "# note: again"]
    # The probes were measured again and fitted with the earlier measurement.
    now = [ln for ln in path.read_text().splitlines() if ln.startswith("# probe: ")]
    assert len(now) == 2 * len(probe_lines) and set(probe_lines) < set(now)
    # --refit measures nothing: same rows, probes and date, the parameters written again.
    before = path.read_text()
    built.clear()
    monkeypatch.setattr(program_probes, "measure_probes", lambda *a, **k: pytest.fail("measured"))
    monkeypatch.setattr(fused_probes, "measure_bf16_fused", lambda *a, **k: pytest.fail("measured"))
    monkeypatch.setattr(
        small_loop_probes, "measure_loop_latencies", lambda *a, **k: pytest.fail("measured")
    )
    monkeypatch.setattr(
        thunked_loop_probes, "measure_thunked_loops", lambda *a, **k: pytest.fail("measured")
    )
    monkeypatch.setattr(fused_chains, "measure", lambda *a, **k: pytest.fail("measured"))
    path.write_text(before.replace(cf.header_value(path, HOST_PARAMS_KEY), "bandwidth_gbps=1"))
    assert calibrate.main(["--target", "host", "--refit", "--note", "refit"]) == 0
    assert (
        built == []
        and cf.checksum_ok(path)
        and path.read_text() == before.replace("# note: again\n", "# note: again\n# note: refit\n")
    )
    assert calibrate.main(["--target", "host", "--refit", "--out", str(tmp_path / "no.csv")]) == 2
    # --rows-only measures the sweep's new shapes alone (no probe: they still fail if run),
    # keeps every earlier row as it was, and fits the parameters again.
    grown = [*specs, sweeps.Spec("add", "f32", (8192,))]
    monkeypatch.setattr(sweeps, "sweep", lambda quick, ops=None, dtypes=(): grown)
    rows_before = calibrate.read_partial(path)
    only = ["--target", "host", "--rows-only", "--repeats", "3", "--no-progress", "--note", "rows"]
    assert calibrate.main(only) == 0
    assert sorted(k for k in built if k not in gauges) == ["add,f32,8192"]
    rows_after = calibrate.read_partial(path)
    assert set(rows_after) == set(rows_before) | {"add,f32,8192"}
    assert all(rows_after[k] == v for k, v in rows_before.items())
    assert cf.checksum_ok(path) and path.read_text().count("# note: rows\n") == 1
    assert not path.with_name(path.stem + ".rows.partial.csv").exists()
    rows_only_elsewhere = [*only, "--out", str(tmp_path / "no.csv")]
    assert calibrate.main(rows_only_elsewhere) == 2
    # --remeasure re-times the rows its pattern matches, once per run (no probe), replaces
    # each with one of its runs' rows and keeps every other row as it was.
    built.clear()
    rows_before = calibrate.read_partial(path)
    again = ["--target", "host", "--remeasure", r"^add,f32,(8192|4096)$", "--runs", "2",
             "--repeats", "3", "--no-progress"]  # fmt: skip
    capsys.readouterr()
    assert calibrate.main(again) == 0
    assert [k for k in built if k not in gauges] == ["add,f32,4096", "add,f32,8192"] * 2
    rows_after = calibrate.read_partial(path)
    assert set(rows_after) == set(rows_before)
    assert all(rows_after[k] == v for k, v in rows_before.items() if k not in built)
    assert all(rows_after[k] != rows_before[k] for k in ("add,f32,4096", "add,f32,8192"))
    out = capsys.readouterr().out
    assert "| add,f32,4096 |" in out and "| add,f32,8192 |" in out and "2 rows re-measured" in out
    assert cf.checksum_ok(path) and "re-measured (2 rows, 2 runs" in path.read_text()
    assert not list(path.parent.glob("*.remeasure*.partial.csv"))
    for bad in ("^nothing$", "add,(f32"):  # matches no row; not a regular expression
        assert calibrate.main(["--target", "host", "--remeasure", bad, "--no-progress"]) == 2
        assert f"--remeasure {bad!r}" in capsys.readouterr().err


def _cal_row(op: str, dtype: str, shape: str, us: float) -> list[str]:
    numel = math.prod(int(d) for d in shape.split("x"))
    return [
        op,
        dtype,
        shape,
        str(numel),
        f"{us:.4f}",
        "0.05",
        f"{us + 20:.4f}",
        "15.0",
        "7",
        "80.0",
    ]


def test_remeasure_keeps_each_rows_median_run_at_the_files_speed() -> None:
    # The file's rows ran beside sentinels of 100 us (its median speed); a run at 200 us
    # (twice as slow) of a 30 us row is 15 us at the file's speed.
    rows = {r[2]: r for r in (_cal_row("add", "f32", str(n), 10.0) for n in (64, 128, 256))}
    for r in rows.values():
        r[-1] = "100.0"
    row = _cal_row("add", "f32", "64", 30.0)
    row[-1] = "200.0"
    assert remeasure.scaled_us(row, 100.0) == pytest.approx(15.0)
    assert remeasure.select({f"add,f32,{k}": v for k, v in rows.items()}, r"f32,(64|256)$") == [
        "add,f32,256",
        "add,f32,64",
    ]
    with pytest.raises(ValueError, match="matches no row"):
        remeasure.select({"add,f32,64": rows["64"]}, "bf16")
    assert remeasure.median_run([12.0, 9.0, 30.0]) == 0
    assert remeasure.median_run([12.0, 9.0, 30.0, 11.0]) == 3  # the lower of the middle two
    assert remeasure.median_run([5.0]) == 0
    done = remeasure.Remeasured("add,f32,64", 10.0, (12.0, 9.0, 30.0), 0)
    assert done.change == pytest.approx(1.2)
    assert "| add,f32,64 | 10.0 | 12.0*, 9.0, 30.0 | 1.200 |" in remeasure.table([done])


def test_a_calibration_keeps_its_speed_when_rows_are_added(tmp_path: Path) -> None:
    """Rows are read at the speed the file was written at (its header's `speed_sentinel_us`,
    the rows' median sentinel then): rows added later in a fast spell do not move it, where
    the median of all rows would have taken every row's time with it."""

    def row(shape: str, us: float, sentinel: float) -> list[str]:
        return [*_cal_row("add", "f32", shape, us)[:-1], f"{sentinel}"]

    path = tmp_path / "cal.csv"
    first = [row("64", 10.0, 80.0), row("128", 10.0, 100.0), row("256", 10.0, 120.0)]
    calibrate.write_calibration(first, path, calibrate.header("host"))
    assert cf.header_value(path, cf.SPEED_KEY) == "100"
    # Three rows timed beside sentinels of 40 us (a spell 2.5x faster): a median of 60 us.
    later = {f"add,f32,{n}": row(str(n), 4.0, 40.0) for n in (512, 1024, 2048)}
    calibrate.refit(path, "three rows added", later)
    assert cf.header_value(path, cf.SPEED_KEY) == "100"
    got = {m.shape: m.latency_us for m in ew.load_measurements(path)}
    # 10 us beside 80 us sentinels is 12.5 at 100; 4 us beside 40 is 10.
    assert got == {(64,): 12.5, (128,): 10.0, (256,): 10.0 * 100 / 120, **dict.fromkeys(
        [(512,), (1024,), (2048,)], 10.0)}  # fmt: skip
    sentinels = [80.0, 100.0, 120.0, 40.0, 40.0, 40.0]
    assert cf.file_speed(path, sentinels) == 100.0
    bare = tmp_path / "bare.csv"  # a file written before the key: its rows' median
    bare.write_text("".join(ln for ln in path.open() if not ln.startswith(f"# {cf.SPEED_KEY}")))
    assert cf.file_speed(bare, sentinels) == 60.0
    assert calibration_check.calibration_sentinel_us(path) == 100.0


def test_check_sample_spreads_over_each_class_and_keeps_resolvable_f32_rows() -> None:
    adds = [_cal_row("add", "f32", f"{64 * (i + 1)}", 10.0 * (i + 1)) for i in range(10)]
    rows = [
        *adds,
        _cal_row("add", "bf16", "64", 50.0),  # bf16: not sampled
        _cal_row("exponential", "f32", "32", 1.0),  # below the timer's resolution band
        _cal_row("exponential", "f32", "8192", 9000.0),  # too slow for a quick check
        _cal_row("exponential", "f32", "4096", 40.0),
    ]
    picked = calibration_check.sample(rows, per_class=3)
    # binary: the 2nd, 5th and 9th of ten rows in time order; transcendental: its one usable row.
    assert [r[2] for r in picked] == ["128", "320", "576", "4096"]


def test_check_flags_a_calibration_the_machine_no_longer_matches(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Times 100x-1000x what a 2-core machine takes for these ops: the check must say so.
    rows = [
        _cal_row("add", "f32", "256x256", 4000.0),
        _cal_row("exponential", "f32", "64x512", 3000.0),
    ]
    path = tmp_path / "stale.csv"
    calibrate.write_calibration(rows, path, calibrate.header("host"))
    report = calibration_check.check(path, repeats=3)
    assert [c.cls for c in report.classes] == ["binary", "transcendental"]
    assert report.kernel_ratio < 0.1 and not report.within_tolerance
    assert calibrate.main(["--check", "--out", str(path), "--repeats", "3", "--no-progress"]) == 1
    out = capsys.readouterr().out
    assert "rerun stablehlo-perf-calibrate" in out
    assert "; sentinel ops " in out  # the rows' sentinel (80 us) against today's
    assert calibrate.main(["--check", "--out", str(tmp_path / "none.csv")]) == 2


def test_check_with_probes_reports_the_per_call_overhead_drift(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A calibration whose rows still match (re-timed, stubbed: as calibrated) but whose
    program probes' overheads now take half their time (stubbed: 80 -> 40 us beyond their
    in-loop time, at the file's speed): the check with probes reports per-call overhead 0.50 of
    2 probes and flags the calibration; without probes it times none and passes."""
    rows = [
        _cal_row("add", "f32", "256x256", 40.0),
        _cal_row("exponential", "f32", "64x512", 30.0),
    ]
    when = "2026-12-06T00:00Z"
    then = [
        program_probes.Probe("dense", k, 2 * k, 80e3 + k * 4e3, 4e3, when, 80.0) for k in (1, 2)
    ]
    path = tmp_path / "cal.csv"
    calibrate.write_calibration(rows, path, calibrate.header("host"), then)
    monkeypatch.setattr(
        calibrate, "measure", lambda specs, *a, **k: {",".join(r[:3]): r for r in rows}
    )
    now = [replace(p, program_ns=p.program_ns - 40e3) for p in then]
    timed: list[int] = []
    monkeypatch.setattr(
        program_probes, "measure_probes", lambda **k: timed.append(k["passes"]) or now
    )
    report = calibration_check.check(path, repeats=3, probes=True)
    assert (report.kernel_ratio, report.call_ratio) == (pytest.approx(1.0), pytest.approx(1.0))
    assert (report.overhead_ratio, report.overhead_probes) == (pytest.approx(0.5), 2)
    assert not report.within_tolerance and timed == [calibration_check.PROBE_PASSES]
    assert "per-call overhead 0.50 (2 program probes)" in report.table()
    assert "and 0.50x its per-call overhead" in report.table()
    plain = calibration_check.check(path, repeats=3)
    assert math.isnan(plain.overhead_ratio) and plain.within_tolerance and len(timed) == 1
    assert calibrate.main(["--check", "--out", str(path), "--no-progress"]) == 1
    assert "per-call overhead 0.50" in capsys.readouterr().out


def _calibration(path: Path, rows: list[list[str]], note: str, date: str, probe: float) -> Path:
    """A finished calibration of this machine with one probe and a small-loop table."""
    head = [f"# note: {note}", *(
        f"# date: {date}" if ln.startswith("# date:") else ln for ln in calibrate.header("host")
    )]  # fmt: skip
    probes = [program_probes.Probe("dense", 1, 2, probe, 4e3, date, 80.0)]
    calibrate.write_calibration(rows, path, head, probes, loop_latencies={"base": probe / 1e3})
    return path


def test_merge_takes_each_shapes_geometric_mean_and_keeps_every_probe(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = _calibration(
        tmp_path / "a.csv",
        [_cal_row("add", "f32", "4096", 10.0), _cal_row("exponential", "f32", "4096", 40.0)],
        "first session", "2026-12-01T10:00Z", 9e3,
    )  # fmt: skip
    b = _calibration(
        tmp_path / "b.csv",
        [_cal_row("add", "f32", "4096", 40.0), _cal_row("add", "f32", "8192", 70.0)],
        "second session", "2026-12-02T10:00Z", 16e3,
    )  # fmt: skip
    out = tmp_path / "merged.csv"
    assert calibrate.main(["--merge", str(a), str(b), "--out", str(out), "--note", "both"]) == 0
    assert "3 shapes merged" in capsys.readouterr().out
    assert cf.checksum_ok(out)
    rows = calibrate.read_partial(out)
    # add 4096: in-loop sqrt(10 * 40) = 20 us, call sqrt(30 * 60) us, 7 + 7 rounds.
    add = rows["add,f32,4096"]
    assert float(add[4]) == pytest.approx(20.0) and float(add[6]) == pytest.approx(1800**0.5)
    assert add[8] == "14" and float(add[9]) == pytest.approx(80.0)
    # A shape only one file holds keeps its row.
    assert float(rows["exponential,f32,4096"][4]) == 40.0
    assert float(rows["add,f32,8192"][4]) == 70.0
    assert {m.op for m in ew.load_measurements(out)} == {"add", "exponential"}
    lines = out.read_text().splitlines()
    assert [ln for ln in lines if ln.startswith("# note: ")][:3] == [
        "# note: first session", "# note: second session", "# note: both",
    ]  # fmt: skip
    assert "# date: 2026-12-01T10:00Z, 2026-12-02T10:00Z" in lines
    assert len([ln for ln in lines if ln.startswith("# probe: ")]) == 2
    # Small-loop latencies: the geometric mean, sqrt(9 * 16) = 12 ns.
    assert parse_latencies(cf.header_value(out, LATENCY_KEY)) == {"base": pytest.approx(12.0)}


def test_merge_refuses_another_machines_or_a_corrupted_calibration(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [_cal_row("add", "f32", "4096", 10.0)]
    a = _calibration(tmp_path / "a.csv", rows, "a", "2026-12-01T10:00Z", 9e3)
    b = _calibration(tmp_path / "b.csv", rows, "b", "2026-12-02T10:00Z", 9e3)
    text = b.read_text()
    b.write_text(
        text.replace(f"# machine: {cf.machine_fingerprint()}", "# machine: other, 64 cores")
    )
    out = tmp_path / "merged.csv"
    assert calibrate.main(["--merge", str(a), str(b), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{b}: measured on 'other, 64 cores'" in err and not out.exists()
    b.write_text(text.replace("\nadd,f32,4096,4096,10.0000", "\nadd,f32,4096,4096,11.0000"))
    assert calibrate.main(["--merge", str(a), str(b), "--out", str(out)]) == 2
    assert f"{b}: no valid calibration" in capsys.readouterr().err and not out.exists()


def test_header_probes_keep_the_median_of_their_runs() -> None:
    """One run of a probe can fall in a slow spell (the Zen 4 reference's tanh on 16 f32 at
    56 ns a trip against 34-35 in two later runs): the header keeps each quantity's median."""
    seeds: list[int] = []

    def loops(seed: int) -> dict[str, float]:
        seeds.append(seed)
        return {"tanh@16": (56.0, 34.6, 35.1)[seed], "add": (1.0, 3.0, 2.0)[seed]}

    assert calibrate.median_of_runs(loops) == {"tanh@16": 35.1, "add": 2.0}
    assert seeds == list(range(calibrate.PROBE_RUNS)) == [0, 1, 2]
    assert calibrate.median_of_runs(lambda s: ((0.6, 1.4), (0.9, 1.5), (0.5, 2.0))[s]) == (0.6, 1.5)
    assert calibrate.median_of_runs(lambda s: (0.11, 0.30, 0.12)[s]) == 0.12
