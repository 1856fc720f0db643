"""Cross-validated MAPE of the TPU v4 GEMM latency model against the SCALE-Sim-cycles baseline.

Data: the shipped real TPU v4 float16 `jnp.matmul` kernel times
(`analysis/data/tpu_v4_gemm.csv`). Every split holds out whole shapes:
GroupKFold by (M, N, K), also scored on its skinny rows and on its rows with
every dim >= 1024; the largest 20% by volume; every shape with a dim of
2560 or more; skinny shapes (min dim <= 32 and max dim >= 8x min); the
shapes off the 128-grid (min dim >= 128, some dim not a multiple of 128), the
closest proxy the data has for unaligned shapes; and elongated shapes (min dim
>= 128, max dim >= 4x min), a proxy for random shapes that mix small and large
dims. Baselines: SCALE-Sim
weight-stationary cycles on one 128x128 array at 1.05 GHz (the SCALE-Sim TPU
paper's pipeline, arXiv 2603.22535), the same cycles with a fitted
`a + b * cycles` mapping, and this model's analytic core without the trees.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy.optimize import nnls
from sklearn.model_selection import GroupKFold
from stablehlo_perf.analysis import systolic
from stablehlo_perf.analysis import tpu_gemm_latency as tgl

Split = list[tuple[np.ndarray, np.ndarray]]
FitPredict = Callable[[np.ndarray, np.ndarray], np.ndarray]


def scalesim_cycles(mnk: np.ndarray) -> np.ndarray:
    """SCALE-Sim 'Total Cycles' for each GEMM, WS on 128x128 (the dataset's column, for all rows)."""
    arr = systolic.ArrayConfig(
        rows=128, cols=128, dataflow="ws", ifmap_sram_kb=6144, filter_sram_kb=6144,
        ofmap_sram_kb=2048,
    )  # fmt: skip
    return np.array([systolic.simulate_gemm(int(m), int(n), int(k), arr).total_cycles
                     for m, n, k in mnk], dtype=float)  # fmt: skip


def splits(mnk: np.ndarray) -> dict[str, Split]:
    """Named train/test index splits; every one holds out whole shapes."""
    m, n, k = mnk.T
    idx = np.arange(len(mnk))
    groups = np.unique(mnk, axis=0, return_inverse=True)[1].ravel()
    vol = m.astype(float) * n * k
    lo, hi = mnk.min(axis=1), mnk.max(axis=1)
    held = {
        "largest 20%": vol >= np.quantile(vol, 0.8),
        "max dim >= 2560": hi >= 2560,
        "skinny": (lo <= 32) & (hi >= 8 * lo),
        "off 128-grid": (lo >= 128) & ((mnk % 128) != 0).any(axis=1),
        "elongated": (lo >= 128) & (hi >= 4 * lo),
    }
    gkf = list(GroupKFold(5).split(idx, groups=groups))
    out: dict[str, Split] = {"GroupKFold(5)": gkf}
    # The same folds scored on subsets: how new shapes fare where training has neighbours.
    for name, mask in {"skinny": held["skinny"], "dims >= 1024": lo >= 1024}.items():
        out[f"GKF: {name} rows"] = [(tr, te[mask[te]]) for tr, te in gkf]
    out.update({f"hold {name}": [(idx[~mask], idx[mask])] for name, mask in held.items()})
    return out


def cv_mape(fit_predict: FitPredict, y: np.ndarray, split: Split) -> tuple[float, float, int]:
    """(MAPE, 90th-percentile APE, n) over the held-out rows of `split`."""
    pred = np.full(len(y), np.nan)
    for tr, te in split:
        pred[te] = fit_predict(tr, te)
    held = ~np.isnan(pred)
    ape = np.abs(pred[held] - y[held]) / y[held]
    return float(ape.mean()), float(np.quantile(ape, 0.9)), int(held.sum())


def main() -> None:
    mnk, y, _ = tgl.load_tpu_v4_gemm_data()
    X = tgl.gemm_features(mnk[:, 0], mnk[:, 1], mnk[:, 2], 1, 2)
    ss_ns = scalesim_cycles(mnk) / tgl.CLOCK_GHZ

    def model(tr: np.ndarray, te: np.ndarray) -> np.ndarray:
        return tgl.TpuGemmLatencyRegressor().fit(X[tr], y[tr]).predict(X[te])

    def core(tr: np.ndarray, te: np.ndarray) -> np.ndarray:
        return tgl.TpuGemmLatencyRegressor(max_iter=1).fit(X[tr], y[tr]).core_ns(X[te])

    def scalesim_fit(tr: np.ndarray, te: np.ndarray) -> np.ndarray:
        a = np.column_stack([np.ones(len(tr)), ss_ns[tr]]) / y[tr, None]
        coef, _ = nnls(a, np.ones(len(tr)))
        return coef[0] + coef[1] * ss_ns[te]

    rows: dict[str, FitPredict] = {
        "this model": model,
        "core only": core,
        "SCALE-Sim/1.05GHz": lambda tr, te: ss_ns[te],
        "SCALE-Sim a+b*cyc": scalesim_fit,
    }
    named = splits(mnk)
    print(f"TPU v4 float16 matmul, {len(y)} measured rows, {len(np.unique(mnk, axis=0))} shapes")
    print("MAPE (90th-percentile APE) on held-out shapes\n")
    print(f"{'split':24s}{'rows':>6s}" + "".join(f"{r:>20s}" for r in rows))
    for name, sp in named.items():
        cells = []
        for fp in rows.values():
            mape, p90, n = cv_mape(fp, y, sp)
            cells.append(f"{100 * mape:.1f}% ({100 * p90:.0f}%)")
        print(f"{name:24s}{n:6d}" + "".join(f"{c:>20s}" for c in cells))
    fitted = tgl.tpu_v4_gemm_model()
    ape = np.abs(fitted.predict(X) - y) / y
    print(f"\nshipped model, in-sample: MAPE {100 * ape.mean():.1f}%, coef {fitted.coef_.round(5)}")


if __name__ == "__main__":
    main()
