"""TPU v4 GEMM latency model: analytic features by hand, fit quality, floors, monotonicity, service."""

from __future__ import annotations

import csv
from importlib import resources

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.model_selection import GroupKFold
from stablehlo_perf.analysis import tpu_gemm_latency as tgl
from stablehlo_perf.analysis.opinfo import OpInfo, TensorType
from stablehlo_perf.analysis.targets import load_target

F = {n: i for i, n in enumerate(tgl.FEATURE_NAMES)}


def feat(M: int, N: int, K: int, batch: int = 1, eb: int = 2) -> dict[str, float]:
    row = tgl.gemm_features(M, N, K, batch, eb)[0]
    return {n: float(row[i]) for n, i in F.items()}


@pytest.fixture(scope="module")
def data() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    mnk, y, _ = tgl.load_tpu_v4_gemm_data()
    return mnk, y, tgl.gemm_features(mnk[:, 0], mnk[:, 1], mnk[:, 2], 1, 2)


def test_features_aligned_cube_by_hand() -> None:
    f = feat(128, 128, 128)
    assert (f["stream_pad"], f["stat_pad"], f["k_pad"], f["folds"]) == (128, 128, 128, 1)
    assert f["mxu_ns"] == pytest.approx(128**3 / (8 * 128 * 128 * 1.05))  # 15.238 ns on 8 MXUs
    assert f["out_elems"] == 128 * 128
    assert f["operand_elems"] == 2 * 128 * 128
    assert f["hbm_bytes"] == 2 * 3 * 128 * 128
    assert f["hbm_ns"] == pytest.approx(98304 / 1200)


def test_features_unaligned_pad_to_mxu_and_sublane_tiles() -> None:
    f = feat(1000, 1000, 1000)
    assert (f["stream_pad"], f["stat_pad"], f["k_pad"], f["folds"]) == (1008, 1024, 1024, 64)
    assert f["hbm_bytes"] == 2 * 3 * 1000 * 1000
    f32 = feat(100, 100, 100, eb=4)  # 32-bit tiles are (8, 128)
    assert (f32["stream_pad"], f32["stat_pad"], f32["k_pad"]) == (104, 128, 128)
    assert f32["hbm_bytes"] == 4 * 3 * 100 * 100


def test_features_skinny_streams_the_small_free_dim() -> None:
    f = feat(4096, 8, 8)  # N streams (pad 16), M sits on the MXU columns
    assert (f["stream_pad"], f["stat_pad"], f["k_pad"], f["folds"]) == (16, 4096, 128, 32)
    assert f["hbm_bytes"] == 2 * (4096 * 8 + 8 * 8 + 4096 * 8)  # logical bytes, no layout padding


def test_features_batch_multiplies_work() -> None:
    one, four = feat(64, 256, 512), feat(64, 256, 512, batch=4)
    assert four["folds"] == 4 * one["folds"] == 4 * 4 * 2
    for name in ("mxu_ns", "out_elems", "operand_elems", "hbm_bytes"):
        assert four[name] == pytest.approx(4 * one[name])


def test_fold_counts_match_scalesim_column() -> None:
    """Where M streams, WS folds x (2R + C + M - 2) - 1 is SCALE-Sim's 'Total Cycles' (128x128)."""
    path = resources.files("stablehlo_perf.analysis.data").joinpath("tpu_v4_gemm.csv")
    with path.open(newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r["op"] == "matmul" and r["scalesim_total_cycles"]]
    mnk = np.array([[int(r["M"]), int(r["N"]), int(r["K"])] for r in rows])
    cycles = np.array([int(float(r["scalesim_total_cycles"])) for r in rows])
    X = tgl.gemm_features(mnk[:, 0], mnk[:, 1], mnk[:, 2])
    m_streams = X[:, F["stat_pad"]] == np.ceil(mnk[:, 1] / 128) * 128
    assert m_streams.sum() > 1000
    ws = X[:, F["folds"]] * (2 * 128 + 128 + mnk[:, 0] - 2) - 1
    np.testing.assert_array_equal(ws[m_streams], cycles[m_streams])


def test_fit_is_deterministic(data: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
    _, y, X = data
    a = tgl.TpuGemmLatencyRegressor().fit(X, y).predict(X[:50])
    b = clone(tgl.TpuGemmLatencyRegressor()).fit(X, y).predict(X[:50])
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, tgl.tpu_v4_gemm_model().predict(X[:50]))
    assert tgl.tpu_v4_gemm_model() is tgl.tpu_v4_gemm_model()


def test_known_shapes_close_to_measured() -> None:
    model = tgl.tpu_v4_gemm_model()
    # (M, N, K) -> measured median us (data_matmul5/6/7, 10-20 repeats)
    for (m, n, k), us in {
        (128, 128, 128): 1.31,
        (512, 512, 512): 6.89,
        (4096, 4096, 4096): 966.7,
    }.items():
        pred = model.predict(tgl.gemm_features(m, n, k))[0] / 1e3
        assert pred == pytest.approx(us, rel=0.15)


def test_grouped_cv_mape(data: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
    """GroupKFold(5) by shape: 4.9% measured (benchmarks/tpu_v4_gemm_latency.py); SCALE-Sim fit: 19.5%."""
    mnk, y, X = data
    groups = np.unique(mnk, axis=0, return_inverse=True)[1].ravel()
    pred = np.empty_like(y)
    for tr, te in GroupKFold(5).split(X, y, groups):
        pred[te] = tgl.TpuGemmLatencyRegressor().fit(X[tr], y[tr]).predict(X[te])
    mape = np.mean(np.abs(pred - y) / y)
    assert 0.03 < mape < 0.065


def test_never_below_floor() -> None:
    model = tgl.tpu_v4_gemm_model()
    assert model.floor_ns_ == pytest.approx(
        594.375
    )  # the 2x2x2 matmul, the fastest kernel measured
    tiny = tgl.gemm_features([1, 1, 2, 3, 1], [1, 2, 1, 3, 7], [1, 1, 1, 5, 2])
    assert (model.predict(tiny) >= model.floor_ns_).all()
    assert (model.core_ns(tiny) > 850).all()  # the fitted per-kernel floor term is ~0.9 us


def test_monotone_sane_sweeps() -> None:
    """Sweeping one dim 1..4096: never more than 20% below any smaller size's prediction.

    The measurements themselves drop by up to 25% (128x128x144 1.89 us, 128x128x256 1.45 us).
    """
    model = tgl.tpu_v4_gemm_model()
    x = np.arange(1, 4097)
    for other in (1, 8, 64, 300, 1024, 4096):
        for axis in range(3):
            dims = [np.full_like(x, other) for _ in range(3)]
            dims[axis] = x
            p = model.predict(tgl.gemm_features(*dims))
            assert (p / np.maximum.accumulate(p)).min() > 0.8, (axis, other)
    cubes = model.predict(tgl.gemm_features(*[np.array([128, 512, 1024, 2048, 4096])] * 3))
    assert (np.diff(cubes) > 0).all()
    core = model.core_ns(tgl.gemm_features(x, 1000, 3000))
    assert (np.diff(core) >= 0).all()


def test_skinny_and_unaligned_are_physical() -> None:
    model = tgl.tpu_v4_gemm_model()
    skinny = model.predict(tgl.gemm_features([4096, 8, 8], [8, 4096, 8], [8, 8, 4096])) / 1e3
    assert ((skinny > 1.0) & (skinny < 3.0)).all()  # ~0.9 us floor + little work
    odd, even = model.predict(tgl.gemm_features([4095, 2049], [4095, 2049], [4095, 2049]))
    assert odd / model.predict(tgl.gemm_features(4096, 4096, 4096))[0] == pytest.approx(1, rel=1e-3)
    assert even > model.predict(tgl.gemm_features(2048, 2048, 2048))[0]  # padded to 2176


def _dot(
    lhs: tuple[int, ...], rhs: tuple[int, ...], out: tuple[int, ...], **attrs: tuple
) -> OpInfo:
    return OpInfo.build(
        1,
        "stablehlo.dot_general",
        [TensorType(lhs, "f16"), TensorType(rhs, "f16")],
        [TensorType(out, "f16")],
        attrs,
    )


def test_dot_general_mapping() -> None:
    batched = _dot(
        (4, 64, 512), (4, 512, 256), (4, 64, 256),
        lhs_batch_dims=(0,), rhs_batch_dims=(0,),
        lhs_contracting_dims=(2,), rhs_contracting_dims=(1,),
    )  # fmt: skip
    assert tgl.dot_general_gemm(batched) == (4, 64, 256, 512)
    transposed = _dot((512, 64), (256, 512), (64, 256),
                      lhs_contracting_dims=(0,), rhs_contracting_dims=(1,))  # fmt: skip
    assert tgl.dot_general_gemm(transposed) == (1, 64, 256, 512)
    assert tgl.dot_general_gemm(_dot((32, 128), (128, 64), (32, 64))) == (1, 32, 64, 128)
    assert tgl.dot_general_gemm(_dot((128,), (128,), ())) == (1, 1, 1, 128)


def test_service_prices_batch_with_one_model_call(monkeypatch: pytest.MonkeyPatch) -> None:
    target = load_target("tpu-v4")
    svc = tgl.TpuV4GemmLatency()
    op = _dot(
        (4, 64, 512), (4, 512, 256), (4, 64, 256),
        lhs_batch_dims=(0,), rhs_batch_dims=(0,),
        lhs_contracting_dims=(2,), rhs_contracting_dims=(1,),
    )  # fmt: skip
    plain = _dot((32, 128), (128, 64), (32, 64))
    assert svc.supports(op, target) and svc.supports(plain, target)
    assert not svc.supports(op, load_target("tpu-v5e"))
    add = OpInfo.build(2, "stablehlo.add", [TensorType((4,), "f16")] * 2, [TensorType((4,), "f16")])
    assert not svc.supports(add, target)

    model = tgl.tpu_v4_gemm_model()
    calls: list[int] = []

    class Counting:
        def predict(self, X: np.ndarray) -> np.ndarray:
            calls.append(len(X))
            return model.predict(X)

    monkeypatch.setattr(tgl, "tpu_v4_gemm_model", lambda: Counting())
    cost, cost_plain = svc.predict([op, plain], target)
    assert calls == [2]
    X = tgl.gemm_features(64, 256, 512, 4, 2)
    expect = model.predict(X)[0]
    assert cost.model == "systolic-ws+tpu-v4-fit"
    assert cost.latency_ns == pytest.approx(expect)
    assert cost.cycles == round(expect * 1.05)
    assert cost.dram_bytes == 4 * 2 * (64 * 512 + 512 * 256 + 64 * 256)
    macs = 4 * 64 * 256 * 512
    assert cost.extra["util"] == pytest.approx(macs / (expect * 8 * 128 * 128 * 1.05))
    assert 0 < cost_plain.extra["util"] < cost.extra["util"] < 1
    assert cost_plain.latency_ns >= model.floor_ns_
