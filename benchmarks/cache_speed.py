"""Speed of PASCAL forecasts versus exact trace simulation (paper §5.1).

Prints: the dynamic predictor's time per forecast (target <= 0.5 ms per op), the GEMM fill
helper's time per call, the gap law's scaling in the number of distinct phases D
(O(D log D)), and at paper scale (N = 8192, M = 48, C = 1280) the time of the closed forms
against an exact LRU simulation of the same configuration, as a ratio.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
from stablehlo_perf.analysis import cache, cache_sim
from stablehlo_perf.analysis import cache_predictor as cp


def per_call(fn: Callable[[], object], repeat: int) -> float:
    """Mean seconds per call over ``repeat`` calls (after one warm-up call)."""
    fn()
    t = time.perf_counter()
    for _ in range(repeat):
        fn()
    return (time.perf_counter() - t) / repeat


def main() -> None:
    """Run and print every timing."""
    cal = cp.simulated_calibration()
    t = time.perf_counter()
    pred = cp.ScanPredictor().fit(cal)
    print(f"predictor fit (once per calibration): {1e3 * (time.perf_counter() - t):.1f} ms")
    key = cp.ConfigKey(2, "tma", 4, 5)
    f = per_call(lambda: pred.forecast(key, 40, 32), 2000)
    print(
        f"scan forecast per op: {1e3 * f:.3f} ms (paper budget 0.5 ms) -> "
        f"{'OK' if f <= 5e-4 else 'OVER'}"
    )
    g = per_call(lambda: cp.gemm_dram_traffic(12, 6, 6, 12, cal.capacity_bytes, cal), 2000)
    print(f"GEMM fill multiple per op (calibrated): {1e3 * g:.3f} ms")
    s = per_call(lambda: cp.gemm_dram_traffic(132, 64, 64, 128, 50 * 2**20), 200)
    print(f"GEMM fill multiple per op (static, 4096 tiles): {1e3 * s:.3f} ms")

    rng = np.random.default_rng(0)
    print("gap law vs distinct phases D (N = 2**22, C = N/8):")
    n = 2**22
    for d in (10, 100, 1_000, 10_000, 100_000):
        phases = rng.choice(n, d, replace=False)
        tg = per_call(lambda p=phases: cache.gap_law_misses(n, n // 8, p), 5)
        print(
            f"  D = {d:6d}: {1e3 * tg:8.3f} ms  ({1e9 * tg / (d * np.log2(d)):.1f} ns per D log2 D)"
        )

    n, m, c = 8192, 48, 1280
    print(f"paper scale N = {n}, M = {m}, C = {c}:")
    for name, phases in {
        "aligned": [0] * m,
        "12 clusters": [((w % 12) * n) // 12 for w in range(m)],
        "uniform random": rng.integers(0, n, m).tolist(),
    }.items():
        tg = per_call(lambda p=phases: cache.gap_law_misses(n, c, p), 50)
        tl = per_call(lambda p=phases: cache.lru_misses(n, c, p), 20)
        t0 = time.perf_counter()
        sim = cache_sim.simulate_lru(n, c, phases)
        ts = time.perf_counter() - t0
        k = cache.gap_law_misses(n, c, phases)
        print(
            f"  {name:14s} K={k:4.0f} LRU={float(sim):4.0f} | gap law {1e3 * tg:.3f} ms, "
            f"lru_misses {1e3 * tl:.3f} ms, LRU simulation {ts:.2f} s "
            f"(simulation / gap law = {ts / tg:,.0f}x, / lru_misses = {ts / tl:,.0f}x)"
        )
    tf = per_call(lambda: pred.forecast(key, 40, 32), 2000)
    print(
        f"  one dynamic forecast ({1e3 * tf:.3f} ms) vs one paper-scale LRU simulation: {ts / tf:,.0f}x"
    )


if __name__ == "__main__":
    main()
