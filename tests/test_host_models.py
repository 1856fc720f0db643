"""The host's models of their own for ops no op class fits: reduce_window (pools and
cumulative scans), variadic reduces (argmax), top_k, FFT and gather. Their features by hand and
from real JAX programs, the calibration sweep's consistency with the analysis, values
on unseen shapes against the shipped reference, and the service's routing."""

import math
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import stablehlo_perf as sp
from conftest import op_infos
from jax import lax
from stablehlo_perf.analysis import calibration_files as cf
from stablehlo_perf.analysis import elementwise as ew
from stablehlo_perf.analysis.fusion_cost import _fused_transpose_rate
from stablehlo_perf.analysis.targets import load_target
from stablehlo_perf.runtime import sweeps

HOST_CSV = Path(ew.__file__).resolve().parent / "data" / "host_reference.csv"
_I = {n: i for i, n in enumerate(ew.FEATURE_NAMES)}


def _ops(fn, *args, name: str = "reduce_window"):
    """OpInfos of the `name` ops in fn's lowered module (calls inlined)."""
    return [o for o in op_infos(jax.jit(fn).lower(*args).as_text()) if o.short_name == name]


def test_pool_and_scan_work_by_hand() -> None:
    # 3x3 stride-2 SAME max pool of 1x64x64x32: 32x32x32 outputs, 9 taps each.
    pool = ew.window_features((1, 64, 64, 32), (1, 32, 32, 32), (1, 3, 3, 1), (1, 2, 2, 1), 4)
    assert pool[_I["tensor_bytes"]] == 32 * 32 * 32 * 9 * 4
    assert pool[_I["second_mod8"]] == 0.0  # not a scan
    # cumsum over 512 of a 256x512 array: a scan, priced per element, not 512 taps each.
    scan = ew.window_features((256, 512), (256, 512), (1, 512), (1, 1), 4)
    assert scan[_I["tensor_bytes"]] == 256 * 512 * 4
    assert scan[_I["second_mod8"]] == 1.0
    # A global pool spans its axes too but keeps one output: not a scan.
    glob = ew.window_features((2, 7, 7, 64), (2, 1, 1, 64), (1, 7, 7, 1), (1, 1, 1, 1), 4)
    assert glob[_I["second_mod8"]] == 0.0
    assert glob[_I["tensor_bytes"]] == 2 * 64 * 49 * 4
    # The minor dim and what it leaves of a 32-byte vector: 32 channels fill 4 f32 vectors,
    # 6 leave 6 floats.
    assert (pool[_I["second_mod16"]], pool[_I["vector_tail"]]) == (32.0, 0.0)
    odd = ew.window_features((4, 28, 28, 6), (4, 14, 14, 6), (1, 2, 2, 1), (1, 2, 2, 1), 4)
    assert (odd[_I["second_mod16"]], odd[_I["vector_tail"]]) == (6.0, 6.0)


@pytest.mark.parametrize(
    "spec",
    [
        sweeps.Spec("reduce_window", "f32", (4, 32, 32, 16, 3, 2)),
        sweeps.Spec("reduce_window", "f32", (1, 16, 16, 64, 2, 2)),
        sweeps.Spec("cumsum", "f32", (16, 512, 2)),
        sweeps.Spec("cumsum", "f32", (2048, 16, 1)),
        sweeps.Spec("cummax", "f32", (16, 512, 2)),
        sweeps.Spec("sum_pool", "f32", (4, 32, 32, 16, 3, 2)),
        sweeps.Spec("argmax", "f32", (64, 1000)),
        sweeps.Spec("top_k", "f32", (16, 1000, 8)),
        sweeps.Spec("fft", "f32", (64, 1000)),
        sweeps.Spec("gather", "f32", (1000, 64, 256)),
        sweeps.Spec("gather", "bf16", (20000, 1, 1024)),
        sweeps.Spec("sum_axis0", "f32", (64, 128)),
        sweeps.Spec("argmax_axis0", "f32", (6, 1, 240)),
        sweeps.Spec("sum_axis1", "f32", (32, 4, 512)),
        sweeps.Spec("sum_groups", "f32", (4, 256, 8, 8)),
        sweeps.Spec("transpose", "f32", (40, 96, 24)),
        sweeps.Spec("reduce", "f32", (64, 128)),
        sweeps.Spec("dot_general", "f32", (1, 64, 32, 48)),
        sweeps.Spec("dot_general", "f32", (1, 64, 32, 48, 2)),
        sweeps.Spec("dot_general", "f32", (1, 64, 32, 48, 3)),
        sweeps.Spec("dot_general", "bf16", (4, 16, 64, 32)),
        sweeps.Spec("dot_general", "i8", (4, 16, 64, 32)),
        sweeps.Spec("convolution", "f32", (1, 14, 14, 32, 3, 3, 32, 2, 32)),
        sweeps.Spec("convolution", "f32", (4, 14, 14, 16, 3, 3, 32, 2)),
        sweeps.Spec("conv3d", "f32", (2, 6, 12, 12, 4, 3, 16, 1)),
        sweeps.Spec("conv3d", "f32", (1, 8, 20, 20, 8, 1, 24, 2)),
    ],
    ids=lambda s: s.key,
)
def test_calibration_rows_have_the_features_of_the_programs_they_time(spec: sweeps.Spec) -> None:
    """What the sweep measures is what the analysis later sees: the features of a
    calibration row equal those of the op in the program it timed. `op_and_shapes` (what
    the CC4CS characterisation lowers, drawing no inputs) gives the inputs' shapes and types."""
    fn, args = sweeps.op_and_inputs(spec)
    (op,) = _ops(fn, *args, name=ew.ROW_OPS.get(spec.op, spec.op))
    row = ew.measurement_features([ew.Measurement(spec.op, spec.dtype, spec.shape, 1.0)])
    np.testing.assert_array_equal(ew.features([op]), row)
    _, shapes = sweeps.op_and_shapes(spec)
    assert [(s.shape, s.dtype) for s in shapes] == [(a.shape, a.dtype) for a in args]


def test_a_convolutions_features_hold_its_images_and_stride() -> None:
    """4 images of 28x28x16 through a 3x3 kernel to 32 features at stride 2: the implicit
    GEMM's M is 4 x 14 x 14 = 784, and the batch (4) and stride (2) have slots of their own."""
    spec = sweeps.Spec("convolution", "f32", (4, 28, 28, 16, 3, 3, 32, 2))
    row = ew.measurement_features([ew.Measurement(spec.op, spec.dtype, spec.shape, 1.0)])[0]
    assert row[_I["d1"]] == 784 and row[_I["d2"]] == 32 and row[_I["d3"]] == 144
    assert row[_I[ew._IMAGES_SLOT]] == 4 and row[_I[ew._STRIDE_SLOT]] == 2


def test_window_sweep_covers_pools_and_both_scan_axes() -> None:
    specs = sweeps.sweep(quick=True, ops=["reduce_window", "sum_pool", "cumsum", "cummax"])
    pools = {s.shape[4:] for s in specs if s.op == "reduce_window"}
    assert pools == {(2, 2), (3, 2), (3, 1)}
    assert {s.shape[2] for s in specs if s.op == "cumsum"} == {1, 2}
    scans = {s.shape for s in specs if s.op == "cumsum"}
    assert scans == {s.shape for s in specs if s.op == "cummax"} and len(scans) == 24
    assert {s.shape for s in specs if s.op == "sum_pool"} == {
        s.shape for s in specs if s.op == "reduce_window"
    }


def test_window_sweep_draws_pools_off_the_grid() -> None:
    """Beside the grid (sides 8-64, channels 16, 32, 64), 48 random pools, the same on
    every call, within the grid's work cap; scans keep to the grid."""
    specs = sweeps.window_specs(quick=True)
    assert specs == sweeps.window_specs(quick=True)
    pools = [s.shape for s in specs if s.op == "reduce_window"]
    off = [p for p in pools if p[3] not in (16, 32, 64) or p[1] not in (8, 16, 32, 64)]
    assert len(off) == 48 and len({p[3] for p in off}) > 20
    assert all(nb * h * w * c * k * k <= 2**24 and h >= k for nb, h, w, c, k, _ in off)
    grid = {1, 16, 256, 64, 128, 512, 2048}
    assert all({s.shape[0], s.shape[1]} <= grid for s in specs if s.op == "cumsum")


@pytest.fixture(scope="module")
def host_model() -> ew.LatencyRegressor:
    rows = [r for r in ew.load_measurements(HOST_CSV) if r.model_class == "reduce_window"]
    return ew.fit_class_models(rows)["reduce_window"]


def test_a_running_maximum_is_priced_by_its_own_rows_or_as_a_cumsum_and_says_so() -> None:
    """lax.cummax and cummin lower to the reduce_window a cumsum does, with a maximum or
    minimum for its body, and run about twice as long (512x512 along the last axis in a
    loop, Xeon VM, 2026-12-07: cumsum 545 us, cummax 1123, cummin along the first 1226, at
    sentinels ~0.8x the file's level); op code `cummax`. With the Xeon reference's rows a
    512x512 cummax (no such row: its scans are 256 x 512 and 256 x 2048) is priced near that
    time and over 1.3x a cumsum's, a cummin as a cummax; the Zen 4 reference, which has no
    cummax rows, prices it as the cumsum and names the stand-in. A max pool stays a pool."""
    x = jnp.zeros((512, 512))
    (cummax,) = _ops(lambda v: lax.cummax(v, axis=1), x)
    (cummin,) = _ops(lambda v: lax.cummin(v, axis=1), x)
    (cumsum,) = _ops(lambda v: jnp.cumsum(v, axis=1), x)
    (pool,) = _ops(lambda v: lax.reduce_window(v, -jnp.inf, lax.max, (2, 2), (2, 2), "VALID"), x)
    code = ew.features([cummax, cummin, cumsum, pool])[:, _I["op_code"]]
    assert list(code) == [
        ew._OP_CODE[c] for c in ("cummax", "cummax", "reduce_window", "reduce_window")
    ]
    host = load_target("host")
    data = HOST_CSV.parent
    xeon = ew.LearnedLatencyModel(data={"host": data / "host_reference_xeon.csv"})
    mx, mn, sm = xeon.predict([cummax, cummin, cumsum], host)
    assert 900 < mx.latency_ns / 1e3 < 1900 and mn.latency_ns == mx.latency_ns
    assert mx.latency_ns > 1.3 * sm.latency_ns and mx.model == "hgb-host-reduce_window"
    zen4 = ew.LearnedLatencyModel(data={"host": data / "host_reference_zen4.csv"})
    stand_in, as_sum = zen4.predict([cummax, cumsum], host)
    assert stand_in.latency_ns == pytest.approx(as_sum.latency_ns)
    assert stand_in.model == "hgb-host-reduce_window(no cummax rows: priced as reduce_window)"


def test_a_summing_pool_is_priced_by_its_own_rows_or_as_a_max_pool_and_says_so() -> None:
    """An average pool's window sums (reducer add, op code `sum_pool`): a 3x3 one in
    0.5-0.6x a max pool's time, a 2x2 one in 1.0-1.4x (Xeon VM, 2026-12-07, in loops:
    8x56x56x48 3x3 stride 2 428-473 us against 745-772; 4x32x32x64 2x2 37-56 against
    38-42). With the Xeon reference's rows the 3x3 one (no such row) is priced at 0.55-0.8x
    the max pool and near its time, the 2x2 one at 0.8-1.25x; the Zen 4 reference, which has
    no sum_pool rows, prices each as the max pool and names the stand-in."""

    def pools(shape: tuple[int, ...], k: int, s: int) -> list:
        x = jax.ShapeDtypeStruct(shape, jnp.float32)
        win, strides = (1, k, k, 1), (1, s, s, 1)
        (mx,) = _ops(lambda v: lax.reduce_window(v, -jnp.inf, lax.max, win, strides, "SAME"), x)
        (sm,) = _ops(lambda v: lax.reduce_window(v, 0.0, lax.add, win, strides, "SAME"), x)
        return [mx, sm]

    ops = pools((8, 56, 56, 48), 3, 2) + pools((4, 32, 32, 64), 2, 2)
    code = ew.features(ops)[:, _I["op_code"]]
    assert list(code) == [ew._OP_CODE[c] for c in ("reduce_window", "sum_pool") * 2]
    host = load_target("host")
    xeon = ew.LearnedLatencyModel(data={"host": HOST_CSV.parent / "host_reference_xeon.csv"})
    mx3, sm3, mx2, sm2 = (c.latency_ns for c in xeon.predict(ops, host))
    assert 0.55 < sm3 / mx3 < 0.8 and 0.8 < sm2 / mx2 < 1.25
    assert 428 / 1.33 < sm3 / 1e3 < 473 * 1.6
    zen4 = ew.LearnedLatencyModel(data={"host": HOST_CSV.parent / "host_reference_zen4.csv"})
    costs = zen4.predict(ops[:2], host)
    assert costs[1].latency_ns == pytest.approx(costs[0].latency_ns)
    assert costs[1].model == "hgb-host-reduce_window(no sum_pool rows: priced as reduce_window)"


def test_a_group_norms_sums_are_priced_by_their_own_rows_or_as_row_sums_and_says_so() -> None:
    """A group norm's statistics sum an image's pixels and each group's channels: of
    4x32x32x64 in 8 groups, a reduce of 4x32x32x8x8 over (1, 2, 4), which collapses to
    4x1024x8x8 over (1, 3), two reduced runs with the groups between them (op code
    `reduce_groups`); it took 121 us in a loop on the Xeon VM (2026-12-07, sentinels ~0.8x
    the file's level) where the row sums it would otherwise be read as were priced 49. With
    the Xeon reference's sum_groups rows (4x1024x8x8 is one; 4x1024x8x16 is not) it is
    priced near that time and over twice the one-run sum of the same input; the Zen 4
    reference, which has no such rows, prices it as the row sums and names the stand-in."""

    def group_sum(c: int) -> list:
        x = jax.ShapeDtypeStruct((4, 32, 32, 8 * c), jnp.float32)
        fn = lambda v: v.reshape(4, 32, 32, 8, c).sum((1, 2, 4))
        return _ops(fn, x, name="reduce")

    (gn8,) = group_sum(8)
    (gn16,) = group_sum(16)
    (rows,) = _ops(
        lambda v: v.sum(-1), jax.ShapeDtypeStruct((4096, 64), jnp.float32), name="reduce"
    )
    code = ew.features([gn8, gn16, rows])[:, _I["op_code"]]
    assert list(code) == [ew._OP_CODE[c] for c in ("reduce_groups", "reduce_groups", "reduce")]
    host = load_target("host")
    xeon = ew.LearnedLatencyModel(data={"host": HOST_CSV.parent / "host_reference_xeon.csv"})
    g8, g16, r = (c.latency_ns / 1e3 for c in xeon.predict([gn8, gn16, rows], host))
    assert 121 / 1.25 < g8 < 121 * 1.6 and g8 > 2 * r and g16 > g8
    zen4 = ew.LearnedLatencyModel(data={"host": HOST_CSV.parent / "host_reference_zen4.csv"})
    (stand_in,) = zen4.predict([gn8], host)
    assert stand_in.model == "hgb-host-reduction(no reduce_groups rows: priced as reduce)"


def test_unseen_scan_length_costs_what_measured_scans_do_per_element(
    host_model: ew.LatencyRegressor,
) -> None:
    """cumsum over 1,000 rows of a 1000x300 array (no measured length is 1,000): the
    reference's scans of 512 and 2,048 rows x 256 took 7.0 and 7.8 ns per element (the
    run of 2026-11-30 measured this program at 2.2 ms, 7.3 ns). A fit whose trees split
    on power-of-two flags (every measured scan length is one) priced it at 23 ms."""
    rows = {r.shape: r.latency_us for r in ew.load_measurements(HOST_CSV) if r.op == "cumsum"}
    per_elem = [rows[(a, 256, 1)] / (a * 256) for a in (512, 2048)]
    X = ew.measurement_features([ew.Measurement("cumsum", "f32", (1000, 300, 1), 1.0)])
    pred = float(host_model.predict(X)[0]) / (1000 * 300)
    assert 0.7 * min(per_elem) < pred < 1.3 * max(per_elem)


def test_service_routes_reduce_window_to_its_model_or_names_the_gap() -> None:
    x = jax.ShapeDtypeStruct((4, 64, 64, 32), jnp.float32)
    (pool,) = _ops(
        lambda v: lax.reduce_window(v, -jnp.inf, lax.max, (1, 3, 3, 1), (1, 2, 2, 1), "SAME"), x
    )
    svc = ew.LearnedLatencyModel(data={"host": HOST_CSV, "tpu-v4": ew.training_files("tpu-v4")[0]})
    (c_host,) = svc.predict([pool], load_target("host"))
    assert c_host.model == "hgb-host-reduce_window"
    # The reference measured this pool at 733 us inside a loop; the model saw it.
    assert c_host.latency_ns / 1e3 == pytest.approx(733, rel=0.25)
    (c_tpu,) = svc.predict([pool], load_target("tpu-v4"))
    assert c_tpu.model == "roofline(hgb-tpu-v4: no reduce_window data)"


def test_argmax_and_top_k_have_models_of_their_own() -> None:
    x = jax.ShapeDtypeStruct((512, 1000), jnp.float32)
    (amax,) = _ops(lambda v: jnp.argmax(v, axis=-1), x, name="reduce")
    (total,) = _ops(lambda v: jnp.sum(v, axis=-1), x, name="reduce")
    (topk,) = _ops(lambda v: lax.top_k(v, 8)[0], x, name="top_k")
    assert [ew.op_model_class(o) for o in (amax, total, topk)] == [
        "reduce_variadic", "reduction", "top_k",
    ]  # fmt: skip
    svc = ew.LearnedLatencyModel(data={"host": HOST_CSV, "tpu-v4": ew.training_files("tpu-v4")[0]})
    c_amax, c_total, c_topk = svc.predict([amax, total, topk], load_target("host"))
    assert (c_amax.model, c_total.model, c_topk.model) == (
        "hgb-host-reduce_variadic", "hgb-host-reduction", "hgb-host-top_k",
    )  # fmt: skip
    # XLA:CPU does not vectorise the (value, index) comparator: the reference measured
    # argmax at 1.0-2.9 ns per element, a sum at ~0.1-0.3.
    assert c_amax.latency_ns > 4 * c_total.latency_ns
    (c_tpu,) = svc.predict([topk], load_target("tpu-v4"))
    assert c_tpu.model == "roofline(hgb-tpu-v4: no top_k data)"


@pytest.mark.parametrize(("shape", "k"), [((256, 1000), 8), ((64, 2000), 1)])
def test_unseen_top_k_costs_what_measured_neighbours_do_per_row(
    shape: tuple[int, int], k: int
) -> None:
    """top_k of shapes the reference never measured, against the per-row-element cost of
    its rows of the same k at the neighbouring sizes (128 and 512 rows of 1000; 16 rows of
    1000 and 4096)."""
    rows = {r.shape: r.latency_us for r in ew.load_measurements(HOST_CSV) if r.op == "top_k"}
    near = [(128, 1000, 8), (512, 1000, 8)] if k == 8 else [(16, 1000, 1), (16, 4096, 1)]
    per = [rows[s] / (s[0] * s[1]) for s in near]
    model = ew.fit_class_models(
        [r for r in ew.load_measurements(HOST_CSV) if r.model_class == "top_k"]
    )["top_k"]
    X = ew.measurement_features([ew.Measurement("top_k", "f32", (*shape, k), 1.0)])
    pred = float(model.predict(X)[0]) / (shape[0] * shape[1])
    assert 0.7 * min(per) < pred < 1.3 * max(per)


def test_fft_features_by_hand_and_routing() -> None:
    row = ew.fft_features((64, 2049), 4.0)
    assert row[_I["tensor_bytes"]] == pytest.approx(64 * 2049 * math.log2(2049) * 4)
    assert row[_I["second_mod16"]] == 683  # 2049 = 3 x 683
    assert ew.fft_features((64, 2048), 4.0)[_I["second_mod16"]] == 2
    (fft,) = _ops(
        lambda v: jnp.fft.rfft(v, axis=-1),
        jax.ShapeDtypeStruct((256, 1000), jnp.float32),
        name="fft",
    )
    svc = ew.LearnedLatencyModel(data={"host": HOST_CSV, "tpu-v4": ew.training_files("tpu-v4")[0]})
    (c_host,) = svc.predict([fft], load_target("host"))
    assert c_host.model == "hgb-host-fft"
    (c_tpu,) = svc.predict([fft], load_target("tpu-v4"))
    assert c_tpu.model == "roofline(hgb-tpu-v4: no fft data)"


def test_fft_of_a_prime_rich_length_costs_more_than_a_power_of_two() -> None:
    """Lengths the reference never measured: 64 rows of 4,093 (prime) against 64 of
    4,096; the measured 2,049 (3 x 683) took 7.8x the 2,048 (1,322 vs 169 us)."""
    model = ew.fit_class_models(
        [r for r in ew.load_measurements(HOST_CSV) if r.model_class == "fft"]
    )["fft"]
    X = ew.measurement_features([ew.Measurement("fft", "f32", (64, n), 1.0) for n in (4093, 4096)])
    prime, pow2 = model.predict(X)
    assert prime > 2 * pow2


def test_gather_features_by_hand_and_routing() -> None:
    """A gather is priced by what it returns, how long its slices are and how large its
    table is: an embedding lookup of 4,096 rows of 256 f32 from a 20,000-row table reads
    4 MiB from a table of 19.5 MiB."""
    table_bytes = 20000 * 256 * 4
    row = ew.gather_features((4096, 256), 256, 4.0, table_bytes)
    assert row[_I["tensor_bytes"]] == 4096 * 256 * 4
    assert row[_I["pad_ratio_8x128"]] == 256 * 4  # one slice's bytes
    assert row[_I["operand_layout"]] == table_bytes
    table = jax.ShapeDtypeStruct((20000, 256), jnp.float32)
    idx = jax.ShapeDtypeStruct((4096,), jnp.int32)
    (rows,) = _ops(lambda t, i: t[i], table, idx, name="gather")
    np.testing.assert_array_equal(
        ew.features([rows])[0, :-1], ew.gather_features((4096, 256), 256, 4.0, table_bytes)
    )
    assert ew.op_model_class(rows) == "gather"
    # An embedding lookup's (batch, seq, width) result is batch x seq rows of width, as the
    # sweep's gathers are recorded.
    (lookup,) = _ops(
        lambda t, i: t[i], table, jax.ShapeDtypeStruct((512, 8), jnp.int32), name="gather"
    )
    assert lookup.results[0].shape == (512, 8, 256)
    np.testing.assert_array_equal(ew.features([lookup]), ew.features([rows]))
    svc = ew.LearnedLatencyModel(data={"host": HOST_CSV, "tpu-v4": ew.training_files("tpu-v4")[0]})
    (c_host,) = svc.predict([rows], load_target("host"))
    assert c_host.model == "hgb-host-gather"
    (c_tpu,) = svc.predict([rows], load_target("tpu-v4"))
    assert "gather" in c_tpu.model  # no gather data on tpu-v4: named as such


def test_unseen_gather_costs_what_measured_neighbours_do_per_byte() -> None:
    """4,096 rows of 128 f32 from 5,000 (no measured table has 5,000 rows, no count is
    4,096) against the reference's rows of width 128 at 1,024 and 8,192 indices."""
    rows = {r.shape: r.latency_us for r in ew.load_measurements(HOST_CSV) if r.op == "gather"
            and r.dtype == "f32"}  # fmt: skip
    near = [(t, 128, n) for t in (1000, 20000) for n in (1024, 8192)]
    per = [rows[s] / (s[1] * s[2]) for s in near]
    model = ew.fit_class_models(
        [r for r in ew.load_measurements(HOST_CSV) if r.model_class == "gather"]
    )["gather"]
    X = ew.measurement_features([ew.Measurement("gather", "f32", (5000, 128, 4096), 1.0)])
    pred = float(model.predict(X)[0]) / (128 * 4096)
    assert 0.7 * min(per) < pred < 1.3 * max(per)


def test_a_gather_from_a_large_table_costs_more() -> None:
    """Random rows of a table beyond the caches miss where a small table's hit: in the Zen 5
    reference 8,192 rows of 512 f32 took 2.3x as long from 20,000 rows as from 1,000 (704 vs
    304 us), and the model fitted on it prices a lookup of 4,096 rows of 256 (a size it has
    not measured) from a 32 MiB table at least 1.5x the same from 1,000 rows."""
    zen5 = HOST_CSV.with_name("host_reference_zen5.csv")
    gathers = [r for r in ew.load_measurements(zen5) if r.model_class == "gather"]
    f32 = {r.shape: r.latency_us for r in gathers if r.dtype == "f32"}
    assert f32[(20000, 512, 8192)] > 2 * f32[(1000, 512, 8192)]
    model = ew.fit_class_models(gathers)["gather"]
    small, large = model.predict(
        ew.measurement_features(
            [ew.Measurement("gather", "f32", (t, 256, 4096), 1.0) for t in (1000, 32000)]
        )
    )
    assert large > 1.5 * small


def test_a_gathered_sum_is_a_row_gather_then_a_library_reduce(amd_reference_host: Path) -> None:
    """An embedding lookup summed over its ids (64x8 rows of 128 f32): XLA:CPU (jax 0.10.2)
    writes the 512 gathered rows in a loop kernel, then sums them in a YNNPACK reduce, which
    takes no gather. perf-fusion groups it so, and the gather's kernel costs about the
    reference's standalone gather of 512 rows (plus its index arithmetic)."""
    import stablehlo_perf as sp

    table = jax.ShapeDtypeStruct((5000, 128), jnp.float32)
    ids = jax.ShapeDtypeStruct((64, 8), jnp.int32)
    rep = sp.analyze(jax.jit(lambda t, i: t[i].sum(axis=1)).lower(table, ids), target="host")
    (gather,) = [o for o in rep.report.ops if o.name == "stablehlo.gather"]
    (reduce,) = [o for o in rep.report.ops if o.name == "stablehlo.reduce"]
    (group,) = [g for g in rep.report.fusion_groups if gather.id in g["ops"]]
    (summed,) = [g for g in rep.report.fusion_groups if reduce.id in g["ops"]]
    assert (group["kind"], summed["kind"]) == ("loop", "input") and group is not summed
    (alone,) = _ops(
        lambda t, i: t[i], table, jax.ShapeDtypeStruct((512,), jnp.int32), name="gather"
    )
    svc = ew.LearnedLatencyModel(data={"host": HOST_CSV})
    (rows,) = svc.predict([alone], load_target("host"))
    assert rows.latency_ns * (1 - 1e-12) <= group["latency_ns"] < 1.5 * rows.latency_ns


def test_a_one_op_kernel_reports_its_ops_cost(amd_reference_host: Path) -> None:
    """A scatter-add of 2048 rows into zeros of 5000x128 f32: its kernel is the scatter alone,
    priced by its model (the reference's movement rows: 107 us), which the fusion-group table
    reports too; it had listed the group's roofline, 6.2 MB at the reference's 31.6 GB/s
    (195 us), while the total used the op's own price."""
    import stablehlo_perf as sp

    zeros = jax.ShapeDtypeStruct((2048, 128), jnp.float32)
    idx = jax.ShapeDtypeStruct((2048,), jnp.int32)
    lowered = jax.jit(lambda g, i: jnp.zeros((5000, 128)).at[i].add(g)).lower(zeros, idx)
    rep = sp.analyze(lowered, target="host").report
    (scatter,) = [o for o in rep.ops if o.name == "stablehlo.scatter"]
    (group,) = [g for g in rep.fusion_groups if scatter.id in g["ops"]]
    assert group["ops"] == [scatter.id] and "roofline" not in group["model"]
    assert group["latency_ns"] == pytest.approx(scatter.latency_ns)
    roofline_ns = group["bytes"] / load_target("host").memory_bandwidth_gbps
    assert group["latency_ns"] < 0.7 * roofline_ns


def test_a_sums_own_rate_is_not_charged_twice(amd_reference_host: Path) -> None:
    """A column sum of 8x16384 f32 is one YNNPACK kernel with its init constant: its bytes
    move at the rate its own measured time gives (`fusion_cost._library_reduce_bandwidth`),
    so the kernel costs that time; adding the sum's compute on top had priced it at 1.5x
    (59.2 us on the Xeon reference against its 38.7, and 28-35 us measured in loops)."""
    import stablehlo_perf as sp
    from stablehlo_perf.analysis.elementwise import LearnedLatencyModel

    x = jax.ShapeDtypeStruct((8, 16384), jnp.float32)
    rep = sp.analyze(jax.jit(lambda v: jnp.sum(v, axis=0)).lower(x), target="host").report
    (group,) = [g for g in rep.fusion_groups if g["latency_ns"] > 0]
    (reduce,) = _ops(lambda v: jnp.sum(v, axis=0), x, name="reduce")
    (own,) = LearnedLatencyModel().predict([reduce], load_target("host"))
    assert group["latency_ns"] == pytest.approx(own.latency_ns, rel=0.02)


def test_a_column_variance_streams_its_input_twice(amd_reference_host: Path) -> None:
    """XLA:CPU fuses a variance's mean and sum of squares into one YNNPACK kernel: over axis 0
    it reads the input once for each (8x16384 f32 in loops on the Xeon VM: 126-134 us, where
    one pass was priced 61), so the kernel costs at least two of the mean's sums; over rows
    it finishes each row's two sums while the row is in the L1, one pass."""
    import stablehlo_perf as sp
    from stablehlo_perf.analysis.elementwise import LearnedLatencyModel

    def price(axis: int, shape: tuple[int, int]) -> tuple[float, float]:
        x = jax.ShapeDtypeStruct(shape, jnp.float32)
        rep = sp.analyze(jax.jit(lambda v: jnp.var(v, axis=axis)).lower(x), target="host").report
        reduces = [o.id for o in rep.ops if o.name == "stablehlo.reduce"]
        (group,) = [g for g in rep.fusion_groups if set(reduces) <= set(g["ops"])]
        (own,) = LearnedLatencyModel().predict(
            _ops(lambda v: jnp.sum(v, axis=axis), x, name="reduce"), load_target("host")
        )
        return group["latency_ns"], own.latency_ns

    both, one = price(0, (8, 16384))
    assert both > 2 * one
    both, one = price(1, (4096, 64))
    assert both < 2 * one


def test_reduce_features_say_which_axes_are_reduced() -> None:
    """1 for the minor axis, 0 for leading axes only (a column sum), 0.5 for an axis with a
    kept dim before it (a middle axis); dims of 1 count as neither."""
    slot = _I["pad_ratio_8x128"]
    assert ew.reduce_features((64, 128), (1,), 4.0)[slot] == 1.0
    assert ew.reduce_features((64, 128), (0,), 4.0)[slot] == 0.0
    assert ew.reduce_features((4, 28, 28, 16), (0, 1, 2), 4.0)[slot] == 0.0
    assert ew.reduce_features((1000,), (0,), 4.0)[slot] == 1.0
    assert ew.reduce_features((64, 8, 128), (1,), 4.0)[slot] == 0.5
    assert ew.reduce_features((8, 4, 16, 5), (0, 2), 4.0)[slot] == 0.5
    assert ew.reduce_features((1, 8, 128), (1,), 4.0)[slot] == 0.0
    rows = ew.measurement_features(
        [
            ew.Measurement(op, "f32", (64, 8, 128), 1.0)
            for op in ("reduce", "sum_axis0", "sum_axis1")
        ]
    )
    assert rows[:, slot].tolist() == [1.0, 0.0, 0.5]
    assert [ew.Measurement(op, "f32", (8, 8), 1.0).model_class for op in ("sum_axis0", "argmax_axis0")] == [
        "reduction", "reduce_variadic",
    ]  # fmt: skip


def test_wide_column_reduces_are_told_apart() -> None:
    """One leading axis reduced, more than 16384 elements kept (dims of 1 aside): YNNPACK's
    slow column reduce; not two leading axes, a middle or the minor axis. Only a library
    (YNNPACK) reduce gets the code: an i32 sum of the same shape, an argmax's rows, keep 0."""
    assert ew.wide_column_reduce((8, 16385), (0,))
    assert not ew.wide_column_reduce((8, 16384), (0,))
    assert ew.wide_column_reduce((8, 2, 16384), (0,))
    assert ew.wide_column_reduce((1, 8, 16385), (1,))
    assert not ew.wide_column_reduce((4, 4, 16385), (0, 1))
    assert not ew.wide_column_reduce((8, 16385, 4), (1,))
    assert not ew.wide_column_reduce((16385, 8), (1,))
    slot = _I["pad_ratio_8x128"]
    x = jax.ShapeDtypeStruct((8, 16385), jnp.float32)
    (f32,) = _ops(lambda v: jnp.sum(v, axis=0), x, name="reduce")
    (i32,) = _ops(lambda v: jnp.sum(v, axis=0), x.update(dtype=jnp.int32), name="reduce")
    assert ew.features([f32, i32])[:, slot].tolist() == [-1.0, 0.0]
    rows = ew.measurement_features(
        [ew.Measurement(op, "f32", (8, 16385), 1.0) for op in ("sum_axis0", "argmax_axis0")]
    )
    assert rows[:, slot].tolist() == [-1.0, 0.0]


def test_a_column_sum_past_ynnpacks_tile_costs_an_order_more() -> None:
    """Sums over axis 0 of 8 x 16385 and 64 x 16385 f32, which the Xeon reference never
    measured, against 8 x 16384 and 64 x 16384: in loops on that VM (2026-12-06) 364-404 us
    against 38 for the 8 rows (the reference's 8 x 16384 row: 37.5 us), 2485 for 64 rows. The
    model without the wide-column code priced the pair alike (40 and 38.7 us) from its
    neighbours."""
    xeon = Path(ew.__file__).resolve().parent / "data" / "host_reference_xeon.csv"
    model = ew.fit_class_models(
        [r for r in ew.load_measurements(xeon) if r.model_class == "reduction"]
    )["reduction"]
    shapes = [(8, 16384), (8, 16385), (64, 16384), (64, 16385)]
    X = ew.measurement_features([ew.Measurement("sum_axis0", "f32", s, 1.0) for s in shapes])
    narrow8, wide8, narrow64, wide64 = model.predict(X)
    assert 30 < narrow8 < 50
    assert wide8 > 4 * narrow8 and wide64 > 4 * narrow64


@pytest.mark.parametrize("op", ["sum", "argmax"])
def test_row_and_column_reduces_cost_what_the_reference_measured(op: str) -> None:
    """At every 2-D shape the reference measured both ways, the service's row / column price
    ratio follows the measured one (median over shapes within 25%)."""
    rows = ew.load_measurements(HOST_CSV)
    minor, cols = ("reduce", "sum_axis0") if op == "sum" else ("argmax", "argmax_axis0")
    t = {(r.op, r.shape): r.latency_us for r in rows if r.dtype == "f32"}
    shapes = [s for (o, s) in t if o == cols and len(s) == 2 and (minor, s) in t]
    assert len(shapes) >= 10
    models = ew.fit_class_models(
        [r for r in rows if r.model_class == ew.Measurement(minor, "f32", (1,), 1.0).model_class]
    )
    model = next(iter(models.values()))
    meas = [ew.Measurement(o, "f32", s, 1.0) for s in shapes for o in (minor, cols)]
    pred = model.predict(ew.measurement_features(meas)).reshape(-1, 2)
    measured = np.array([[t[(minor, s)], t[(cols, s)]] for s in shapes])
    ratio = (pred[:, 1] / pred[:, 0]) / (measured[:, 1] / measured[:, 0])
    assert 0.75 < float(np.median(ratio)) < 1.33


def test_sweep_measures_wide_column_sums_and_middle_axis_sums() -> None:
    """Column sums past 16,384 columns (XLA:CPU's slow path) and rank-3 middle-axis sums are
    in the quick sweep, in both dtypes."""
    specs = sweeps.sweep(quick=True, ops=["sum_axis0", "sum_axis1"])
    for dtype in ("f32", "bf16"):
        cols = {s.shape for s in specs if s.op == "sum_axis0" and s.dtype == dtype}
        assert {(8, 16384), (8, 20480), (32, 65536)} <= cols
        middle = [s.shape for s in specs if s.op == "sum_axis1" and s.dtype == dtype]
        assert len(middle) == 20 and all(len(m) == 3 and math.prod(m) <= 2**22 for m in middle)


def test_sweep_measures_narrow_rows_for_loop_ops() -> None:
    """Rows whose last dim leaves a vector tail run XLA:CPU's loops several times slower per
    element; the sweep measures them for loop ops (not for library calls, nor transposes)."""
    narrow = set(sweeps.narrow_shapes(quick=True))
    assert len(narrow) == 16 and all(s[-1] <= 600 for s in narrow)
    specs = sweeps.sweep(quick=True)
    for op, measured in (("add", True), ("reduce", True), ("sort", False), ("transpose", False)):
        shapes = {s.shape for s in specs if s.op == op and s.dtype == "f32"}
        assert (narrow <= shapes) is measured, op


def test_sweep_measures_layer_shapes_but_not_for_sorts_and_ffts() -> None:
    """Rows of a layer's width at 2^18-2^22 elements, in both dtypes, for every op of the
    elementwise grid but sorts and FFTs; ops the quick sweep caps stop at the cap."""
    layers = set(sweeps.layer_shapes(quick=True))
    assert len(layers) == 15 and (4096, 256) in layers and (1024, 4096) in layers
    assert {math.prod(s) for s in layers} == {2**18, 2**20, 2**22}
    specs = sweeps.sweep(quick=True)
    for op, dtype, expected in (
        ("reduce", "bf16", layers),
        ("tanh", "f32", layers),
        ("argmax", "f32", {s for s in layers if math.prod(s) <= 2**20}),
        ("sort", "f32", set()),
        ("fft", "f32", set()),
    ):
        assert {s.shape for s in specs if s.op == op and s.dtype == dtype} & layers == expected
    assert len({s.key for s in specs}) == len(specs)


def test_sweep_gathers_draw_sizes_between_the_grid_within_its_caps() -> None:
    """The quick sweep's gathers: the 28 grid shapes a dtype (four index counts of four
    widths of two tables, less those whose result passes GATHER_MAX_OUT) and 24 random draws
    off the grid, the same on every call, none beyond the result or table caps."""
    quick = sweeps.gather_specs(("f32",), quick=True)
    assert quick == sweeps.gather_specs(("f32",), quick=True)
    off_grid = [s.shape for s in quick if s.shape[0] not in (1000, 20000)]
    assert len(quick) == 28 + 24 and len(off_grid) == 24
    assert all(w * n <= sweeps.GATHER_MAX_OUT for _, w, n in off_grid)
    assert all(r * w * 4 <= sweeps.GATHER_MAX_TABLE_BYTES for r, w, _ in off_grid)
    assert len({w for _, w, _ in off_grid} - {1, 16, 128, 512}) > 10


def test_a_row_with_a_vector_tail_costs_more_per_element() -> None:
    """An f32 add of 4096 rows of 7 (a shape the reference did not measure: its narrow rows
    are 3, 6, 10, ...) is priced at over three times the per-element cost of an aligned add
    of similar size (this VM, in a loop: 4248x7 1.9 ns per element, 1532x64 0.3)."""
    rows = ew.load_measurements(HOST_CSV)
    model = ew.fit_class_models([r for r in rows if r.model_class == "binary"])["binary"]
    shapes = [(4096, 7), (448, 64)]
    x = ew.measurement_features([ew.Measurement("add", "f32", s, 1.0) for s in shapes])
    per_elem = model.predict(x) / np.array([math.prod(s) for s in shapes])
    assert per_elem[0] > 3 * per_elem[1]


def test_sweep_transposes_move_the_data() -> None:
    """Inside the timing loop XLA may give the carried result the transposed layout, which
    turns a transpose into a plain copy; the sweep flattens it, so the rows time the data
    really moving. The values are the transposed tensor's, in row-major order."""
    fn, (x,) = sweeps.op_and_inputs(sweeps.Spec("transpose", "f32", (64, 96)))
    out = np.asarray(fn(x))
    assert x.shape == (96, 64) and out.shape == (64 * 96,)
    np.testing.assert_array_equal(out, np.asarray(x).T.reshape(-1))


def test_transposes_that_move_the_minor_axis_have_a_model_of_their_own() -> None:
    """A transpose that changes which dim is minor reads one element per cache line (the
    reference: 832x832 f32 573 us, a copy of it 114 us); one that keeps the minor dim
    copies contiguous rows, and one that only moves unit dims is a reshape."""
    f32 = jnp.float32
    (swap,) = _ops(lambda v: v.T, jax.ShapeDtypeStruct((700, 900), f32), name="transpose")
    (rows,) = _ops(
        lambda v: jnp.transpose(v, (1, 0, 2)), jax.ShapeDtypeStruct((8, 300, 256), f32),
        name="transpose",
    )  # fmt: skip
    (unit,) = _ops(
        lambda v: jnp.transpose(v, (0, 2, 1)), jax.ShapeDtypeStruct((64, 1, 96), f32),
        name="transpose",
    )  # fmt: skip
    assert [ew.op_model_class(o) for o in (swap, rows, unit)] == [
        "transpose", "movement", "movement",
    ]  # fmt: skip
    svc = ew.LearnedLatencyModel(data={"host": HOST_CSV})
    c_swap, c_rows, _ = svc.predict([swap, rows, unit], load_target("host"))
    assert (c_swap.model, c_rows.model) == ("hgb-host-transpose", "hgb-host-movement")
    # Same bytes (630,000 and 614,400 f32): the swap costs several copies.
    assert c_swap.latency_ns > 3 * c_rows.latency_ns


def test_a_loop_that_moves_the_minor_axis_and_computes_is_priced_by_its_elements() -> None:
    """XLA:CPU runs a transpose fused with arithmetic element by element, reading across its
    input (`Target.transpose_fused_ns_per_element`, runtime/fused_probes.py; 0.57 ns an
    element on the Zen 4 reference): 64x256x128 f32 over its last two axes, scaled, costs its
    2,097,152 elements at that rate, where the member rule said the transpose plus a
    multiply (585 us). 8x512x512 reads elements 2 KiB apart, which alias in the L1 cache: the
    aliased rate (1.45 ns on the Zen 4's; the strided one where a reference has none). A
    transpose that keeps the minor axis, or one computing nothing, keeps the member rule."""
    host = load_target("host")
    rate = host.transpose_fused_ns_per_element  # the header's (test_runtime_timing checks)
    if not rate:
        pytest.skip("no calibration of this machine: the host target has no measured rate")
    aliased = host.transpose_fused_aliased_ns_per_element or rate
    x3 = jax.ShapeDtypeStruct((64, 256, 128), jnp.float32)
    x4 = jax.ShapeDtypeStruct((8, 128, 16, 64), jnp.float32)

    def kernel(fn, x):
        [group] = sp.perf_jit(fn, target="host").analyze(x).report.fusion_groups
        return group

    swapped = kernel(lambda v: jnp.transpose(v, (0, 2, 1)) * 2, x3)
    assert swapped["model"].endswith("+strided-transpose")
    assert swapped["latency_ns"] == pytest.approx(2_097_152 * rate + host.launch_overhead_ns)
    x_wide = jax.ShapeDtypeStruct((8, 512, 512), jnp.float32)
    wide = kernel(lambda v: jnp.transpose(v, (0, 2, 1)) * 2, x_wide)
    # Its footprint, 512 reads 2 KiB apart (1 MiB), is half the project's VMs' 2 MiB L2s: the
    # aliased rate there; on a machine of a smaller L2 with a measured rate past it, from the
    # aliased rate toward that one, geometrically over two doublings of the footprint.
    past, l2 = host.transpose_fused_l2_ns_per_element, host.onchip_mib.get("l2", 0.0) * 2**20
    if past > aliased and l2 and 2**20 > l2 / 2:
        aliased *= (past / aliased) ** min(math.log2(2**20 / (l2 / 2)) / 2, 1.0)
    assert wide["latency_ns"] == pytest.approx(2_097_152 * aliased + host.launch_overhead_ns)
    heads = kernel(lambda v: jnp.transpose(v, (0, 2, 1, 3)) * 0.125, x4)
    assert "strided" not in heads["model"]
    alone = kernel(lambda v: jnp.transpose(v, (0, 2, 1)), x3)
    assert "strided" not in alone["model"]
    assert alone["latency_ns"] < swapped["latency_ns"]


def test_an_outer_product_is_a_multiply_fused_into_one_loop_kernel() -> None:
    """XLA's simplifier makes a dot_general that contracts only unit dimensions (or none) a
    multiply of broadcasts, and XLA:CPU fuses it with its neighbours: the per-example weight
    gradient `vmap(grad)` of `tanh(x @ w)` compiles to one YNNPACK dot, its tanh (which XLA
    does not recompute for each element of the outer product that reads it) and one loop
    kernel (the outer product of the inputs and the error, written transposed), as the pass
    plans it.
    The report still names the op a dot_general. Its transpose computes from rows in cache:
    not priced at the strided rate of a transpose that reads a tensor across its rows."""

    def loss(w: jax.Array, x: jax.Array, y: jax.Array) -> jax.Array:
        return ((jnp.tanh(x @ w) - y) ** 2).sum()

    grads = jax.vmap(jax.grad(loss), in_axes=(None, 0, 0))
    f32 = jnp.float32
    args = [jax.ShapeDtypeStruct(s, f32) for s in ((64, 32), (32, 64), (32, 32))]
    lowered = jax.jit(grads).lower(*args)
    entry = lowered.compile().as_text().split("ENTRY")[1]
    kernels = [ln.split("=")[0] for ln in entry.splitlines() if " fusion(" in ln]
    assert len(kernels) == 3 and sum("ynn_fusion" in k for k in kernels) == 1
    report = sp.analyze(lowered, target="host").report
    groups = [g for g in report.fusion_groups if g["latency_ns"] > 0]
    assert len(groups) == 3
    names = [op.name for op in report.ops if op.model.startswith("fused-loop")]
    assert "stablehlo.dot_general" in names and "stablehlo.transpose" in names
    assert not any("strided" in g["model"] for g in groups)
    vectors = (jax.ShapeDtypeStruct((n,), f32) for n in (8, 4))
    (outer,) = _ops(lambda a, b: jnp.outer(a, b), *vectors, name="multiply")
    assert (outer.short_name, outer.op_class, outer.flops) == ("multiply", "binary", 32)


def test_a_fused_transposes_rate_grows_with_its_footprint_past_the_l2() -> None:
    """Rates by hand on a target of a 2 MiB L2 (strided 0.7 ns an element, aliased 0.6, past
    the L2 3.2): footprints (`transpose_footprint_bytes`) of half the L2 or less keep their
    rate, of twice it or more pay the L2 rate, and between go geometrically; a target with no
    rate past the L2 keeps the old two."""
    from dataclasses import replace

    from stablehlo_perf.analysis.fusion_cost import transpose_footprint_bytes as footprint

    assert footprint((2048, 1024), (1, 0), 4.0) == 2048 * 4096  # reads a page apart
    assert footprint((1000, 1000), (1, 0), 4.0) == 1000 * 64  # a line each
    assert footprint((4096, 192), (1, 0), 4.0) == 4096 * 256  # 768 B apart: gcd 256
    assert footprint((8, 512, 512), (0, 2, 1), 4.0) == 512 * 2048
    host = replace(
        load_target("host"),
        transpose_fused_ns_per_element=0.7,
        transpose_fused_aliased_ns_per_element=0.6,
        transpose_fused_l2_ns_per_element=3.2,
        onchip_mib={"l2": 2.0},
    )
    want = {
        (512, 512): 0.6,  # 1 MiB
        (1000, 1000): 0.7,
        (1024, 1024): 3.2,  # 4 MiB
        (1024, 512): math.sqrt(0.6 * 3.2),  # 2 MiB, 2 KiB apart: from the aliased rate
        (2048, 768): math.sqrt(0.7 * 3.2),  # 2 MiB, 3 KiB apart: from the strided rate
    }
    for shape, rate in want.items():
        x = jax.ShapeDtypeStruct(shape, jnp.float32)
        (t,) = _ops(lambda v: v.T, x, name="transpose")
        assert _fused_transpose_rate(t, host) == pytest.approx(rate), shape
    (t,) = _ops(lambda v: v.T, jax.ShapeDtypeStruct((1024, 1024), jnp.float32), name="transpose")
    assert _fused_transpose_rate(t, replace(host, transpose_fused_l2_ns_per_element=0.0)) == 0.6


def test_transpose_read_stride_is_the_input_stride_of_the_dim_made_minor() -> None:
    """A 2-D transpose of 512x1024 f32 reads down a column: 4,096 bytes apart; 64x256x128
    over its last two axes, 512; unit dims do not count (1x384x1 -> its middle dim, 4 bytes);
    and the probe's aliased cases alias, its strided ones do not."""
    from stablehlo_perf.analysis.fusion_cost import ALIASED_STRIDE_BYTES
    from stablehlo_perf.analysis.opinfo import transpose_read_stride_bytes as stride
    from stablehlo_perf.runtime.fused_probes import ALIASED_CASES, TRANSPOSE_CASES

    assert stride((512, 1024), (1, 0), 4.0) == 4096
    assert stride((64, 256, 128), (0, 2, 1), 4.0) == 512
    assert stride((1, 384, 1), (2, 1, 0), 4.0) == 4
    assert all(stride(s, p, 4.0) % ALIASED_STRIDE_BYTES == 0 for s, p in ALIASED_CASES)
    assert all(stride(s, p, 4.0) % ALIASED_STRIDE_BYTES for s, p in TRANSPOSE_CASES)


@pytest.mark.parametrize(
    ("eq", "lhs", "rhs", "layout"),
    [
        ("mk,kn->mn", (64, 32), (32, 48), 0),
        ("mk,nk->mn", (64, 32), (48, 32), 1),
        ("km,kn->mn", (32, 64), (32, 48), 2),
        ("km,nk->mn", (32, 64), (48, 32), 3),
        ("bmk,bkn->bmn", (4, 64, 32), (4, 32, 48), 0),
        ("bkm,bnk->bmn", (4, 32, 64), (4, 48, 32), 3),
    ],
)
def test_gemm_layout_reads_which_dims_are_minor(eq: str, lhs, rhs, layout: int) -> None:
    """2·[lhs is K x M] + [rhs is N x K], from the dot_general JAX lowers each einsum to."""
    f32 = jnp.float32
    (dot,) = _ops(
        lambda a, b: jnp.einsum(eq, a, b),
        jax.ShapeDtypeStruct(lhs, f32), jax.ShapeDtypeStruct(rhs, f32),
        name="dot_general",
    )  # fmt: skip
    assert ew.gemm_layout(dot) == layout
    assert ew.features([dot])[0, _I["operand_layout"]] == layout


def test_convolutions_have_models_apart_from_dots_and_grouped_ones_apart_from_dense() -> None:
    """XLA:CPU runs a depthwise 3x3 convolution on a path of its own: the reference measured
    ~2.6-3.4 ns per FLOP (1x56x56x64: 9.3 ms), a dense one ~0.015 (1x56x56x64 -> 64: 3.4 ms
    for 64x the FLOPs). One model over both, with the dots, swung the e2e depthwise program
    from -51% to +29% between neighbouring sizes."""
    f32 = jnp.float32
    x = jax.ShapeDtypeStruct((1, 40, 40, 32), f32)

    def conv(groups: int):
        w = jax.ShapeDtypeStruct((3, 3, 32 // groups, 32), f32)
        (op,) = _ops(
            lambda a, b: lax.conv_general_dilated(
                a, b, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"),
                feature_group_count=groups,
            ),
            x, w, name="convolution",
        )  # fmt: skip
        return op

    dense, depthwise = conv(1), conv(32)
    assert [ew.op_model_class(o) for o in (dense, depthwise)] == ["convolution", "grouped_conv"]
    svc = ew.LearnedLatencyModel(data={"host": HOST_CSV})
    c_dense, c_dw = svc.predict([dense, depthwise], load_target("host"))
    assert (c_dense.model, c_dw.model) == ("hgb-host-convolution", "hgb-host-grouped_conv")
    # 1/32 of the FLOPs, yet not cheaper: the depthwise path runs ~175x fewer FLOPs per ns.
    assert c_dw.latency_ns > c_dense.latency_ns


def test_a_volumetric_convolution_is_priced_from_the_3d_rows_not_as_its_implicit_gemm() -> None:
    """XLA:CPU runs a 3x3x3 window on a path of its own. Two layers of one implicit GEMM
    (M = 9216, N = 24, K = 432), timed in a loop on the Zen 4 VM (2026-12-07): 2x8x24x24x16
    with a 3x3x3 window 6.9-8.5 ms, 16x24x24x48 with a 3x3 one 1.84-1.97 ms; neither shape
    is a row of the reference. Every 2-D row holds 2 in the spatial slot, a 3-D one 3."""
    f32 = jnp.float32

    def conv(lhs: tuple[int, ...], rhs: tuple[int, ...], layout: tuple[str, str, str]):
        (op,) = _ops(
            lambda a, b: lax.conv_general_dilated(
                a, b, (1,) * (len(lhs) - 2), "SAME", dimension_numbers=layout
            ),
            jax.ShapeDtypeStruct(lhs, f32), jax.ShapeDtypeStruct(rhs, f32), name="convolution",
        )  # fmt: skip
        return op

    volume = conv((2, 8, 24, 24, 16), (3, 3, 3, 16, 24), ("NDHWC", "DHWIO", "NDHWC"))
    image = conv((16, 24, 24, 48), (3, 3, 48, 24), ("NHWC", "HWIO", "NHWC"))
    X = ew.features([volume, image])
    assert X[:, _I["d1"]].tolist() == [9216, 9216] and X[:, _I["d3"]].tolist() == [432, 432]
    assert X[:, _I[ew._SPATIAL_SLOT]].tolist() == [3.0, 2.0]
    svc = ew.LearnedLatencyModel(data={"host": cf.shipped_file("host_reference_zen4.csv")})
    host = load_target("host")
    c3, c2 = svc.predict([volume, image], host)
    assert 6.9e6 / 1.25 < c3.latency_ns < 8.5e6 * 1.25
    assert 1.84e6 / 1.25 < c2.latency_ns < 1.97e6 * 1.25
    # A reference without 3-D rows (the Zen 5 VM's) says its price of one is an extrapolation.
    zen5 = ew.LearnedLatencyModel(data={"host": cf.shipped_file("host_reference_zen5.csv")})
    flags = [c.extra["extrapolated"] for c in (c3, c2, *zen5.predict([volume, image], host))]
    assert flags == [False, False, True, False]


def _pool_grad(shape: tuple[int, ...]):
    """The select_and_scatter op of a max pool's gradient, (N, H, W, C, K, stride), SAME."""
    nb, hw, _, c, k, s = shape

    def vjp(x: jax.Array, g: jax.Array) -> jax.Array:
        pool = lambda v: lax.reduce_window(v, -jnp.inf, lax.max, (1, k, k, 1), (1, s, s, 1), "SAME")
        return jax.vjp(pool, x)[1](g)[0]

    out = -(-hw // s)
    x, g = jax.ShapeDtypeStruct((nb, hw, hw, c), jnp.float32), jax.ShapeDtypeStruct((nb, out, out, c), jnp.float32)  # fmt: skip
    (op,) = _ops(vjp, x, g, name="select_and_scatter")
    return op


def test_a_max_pools_gradient_is_priced_from_the_pool_grad_rows() -> None:
    """XLA:CPU runs a select_and_scatter an element at a time (a reduce_window of values
    and indices, then a scatter): 20-50 ns a source element, where the roofline priced the
    op at 0.3 ms against 20 ms. Its features are a pool's, on the padded operand JAX hands
    it; three shapes none of the rows has, timed in loops beside the sentinel ops on the Zen
    4 VM (2026-12-07, three runs) and scaled to the reference's level: 2x82x82x45 2x2/2
    3.26-3.76 ms, 1x48x48x30 3x3/1 2.01-2.21 ms, 6x27x27x16 3x3/2 0.70-0.75 ms."""
    ops = [
        _pool_grad(s) for s in ((2, 82, 82, 45, 2, 2), (1, 48, 48, 30, 3, 1), (6, 27, 27, 16, 3, 2))
    ]
    assert [op.operands[0].shape for op in ops] == [
        (2, 82, 82, 45),
        (1, 50, 50, 30),
        (6, 29, 29, 16),
    ]
    row = ew.measurement_features([ew.Measurement("pool_grad", "f32", (1, 48, 48, 30, 3, 1), 1.0)])
    assert ew.features(ops[1:2])[0].tolist() == row[0].tolist()
    svc = ew.LearnedLatencyModel(data={"host": cf.shipped_file("host_reference_zen4.csv")})
    costs = svc.predict(ops, load_target("host"))
    for c, (lo, hi) in zip(
        costs, ((3.26e6, 3.76e6), (2.01e6, 2.21e6), (0.70e6, 0.75e6)), strict=True
    ):
        assert lo / 1.25 < c.latency_ns < hi * 1.25
        assert c.model == "hgb-host-select_and_scatter"


def test_the_volumetric_sweep_is_a_grid_and_seeded_random_layers() -> None:
    """conv3d rows: a grid of 1x1x1 and 3x3x3 layers (stride 2 for one volume, 1x1x1 ones
    too: a strided 1x1x1 layer is no product) and 192 random layers, the same on every call,
    each within the grid's work cap."""
    specs = sweeps.sweep(quick=True, ops=["conv3d"])
    assert specs == sweeps.sweep(quick=True, ops=["conv3d"])
    shapes = {s.shape for s in specs}
    assert sweeps.volume_draws(192) <= shapes and len(shapes) == len(specs)
    assert (1, 8, 32, 32, 16, 1, 16, 2) in shapes and (2, 8, 16, 16, 16, 3, 16, 1) in shapes
    macs = [nb * d * h * w * c * o * k**3 / s**3 for nb, d, h, w, c, k, o, s in shapes]
    assert max(macs) <= 2**26 and {k for *_, k, _, _ in shapes} == {1, 3, 5}


def test_narrow_products_are_priced_from_their_own_rows() -> None:
    """int8 (int32-accumulating) and bf16 products run at rates of their own (AMX/VNNI on the
    project's Xeon VM: a 4x64x256 @ 4x256x128 int8 program 32 us, f32 190 us): fitted on f32
    rows at 20 FLOP/ns and int8 rows at 120, an unseen int8 product costs ~1/6 of its f32."""
    rows = [
        ew.Measurement("dot_general", dt, (b, m, n, k), 1.0 + 2 * b * m * n * k / rate / 1e3)
        for dt, rate in (("f32", 20.0), ("i8", 120.0))
        for b in (1, 4) for m in (16, 64, 256) for n in (32, 128, 512) for k in (64, 256)
    ]  # fmt: skip
    model = ew.fit_class_models(rows)["matmul"]
    unseen = [ew.Measurement("dot_general", dt, (2, 128, 256, 128), 1.0) for dt in ("f32", "i8")]
    f32, i8 = model.predict(ew.measurement_features(unseen))
    flops = 2 * 2 * 128 * 256 * 128
    assert f32 == pytest.approx(1.0 + flops / 20e3, rel=0.2)
    assert i8 == pytest.approx(1.0 + flops / 120e3, rel=0.2)


def test_a_calibration_of_copies_alone_prices_transposes_and_gathers_by_them(
    tmp_path: Path,
) -> None:
    """Where only copies were measured, a transpose and a gather borrow the movement model,
    scaled by the roofline ratio to a copy of the same tensor, and say so."""
    csv = tmp_path / "copies.csv"
    sizes = [(64, 64 * k) for k in range(1, 13)]
    csv.write_text(
        "op,dtype,shape,measured_us_median\n"
        + "".join(f"copy,f32,{a}x{b},{0.5 + a * b * 8 / 30e3:.4f}\n" for a, b in sizes)
    )
    f32 = jnp.float32
    (swap,) = _ops(lambda v: v.T, jax.ShapeDtypeStruct((300, 500), f32), name="transpose")
    (take,) = _ops(
        lambda t, i: t[i],
        jax.ShapeDtypeStruct((1000, 128), f32), jax.ShapeDtypeStruct((256,), jnp.int32),
        name="gather",
    )  # fmt: skip
    svc = ew.LearnedLatencyModel(data={"host": csv})
    c_swap, c_take = svc.predict([swap, take], load_target("host"))
    assert c_swap.model == "hgb-host-movement→transpose(scaled)"
    assert c_take.model == "hgb-host-movement→gather(scaled)"
    # 150,000 f32 copied at ~30 GB/s in the rows: ~40 us; a transpose moves the same bytes.
    assert 20e3 < c_swap.latency_ns < 80e3


def test_small_loops_are_the_ones_xla_cpu_compiles_into_one_kernel():
    """Our rule against XLA's own decision: its compiled HLO tags a hoisted loop's call
    `xla_cpu_small_call`; the analysis names such a loop `while(xN, one kernel)`."""
    import jax
    import jax.numpy as jnp
    import stablehlo_perf as sp
    from jax import lax

    def tanh_loop(x):
        return lax.fori_loop(0, 100, lambda i, v: v * 0.5 + jnp.tanh(v), x)

    def two_carries(x, y):
        return lax.fori_loop(0, 100, lambda i, c: (c[0] * 0.5 + c[1], c[1]), (x, y))[0]

    def with_dot(x):
        return lax.fori_loop(0, 10, lambda i, v: jnp.tanh(v @ v), x)

    def with_sort(x):
        return lax.fori_loop(0, 10, lambda i, v: jnp.sort(v) * 0.5, x)

    def scatter_at(positions):
        def fn(x):
            def body(i, v):
                return v.at[jnp.stack([(i + k) % x.shape[0] for k in range(positions)])].add(1.0)

            return lax.fori_loop(0, 10, body, x)

        fn.__name__ = f"scatter_at_{positions}"
        return fn

    def scatter_row(x):  # one index vector into a (4, 8): a row
        return lax.fori_loop(0, 10, lambda i, v: v.at[i % 4].add(1.0), x)

    cases = [(tanh_loop, (n,)) for n in (1, 64, 123, 124, 256)]
    cases += [(two_carries, (n,), (n,)) for n in (80, 81, 82, 84)]
    cases += [(with_dot, (4, 4)), (with_dot, (8, 8)), (with_sort, (8,))]
    cases += [(scatter_at(1), (16,)), (scatter_at(2), (16,)), (scatter_row, (4, 8))]
    for fn, *shapes in cases:
        args = [jnp.ones(s) for s in shapes]
        xla = "xla_cpu_small_call" in jax.jit(fn).lower(*args).compile().as_text()
        res = sp.perf_jit(fn, target="host").analyze(*args)
        (loop,) = [o for o in res.report.ops if o.name == "stablehlo.while"]
        assert loop.model.endswith("one kernel)") == xla, (fn.__name__, shapes, loop.model)


def test_small_loop_member_prices_by_hand():
    import dataclasses

    from stablehlo_perf.analysis.fusion_cost import member_compute_ns
    from stablehlo_perf.analysis.opinfo import OpInfo, TensorType
    from stablehlo_perf.analysis.service import OpCost
    from stablehlo_perf.analysis.small_loops import (
        REFERENCE_ELEMENTS,
        is_small_loop,
        loop_member_ns,
        reference_op,
    )
    from stablehlo_perf.analysis.targets import load_target

    target = dataclasses.replace(load_target("host"), small_loop_latency_ns={})
    t = TensorType((64,), "f32")
    tanh = OpInfo.build(0, "stablehlo.tanh", [t], [t])
    ref = reference_op(tanh)
    assert ref.operands[0].shape == (REFERENCE_ELEMENTS,) and ref.element_type == "f32"
    # Reference time: launch + its bytes at the target's bandwidth + 2 ns per element.
    memory = ref.bytes / target.memory_bandwidth * 1e9
    ref_ns = target.launch_overhead_ns + memory + 2.0 * REFERENCE_ELEMENTS
    assert member_compute_ns(ref, OpCost(0, ref_ns, 0, "m"), target) == pytest.approx(
        2.0 * REFERENCE_ELEMENTS
    )
    own = OpCost(0, 150.0, 0, "m")
    # Without latencies (no probe): 2 ns for each of its 64 elements.
    assert loop_member_ns(tanh, own, OpCost(0, ref_ns, 0, "m"), target) == pytest.approx(128.0)
    # Not elementwise: its own compute (no launch); a constant nothing.
    assert reference_op(OpInfo.build(0, "stablehlo.sort", [t], [t])) is None
    const = OpInfo.build(0, "stablehlo.constant", [], [t])
    assert loop_member_ns(const, OpCost(0, 50.0, 0, "free"), None, target) == 0.0
    # With the probe's latencies a trip waits for each op's result: one element of tanh
    # costs its latency, 64 elements that and 2 ns for each element past the first 16.
    from stablehlo_perf.analysis.small_loops import (
        format_latencies,
        op_latency_ns,
        parse_latencies,
    )

    table = {"base": 3.0, "add": 1.5, "tanh": 150.0, "exponential": 20.0, "sine": 30.0}
    assert parse_latencies(format_latencies(table)) == table
    assert parse_latencies("add=x") == {} and parse_latencies("add=-1") == {}
    timed = dataclasses.replace(target, small_loop_latency_ns=table)
    one = OpInfo.build(0, "stablehlo.tanh", [TensorType((1,), "f32")], [TensorType((1,), "f32")])
    ref_cost = OpCost(0, ref_ns, 0, "m")
    assert loop_member_ns(one, own, ref_cost, timed) == pytest.approx(150.0)
    assert loop_member_ns(tanh, own, ref_cost, timed) == pytest.approx(150.0 + 96.0)
    big = OpInfo.build(
        0, "stablehlo.tanh", [TensorType((100,), "f32")], [TensorType((100,), "f32")]
    )
    assert loop_member_ns(big, own, ref_cost, timed) == pytest.approx(150.0 + 168.0)
    # Fallbacks: an unmeasured transcendental the median of the measured ones, another float
    # op an add's, an integer op (the loop counter) nothing.
    s = TensorType((1,), "f32")
    assert op_latency_ns(OpInfo.build(0, "stablehlo.log", [s], [s]), table) == 30.0
    assert op_latency_ns(OpInfo.build(0, "stablehlo.negate", [s], [s]), table) == 1.5
    i = TensorType((), "i32")
    assert op_latency_ns(OpInfo.build(0, "stablehlo.add", [i, i], [i]), table) == 0.0
    # Up to 16 elements (scalar code) the probe's cost a trip on 16, pro rata, at least
    # the latency; the fallbacks as on one element; above 16 the vector rule as before.
    scalar = dataclasses.replace(
        target, small_loop_latency_ns={**table, "tanh@16": 480.0, "add@16": 8.0}
    )

    def sized(name: str, n: int) -> OpInfo:
        t = TensorType((n,), "f32")
        return OpInfo.build(0, f"stablehlo.{name}", [t], [t])

    assert loop_member_ns(sized("tanh", 8), own, ref_cost, scalar) == pytest.approx(240.0)
    assert loop_member_ns(sized("tanh", 4), own, ref_cost, scalar) == pytest.approx(150.0)
    assert loop_member_ns(sized("log", 16), own, ref_cost, scalar) == pytest.approx(480.0)
    assert loop_member_ns(sized("negate", 4), own, ref_cost, scalar) == pytest.approx(2.0)
    assert loop_member_ns(sized("tanh", 1), own, ref_cost, scalar) == pytest.approx(150.0)
    assert loop_member_ns(big, own, ref_cost, scalar) == pytest.approx(150.0 + 168.0)
    assert op_latency_ns(sized("log", 1), scalar.small_loop_latency_ns) == 30.0
    # 8 bytes per carried value; a sort keeps the loop thunked, a dot does not.
    add, tanh1 = OpInfo.build(0, "stablehlo.add", [s, s], [s]), one
    assert is_small_loop([add, tanh1], 984 + 21, 2) and not is_small_loop([add], 992 + 21, 2)
    sort = OpInfo.build(0, "stablehlo.sort", [s], [s])
    m = TensorType((4, 4), "f32")
    dot = OpInfo.build(0, "stablehlo.dot_general", [m, m], [m])
    assert not is_small_loop([sort, add], 16, 2) and is_small_loop([dot], 16, 2)
    # A scatter at one index vector is a dynamic-update-slice to XLA; at two, a scatter.
    v = TensorType((16,), "f32")

    def scatter(indices: tuple[int, ...], index_vector_dim: int) -> OpInfo:
        idx = TensorType(indices, "i32")
        upd = TensorType((indices[0] if len(indices) > 1 else 1,), "f32")
        return OpInfo.build(
            0, "stablehlo.scatter", [v, idx, upd], [v], {"index_vector_dim": index_vector_dim}
        )

    assert is_small_loop([scatter((1,), 1)], 16, 1) and is_small_loop([scatter((1, 1), 1)], 16, 1)
    assert not is_small_loop([scatter((2, 1), 1)], 16, 1)
    assert not is_small_loop([scatter((2,), 1)], 16, 1)  # index_vector_dim = rank: two scalars


def test_kernels_of_a_thunked_loop_cost_one_thunk_not_the_calibration_loops_three():
    """The calibrated floor is three thunks (the op and the sweep loop's counter and test);
    in a program's loop that XLA:CPU runs kernel by kernel the scalar test costs one, and the
    loop is its trips of body plus one more of its condition."""
    import jax.numpy as jnp
    import stablehlo_perf as sp
    from jax import lax
    from stablehlo_perf.analysis.targets import load_target

    host = load_target("host")
    if not host.calibrated:
        pytest.skip("the host target has no calibration of this machine")

    def newton(x):
        body = lambda i, c: (0.5 * (c[0] + c[1] / c[0]), c[1])
        return lax.fori_loop(0, 50, body, (x, x + 1.0))[0]

    rep = sp.perf_jit(newton, target="host").analyze(jnp.full((512,), 0.7)).report
    loop = next(o for o in rep.ops if o.name == "stablehlo.while")
    # 512 floats: too large to become one kernel; x and the counter's 0 copied before it
    assert loop.model == "while(x50, copies: 2 before)"
    test = next(o for o in rep.ops if o.name == "stablehlo.compare")
    # a scalar compare: one thunk and a few bytes, or, where the thunked-loop probe ran,
    # half of what a trip of its loop of no other kernel costs (the counter is the other)
    probed = host.thunked_loop.get("base")
    thunk = probed / 2 if probed is not None else host.launch_overhead_ns / 3
    assert thunk - 1e-9 <= test.latency_ns < thunk + 1.0  # (float rounding of the half)
    body = [o for o in rep.ops if not o.top_level and o.name != "stablehlo.compare"]
    from stablehlo_perf.analysis.opinfo import OpInfo, TensorType
    from stablehlo_perf.analysis.service import default_registry

    copied = [TensorType((512,), "f32"), TensorType((), "i32")]
    copies = default_registry().price(
        [OpInfo.build(0, "stablehlo.copy", [t], [t]) for t in copied], host
    )
    assert loop.latency_ns == pytest.approx(
        50 * sum(o.latency_ns for o in body)
        + 51 * test.latency_ns
        + sum(c.latency_ns for c in copies)
    )


def test_thunked_loop_probe_fit_recovers_its_parameters_by_hand() -> None:
    """Trips made from base 20 ns, 10 ns a kernel, 100 GB/s in a 48 KiB L1 and 50 beyond:
    the relative least squares gives them back exactly."""
    from stablehlo_perf.runtime.thunked_loop_probes import SIZES, fit_thunked_loops

    l1 = 48 * 1024
    rows = [(n, k, 20.0 + k * (10.0 + 8 * n / (100.0 if 8 * n <= l1 else 50.0))) for n, k in SIZES]
    fit = fit_thunked_loops(rows, l1)
    assert fit.base_ns == pytest.approx(20.0) and fit.kernel_ns == pytest.approx(10.0)
    assert fit.l1_gbps == pytest.approx(100.0) and fit.l2_gbps == pytest.approx(50.0)
    slow = fit.at_speed(2.0)  # a machine twice as slow: times double, bandwidths halve
    assert (slow.base_ns, slow.kernel_ns, slow.l1_gbps) == pytest.approx((40.0, 20.0, 50.0))


def test_kernels_of_a_thunked_loop_move_their_state_at_the_probes_cache_bandwidth(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`(a + b, a - b)` on 1024 f32 for 5 trips on unit-cpu (100 B/ns, 100 ns a kernel) with
    a thunked-loop probe of base 20 ns, 10 ns a kernel, 200 GB/s in a 48 KiB L1: each
    vector kernel's 12 KiB at 200 B/ns plus 10 ns (its roofline had no compute beyond its
    launch and bytes), the scalar counter and test 10 ns each (base / 2); the copies, priced
    by the copy model, and the condition's extra run unchanged."""
    import dataclasses

    import stablehlo_perf as sp
    from stablehlo_perf.passes import annotate_cycles

    unit = str(Path(__file__).resolve().parents[1] / "test_ir" / "Inputs" / "unit_cpu.toml")
    probed = dataclasses.replace(
        load_target(unit),
        calibrated=True,
        onchip_mib={"l1": 48 / 1024, "l2": 2.0},
        thunked_loop={"base": 20.0, "kernel": 10.0, "l1_gbps": 200.0, "l2_gbps": 100.0},
    )
    monkeypatch.setattr(annotate_cycles, "load_target", lambda name: probed)

    def f(a, b):
        return lax.fori_loop(0, 5, lambda i, c: (c[0] + c[1], c[0] - c[1]), (a, b))

    res = sp.analyze(jax.jit(f).lower(jnp.ones(1024), jnp.ones(1024)), target=unit)
    (loop_op,) = [o for o in res.report.ops if o.name == "stablehlo.while"]
    vector_op = 10.0 + 3 * 4096 / 200.0
    scalar = 20.0 / 2
    copy, scalar_copy = 100.0 + 2 * 4096 / 100.0, 100.0 + 2 * 4 / 100.0
    expected = 5 * (2 * vector_op + scalar) + 6 * scalar + (10 + 2) * copy + scalar_copy
    assert loop_op.latency_ns == pytest.approx(expected)
    # Past L1 a kernel's bytes move at the L2 rate; a loop carrying more than L2 streams.
    from stablehlo_perf.passes.small_loops import _in_loop_ns

    assert _in_loop_ns(100_000, 200_000, probed) == pytest.approx(10.0 + 100_000 / 100.0)
    assert _in_loop_ns(100_000, 3 * 2**20, probed) is None


def test_a_bf16_ynn_fusion_is_priced_as_its_f32_twin(amd_reference_host: Path) -> None:
    """A softmax of 4096 rows is one YNNPACK fusion on XLA:CPU (jax 0.10.2), which computes
    bf16 in f32: its bf16 kernel is priced as the f32 one (timed in loops: a bf16 layer norm
    of 4096x256 265 us, the f32 one 246), not from the bf16 members' own times, which
    include XLA's per-op widening and rounding (on the reference: 3.75x the f32 group's
    price; as twins 1.29x, the bf16 max-reduce still its own)."""
    import stablehlo_perf as sp
    from stablehlo_perf.passes import annotate_cycles

    def group_ns(dtype: object) -> float:
        x = jax.ShapeDtypeStruct((4096, 256), dtype)
        rep = sp.analyze(jax.jit(lambda x: jax.nn.softmax(x, -1)).lower(x), target="host")
        (group,) = [g for g in rep.report.fusion_groups if g["kind"] != "free"]
        return group["latency_ns"]

    f32 = group_ns(jnp.float32)
    assert 0.9 < group_ns(jnp.bfloat16) / f32 < 1.35
    monkeypatch = pytest.MonkeyPatch()
    with monkeypatch.context() as m:
        m.setattr(annotate_cycles, "_widened_in_ynn", lambda o, c, p, t, r, tg: (o, c, t))
        assert group_ns(jnp.bfloat16) > 2.0 * f32


def test_a_mean_merged_into_a_ynn_reduce_adds_little(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cross-entropy's mean over 4096 row losses is one reduce with the row sums (XLA's
    simplifier), in their YNNPACK fusion: that kernel is priced at the row sums' rate, within
    a few percent of the same fusion without the mean, not at the 4096-element mean's own
    measured rate applied to the rows' 4 MiB (1.46x, as the Zen 4 VM, whose reference this
    test takes)."""
    import stablehlo_perf as sp
    from stablehlo_perf.analysis import cc4cs

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    zen4 = cf.header_value(cf.shipped_file("host_reference_zen4.csv"), "machine")
    monkeypatch.setattr(cf, "machine_fingerprint", lambda: zen4)
    cc4cs.load_characterisation.cache_clear()
    cc4cs.load_module_lasso.cache_clear()

    x = jax.ShapeDtypeStruct((4096, 256), jnp.float32)

    def ynn_group_ns(fn: object) -> float:
        rep = sp.analyze(jax.jit(fn).lower(x, x), target="host").report
        return max(g["latency_ns"] for g in rep.fusion_groups)

    try:
        rows = ynn_group_ns(lambda x, y: -(jax.nn.log_softmax(x, -1) * y).sum(-1))
        mean = ynn_group_ns(lambda x, y: -(jax.nn.log_softmax(x, -1) * y).sum(-1).mean())
    finally:  # the Zen 4 characterisation stays out of later tests' caches
        cc4cs.load_characterisation.cache_clear()
        cc4cs.load_module_lasso.cache_clear()
    assert 0.95 * rows < mean < 1.05 * rows


def test_an_f16_exp_is_a_scalar_call_unless_its_kernel_broadcasts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """XLA:CPU runs an f16 exp as a scalar call an element in a kernel of its own or beside
    elementwise neighbours, and vectorised in f32 where the kernel broadcasts a scalar or a
    vector (256x256 in a loop, Zen 4 VM: exp 155 us, exp(x) * x 166, exp(x) + 1 26, the f32
    exp(x) + 1 25). On the Zen 4 reference (the machine pinned), 1024x1024: exp alone and
    exp(x) * x are priced near the median of the f16 exp rows of 2^20 elements (five shapes,
    1.7-2.3 ms at the file's speed), exp(x) + 1 near 0.73x the f32 rows' (1024x1024 in one
    run of loops: f16 exp(x) + 1 232 us, f32 exp 318; it moves half the bytes)."""
    from stablehlo_perf.analysis import cc4cs

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    zen4 = cf.shipped_file("host_reference_zen4.csv")
    machine = cf.header_value(zen4, "machine")
    monkeypatch.setattr(cf, "machine_fingerprint", lambda: machine)
    cc4cs.load_characterisation.cache_clear()
    cc4cs.load_module_lasso.cache_clear()
    shape = (1024, 1024)
    rows: dict[str, list[float]] = {}
    for r in ew.load_measurements(zen4):
        if r.op == "exponential" and math.prod(r.shape) == 2**20:
            rows.setdefault(r.dtype, []).append(r.latency_us)

    def kernel_us(fn: object) -> float:
        x = jax.ShapeDtypeStruct(shape, jnp.float16)
        rep = sp.analyze(jax.jit(fn).lower(x), target="host").report
        (group,) = [g for g in rep.fusion_groups if g["kind"] != "free"]
        return group["latency_ns"] / 1e3

    try:
        alone, times_x, plus_one = (
            kernel_us(jnp.exp),
            kernel_us(lambda x: jnp.exp(x) * x),
            kernel_us(lambda x: jnp.exp(x) + 1),
        )
    finally:  # the Zen 4 characterisation stays out of later tests' caches
        cc4cs.load_characterisation.cache_clear()
        cc4cs.load_module_lasso.cache_clear()
    f16, f32 = (float(np.median(rows[t])) for t in ("f16", "f32"))
    assert f16 > 3 * f32  # the rows themselves: scalar calls against vectors
    assert alone == pytest.approx(f16, rel=0.3)
    assert times_x == pytest.approx(f16, rel=0.3)
    assert plus_one == pytest.approx(0.73 * f32, rel=0.3)
