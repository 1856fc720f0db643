"""Learned latency models: CSV validation, features, fitting on fixed data, split by size,
the tpu-v4 accuracy target, and the service's fallbacks."""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.metrics import r2_score
from stablehlo_perf.analysis import calibration_files as cf
from stablehlo_perf.analysis import elementwise as ew
from stablehlo_perf.analysis.opinfo import OpInfo, TensorType
from stablehlo_perf.analysis.targets import load_target

TPU_CSV = Path(ew.__file__).resolve().parent / "data" / "tpu_v4_elementwise.csv"
HEADER = "op,dtype,shape,measured_us_median\n"


def _write(tmp_path: Path, text: str, name: str = "cal.csv") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def _op(name: str, shape: tuple[int, ...], dtype: str = "f16", n_in: int = 2) -> OpInfo:
    t = TensorType(shape, dtype)
    return OpInfo.build(0, f"stablehlo.{name}", [t] * n_in, [t])


# --- bad input ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("", "empty calibration file"),
        ("# only a comment\n\n", "empty calibration file"),
        ("op,dtype,shape\nadd,f32,8\n", ":1: missing column(s) measured_us_median"),
        (HEADER, "no measurement rows"),
        (HEADER + "add,f32,8,1.0\nadd,f32,16,nan\n", ":3: measured_us_median must be a positive"),
        (HEADER + "add,f32,8,-2\n", ":2: measured_us_median must be a positive"),
        (HEADER + "add,f32,8,0\n", ":2: measured_us_median must be a positive"),
        (HEADER + "add,f32,8,\n", ":2: measured_us_median '' is not a number"),
        (HEADER + "add,f32,8,inf\n", ":2: measured_us_median must be a positive"),
        (HEADER + "add,f32,8x0,1\n", ":2: bad shape '8x0'"),
        (HEADER + "add,f32,eight,1\n", ":2: bad shape 'eight'"),
        (HEADER + "add,float99,8,1\n", ":2: unknown dtype 'float99'"),
        (HEADER + "add,f32,8,1,extra\n", ":2: wrong number of fields"),
    ],
)
def test_bad_csv_names_file_and_row(tmp_path: Path, body: str, message: str) -> None:
    p = _write(tmp_path, "# machine: test\n" + body if body.startswith("op") else body)
    with pytest.raises(ew.CalibrationError) as e:
        ew.load_measurements(p)
    assert str(e.value).startswith(str(p))
    # A leading comment line shifts the row numbers by one.
    expected = message
    if body.startswith("op") and message.startswith(":"):
        line = int(message[1:].split(":")[0]) + 1
        expected = f":{line}:" + message.split(":", 2)[2]
    assert expected in str(e.value)


def test_missing_file_is_a_calibration_error(tmp_path: Path) -> None:
    with pytest.raises(ew.CalibrationError, match="cannot read"):
        ew.load_measurements(tmp_path / "nope.csv")


def test_duplicates_merge_by_median_and_aliases_normalise(tmp_path: Path) -> None:
    p = _write(
        tmp_path,
        HEADER + "relu,float16,4x8,1.0\nmaximum,f16,4x8,3.0\nrelu,f16,4x8,10.0\nadd,f32,8,2\n",
    )
    rows = ew.load_measurements(p)
    assert rows == [
        ew.Measurement("maximum", "f16", (4, 8), 3.0),
        ew.Measurement("add", "f32", (8,), 2.0),
    ]


def test_primary_column_keeps_primary_rows_only(tmp_path: Path) -> None:
    p = _write(
        tmp_path,
        "op,dtype,shape,measured_us_median,primary\nadd,f16,8,1.0,1\nadd,f16,8,,0\n",
    )
    assert ew.load_measurements(p) == [ew.Measurement("add", "f16", (8,), 1.0)]


def test_sentinel_column_puts_every_row_at_the_files_median_speed(tmp_path: Path) -> None:
    # Sentinels 10, 20, 15 us: median 15, so the row timed while the machine ran the
    # sentinels in 20 us (slow) is scaled by 0.75, the one at 10 us by 1.5; a row without a
    # sentinel (measured before them) is kept as it is.
    p = _write(
        tmp_path,
        "op,dtype,shape,measured_us_median,sentinel_us\n"
        "add,f32,8,2.0,10\nadd,f32,16,4.0,20\nadd,f32,32,3.0,15\nadd,f32,64,5.0,nan\n",
    )
    got = {m.shape: m.latency_us for m in ew.load_measurements(p)}
    assert got == {(8,): 3.0, (16,): 3.0, (32,): 3.0, (64,): 5.0}
    # Grouped convolutions do not follow the sentinels: read as measured, where a dense
    # convolution timed in the same slow chunk is scaled by 0.75 (median sentinel 15 us).
    dense, grouped = "1x8x8x16x3x3x16x1", "1x8x8x16x3x3x16x1x16"
    convs = _write(
        tmp_path,
        "op,dtype,shape,measured_us_median,sentinel_us\nadd,f32,8,2.0,10\nadd,f32,16,2.0,10\n"
        f"convolution,f32,{dense},40.0,20\nconvolution,f32,{grouped},40.0,20\n",
    )
    got = {m.shape: m.latency_us for m in ew.load_measurements(convs)}
    assert got[(1, 8, 8, 16, 3, 3, 16, 1)] == 30.0 and got[(1, 8, 8, 16, 3, 3, 16, 1, 16)] == 40.0
    bad = _write(tmp_path, "op,dtype,shape,measured_us_median,sentinel_us\nadd,f32,8,2.0,x\n")
    with pytest.raises(ew.CalibrationError, match=r":2: sentinel_us 'x' is not a number"):
        ew.load_measurements(bad)


def test_shipped_tpu_csv_loads_one_row_per_shape() -> None:
    rows = ew.load_measurements(TPU_CSV)
    # 852 rows, of which 708 are primary (README: one primary row per (op, dtype, shape)).
    assert len(rows) == 708
    assert {r.op for r in rows} == {"add", "multiply", "maximum"}
    assert {r.dtype for r in rows} == {"f16"}


# --- features -------------------------------------------------------------------------


def test_shape_features_tile_padding() -> None:
    f = dict(zip(ew.FEATURE_NAMES[:-1], ew.shape_features((3, 100, 200), 2.0), strict=True))
    assert f["numel"] == 60000
    assert f["tensor_bytes"] == 120000
    assert (f["d0"], f["d1"], f["d2"], f["d3"]) == (1, 3, 100, 200)
    assert f["rank"] == 3
    assert f["padded_8x128"] == 3 * 104 * 256
    assert f["padded_16x128"] == 3 * 112 * 256
    assert f["last_mod128"] == 72 and f["second_mod8"] == 4 and f["second_mod16"] == 4
    assert f["last_pow2"] == 0 and f["numel_pow2"] == 0
    assert math.isclose(f["log2_numel"], math.log2(60000))


@pytest.mark.parametrize(
    ("shape", "elem_bytes", "tail"),
    [((64, 127), 4.0, 7), ((64, 128), 4.0, 0), ((4248, 7), 4.0, 7), ((3, 40), 2.0, 8)],
)
def test_vector_tail_counts_elements_past_the_last_whole_register(
    shape: tuple[int, ...], elem_bytes: float, tail: int
) -> None:
    f = dict(zip(ew.FEATURE_NAMES[:-1], ew.shape_features(shape, elem_bytes), strict=True))
    assert f["vector_tail"] == tail


@pytest.mark.parametrize(
    ("shape", "elem_bytes", "fraction", "mod_unroll"),
    [((16384, 3), 4.0, 1.0, 3), ((2457, 20), 4.0, 0.2, 4), ((2048, 24), 4.0, 0.0, 8),
     ((3072, 16), 4.0, 0.0, 0), ((100, 20), 2.0, 0.2, 20)],
)  # fmt: skip
def test_row_tail_features(
    shape: tuple[int, ...], elem_bytes: float, fraction: float, mod_unroll: int
) -> None:
    """Tail elements over the row, and the row modulo two vectors (8 f32 or 16 bf16 lanes)."""
    f = dict(zip(ew.FEATURE_NAMES[:-1], ew.shape_features(shape, elem_bytes), strict=True))
    assert f["tail_fraction"] == pytest.approx(fraction)
    assert f["last_mod_unroll"] == mod_unroll


def test_row_tail_features_only_for_elementwise_loops() -> None:
    """A reduce, a transpose or a dot of the same shape carries no row tail; an add, a
    convert and a copy do."""
    cols = [ew.FEATURE_NAMES.index(n) for n in ("tail_fraction", "last_mod_unroll")]
    rows = [ew.Measurement(op, "f32", (16384, 3), 1.0) for op in ("add", "convert", "copy")]
    rows += [ew.Measurement(op, "f32", (16384, 3), 1.0) for op in ("reduce", "transpose")]
    rows.append(ew.Measurement("dot_general", "f32", (1, 8, 8, 8), 1.0))
    X = ew.measurement_features(rows)[:, cols]
    assert X.tolist() == [[1.0, 3.0]] * 3 + [[0.0, 0.0]] * 3
    reduce = OpInfo.build(
        0, "stablehlo.reduce", [TensorType((64, 3), "f32")], [TensorType((64,), "f32")],
        {"dimensions": (1,)},
    )  # fmt: skip
    assert ew.features([_op("add", (64, 3), "f32"), reduce])[:, cols].tolist() == [
        [1.0, 3.0],
        [0.0, 0.0],
    ]


def test_transposes_carry_no_vector_tail() -> None:
    tr = OpInfo.build(
        0, "stablehlo.transpose", [TensorType((127, 64), "f32")], [TensorType((64, 127), "f32")]
    )
    add = _op("add", (64, 127), "f32")
    col = ew.FEATURE_NAMES.index("vector_tail")
    assert ew.features([tr, add])[:, col].tolist() == [0.0, 7.0]
    rows = [ew.Measurement("transpose", "f32", (64, 127), 1.0)]
    assert ew.measurement_features(rows)[0, col] == 0.0


def test_rank_above_four_folds_leading_dims() -> None:
    f = ew.shape_features((2, 3, 4, 5, 6), 4.0)
    assert f[5:9] == [6.0, 4.0, 5.0, 6.0]


def test_features_of_ops_use_the_right_tensor() -> None:
    red = OpInfo.build(
        0, "stablehlo.reduce", [TensorType((64, 128), "f32")], [TensorType((64,), "f32")]
    )
    bc = OpInfo.build(
        0, "stablehlo.broadcast_in_dim", [TensorType((128,), "f32")], [TensorType((64, 128), "f32")]
    )
    X = ew.features([red, bc, _op("add", (8, 128), "bf16")])
    assert X[:, 0].tolist() == [8192, 8192, 1024]
    assert X[2, ew.FEATURE_NAMES.index("elem_bytes")] == 2
    code = X[:, ew.FEATURE_NAMES.index("op_code")]
    assert code.tolist() == [ew.OP_CODES.index(n) for n in ("reduce", "broadcast_in_dim", "add")]
    assert math.isnan(ew.features([_op("xor", (8,), "i32")])[0, -1])
    # XLA expands atan(x) as atan2(x, 1): atan2 is priced with atan's code.
    assert ew.features([_op("atan2", (8,))])[0, -1] == ew.OP_CODES.index("atan")


def test_matmul_features_dot_and_conv() -> None:
    dot = OpInfo.build(
        0,
        "stablehlo.dot_general",
        [TensorType((4, 32, 64), "f32"), TensorType((4, 64, 16), "f32")],
        [TensorType((4, 32, 16), "f32")],
        {
            "lhs_batch_dims": (0,),
            "rhs_batch_dims": (0,),
            "lhs_contracting_dims": (2,),
            "rhs_contracting_dims": (1,),
        },
    )
    X = ew.features([dot])
    assert X[0, 0] == 2 * 4 * 32 * 16 * 64
    assert X[0, 5:9].tolist() == [4, 32, 16, 64]
    # The 32 x 16 output as whole 7 x 32 tiles: 35 x 32 computed for 32 x 16.
    assert X[0, ew.FEATURE_NAMES.index("vector_tail")] == 35 * 32 / (32 * 16)
    assert ew.gemm_padding(14, 64) == 1.0


def test_a_dot_with_a_ragged_tile_costs_its_padded_work() -> None:
    """The matmul model reads the tile padding: fitted on products whose time is their work
    padded to whole 7-row tiles (a whole number of tiles and one row more, at each size),
    a product of 36 rows, a size it never saw, is priced as the 42 rows it computes, and one
    of 35 as 35: 1.2x apart, where on M alone the trees put both in one leaf (1.03x)."""
    rows = [
        ew.Measurement("dot_general", "f32", (1, m, 64, 64), 1e-4 * 7 * math.ceil(m / 7))
        for whole in (7, 14, 21, 28, 42, 49, 56, 63, 70)
        for m in (whole, whole + 1)
    ]
    model = ew.fit_class_models(rows)["matmul"]
    X = ew.measurement_features(
        [ew.Measurement("dot_general", "f32", (1, m, 64, 64), 1.0) for m in (35, 36)]
    )
    whole, ragged = model.predict(X)
    assert ragged / whole == pytest.approx(42 / 35, rel=0.05)


@pytest.mark.parametrize(("lhs_dilation", "k"), [((1, 1), 64 * 9), ((2, 2), 64 * 9 // 4)])
def test_conv_gemm_counts_the_taps_that_meet_real_inputs(
    lhs_dilation: tuple[int, int], k: int
) -> None:
    """A stride-2 transposed 3x3 convolution (input dilated by 2) multiplies 9/4 taps per
    output on average, not 9 (4x16x16x64 -> 32: predicted 2.4 ms with 9, measured ~1 ms)."""
    conv = OpInfo.build(
        0,
        "stablehlo.convolution",
        [TensorType((4, 16, 16, 64), "f32"), TensorType((3, 3, 64, 32), "f32")],
        [TensorType((4, 32, 32, 32), "f32")],
        {
            "input_spatial_dims": (1, 2),
            "kernel_input_feature_dim": 2,
            "kernel_output_feature_dim": 3,
            "kernel_spatial_dims": (0, 1),
            "output_feature_dim": 3,
            "output_spatial_dims": (1, 2),
            "input_batch_dim": 0,
            "input_feature_dim": 3,
            "output_batch_dim": 0,
            "lhs_dilation": lhs_dilation,
        },
    )
    X = ew.features([conv])
    assert X[0, 5:9].tolist() == [1, 4 * 32 * 32, 32, k]


# --- the estimator on fixed data -------------------------------------------------------


def _synthetic() -> tuple[np.ndarray, np.ndarray]:
    """A floor of 1 us, 1 ns per element, and +20% when the last dim is not 128-aligned."""
    shapes = [(a, b) for a in range(8, 136, 8) for b in (128, 256, 384, 512, 96, 200)]
    X = np.array([[*ew.shape_features(s, 4.0), ew.OP_CODES.index("add")] for s in shapes])
    n = X[:, 0]
    y = (1.0 + 1e-3 * n) * np.where(X[:, ew.FEATURE_NAMES.index("last_mod128")] > 0, 1.2, 1.0)
    return X, y


def test_fit_on_fixed_data_predicts_unseen_sizes() -> None:
    X, y = _synthetic()
    train, test = ew.size_split(X[:, 0], 0.25, seed=1)
    model = ew.LatencyRegressor().fit(X[train], y[train])
    pred = model.predict(X[test])
    rel = np.abs(pred - y[test]) / y[test]
    assert np.median(rel) < 0.01
    assert rel.max() < 0.05
    # The line carries the size trend: floor ~1 us, slope ~1e-3 us per element (4 bytes).
    assert model.floor_ == pytest.approx(1.0, rel=0.05)
    assert model.slope_ * 4 == pytest.approx(1e-3, rel=0.05)


def test_fit_is_deterministic_and_follows_estimator_protocol() -> None:
    X, y = _synthetic()
    a = ew.LatencyRegressor(max_iter=30).fit(X, y).predict(X)
    est = clone(ew.LatencyRegressor(max_iter=30))
    assert est.get_params()["residual"] == "log"
    assert not hasattr(est, "trees_")
    b = est.fit(X, y).predict(X)
    assert np.array_equal(a, b)


def test_line_extrapolates_where_trees_alone_flatten() -> None:
    X, y = _synthetic()
    small = X[:, 0] <= 40000
    big = ~small
    line = ew.LatencyRegressor(max_iter=50).fit(X[small], y[small])
    plain = ew.LatencyRegressor(residual="plain", max_iter=50).fit(X[small], y[small])
    err_line = np.median(np.abs(line.predict(X[big]) - y[big]) / y[big])
    err_plain = np.median(np.abs(plain.predict(X[big]) - y[big]) / y[big])
    assert err_line < 0.03 < err_plain
    assert line.extrapolated(X[big]).all() and not line.extrapolated(X[small]).any()


def test_units_count_a_reduces_outputs_and_a_gathers_slices() -> None:
    """The second work column: a row sum of 300x7 makes 300 outputs, a column sum 7; a
    gather of 4,096 rows of 256 copies 4,096 slices, one of single elements each element;
    a top 8 of 16 rows of 1,000 expects 8 (1 + ln 125) insertions per row, each 4 heap
    levels (log2 16); an FFT of 4x64 rows makes 256 transforms."""
    units = ew.FEATURE_NAMES.index("units")
    assert ew.reduce_features((300, 7), (1,), 4.0)[units] == 300
    assert ew.reduce_features((300, 7), (0,), 4.0)[units] == 7
    assert ew.reduce_features((2, 300, 7), (0, 2), 4.0)[units] == 300
    assert ew.gather_features((4096, 256), 256, 4.0, 0.0)[units] == 4096
    assert ew.gather_features((64, 8), 1, 4.0, 0.0)[units] == 512
    assert ew.topk_features((16, 1000), 8, 4.0)[units] == pytest.approx(
        16 * 8 * (1 + math.log(125)) * 4
    )
    assert ew.topk_features((16, 8), 8, 4.0)[units] == 16 * 8 * 4
    assert ew.topk_features((1, 64), 1, 4.0)[units] == pytest.approx(1 + math.log(64))
    assert ew.fft_features((4, 64, 2048), 4.0)[units] == 256
    assert ew.shape_features((300, 7), 4.0)[units] == 0


def test_fft_work_counts_mixed_radix_passes_or_bluestein() -> None:
    """1,024 = 2^10: ten radix-2 passes, 1,024 x 20. 2,049 = 3 x 683 directly costs 2,049 x
    686; as Bluestein it is three FFTs of 4,116 = 2^2 x 3 x 7^3, the smallest 7-smooth length
    >= 4,097, each 4,116 x 28: the cheaper is taken. The feature row carries the ratio to
    the radix-2 ideal (length log2 length) in its cost slot."""
    assert ew.fft_work(1024) == 1024 * 20
    assert ew.fft_work(2049) == 3 * 4116 * 28 < 2049 * 686
    assert ew.fft_work(1) == 1
    slot = ew.FEATURE_NAMES.index("pad_ratio_8x128")
    assert ew.fft_features((64, 2049), 4.0)[slot] == pytest.approx(
        345744 / (2049 * math.log2(2049))
    )
    assert ew.fft_features((64, 2048), 4.0)[slot] == pytest.approx(2.0)


def test_nonneg_lad_recovers_per_byte_and_per_unit_costs() -> None:
    """y = 2e-3 per byte + 0.05 per unit on 12 rows, one of them 10x off: recovered exactly
    (the median line ignores the outlier); a cost that falls with units is clipped at 0."""
    rng = np.random.default_rng(0)
    a_mat = np.c_[rng.uniform(1e3, 1e6, 12), rng.uniform(1, 1e4, 12)]
    y = a_mat @ [2e-3, 0.05]
    y[3] *= 10
    np.testing.assert_allclose(ew.nonneg_lad(a_mat, y), [2e-3, 0.05], rtol=1e-6)
    coef = ew.nonneg_lad(a_mat, a_mat @ [2e-3, -0.05])
    assert coef[1] == 0 and coef[0] > 0


def test_ratio_line_prices_reduces_by_outputs_as_well_as_bytes() -> None:
    """Row sums costing 0.2 us + 1e-4 us per byte + 4e-3 us per output row, fitted on rows
    of 64 and 512 and three-wide rows up to 2,000: a 20,000x3 sum (240 KB, 20,000 outputs,
    104.2 us) is predicted within 5%, where the bytes alone would give ~24 us."""
    shapes = [(r, c) for r in (100, 300, 1000, 3000, 10000) for c in (64, 512)]
    shapes += [(r, 3) for r in (50, 200, 500, 1000, 2000)]
    rows = [
        ew.Measurement("reduce", "f32", s, 0.2 + 4e-4 * s[0] * s[1] + 4e-3 * s[0]) for s in shapes
    ]
    X, y = ew.measurement_features(rows), np.array([r.latency_us for r in rows])
    model = ew.regressor_for("reduction", max_iter=30).fit(X, y)
    assert model.line == "ratio" and model.unit_slope_ > 0
    (pred,) = model.predict(
        ew.measurement_features([ew.Measurement("reduce", "f32", (20000, 3), 1.0)])
    )
    assert pred == pytest.approx(0.2 + 4e-4 * 60000 + 4e-3 * 20000, rel=0.05)


def test_matmul_parameters_beat_the_shared_defaults_on_unseen_sizes() -> None:
    """The matmul class's own boosting parameters (`_CLASS_PARAMS`) against the shared
    defaults, 5-fold CV by total size on the shipped Zen 5 reference's f32 products: lower
    median relative error (11.3 vs 12.1% over three splits when chosen)."""
    rows = ew.load_measurements(cf.shipped_file("host_reference_zen5.csv"))
    rows = [r for r in rows if r.model_class == "matmul" and r.dtype == "f32"]
    X, y = ew.measurement_features(rows), np.array([r.latency_us for r in rows])
    sizes = np.unique(X[:, 0])
    fold = dict(zip(np.random.default_rng(0).permutation(sizes), np.arange(len(sizes)) % 5))
    k = np.array([fold[s] for s in X[:, 0]])
    errs = []
    for make in (lambda: ew.regressor_for("matmul"), lambda: ew.LatencyRegressor(line="ratio")):
        p = np.zeros_like(y)
        for f in range(5):
            p[k == f] = make().fit(X[k != f], y[k != f]).predict(X[k == f])
        errs.append(float(np.median(np.abs(p / y - 1))))
    assert errs[0] < errs[1]


def test_floor_stays_positive_when_large_ops_steer_the_line() -> None:
    """Host movement data: small ops ~0.2 us, large ones superlinear, so the LAD line crosses
    zero. Its floor is kept at a quarter of the fastest row (0.05 us here), so small ops are
    predicted near their measurements instead of the thousands of us a ~0 floor gave."""
    shapes = [(64, n) for n in (16, 32, 48, 64, 80, 96, 128)]
    shapes += [(n, n) for n in (512, 768, 1024, 1536, 2048)]
    X = np.array([[*ew.shape_features(s, 4.0), ew.OP_CODES.index("transpose")] for s in shapes])
    n = X[:, 0]
    y = np.where(n < 10_000, 0.2, 1e-3 * n * (n / 2e5) ** 0.5)
    model = ew.LatencyRegressor().fit(X, y)
    assert model.floor_ == pytest.approx(0.05)
    small = model.predict(X[n < 10_000])
    assert np.all(small < 1.0)


def test_below_the_smallest_size_the_smallest_rows_time_scales_down() -> None:
    """A floor of 5 us steered by large ops and 2 us measured at the smallest size (100
    elements, three rows: too few for a leaf of their own): below it, at most 2 us x n / 100
    and never under a quarter of the fastest row (0.5 us). 50 elements: 1.0 us; 10: 0.5 us,
    where the line and trees alone put 5.0 and 4.6."""
    sizes = [100, 200, 400] + [1000 * k for k in range(1, 40)]
    X = np.array([[*ew.shape_features((n,), 4.0), ew.OP_CODES.index("cosine")] for n in sizes])
    n = X[:, 0]
    y = np.where(n < 1000, 2.0 * n / 100, 5.0 + 1e-2 * n)
    model = ew.LatencyRegressor().fit(X, y)
    below = np.array(
        [[*ew.shape_features((m,), 4.0), ew.OP_CODES.index("cosine")] for m in (50, 10)]
    )
    assert model.extrapolated(below).all()
    np.testing.assert_allclose(model.predict(below), [1.0, 0.5], rtol=1e-9)


def test_size_split_never_shares_a_size() -> None:
    sizes = np.array([4, 4, 8, 8, 8, 16, 32, 32, 64, 128])
    train, test = ew.size_split(sizes, 0.4, seed=3)
    assert (train ^ test).all()
    assert not set(sizes[train]) & set(sizes[test])
    assert len(set(sizes[test])) == 2


def test_bad_residual_mode_is_rejected() -> None:
    X, y = _synthetic()
    with pytest.raises(ValueError, match="residual"):
        ew.LatencyRegressor(residual="exp").fit(X, y)


# --- real tpu-v4 data ------------------------------------------------------------------


def test_tpu_v4_add_on_unseen_sizes_beats_the_paper() -> None:
    rows = [r for r in ew.load_measurements(TPU_CSV) if r.op_class == "binary"]
    X = ew.measurement_features(rows)
    y = np.array([r.latency_us for r in rows])
    train, test = ew.size_split(X[:, 0], 0.2, seed=0)
    pred = ew.LatencyRegressor().fit(X[train], y[train]).predict(X[test])
    is_add = np.array([r.op == "add" for r in rows])[test]
    rel = np.abs(pred - y[test]) / y[test]
    # Paper: 1.78% median relative error and R^2 0.9973 for add.
    assert np.median(rel[is_add]) < 0.015
    assert r2_score(y[test][is_add], pred[is_add]) > 0.998


@pytest.mark.parametrize(
    ("shape", "padded"),
    [
        ((8192,), 8192),  # 1-D: unpadded
        ((8, 8, 120), 64 * 128),  # 120 in the lanes, 64 rows
        ((120, 8, 8), 64 * 128),  # a permutation pads the same
        ((24, 24, 8), 192 * 128),  # any 24 in the lanes: 192 rows of 128
        ((960, 896), 960 * 896),  # 896 = 7 x 128 in the lanes: no padding
        ((960, 576), 576 * 1024),  # 960 -> 1024 lanes beats 576 -> 640 (614,400)
        ((3, 5, 7), 16 * 128),  # 15 rows -> 16, 7 lanes -> 128
    ],
)
def test_lane_padded_elements_by_hand(shape: tuple[int, ...], padded: int) -> None:
    col = ew.FEATURE_NAMES.index("lane_padded_bytes")
    assert ew.shape_features(shape, 2.0)[col] == 2.0 * padded


def test_tpu_v4_3d_shapes_of_an_unseen_size_follow_their_padded_lanes() -> None:
    """3-D f16 ReLUs of 8,192 elements differ by 35% (8x8x128 0.97 us, 16x16x32 1.30 us).
    With every shape of that size held out, the lane-padded line predicts the slow ones
    (two dims above 8) within 4.5% (2.0-4.0% with five averaged fits); the element-count
    line misses them by 15-17%."""
    rows = [r for r in ew.load_measurements(TPU_CSV) if r.model_class == "compare_select"]
    X = ew.measurement_features(rows)
    y = np.array([r.latency_us for r in rows])
    test = X[:, 0] == 8192
    slow = test & (X[:, ew.FEATURE_NAMES.index("rank")] == 3) & (y > 1.25)
    assert slow.sum() == 6
    for lane_padded, lo, hi in ((False, 0.10, 1.0), (True, 0.0, 0.045)):
        model = ew.LatencyRegressor(lane_padded=lane_padded).fit(X[~test], y[~test])
        rel = np.abs(model.predict(X[slow]) - y[slow]) / y[slow]
        assert lo < rel.min() and rel.max() < hi


def test_tpu_v4_service_matches_the_data_on_unseen_sizes() -> None:
    """5-fold split by size, the service's settings: add, multiply and ReLU median
    relative error under the issue's 1.5% (paper: 1.78% add, 2.55% ReLU)."""
    rows = ew.load_measurements(TPU_CSV)
    X = ew.measurement_features(rows)
    y = np.array([r.latency_us for r in rows])
    ops = np.array([r.op for r in rows])
    classes = np.array([r.model_class for r in rows])
    uniq = np.unique(X[:, 0])
    fold = dict(zip(uniq, np.random.default_rng(0).permutation(len(uniq)) % 5, strict=True))
    f = np.array([fold[v] for v in X[:, 0]])
    pred = np.zeros(len(y))
    for cls in set(classes):
        for k in range(5):
            tr, te = (classes == cls) & (f != k), (classes == cls) & (f == k)
            if te.any():
                pred[te] = ew.LatencyRegressor(lane_padded=True).fit(X[tr], y[tr]).predict(X[te])
    for op in ("add", "multiply", "maximum"):
        m = ops == op
        assert np.median(np.abs(pred[m] - y[m]) / y[m]) < 0.015, op


# --- the service -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def tpu() -> object:
    return load_target("tpu-v4")


def test_service_routes_classes_and_names_fallbacks(tpu: object) -> None:
    svc = ew.LearnedLatencyModel(data={"tpu-v4": TPU_CSV})
    ops = [
        _op("add", (64, 1024)),
        _op("select", (64, 1024), n_in=3),
        _op("exponential", (64, 1024), n_in=1),
        OpInfo.build(
            0,
            "stablehlo.transpose",
            [TensorType((64, 1024), "f16")],
            [TensorType((1024, 64), "f16")],
        ),
        _op("add", (4096, 4096)),
    ]
    assert all(svc.supports(op, tpu) for op in ops)  # type: ignore[arg-type]
    costs = svc.predict(ops, tpu)  # type: ignore[arg-type]
    assert [c.model for c in costs] == [
        "hgb-tpu-v4-binary",
        "hgb-tpu-v4-compare_select",
        "hgb-tpu-v4-compare_select→transcendental(scaled)",
        "roofline(hgb-tpu-v4: no transpose data)",
        "hgb-tpu-v4-binary",
    ]
    # 64x1024 f16 add: the 2-D sweep measured 1.9-2.1 us around this size.
    assert 1.7e3 < costs[0].latency_ns < 2.3e3
    assert costs[0].cycles == round(costs[0].latency_ns * 1.05)
    assert costs[0].extra["extrapolated"] is False
    assert costs[4].extra["extrapolated"] is True
    # 16M elements extrapolate along the line: far above the largest measured (~19 us).
    assert costs[4].latency_ns > 100e3


def test_service_batches_one_predict_per_class(
    tpu: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    svc = ew.LearnedLatencyModel(data={"tpu-v4": TPU_CSV})
    models = svc.models(tpu)  # type: ignore[arg-type]
    calls: list[int] = []
    real = ew.LatencyRegressor.predict

    def counting(self: ew.LatencyRegressor, X: np.ndarray) -> np.ndarray:
        calls.append(len(X))
        return real(self, X)

    monkeypatch.setattr(ew.LatencyRegressor, "predict", counting)
    ops = [_op("add", (n,)) for n in range(32, 3200, 32)] + [_op("maximum", (128, 128))]
    svc.predict(ops, tpu)  # type: ignore[arg-type]
    assert sorted(calls) == [1, 99]
    assert set(models) == {"binary", "compare_select"}


def test_service_without_data_supports_nothing(
    tpu: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    h200 = load_target("h200")
    svc = ew.LearnedLatencyModel()
    assert not svc.supports(_op("add", (8, 128)), h200)
    assert svc.supports(_op("add", (8, 128)), tpu)  # type: ignore[arg-type]
    dot = OpInfo.build(
        0, "stablehlo.dot_general", [TensorType((8, 8), "f32")] * 2, [TensorType((8, 8), "f32")]
    )
    assert not svc.supports(dot, tpu)  # type: ignore[arg-type]
    assert not svc.supports(_op("add", (0, 128)), tpu)  # type: ignore[arg-type]


def test_corrupted_cache_entry_is_never_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    path = cf.calibration_path("tpu-v4")
    path.parent.mkdir(parents=True)
    body = HEADER + "add,f16,8,5.0\nadd,f16,16,6.0\n"
    path.write_text(f"# sha256: {hashlib.sha256(body.encode()).hexdigest()}\n" + body)
    assert cf.checksum_ok(path)
    assert cf.training_files("tpu-v4") == (path, True)
    path.write_text(path.read_text().replace("6.0", "7.0"))
    assert not cf.checksum_ok(path)
    with pytest.warns(UserWarning, match="corrupted calibration"):
        src = cf.training_files("tpu-v4")
    assert src is not None and src[0].name == "tpu_v4_elementwise.csv"


def test_host_takes_the_shipped_reference_measured_on_this_machine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One reference ships per machine the project ran on: this machine's answers, as measured
    here; another machine gets one of its CPU (other threads), else the first, as measured
    elsewhere."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    refs = {}
    for name, cpu in (("a.csv", "CPU A"), ("b.csv", "CPU B")):
        refs[cpu] = _write(
            tmp_path, f"# machine: {cpu}, 2 cores, x86_64\n{HEADER}add,f32,8,1\n", name
        )
    monkeypatch.setattr(cf, "_SHIPPED", {"host": ("a.csv", "b.csv")})
    monkeypatch.setattr(cf, "shipped_file", lambda name: tmp_path / name)
    monkeypatch.setattr(cf, "machine_fingerprint", lambda: "CPU B, 2 cores, x86_64")
    assert cf.training_files("host") == (refs["CPU B"], True)
    monkeypatch.setattr(cf, "machine_fingerprint", lambda: "CPU C, 64 cores, aarch64")
    assert cf.training_files("host") == (refs["CPU A"], False)
    # CPU B run on another number of threads: CPU B's reference, as another machine's.
    monkeypatch.setattr(cf, "machine_fingerprint", lambda: "CPU B, 3 cores, x86_64")
    assert cf.training_files("host") == (refs["CPU B"], False)
    assert cf.training_files("tpu-v5e") is None


_ZEN5 = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 26
model\t\t: 2
model name\t: AMD EPYC
flags\t\t: fpu avx512f

processor\t: 1
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 17
model name\t: AMD EPYC
"""


def test_one_cpu_name_of_two_generations_is_two_machines(monkeypatch: pytest.MonkeyPatch) -> None:
    """A VM's "AMD EPYC" names both a Zen 4 and a Zen 5: the family and model numbers of the
    first processor tell them apart, so one's calibration is not taken for the other's."""
    assert cf.cpu_name(_ZEN5) == "AMD EPYC (family 26 model 2)"
    arm = "processor\t: 0\nCPU implementer\t: 0x41\nCPU part\t: 0xd4f\n"
    assert cf.cpu_name(arm) == "(implementer 0x41 part 0xd4f)"
    assert cf.cpu_name("processor\t: 0\n") == ""
    monkeypatch.setattr(
        cf, "machine_fingerprint", lambda: "AMD EPYC (family 26 model 2), 2 cores, x86_64"
    )
    old = "AMD EPYC, 2 cores, x86_64"
    zen4 = "AMD EPYC (family 25 model 17), 2 cores, x86_64"
    assert cf.nearest_machine([old, zen4]) is None
    assert cf.nearest_machine([zen4, "AMD EPYC (family 26 model 2), 16 cores, x86_64"]) == (
        1,
        False,
    )


def test_host_uses_the_shipped_reference_with_a_matmul_class(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    host = load_target("host")
    src = cf.training_files("host")
    assert src is not None and src[0].name.startswith("host_reference")
    assert "# note: reference host calibration" in src[0].read_text()
    svc = ew.LearnedLatencyModel()
    dot = OpInfo.build(
        0, "stablehlo.dot_general", [TensorType((256, 256), "f32")] * 2,
        [TensorType((256, 256), "f32")],
        {"lhs_contracting_dims": (1,), "rhs_contracting_dims": (0,)},
    )  # fmt: skip
    ops = [_op("add", (1024,), "f32"), _op("add", (2048, 2048), "f32"), dot]
    assert all(svc.supports(op, host) for op in ops)
    costs = svc.predict(ops, host)
    assert [c.model for c in costs] == ["hgb-host-binary", "hgb-host-binary", "hgb-host-matmul"]
    assert 0 < costs[0].latency_ns < costs[1].latency_ns
    assert costs[2].latency_ns > 0
    # Some references also measured sine and cosine, the special functions, unary ops, or
    # max pools' gradients.
    optional = {"trigonometric", "special", "unary", "select_and_scatter"}
    assert set(svc.models(host)) - optional == {
        "binary", "compare_select", "transcendental", "convert", "movement", "transpose",
        "reduction", "sort", "reduce_variadic", "top_k", "reduce_window", "fft", "gather", "matmul",
        "convolution", "grouped_conv",
    }  # fmt: skip


def test_host_sort_has_a_model_of_its_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """XLA:CPU's comparator sort of a 320x576 tensor takes ~1,000x its row sums (reference:
    ~30 ms vs ~28 us); sort and reduce share the reduction op class but not a model."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    host = load_target("host")
    src = cf.training_files("host")
    assert src is not None
    measured = {(r.op, r.shape): r.latency_us for r in ew.load_measurements(src[0])}
    shape = (320, 576)
    t = TensorType(shape, "f32")
    sort = OpInfo.build(0, "stablehlo.sort", [t], [t], {"dimension": 1})
    total = OpInfo.build(
        1, "stablehlo.reduce", [t], [TensorType((320,), "f32")], {"dimensions": (1,)}
    )
    assert ew.model_class(sort.name) == "sort" and sort.op_class == total.op_class == "reduction"
    svc = ew.LearnedLatencyModel()
    c_sort, c_sum = svc.predict([sort, total], host)
    assert (c_sort.model, c_sum.model) == ("hgb-host-sort", "hgb-host-reduction")
    assert c_sort.latency_ns / 1e3 == pytest.approx(measured[("sort", shape)], rel=0.15)
    assert c_sum.latency_ns / 1e3 == pytest.approx(measured[("reduce", shape)], rel=0.5)
    assert c_sort.latency_ns > 100 * c_sum.latency_ns


def test_a_sort_is_priced_by_its_sorted_axis_whichever_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The calibration sorts along the last axis; a sort along another costs what as many
    rows of its sorted axis cost (Zen 5 VM: 1024x128 along axis 0 16.8 ms, 128x1024 along
    axis 1 16.4, 1024x128 along axis 1 ~10), so it is priced as that."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    host = load_target("host")

    def sort(shape: tuple[int, ...], dim: int) -> OpInfo:
        t = TensorType(shape, "f32")
        return OpInfo.build(0, "stablehlo.sort", [t], [t], {"dimension": dim})

    svc = ew.LearnedLatencyModel()
    cols, rows, short = svc.predict(
        [sort((1024, 128), 0), sort((128, 1024), 1), sort((1024, 128), 1)], host
    )
    assert cols.latency_ns == rows.latency_ns
    assert cols.latency_ns != short.latency_ns
    mid, last = svc.predict([sort((8, 64, 256), 1), sort((8, 256, 64), 2)], host)
    assert mid.latency_ns == last.latency_ns


def test_quick_sweep_caps_sort_size() -> None:
    from stablehlo_perf.runtime import sweeps

    sizes = [math.prod(s.shape) for s in sweeps.sweep(True, ["sort"])]
    assert sizes and max(sizes) <= sweeps.QUICK_SORT_MAX < max(
        math.prod(s.shape) for s in sweeps.sweep(True, ["reduce"])
    )


def test_borrowed_class_is_scaled_by_the_roofline_ratio(tpu: object) -> None:
    """exp borrows ReLU's model; both read and write one tensor, so the scale is 1."""
    svc = ew.LearnedLatencyModel(data={"tpu-v4": TPU_CSV})
    relu, exp = _op("maximum", (256, 1024), n_in=1), _op("exponential", (256, 1024), n_in=1)
    a, b = svc.predict([relu, exp], tpu)  # type: ignore[arg-type]
    assert b.model == "hgb-tpu-v4-compare_select→transcendental(scaled)"
    # Only the op code (unseen for exp: a missing category) may move it, and only slightly.
    assert b.latency_ns == pytest.approx(a.latency_ns, rel=0.05)
    sub = _op("subtract", (256, 1024), "f32")
    conv = OpInfo.build(0, "stablehlo.convert", [TensorType((256, 1024), "f32")], [sub.results[0]])
    c_sub, c_conv = svc.predict([sub, conv], tpu)  # type: ignore[arg-type]
    assert c_conv.model == "hgb-tpu-v4-compare_select→convert(scaled)"
    assert c_sub.model == "hgb-tpu-v4-binary"


def test_op_with_a_splat_operand_is_priced_as_one_tensor_read(tpu: object) -> None:
    """x + 1 reads one tensor, like the measured ReLU max(x, 0), not two like x + y
    (tpu-v4 f16 16x16x32: add 1.506 us, ReLU 1.297 us, both measured)."""
    svc = ew.LearnedLatencyModel(data={"tpu-v4": TPU_CSV})
    t = TensorType((16, 16, 32), "f16")
    two = OpInfo.build(0, "stablehlo.add", [t, t], [t])
    one = OpInfo.build(1, "stablehlo.add", [t, t], [t], {"splat_operands": 1})
    relu = OpInfo.build(2, "stablehlo.maximum", [t, t], [t], {"splat_operands": 1})
    # max(x, y) of two tensors reads what x + y does, not the ReLU rows' one tensor.
    both = OpInfo.build(3, "stablehlo.maximum", [t, t], [t])
    c_two, c_one, c_relu, c_both = svc.predict([two, one, relu, both], tpu)
    assert c_two.model == "hgb-tpu-v4-binary"
    assert c_one.model == c_relu.model == "hgb-tpu-v4-compare_select(one tensor read)"
    assert c_both.model == "hgb-tpu-v4-binary(two tensors read)"
    assert c_one.latency_ns == pytest.approx(c_relu.latency_ns)
    assert c_both.latency_ns == pytest.approx(c_two.latency_ns)
    assert c_relu.latency_ns / 1e3 == pytest.approx(1.297, rel=0.03)
    assert c_two.latency_ns / 1e3 == pytest.approx(1.506, rel=0.03)


def test_splat_operands_come_from_constants_and_scalar_broadcasts() -> None:
    import jax
    import jax.numpy as jnp
    from conftest import op_infos

    def f(x, y, s):
        return (x + 1.0) * y + s, jnp.maximum(x, 0.0) - x

    spec = jax.ShapeDtypeStruct((8, 16), jnp.float32)
    text = jax.jit(f).lower(spec, spec, jax.ShapeDtypeStruct((), jnp.float32)).as_text()
    found = [
        (o.short_name, o.attrs.get("splat_operands", 0))
        for o in op_infos(text)
        if o.op_class in ("binary", "compare_select")
    ]
    # x + 1, + s (a broadcast scalar argument) and max(x, 0) have one splat; the others none.
    assert sorted(found) == sorted(
        [("add", 1), ("multiply", 0), ("add", 1), ("maximum", 1), ("subtract", 0)]
    )


def test_integer_division_by_a_tensor_is_told_from_division_by_a_constant() -> None:
    """x86 divides integers an element at a time unless the divisor is a constant, which XLA
    turns into a multiply and shifts (65536 i32 in a loop, Zen 4 VM: 65-73 us by a tensor or
    a runtime scalar, 5-7 by 7); a float remainder is a libm call whatever its divisor."""
    import jax
    import jax.numpy as jnp
    from conftest import op_infos
    from jax import lax

    def f(a, b, s, x, y):
        seven = jnp.int32(7)
        return (
            lax.div(a, b), lax.rem(a, b), lax.div(a, seven), lax.rem(a, seven), lax.div(a, s),
            lax.rem(x, y), lax.div(x, y), lax.rem(x, jnp.float32(2.0)),
        )  # fmt: skip

    i, f32 = jax.ShapeDtypeStruct((64, 64), jnp.int32), jax.ShapeDtypeStruct((64, 64), jnp.float32)
    text = jax.jit(f).lower(i, i, jax.ShapeDtypeStruct((), jnp.int32), f32, f32).as_text()
    found = [
        (o.short_name, ew.op_model_class(o), ew.division_code(o))
        for o in op_infos(text)
        if o.short_name in ("divide", "remainder")
    ]
    assert found == [
        ("divide", "special", "integer_divide"),
        ("remainder", "special", "integer_remainder"),
        ("divide", "binary", None),
        ("remainder", "binary", None),
        ("divide", "special", "integer_divide"),  # a runtime scalar: no constant to fold
        ("remainder", "special", None),
        ("divide", "binary", None),
        ("remainder", "special", None),
    ]
    codes = ew.features([o for o in op_infos(text) if o.short_name in ("divide", "remainder")])
    assert list(codes[:2, -1]) == [
        ew.OP_CODES.index("integer_divide"), ew.OP_CODES.index("integer_remainder"),
    ]  # fmt: skip


def test_special_functions_are_priced_by_their_own_rows_and_borrow_without_them() -> None:
    """CHLO's special functions run at their own rates per element (Zen 4 reference, 256x256
    f32: erf about a tanh, erf_inv ~6x, lgamma and digamma ~17-19x, atan ~25x), where the
    transcendental model priced erf at 5x its time and the roofline erf_inv at a twelfth:
    with the Zen 4 rows each is priced near its rows of 2^20 elements (the median of 1024 x
    1024, 2048 x 512 and 4096 x 256: one row alone can sit in a slow spell); a calibration
    without them (the AMD reference) borrows the transcendental model, scaled, and says so."""
    host = load_target("host")
    data = Path(ew.__file__).resolve().parent / "data"
    zen4 = data / "host_reference_zen4.csv"
    rows: dict[str, list[float]] = {}
    for r in ew.load_measurements(zen4):
        if r.dtype == "f32" and r.shape in ((1024, 1024), (2048, 512), (4096, 256)):
            rows.setdefault(r.op, []).append(r.latency_us)
    shape = (1024, 1024)
    names = ("erf", "erf_inv", "erfc", "lgamma", "digamma", "atan", "tanh")
    ops = [_op(n, shape, "f32", n_in=1) for n in names[:-1]]
    ops = [*(OpInfo.build(0, f"chlo.{o.short_name}", o.operands, o.results) for o in ops)]
    ops.append(_op("tanh", shape, "f32", n_in=1))
    assert [ew.op_model_class(o) for o in ops] == ["special"] * 6 + ["transcendental"]
    costs = ew.LearnedLatencyModel(data={"host": zen4}).predict(ops, host)
    assert [c.model for c in costs] == ["hgb-host-special"] * 6 + ["hgb-host-transcendental"]
    for name, cost in zip(names, costs, strict=True):
        assert len(rows[name]) == 3
        assert cost.latency_ns / 1e3 == pytest.approx(np.median(rows[name]), rel=0.25), name
    by = {n: c.latency_ns for n, c in zip(names, costs, strict=True)}
    assert by["erf"] < 2 * by["tanh"] < by["erf_inv"] and by["atan"] > 10 * by["tanh"]
    amd = ew.LearnedLatencyModel(data={"host": data / "host_reference.csv"})
    (borrowed,) = amd.predict(ops[1:2], host)
    assert borrowed.model == "hgb-host-transcendental→special(scaled)"


def _mega_rows(path: Path) -> dict[tuple[str, str], list[float]]:
    """(op, dtype) -> times of a calibration's rows of 2^20 elements as 1024 x 1024, 2048 x
    512 and 4096 x 256 (their median: one row alone can sit in a slow spell)."""
    rows: dict[tuple[str, str], list[float]] = {}
    for r in ew.load_measurements(path):
        if r.shape in ((1024, 1024), (2048, 512), (4096, 256)):
            rows.setdefault((r.op, r.dtype), []).append(r.latency_us)
    return rows


def test_ops_run_an_element_at_a_time_are_priced_by_their_own_rows() -> None:
    """Tangents, cube roots, powers, float remainders (libm calls), expm1 and log1p, sines and
    cosines, and integer division by a tensor cost 5-100x an add an element on the host (Zen
    4 reference, 1024 x 1024: fmod 8.1 ms, cbrt 8.3, tan 7.2, an add ~0.2): each is priced
    near the median of its three 2^20-element rows, an i8 divide as an i32 one, and an
    integer divide by a constant (a multiply and shifts) at the binary model's rate."""
    host = load_target("host")
    zen4 = Path(ew.__file__).resolve().parent / "data" / "host_reference_zen4.csv"
    rows = _mega_rows(zen4)
    shape = (1024, 1024)
    one = ("tan", "exponential_minus_one", "log_plus_one", "cbrt", "sine", "cosine")
    ops = [_op(n, shape, "f32", n_in=1) for n in one]
    ops += [_op(n, shape, "f32") for n in ("power", "remainder")]
    ops += [_op(n, shape, "i32") for n in ("divide", "remainder")]
    keys = [(n, "f32") for n in (*one, "power", "remainder")]
    keys += [("integer_divide", "i32"), ("integer_remainder", "i32")]
    svc = ew.LearnedLatencyModel(data={"host": zen4})
    costs = svc.predict(ops, host)
    trig = ("tan", "sine", "cosine")
    assert [c.model for c in costs] == [
        f"hgb-host-{'trigonometric' if k[0] in trig else 'special'}" for k in keys
    ]
    for key, cost in zip(keys, costs, strict=True):
        assert len(rows[key]) == 3, key
        assert cost.latency_ns / 1e3 == pytest.approx(np.median(rows[key]), rel=0.25), key
    t8 = TensorType(shape, "i8")
    seven = OpInfo.build(0, "stablehlo.divide", [t8, t8], [t8], {"constant_divisor": 1})
    i8, add, by_seven = svc.predict(
        [OpInfo.build(0, "stablehlo.divide", [t8, t8], [t8]), _op("add", shape, "f32"), seven],
        host,
    )
    assert i8.latency_ns == pytest.approx(costs[-2].latency_ns)
    assert costs[7].latency_ns > 20 * add.latency_ns  # the float remainder
    assert by_seven.model == "hgb-host-binary" and by_seven.latency_ns < i8.latency_ns / 5


def test_f64_ops_are_priced_by_their_own_rows() -> None:
    """XLA:CPU runs f64 transcendentals on other paths than f32's (65536 elements in a loop,
    Zen 4 VM: erf 564 us in f64, 18 in f32; log 233 and 37): with the Zen 4 reference's f64
    rows each is priced near the median of its 2^20-element f64 rows, where the f32 rows
    alone had priced f64 erf at 0.09x and log at 0.35x."""
    host = load_target("host")
    zen4 = Path(ew.__file__).resolve().parent / "data" / "host_reference_zen4.csv"
    rows = _mega_rows(zen4)
    names = ("erf", "log", "exponential", "tanh", "sine", "logistic")
    ops = [_op(n, (1024, 1024), dt, n_in=1) for dt in ("f64", "f32") for n in names]
    costs = ew.LearnedLatencyModel(data={"host": zen4}).predict(ops, host)
    by = {(o.short_name, o.element_type): c.latency_ns / 1e3 for o, c in zip(ops, costs)}
    for name in names:
        assert len(rows[name, "f64"]) == 3, name
        assert by[name, "f64"] == pytest.approx(np.median(rows[name, "f64"]), rel=0.25), name
    assert by["erf", "f64"] > 5 * by["erf", "f32"] and by["log", "f64"] > 2 * by["log", "f32"]


def test_f16_ops_are_priced_by_their_own_rows() -> None:
    """XLA:CPU keeps f16 ops in f16, and LLVM runs its intrinsics (exp, log, sqrt, floor) as
    a scalar call an element, where bf16 is widened to f32 and vectorised: with the Zen 4
    reference's f16 rows each f16 op is priced near the median of its 2^20-element f16 rows
    (within 30%: f16 exp's three run 2.1-2.3 ms, its other 2^20 shapes 1.7) and each bf16 op
    near its bf16 rows', where the bf16 rows alone had priced f16 exp at 0.31x and sqrt at
    0.17x (65536 in a loop); a rounding is priced as floor."""
    host = load_target("host")
    zen4 = Path(ew.__file__).resolve().parent / "data" / "host_reference_zen4.csv"
    rows = _mega_rows(zen4)
    names = ("exponential", "log", "sqrt", "floor", "exponential_minus_one", "tanh", "negate")
    ops = [_op(n, (1024, 1024), dt, n_in=1) for dt in ("f16", "bf16") for n in names]
    ops.append(_op("round_nearest_even", (1024, 1024), "f16", n_in=1))
    costs = ew.LearnedLatencyModel(data={"host": zen4}).predict(ops, host)
    by = {(o.short_name, o.element_type): c.latency_ns / 1e3 for o, c in zip(ops, costs)}
    for key in [(n, dt) for dt in ("f16", "bf16") for n in names]:
        assert len(rows[key]) == 3, key
        assert by[key] == pytest.approx(np.median(rows[key]), rel=0.3), key
    assert by["exponential", "f16"] > 2 * by["exponential", "bf16"]
    assert by["sqrt", "f16"] > 2 * by["sqrt", "bf16"]
    assert by["round_nearest_even", "f16"] == pytest.approx(by["floor", "f16"])


def test_the_xeon_references_f16_rows_price_its_vector_and_scalar_f16_paths() -> None:
    """On the Xeon VM (AVX-512 FP16) f16 adds, multiplies and floors are vector ops, faster
    than their bf16 twins (widened to f32), while exp and log stay scalar calls (2.7-3.9x
    their f32 time over its rows): with its f16 rows (2026-12-06) each f16 op is priced near
    the median of its 2^20-element rows, where the bf16 rows alone had priced exp and log at
    0.36-0.41x of them and add and floor at 1.7-2.0x."""
    host = load_target("host")
    xeon = Path(ew.__file__).resolve().parent / "data" / "host_reference_xeon.csv"
    rows = _mega_rows(xeon)
    names = ("add", "multiply", "floor", "exponential", "log")
    ops = [
        _op(n, (1024, 1024), dt, n_in=2 if n in ("add", "multiply") else 1)
        for dt in ("f16", "bf16", "f32")
        for n in names
    ]
    costs = ew.LearnedLatencyModel(data={"host": xeon}).predict(ops, host)
    by = {(o.short_name, o.element_type): c.latency_ns / 1e3 for o, c in zip(ops, costs)}
    for name in names:
        assert len(rows[name, "f16"]) == 3, name
        assert by[name, "f16"] == pytest.approx(np.median(rows[name, "f16"]), rel=0.3), name
    for name in ("add", "multiply", "floor"):
        assert by[name, "f16"] < 0.8 * by[name, "bf16"], name
    for name in ("exponential", "log"):
        assert by[name, "f16"] > 2 * by[name, "f32"], name


def test_an_f16_loop_is_marked_apart_from_a_bf16_one_and_roundings_share_a_code() -> None:
    """f16 and bf16 are both two bytes, but XLA:CPU widens bf16 to f32 and runs f16 as scalar
    calls: an elementwise f16 op's features differ from its bf16 twin's in the half slot
    alone, a dot's layout slot is its layout whatever its type, and ceil and the roundings
    carry floor's op code (its rows price them)."""
    half = ew.FEATURE_NAMES.index(ew._HALF_SLOT)
    x16, xb = ew.features(
        [_op("exponential", (64, 100), "f16", 1), _op("exponential", (64, 100), "bf16", 1)]
    )
    assert (x16[half], xb[half]) == (1.0, 0.0)
    assert np.array_equal(np.delete(x16, half), np.delete(xb, half))
    lhs, rhs = TensorType((64, 32), "f16"), TensorType((64, 16), "f16")
    dot = OpInfo.build(
        0, "stablehlo.dot_general", [lhs, rhs], [TensorType((32, 16), "f16")],
        {"lhs_contracting_dims": (0,), "rhs_contracting_dims": (0,)},
    )  # fmt: skip
    assert ew.features([dot])[0, half] == ew.gemm_layout(dot) == 2
    code = ew.FEATURE_NAMES.index("op_code")
    names = ("floor", "ceil", "round_nearest_even", "round_nearest_afz", "negate")
    codes = ew.features([_op(n, (8, 128), "f32", 1) for n in names])[:, code]
    assert len(set(codes[:4])) == 1 and codes[0] == ew.OP_CODES.index("floor") != codes[4]


def test_a_transposed_convolution_keeps_its_kernels_input_channels() -> None:
    """A stride-2 transposed convolution (lhs_dilation 2) meets real inputs with 2.25 of its
    3x3 taps: K counts those (8 channels x 2.25 = 18), and the channels slot holds the
    kernel's 8, not K over the window's 9 (2, the slow path of 1-3 channel stems)."""
    import jax
    import jax.numpy as jnp
    from conftest import op_infos
    from jax import lax

    def up(x: jax.Array, w: jax.Array) -> jax.Array:
        return lax.conv_transpose(x, w, (2, 2), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))

    x, w = (
        jax.ShapeDtypeStruct((2, 16, 16, 8), jnp.float32),
        jax.ShapeDtypeStruct((3, 3, 8, 4), jnp.float32),
    )
    (conv,) = [
        o for o in op_infos(jax.jit(up).lower(x, w).as_text()) if o.short_name == "convolution"
    ]
    assert ew._gemm_dims(conv) == (1, 2 * 32 * 32, 4, 18)
    assert ew.features([conv])[0, ew.FEATURE_NAMES.index(ew._CHANNELS_SLOT)] == 8


def test_a_depthwise_row_is_priced_near_itself_beside_a_larger_input() -> None:
    """The Zen 4 reference's 4x32x32x32 depthwise row (3692 us) and its 4x56x56x32 neighbour
    (15236 us: 1.6 MB of input, past the L2, 1.3x the time per pixel) differ in the grouped
    model's columns by their size alone without M x K: the trees priced the first 4314 in
    sample; with the implicit GEMM's M x K among them, within 5% of its row."""
    import jax
    import jax.numpy as jnp
    from conftest import op_infos
    from jax import lax

    def depthwise(x: jax.Array, w: jax.Array) -> jax.Array:
        return lax.conv_general_dilated(
            x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"),
            feature_group_count=32,
        )  # fmt: skip

    x, w = (
        jax.ShapeDtypeStruct((4, 32, 32, 32), jnp.float32),
        jax.ShapeDtypeStruct((3, 3, 1, 32), jnp.float32),
    )
    (conv,) = [
        o
        for o in op_infos(jax.jit(depthwise).lower(x, w).as_text())
        if o.short_name == "convolution"
    ]
    data = Path(ew.__file__).resolve().parent / "data"
    zen4 = data / "host_reference_zen4.csv"
    (row,) = [
        r.latency_us
        for r in ew.load_measurements(zen4)
        if r.shape == (4, 32, 32, 32, 3, 3, 32, 1, 32)
    ]
    (cost,) = ew.LearnedLatencyModel(data={"host": zen4}).predict([conv], load_target("host"))
    assert cost.model == "hgb-host-grouped_conv"
    assert cost.latency_ns / 1e3 == pytest.approx(row, rel=0.05)


def test_a_reduce_is_featured_as_xla_normalises_it() -> None:
    """Dims of 1 dropped, neighbouring reduced (or kept) dims merged: a sum of all of
    256x256x3 is priced as the 196,608-element sum it runs as (it was priced as 65,536 rows
    of 3: 62 us against ~13 for the 1-D sum, measured 10-24 us in loops)."""
    assert ew.collapsed_reduce((256, 256, 3), (0, 1, 2)) == ((196608,), (0,))
    assert ew.collapsed_reduce((8, 64, 64, 3), (0, 1, 2)) == ((32768, 3), (0,))
    assert ew.collapsed_reduce((2, 3, 4, 5), (1, 2)) == ((2, 12, 5), (1,))
    assert ew.collapsed_reduce((1, 512, 1, 1000), (3,)) == ((512, 1000), (1,))
    assert ew.collapsed_reduce((1, 1), (0, 1)) == ((1,), (0,))

    def total(shape: tuple[int, ...]) -> OpInfo:
        dims = tuple(range(len(shape)))
        return OpInfo.build(
            0, "stablehlo.reduce", [TensorType(shape, "f32"), TensorType((), "f32")],
            [TensorType((), "f32")], {"dimensions": dims},
        )  # fmt: skip

    flat, cube = ew.LearnedLatencyModel().predict(
        [total((196608,)), total((256, 256, 3))], load_target("host")
    )
    assert cube.latency_ns == pytest.approx(flat.latency_ns)


def test_a_complex_dot_costs_four_real_products() -> None:
    """(a + bi)(c + di) takes four real multiplies: a complex64 dot is priced as four f32 dots
    of its dims (XLA:CPU ran them at 3.6-5.6x the f32 dot; priced as one, 0.19-0.29x), a
    complex128 one as four f64 dots, and the model name says so."""
    host = load_target("host")
    svc = ew.LearnedLatencyModel()
    dims = {"lhs_contracting_dims": (1,), "rhs_contracting_dims": (0,)}

    def dot(t: str) -> OpInfo:
        return OpInfo.build(
            0, "stablehlo.dot_general", [TensorType((128, 256), t), TensorType((256, 64), t)],
            [TensorType((128, 64), t)], dims,
        )  # fmt: skip

    ops = [dot("complex<f32>"), dot("f32"), dot("complex<f64>"), dot("f64")]
    c64, f32, c128, f64 = svc.predict(ops, host)
    assert c64.latency_ns == pytest.approx(4 * f32.latency_ns)
    assert c128.latency_ns == pytest.approx(4 * f64.latency_ns)
    assert c64.model == f32.model + "(complex: 4 real products)"
    # Elementwise complex ops keep their own pricing.
    mul = _op("multiply", (128, 64), "complex<f32>")
    assert "complex" not in svc.predict([mul], host)[0].model


def test_an_integer_dot_is_priced_by_rows_of_its_own_or_as_f32_and_says_so() -> None:
    """XLA:CPU's i32 products run on no GEMM library's path, 3.7-6.4x the f32 product of the
    same dims (Xeon VM, 2026-12-07): with the Xeon reference's i32 rows (op code
    `integer_dot`) a 256^3 one, between its 128^3 and 512^3 rows, is priced between theirs
    and at over 3x the f32 price (it ran 688 us in a loop at sentinels 0.8x the file's level;
    priced as f32, 199 us); an i8 product keeps its own rows; the Zen 4 reference, which has
    no i32 rows, prices it as the f32 product and names the stand-in."""
    host = load_target("host")
    data = Path(ew.__file__).resolve().parent / "data"
    dims = {"lhs_contracting_dims": (1,), "rhs_contracting_dims": (0,)}

    def dot(t: str, n: int = 256, out: str | None = None) -> OpInfo:
        return OpInfo.build(
            0, "stablehlo.dot_general", [TensorType((n, n), t), TensorType((n, n), t)],
            [TensorType((n, n), out or t)], dims,
        )  # fmt: skip

    xeon = data / "host_reference_xeon.csv"
    rows = {
        r.shape: r.latency_us
        for r in ew.load_measurements(xeon)
        if r.op == "dot_general" and r.dtype == "i32"
    }
    i32, f32, i8 = ew.LearnedLatencyModel(data={"host": xeon}).predict(
        [dot("i32"), dot("f32"), dot("i8", out="i32")], host
    )
    assert rows[(1, 128, 128, 128)] < i32.latency_ns / 1e3 < rows[(1, 512, 512, 512)]
    assert 600 < i32.latency_ns / 1e3 < 1100
    assert i32.latency_ns > 3 * f32.latency_ns and i32.model == f32.model == "hgb-host-matmul"
    assert i8.latency_ns < f32.latency_ns
    zen4 = ew.LearnedLatencyModel(data={"host": data / "host_reference_zen4.csv"})
    stand_in, as_f32 = zen4.predict([dot("i32"), dot("f32")], host)
    assert stand_in.latency_ns == pytest.approx(as_f32.latency_ns)
    assert stand_in.model == "hgb-host-matmul(no integer_dot rows: priced as dot_general)"


def test_sine_has_a_model_of_its_own_and_borrows_the_transcendental_one_without_rows() -> None:
    """XLA:CPU's sine of standard normal f32 costs ~7 ns per element (the Xeon reference's
    64x512 row: 215 us, 2026-12-05; 357 in its 2026-12-01 one), ~20x a tanh: with its rows,
    the host prices a 64x512 sine from them; a calibration without sine rows (the AMD
    reference) borrows the transcendental model, scaled, and says so."""
    host = load_target("host")
    data = Path(ew.__file__).resolve().parent / "data"
    sine = _op("sine", (64, 512), "f32", n_in=1)
    tanh = _op("tanh", (64, 512), "f32", n_in=1)
    assert ew.op_model_class(sine) == "trigonometric"
    xeon = ew.LearnedLatencyModel(data={"host": data / "host_reference_xeon.csv"})
    s, t = xeon.predict([sine, tanh], host)
    assert s.model == "hgb-host-trigonometric"
    assert 150e3 < s.latency_ns < 500e3 and s.latency_ns > 5 * t.latency_ns
    amd = ew.LearnedLatencyModel(data={"host": data / "host_reference.csv"})
    (borrowed,) = amd.predict([sine], host)
    assert borrowed.model == "hgb-host-transcendental→trigonometric(scaled)"
