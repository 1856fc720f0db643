"""Held-out MAPE of the PASCAL dynamic predictor on the simulated calibration (paper §5.4).

Prints the predictor's and the aligned ``K = 1`` (GEMM: ``B0``) baseline's fill-multiple
MAPE on the held-out runs stored in the bundled simulated calibration, split into aligned
and divergent runs, and the leave-one-reference-out comparison of anchor choices used to
fix the anchor term (App. C.5).  Regenerate the calibration with ``--regenerate``.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import replace

import numpy as np
from stablehlo_perf.analysis import cache_predictor as cp


def split_errors(cal: cp.Calibration) -> dict[str, tuple[int, float, float]]:
    """Scan held-out MAPE (predictor, baseline) for aligned (K <= 1.05) and divergent runs."""
    pred = cp.ScanPredictor().fit(cal)
    groups: dict[str, list[tuple[float, float]]] = {"aligned": [], "divergent": []}
    for h in cal.heldout:
        if h["kind"] != "scan":
            continue
        key = cp.ConfigKey(h["occupancy"], h["path"], h["depth"], h["compute"])
        k = h["fills"] / (h["n_blocks"] * h["scans"])
        f = pred.forecast(key, h["n_blocks"], h["scans"]).fill_multiple
        groups["divergent" if k > 1.05 else "aligned"].append((abs(f - k) / k, abs(1 - k) / k))
    return {
        g: (
            len(e),
            100 * float(np.mean([a for a, _ in e])),
            100 * float(np.mean([b for _, b in e])),
        )
        for g, e in groups.items()
        if e
    }


def leave_one_out(cal: cp.Calibration) -> float:
    """MAPE predicting each reference compute count from the others (references only)."""
    errors = []
    keys = sorted({r.key for r in cal.scans})
    for key in keys:
        rest = tuple(r for r in cal.scans if r.key != key)
        if not any(r.key.family == key.family and r.key.klass == key.klass for r in rest):
            continue
        pred = cp.ScanPredictor().fit(replace(cal, scans=rest, heldout=()))
        for r in cal.scans:
            if r.key != key:
                continue
            for w in cal.horizons:
                k = math.exp(np.mean(np.log(r.fills[w]))) / (r.n_blocks * w)
                f = pred.forecast(key, r.n_blocks, w).fill_multiple
                errors.append(abs(f - k) / k)
    return 100 * float(np.mean(errors))


def gemm_leave_one_out(cal: cp.Calibration) -> float:
    """MAPE predicting each reference tile grid (nr, nc), at every nk, from the other grids."""
    errors = []
    for nr, nc in sorted({(g.nr, g.nc) for g in cal.gemms}):
        rest = tuple(g for g in cal.gemms if (g.nr, g.nc) != (nr, nc))
        pred = cp.GemmPredictor().fit(replace(cal, gemms=rest))
        for g in cal.gemms:
            if (g.nr, g.nc) == (nr, nc):
                true = math.exp(np.mean(np.log(g.fill_bytes))) / cp.gemm_cold_bytes(nr, nc, g.nk)
                errors.append(abs(pred.fill_multiple(g.workers, nr, nc, g.nk) - true) / true)
    return 100 * float(np.mean(errors))


def repeat_floor(cal: cp.Calibration) -> float:
    """MAPE of predicting each held-out scan run by an independent repeat (noise floor, §5.4)."""
    from stablehlo_perf.analysis.cache_calibration_sim import SimDevice, simulate_scan

    errors = []
    for i, h in enumerate(cal.heldout):
        if h["kind"] != "scan":
            continue
        key = cp.ConfigKey(h["occupancy"], h["path"], h["depth"], h["compute"])
        k = h["fills"] / (h["n_blocks"] * h["scans"])
        rerun = simulate_scan(SimDevice(), key, h["n_blocks"], h["scans"], seed=10**7 + i)
        errors.append(abs(rerun.fills / (h["n_blocks"] * h["scans"]) - k) / k)
    return 100 * float(np.mean(errors))


def main() -> None:
    """Print the held-out report and the anchor comparison."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--regenerate", action="store_true", help="re-run the simulation (minutes)")
    ap.add_argument("--noise-floor", action="store_true", help="re-simulate held-out repeats")
    args = ap.parse_args()
    if args.regenerate:
        from stablehlo_perf.analysis.cache_calibration_sim import build_calibration

        build_calibration().save(cp.bundled_calibration_path())
    cal = cp.simulated_calibration()
    print(
        f"calibration: {cal.device} ({cal.source}); {len(cal.scans)} scan and "
        f"{len(cal.gemms)} GEMM references, {len(cal.heldout)} held-out runs"
    )
    r = cp.heldout_report(cal)
    print(
        f"scan held-out MAPE  predictor {r.scan_mape:6.2f}%   aligned K=1 {r.scan_baseline_mape:6.2f}%"
        f"   ({r.scan_cases} runs)"
    )
    for g, (n, a, b) in split_errors(cal).items():
        print(f"  {g:9s} runs     predictor {a:6.2f}%   aligned K=1 {b:6.2f}%   ({n} runs)")
    print(
        f"GEMM held-out MAPE  predictor {r.gemm_mape:6.2f}%   static B0   {r.gemm_baseline_mape:6.2f}%"
        f"   ({r.gemm_cases} shapes)"
    )
    if args.noise_floor:
        print(
            f"  repeat-run noise floor (each held-out run predicted by its repeat) "
            f"{repeat_floor(cal):6.2f}%"
        )
    print("anchor choice, leave-one-reference-out MAPE on the references only:")
    for anchor, weight in (("aligned", 4.0), ("class-mean", 4.0), ("class-mean", math.inf)):
        label = "linear (no anchor)" if math.isinf(weight) else f"{anchor}, weight {weight:g}"
        c = replace(cal, anchor=anchor, gemm_anchor=anchor, anchor_weight=weight)
        print(f"  {label:22s} scan {leave_one_out(c):6.2f}%   GEMM {gemm_leave_one_out(c):6.2f}%")


if __name__ == "__main__":
    main()
