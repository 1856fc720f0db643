"""PASCAL dynamic predictor (paper §4, App. C): curve fit, encoding, transfer, file format."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pytest
from stablehlo_perf.analysis import cache_predictor as cp
from stablehlo_perf.analysis.cache_calibration_sim import (
    SimDevice,
    gemm_streams,
    simulate_gemm,
    simulate_scan,
)

EPS = cp.EPSILON
FAMILY = (1, "tma", 4)
WORKERS = 8


def scan_refs(
    k_of: dict[tuple[int, int], float | list[float]], family: tuple[int, str, int] = FAMILY
) -> tuple[cp.ScanReference, ...]:
    """References with fills K * N * W at every horizon; ``k_of[(m, N)]`` is K or K per W."""
    refs = []
    for (m, n), k in sorted(k_of.items()):
        ks = k if isinstance(k, list) else [k] * len(cp.HORIZONS)
        fills = {w: (kw * n * w,) for w, kw in zip(cp.HORIZONS, ks)}
        refs.append(cp.ScanReference(cp.ConfigKey(*family, m), n, WORKERS, fills))
    return tuple(refs)


def calibration(k_of: dict[tuple[int, int], float | list[float]], **kw) -> cp.Calibration:
    """A hand-made measured-style calibration with capacity 16 blocks."""
    return cp.Calibration(
        device="hand",
        source="simulated",
        capacity_blocks=16,
        block_bytes=16384,
        scans=scan_refs(k_of),
        **kw,
    )


def key(m: int) -> cp.ConfigKey:
    """Configuration key in the test family."""
    return cp.ConfigKey(*FAMILY, m)


def a(k: float) -> float:
    """Excess coordinate of a scan (K0 = 1)."""
    return math.log(max(k - 1.0, 0.0) + EPS)


# one size, every class sampled: class 0 at m = 0, 8, 12; class 1 at 1; class 2 at 2
ONE_SIZE = {(0, 32): 1.0, (8, 32): 3.0, (12, 32): 5.0, (1, 32): 2.0, (2, 32): 1.5}


def test_execution_classes() -> None:
    """chi(m) = min(m mod 4, 2): remainders 2 and 3 share the predicated tail (App. C.4)."""
    assert [cp.execution_class(m) for m in range(8)] == [0, 1, 2, 2, 0, 1, 2, 2]
    with pytest.raises(ValueError, match="non-negative integer"):
        cp.execution_class(-1)


def test_excess_coordinate_round_trip_and_clip() -> None:
    """Decode inverts encode above the aligned level, floors at K0 and clips at M (§4.6)."""
    for k in (1.0, 1.3, 2.0, 5.5):
        assert cp.decode_excess(cp.encode_excess(k, 1.0), 1.0, 48) == pytest.approx(k)
    assert cp.decode_excess(cp.encode_excess(3.0, 1.5), 1.5, 48) == pytest.approx(3.0)
    assert cp.encode_excess(0.9, 1.0) == pytest.approx(math.log(EPS))
    assert cp.decode_excess(math.log(EPS) - 3.0, 1.0, 48) == 1.0
    assert cp.decode_excess(10.0, 1.0, 8) == 8.0


def test_excess_error_bound() -> None:
    """App. C.3: a log error delta in the encoding moves K by at most (e + eps)|exp(delta) - 1|."""
    rng = np.random.default_rng(5)
    for _ in range(500):
        k = 1.0 + rng.exponential(1.0) * rng.integers(0, 2)
        delta = rng.normal(0.0, 0.7)
        k_hat = cp.decode_excess(cp.encode_excess(k, 1.0) + delta, 1.0, 1000)
        assert abs(k_hat - k) <= (k - 1.0 + EPS) * abs(math.exp(delta) - 1.0) + 1e-12


def test_reference_is_reproduced_at_all_horizons() -> None:
    """At a reference key and calibrated size, the forecast is the reference's own K."""
    cal = calibration({**ONE_SIZE, (8, 32): [1.0, 1.5, 2.5, 3.0]})
    pred = cp.ScanPredictor().fit(cal)
    for w, k in zip(cp.HORIZONS, [1.0, 1.5, 2.5, 3.0]):
        f = pred.forecast(key(8), 32, w)
        assert f.fill_multiple == pytest.approx(k)
        assert f.miss_rate == pytest.approx(k / WORKERS)
        assert f.fill_bytes == pytest.approx(k * 32 * w * 16384)
    assert f.source == "calibrated:hand (simulated)"


def test_horizon_interpolation_and_clamp() -> None:
    """PCHIP over log W between horizons; K held at the endpoints outside [1, 64] (§4.2)."""
    # cumulative fills N*W*K with K = (1, 2, 2, 2): V = 32 * (1, 8, 32, 128)
    cal = calibration({**ONE_SIZE, (8, 32): [1.0, 2.0, 2.0, 2.0]})
    pred = cp.ScanPredictor().fit(cal)
    v = [pred.forecast(key(8), 32, w).fill_blocks for w in (4, 6, 8, 12, 16)]
    assert v == sorted(v) and v[0] == pytest.approx(256) and v[-1] == pytest.approx(1024)
    # the Fritsch-Butland interpolant of log V over log W, evaluated by hand at W = 8
    x = np.log([1, 4, 16, 64])
    y = np.log(32 * np.array([1, 8, 32, 128]))
    h, delta = np.diff(x), np.diff(y) / np.diff(x)
    d1 = 3 * (h[0] + h[1]) / ((2 * h[1] + h[0]) / delta[0] + (h[1] + 2 * h[0]) / delta[1])
    d2 = 1.0  # equal slopes on both sides of log 16
    t = (math.log(8) - x[1]) / h[1]
    y8 = (
        (2 * t**3 - 3 * t**2 + 1) * y[1]
        + (t**3 - 2 * t**2 + t) * h[1] * d1
        + (-2 * t**3 + 3 * t**2) * y[2]
        + (t**3 - t**2) * h[1] * d2
    )
    assert pred.forecast(key(8), 32, 8).fill_multiple == pytest.approx(math.exp(y8) / (32 * 8))
    # flat K means log V = log(2 N) + log W: PCHIP reproduces it exactly at W = 32
    assert pred.forecast(key(8), 32, 32).fill_multiple == pytest.approx(2.0)
    assert pred.forecast(key(8), 32, 1000).fill_multiple == pytest.approx(2.0)


def test_isotonic_pools_decreasing_traffic() -> None:
    """Cumulative traffic that falls between horizons is pooled by isotonic regression (§4.2)."""
    # V(4) = 12 N, V(16) = 10 N decreases: both become the geometric mean sqrt(120) N
    n = 32
    fills = {1: (1.0 * n,), 4: (12.0 * n,), 16: (10.0 * n,), 64: (200.0 * n,)}
    refs = [r for r in scan_refs(ONE_SIZE) if r.key.compute != 8]
    refs.append(cp.ScanReference(key(8), n, WORKERS, fills))
    cal = replace(calibration(ONE_SIZE), scans=tuple(refs))
    pred = cp.ScanPredictor().fit(cal)
    assert pred.forecast(key(8), n, 4).fill_multiple == pytest.approx(math.sqrt(120) / 4)
    assert pred.forecast(key(8), n, 16).fill_multiple == pytest.approx(
        max(1.0, math.sqrt(120) / 16)
    )


def test_geometric_mean_of_repeats() -> None:
    """Repeated measurements enter as their geometric mean (§4.2)."""
    n = 32
    refs = [r for r in scan_refs(ONE_SIZE) if r.key.compute != 8]
    fills = {w: (2.0 * n * w, 8.0 * n * w) for w in cp.HORIZONS}
    refs.append(cp.ScanReference(key(8), n, WORKERS, fills))
    pred = cp.ScanPredictor().fit(replace(calibration(ONE_SIZE), scans=tuple(refs)))
    assert pred.forecast(key(8), n, 16).fill_multiple == pytest.approx(4.0)


def test_anchored_interpolation_within_class() -> None:
    """Between references: (p + 4 a_lin) / 5 with the aligned anchor p = log eps (App. C.5)."""
    pred = cp.ScanPredictor().fit(calibration(ONE_SIZE))
    a0, a8, a12 = a(1.0), a(3.0), a(5.0)
    lin = (a0 + a8) / 2  # m = 4 sits midway between m = 0 and m = 8
    expect = (math.log(EPS) + 4 * lin) / 5
    k = pred.forecast(key(4), 32, 16).fill_multiple
    assert k == pytest.approx(1 + math.exp(expect) - EPS)
    # the class-mean anchor pulls toward the class's mean encoding instead
    mean = cp.ScanPredictor().fit(calibration(ONE_SIZE, anchor="class-mean"))
    expect_mean = (np.mean([a0, a8, a12]) + 4 * lin) / 5
    k_mean = mean.forecast(key(4), 32, 16).fill_multiple
    assert k_mean == pytest.approx(1 + math.exp(expect_mean) - EPS)
    assert k < k_mean
    # an infinite weight is plain linear interpolation in the excess coordinate
    linear = cp.ScanPredictor().fit(calibration(ONE_SIZE, anchor_weight=math.inf))
    assert linear.forecast(key(4), 32, 16).fill_multiple == pytest.approx(1 + math.exp(lin) - EPS)


def test_classes_do_not_mix_and_compute_is_clamped() -> None:
    """m = 5 (class 1) uses only class-1 references; beyond the class range it is clamped."""
    pred = cp.ScanPredictor().fit(calibration(ONE_SIZE))
    assert pred.forecast(key(5), 32, 16).fill_multiple == pytest.approx(2.0)
    assert pred.forecast(key(40), 32, 16).fill_multiple == pytest.approx(5.0)
    assert pred.forecast(key(7), 32, 16).fill_multiple == pytest.approx(1.5)


def test_size_interpolation_in_capacity_ratio() -> None:
    """Linear in eta = C/N between adjacent reference sizes, clamped outside (§4.4)."""
    k_of = {}
    for m, (k32, k64) in {0: (2.0, 4.0), 1: (1.0, 1.0), 2: (1.0, 1.0)}.items():
        k_of[(m, 32)], k_of[(m, 64)] = k32, k64
    pred = cp.ScanPredictor().fit(calibration(k_of))
    # C = 16: eta(32) = 1/2, eta(64) = 1/4, eta(48) = 1/3 -> one third of the way from N=64
    assert pred.forecast(key(0), 48, 16).fill_multiple == pytest.approx(4.0 + (2.0 - 4.0) / 3)
    assert pred.forecast(key(0), 20, 16).fill_multiple == pytest.approx(2.0)
    assert pred.forecast(key(0), 500, 16).fill_multiple == pytest.approx(4.0)


def test_unsampled_class_is_refused() -> None:
    """A family without references in the target's class is refused, not guessed (App. C.4)."""
    k_of = {(0, 32): 1.0, (8, 32): 3.0, (2, 32): 1.5}
    cal = calibration(k_of)
    with pytest.raises(ValueError, match=r"execution class\(es\) \[1\]"):
        cp.ScanPredictor().fit(cal)
    doc = cal.to_json()
    with pytest.raises(ValueError, match="unsampled class"):
        cp.Calibration.from_json(doc)


def test_uncalibrated_family_and_bad_queries() -> None:
    """Unknown families, cache-resident sizes and bad horizons are clear errors."""
    pred = cp.ScanPredictor().fit(calibration(ONE_SIZE))
    with pytest.raises(ValueError, match="not calibrated"):
        pred.forecast(cp.ConfigKey(2, "sync", 0, 0), 32, 4)
    with pytest.raises(ValueError, match="fits in the 16-block cache"):
        pred.forecast(key(0), 16, 4)
    with pytest.raises(ValueError, match="scans must be a positive integer"):
        pred.forecast(key(0), 32, 0)
    with pytest.raises(ValueError, match="fit"):
        cp.ScanPredictor().forecast(key(0), 32, 4)
    with pytest.raises(ValueError, match="depth 0"):
        cp.ConfigKey(1, "sync", 2, 0)
    with pytest.raises(ValueError, match="load path"):
        cp.ConfigKey(1, "dma", 2, 0)
    with pytest.raises(ValueError, match="compute must be an integer"):
        cp.ConfigKey(1, "tma", 2, 1.5)


def test_file_round_trip(tmp_path) -> None:
    """save -> load gives the same calibration; the document is versioned and labelled."""
    cal = calibration(ONE_SIZE)
    path = tmp_path / "cal.json"
    cal.save(path)
    doc = json.loads(path.read_text())
    assert doc["format"] == cp.FORMAT and doc["version"] == cp.VERSION
    assert doc["source"] == "simulated"
    assert cp.load_calibration(path) == cal


@pytest.mark.parametrize(
    "edit,message",
    [
        (lambda d: d.update(version=99), "unsupported calibration version"),
        (lambda d: d.update(format="other"), "not a cache calibration"),
        (lambda d: d.update(source="guessed"), "source must be"),
        (lambda d: d["scan_references"][0]["fills"].pop("16"), r"lacks horizons \[16\]"),
        (lambda d: d["scan_references"][0].pop("n_blocks"), "lacks field 'n_blocks'"),
        (lambda d: d.update(scan_references=[], gemm_references=[]), "no references"),
        (lambda d: d.update(anchor="median"), "anchor must be"),
        (lambda d: d.update(gemm_anchor="median"), "gemm_anchor must be"),
        (lambda d: d.pop("capacity_blocks"), "lacks"),
    ],
)
def test_bad_calibration_files(edit, message) -> None:
    """Malformed calibration documents raise ValueError naming the defect."""
    doc = calibration(ONE_SIZE).to_json()
    edit(doc)
    with pytest.raises(ValueError, match=message):
        cp.Calibration.from_json(doc)


def test_gemm_static_reference() -> None:
    """B0 = 16384 (nr + nc) nk and K0 = M (nr + nc) / (2 nr nc) (App. C.8)."""
    assert cp.gemm_cold_bytes(8, 8, 16) == 16384 * 16 * 16
    assert cp.gemm_k0(12, 8, 8) == pytest.approx(12 * 16 / 128)
    # GB10-like check: 5120 x 2560 x 5120 FP16 -> (40, 20, 80) tiles, M = 48
    assert cp.gemm_k0(48, 40, 20) == pytest.approx(48 * 60 / 1600)
    # everything fits in L2, or one wave covers the grid: each input tile is read once
    assert cp.static_gemm_fill_multiple(12, 8, 8, 16, 2**30) == 1.0
    assert cp.static_gemm_fill_multiple(64, 8, 8, 16, 2**16) == 1.0


def test_gemm_static_waves_by_hand() -> None:
    """Two waves of 4 CTAs on a 2x4 grid: rows {0} then {1}, columns {0..3} both times.

    Each wave needs 1 row + 4 column panels.  With a one-panel L2 the second wave refetches
    the columns: 5 + 5 = 10 panels for 6 distinct ones (multiple 10/6); with room for the
    first wave's 5 panels it fetches only its new row (6 panels, multiple 1).
    """
    panel = 16384 * 4
    assert cp.static_gemm_fill_multiple(4, 2, 4, 4, panel) == pytest.approx(10 / 6)
    assert cp.static_gemm_fill_multiple(4, 2, 4, 4, 5 * panel) == pytest.approx(1.0)


def test_gemm_dram_traffic_sources() -> None:
    """The pass helper says whether the calibration or the static reference answered."""
    static = cp.gemm_dram_traffic(12, 8, 8, 16, 2**30)
    assert static.source == "static-aligned" and static.fill_multiple == 1.0
    assert static.dram_bytes == cp.gemm_cold_bytes(8, 8, 16)
    sim_cal = cp.simulated_calibration()
    calibrated = cp.gemm_dram_traffic(12, 6, 6, 12, sim_cal.capacity_bytes, sim_cal)
    assert calibrated.source == "calibrated:sim-small (simulated)"
    assert 1.0 <= calibrated.fill_multiple <= 12 / cp.gemm_k0(12, 6, 6)
    mismatch = cp.gemm_dram_traffic(12, 6, 6, 12, 2**30, sim_cal)
    assert mismatch.source.startswith("static-aligned (calibration 'sim-small' unused")
    no_gemm = cp.gemm_dram_traffic(12, 6, 6, 12, 2**20, replace(sim_cal, gemms=()))
    assert "no GEMM references" in no_gemm.source
    with pytest.raises(ValueError, match="nk must be a positive integer"):
        cp.gemm_dram_traffic(12, 6, 6, 0, 2**20)


def test_gemm_transfer_by_hand() -> None:
    """Grid references with constant V/B0 are reproduced between and beyond them (§4.6)."""
    gemms = []
    for nr in (2, 8):
        for nc in (2, 8):
            for nk in (4, 16):
                kappa = 2.0 if nr == 8 else 1.0
                gemms.append(
                    cp.GemmReference(nr, nc, nk, 12, (kappa * cp.gemm_cold_bytes(nr, nc, nk),))
                )
    cal = replace(calibration(ONE_SIZE), gemms=tuple(gemms))
    g = cp.GemmPredictor().fit(cal)
    assert g.fill_multiple(12, 8, 5, 8) == pytest.approx(2.0)
    assert g.fill_multiple(12, 2, 3, 100) == pytest.approx(1.0)
    # nr = 4 is midway in log nr: anchored mean of a(1) and a(2) with the class-mean prior
    lin = (math.log(EPS) + math.log(1 + EPS)) / 2
    expect = 1 + math.exp(lin) - EPS  # prior = mean of the two endpoints = lin
    assert g.fill_multiple(12, 4, 4, 8) == pytest.approx(expect)


def test_simulated_calibration_file() -> None:
    """The bundled file is labelled simulated, complete, and beats the K = 1 baseline."""
    cal = cp.simulated_calibration()
    assert cal.source == "simulated" and "SIMULATED" in cal.note
    assert {r.key.klass for r in cal.scans} == {0, 1, 2}
    fitted_keys = {r.key.compute for r in cal.scans}
    heldout_keys = {h["compute"] for h in cal.heldout if h["kind"] == "scan"}
    assert not fitted_keys & heldout_keys
    report = cp.heldout_report(cal)
    assert report.scan_cases >= 400 and report.gemm_cases >= 8
    assert report.scan_mape < report.scan_baseline_mape
    assert report.gemm_mape < 0.5 * report.gemm_baseline_mape


def test_simulation_reproduces_depth_effect() -> None:
    """The simulated source shows §3.6's contrast: d = 2 stays aligned, d = 4 diverges."""
    cal = cp.simulated_calibration()

    def mean_k(o: int, d: int, w: int) -> float:
        ks = [
            float(np.mean(r.fills[w])) / (r.n_blocks * w)
            for r in cal.scans
            if r.key.family == (o, "tma", d)
        ]
        return float(np.mean(ks))

    assert mean_k(1, 2, 64) < 1.02
    assert mean_k(1, 4, 64) > 1.5
    assert mean_k(1, 4, 1) < 1.02  # a single scan has no time to diverge


def test_forecast_is_fast() -> None:
    """A forecast costs well under the paper's 0.5 ms per op on a fitted predictor (§5.1)."""
    import time

    pred = cp.ScanPredictor().fit(cp.simulated_calibration())
    q = cp.ConfigKey(2, "tma", 4, 5)
    pred.forecast(q, 40, 32)
    t = time.perf_counter()
    for _ in range(200):
        pred.forecast(q, 40, 32)
    assert (time.perf_counter() - t) / 200 < 2e-3


def test_sim_single_worker_misses_every_block() -> None:
    """One worker cycling over N > C blocks under LRU fetches every block every scan."""
    dev = SimDevice(sms=1)
    run = simulate_scan(dev, cp.ConfigKey(1, "tma", 4, 0), 24, 5, seed=1)
    assert run.fills == 24 * 5 and run.workers == 1


def test_sim_without_jitter_stays_aligned() -> None:
    """Identical workers without jitter share every fill: K = 1 exactly."""
    dev = SimDevice(dram_jitter=0.0, l2_jitter=0.0, compute_jitter=0.0, tma_barrier=0.0)
    for k in (cp.ConfigKey(1, "tma", 4, 0), cp.ConfigKey(2, "sync", 0, 3)):
        run = simulate_scan(dev, k, 40, 8, seed=2)
        assert run.fills == 40 * 8


def test_sim_gemm_reads_each_tile_once_when_it_fits() -> None:
    """With every operand tile resident, fills equal the cold reference B0 / 16 KiB."""
    dev = SimDevice(capacity=10_000)
    run = simulate_gemm(dev, cp.ConfigKey(1, "tma", 3, 0), 3, 5, 4, seed=3)
    assert run.fills == (3 + 5) * 4
    streams = gemm_streams(2, 1, 2, 2)
    assert streams == [[0, 2, 1, 4], [0, 3, 1, 5]]


def test_sim_rejects_cache_resident_ring() -> None:
    """The scan must not fit in the simulated cache."""
    with pytest.raises(ValueError, match="must exceed the cache capacity"):
        simulate_scan(SimDevice(), cp.ConfigKey(1, "sync", 0, 0), 16, 1, seed=0)


def test_cache_module_reexports_predictor_lazily() -> None:
    """``cache`` is the public API; its static part does not import scikit-learn."""
    import subprocess
    import sys

    from stablehlo_perf.analysis import cache

    assert cache.gemm_dram_traffic is cp.gemm_dram_traffic
    assert cache.ScanPredictor is cp.ScanPredictor
    # only what importing ``cache`` itself adds counts (the package may import more)
    code = (
        "import sys\n"
        "import stablehlo_perf.analysis\n"
        "before = 'sklearn' in sys.modules\n"
        "from stablehlo_perf.analysis import cache\n"
        "assert cache.gap_law_misses(8, 2, (0, 4)) == 2.0\n"
        "assert before or 'sklearn' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = cache.nope
