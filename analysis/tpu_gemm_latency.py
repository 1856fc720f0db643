"""TPU v4 GEMM latency: an analytic MXU/HBM core plus a learned correction, fitted on real kernel times.

The core prices one (batched) GEMM the way XLA maps it onto a TPU v4 chip:
the contraction and the stationary output dim padded to the 128x128 MXU, the
streamed dim only to the sublane tile (8 rows of 32-bit words, so 16 for
16-bit types; XLA may stream either M or N and takes the cheaper), work spread
over 2 TensorCores x 4 MXUs at 1.05 GHz, and compulsory HBM traffic at
1200 GB/s. A non-negative linear fit over those terms (a per-kernel floor, MXU
time, output and operand tile traffic, HBM time) keeps the prediction monotone
in every dimension and lets it extrapolate linearly in work; a shallow,
clipped gradient-boosted tree model corrects its residual in log space from
log sizes and alignment ratios. Training data: SCALE-Sim TPU (Dang et al.,
arXiv 2603.22535) xprof kernel times for float16 `jnp.matmul` on TPU v4,
shipped as `analysis/data/tpu_v4_gemm.csv` (see shared/data/tpu_v4/README.md).
Only float16 was measured: other element types reuse the fit with their own
sublane padding and byte counts, an extrapolation.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from functools import cache
from importlib import resources

import numpy as np
from scipy.optimize import nnls
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.ensemble import HistGradientBoostingRegressor
from stablehlo_perf.analysis.opinfo import OpInfo
from stablehlo_perf.analysis.service import OpCost
from stablehlo_perf.analysis.targets import Target
from threadpoolctl import threadpool_limits

__all__ = [
    "FEATURE_NAMES",
    "MODEL_NAME",
    "TpuGemmLatencyRegressor",
    "TpuV4GemmLatency",
    "dot_general_gemm",
    "gemm_features",
    "load_tpu_v4_gemm_data",
    "tpu_v4_gemm_model",
]

# Jouppi et al., "TPU v4: An Optically Reconfigurable Supercomputer", ISCA 2023, Table 1.
CLOCK_GHZ = 1.05
MXU_DIM = 128
MXUS = 2 * 4  # 2 TensorCores x 4 MXUs each
HBM_GB_PER_S = 1200.0
# XLA TPU vreg/layout tile: 8 sublanes x 128 lanes of 32-bit words; narrower
# types pack along sublanes, so a 16-bit operand tiles as (16, 128).
SUBLANE_BYTES = 8 * 4

MODEL_NAME = "systolic-ws+tpu-v4-fit"

FEATURE_NAMES: tuple[str, ...] = (
    "M", "N", "K", "batch", "dtype_bytes",
    "stream_pad", "stat_pad", "k_pad", "folds",
    "mxu_ns", "out_elems", "operand_elems", "hbm_bytes", "hbm_ns",
)  # fmt: skip
_F = {n: i for i, n in enumerate(FEATURE_NAMES)}
# Columns the non-negative linear core combines (plus a constant floor).
_LINEAR = ("mxu_ns", "out_elems", "operand_elems", "hbm_ns")


def _pad(x: np.ndarray, tile: np.ndarray | int) -> np.ndarray:
    return np.ceil(x / tile) * tile


def gemm_features(
    M: np.ndarray | Sequence[int] | int,
    N: np.ndarray | Sequence[int] | int,
    K: np.ndarray | Sequence[int] | int,
    batch: np.ndarray | Sequence[int] | int = 1,
    dtype_bytes: np.ndarray | Sequence[float] | float = 2,
) -> np.ndarray:
    """Analytic features (columns `FEATURE_NAMES`) of batch x (MxK @ KxN) GEMMs on TPU v4.

    Vectorised: every argument broadcasts; returns an (n, len(FEATURE_NAMES)) float array.
    """
    m, n, k, b, eb = np.broadcast_arrays(
        *(np.atleast_1d(np.asarray(v, dtype=float)) for v in (M, N, K, batch, dtype_bytes))
    )
    sub = np.where(eb >= 4, 8.0, np.floor(SUBLANE_BYTES / eb))
    # XLA puts the contraction on the MXU rows, one free dim on its columns
    # (padded to 128) and streams the other through it (padded to the sublane tile).
    m_streams = _pad(m, sub) * _pad(n, MXU_DIM) <= _pad(n, sub) * _pad(m, MXU_DIM)
    stream = np.where(m_streams, _pad(m, sub), _pad(n, sub))
    stat = np.where(m_streams, _pad(n, MXU_DIM), _pad(m, MXU_DIM))
    kp = _pad(k, MXU_DIM)
    folds = b * (kp / MXU_DIM) * (stat / MXU_DIM)
    mxu_ns = b * stream * stat * kp / (MXUS * MXU_DIM * MXU_DIM * CLOCK_GHZ)
    out_elems = b * stream * stat
    operand_elems = b * (stream * kp + kp * stat)
    # Compulsory traffic in logical bytes: the measured skinny kernels show no cost
    # for the layout padding of narrow arrays (2x512x512 and 512x2x512 both take
    # 1.55 us although their (16, 128)-tiled footprints differ by 40%).
    hbm_bytes = b * eb * (m * k + k * n + m * n)
    hbm_ns = hbm_bytes / HBM_GB_PER_S
    cols = (m, n, k, b, eb, stream, stat, kp, folds, mxu_ns, out_elems, operand_elems, hbm_bytes,
            hbm_ns)  # fmt: skip
    return np.stack(cols, axis=1)


def _linear_terms(X: np.ndarray) -> np.ndarray:
    return np.column_stack([np.ones(len(X)), *(X[:, _F[c]] for c in _LINEAR)])


def _tree_features(X: np.ndarray) -> np.ndarray:
    """Log sizes (raw and padded), HBM-vs-MXU balance and alignment ratios, per GEMM."""
    m, n, k = X[:, _F["M"]], X[:, _F["N"]], X[:, _F["K"]]
    return np.column_stack(
        [
            np.log(m), np.log(n), np.log(k),
            np.log(X[:, _F["stream_pad"]]), np.log(X[:, _F["stat_pad"]]), np.log(X[:, _F["k_pad"]]),
            np.log(X[:, _F["hbm_ns"]] / X[:, _F["mxu_ns"]]),
            m / _pad(m, MXU_DIM), n / _pad(n, MXU_DIM), k / X[:, _F["k_pad"]],
        ]
    )  # fmt: skip


class TpuGemmLatencyRegressor(RegressorMixin, BaseEstimator):
    """Latency (ns) of GEMMs from `gemm_features` rows: NNLS analytic core x exp(clipped tree residual).

    The core is fitted by non-negative least squares in relative error, so each
    term (floor, MXU time, output/operand tile traffic, HBM time) can only add
    time; the residual model is a shallow histogram gradient-boosting regressor
    on log(measured / core), clipped to +-`clip` so it cannot overturn the
    physics where the training grid has no data. Predictions never go below the
    fastest kernel seen in training.
    """

    def __init__(
        self,
        max_iter: int = 150,
        learning_rate: float = 0.1,
        max_depth: int = 4,
        min_samples_leaf: int = 20,
        l2_regularization: float = 1.0,
        clip: float = 0.35,
        random_state: int = 0,
    ) -> None:
        self.max_iter = max_iter
        self.learning_rate = learning_rate
        self.max_depth = max_depth
        self.min_samples_leaf = min_samples_leaf
        self.l2_regularization = l2_regularization
        self.clip = clip
        self.random_state = random_state

    def fit(self, X: np.ndarray, y: np.ndarray) -> TpuGemmLatencyRegressor:
        """Fit the core on relative error, then the residual trees on log(y / core)."""
        X, y = np.asarray(X, dtype=float), np.asarray(y, dtype=float)
        terms = _linear_terms(X)
        w = 1.0 / y
        self.coef_, _ = nnls(terms * w[:, None], y * w)
        self.floor_ns_ = float(y.min())
        core = terms @ self.coef_
        # ~2k rows: OpenMP threads only add contention (minutes on a busy 2-core host).
        with threadpool_limits(1, user_api="openmp"):
            self.residual_ = HistGradientBoostingRegressor(
                max_iter=self.max_iter,
                learning_rate=self.learning_rate,
                max_depth=self.max_depth,
                min_samples_leaf=self.min_samples_leaf,
                l2_regularization=self.l2_regularization,
                early_stopping=False,
                random_state=self.random_state,
            ).fit(_tree_features(X), np.log(y / core))
        self.n_features_in_ = X.shape[1]
        return self

    def core_ns(self, X: np.ndarray) -> np.ndarray:
        """The fitted analytic core alone (monotone in every GEMM dimension)."""
        return _linear_terms(np.asarray(X, dtype=float)) @ self.coef_

    def predict(self, X: np.ndarray) -> np.ndarray:
        """Predicted kernel latency in ns, one per row of `X`."""
        X = np.asarray(X, dtype=float)
        with threadpool_limits(1, user_api="openmp"):
            corr = self.residual_.predict(_tree_features(X))
        corr = np.clip(corr, -self.clip, self.clip)
        return np.maximum(self.core_ns(X) * np.exp(corr), self.floor_ns_)


def load_tpu_v4_gemm_data() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(M, N, K) int array, latency in ns and source name per row: the shipped single-fusion matmuls.

    Kept: `matmul` rows that XLA ran as one MXU `fusion` kernel. Left out: the
    1-D `jnp.dot` rows and the 1x1xK matmuls, which XLA lowers to vector
    reduce kernels (`convert_reduce_fusion`, two kernels for the matmul) instead.
    """
    text = resources.files("stablehlo_perf.analysis.data").joinpath("tpu_v4_gemm.csv")
    with text.open(newline="") as fh:
        rows = [
            r for r in csv.DictReader(fh) if r["op"] == "matmul" and r["xla_kernels"] == "fusion"
        ]
    mnk = np.array([[int(r["M"]), int(r["N"]), int(r["K"])] for r in rows])
    latency_ns = np.array([float(r["measured_us"]) * 1e3 for r in rows])
    source = np.array([r["source"] for r in rows])
    return mnk, latency_ns, source


@cache
def tpu_v4_gemm_model() -> TpuGemmLatencyRegressor:
    """The regressor fitted (deterministically) on the shipped TPU v4 float16 GEMM times; cached."""
    mnk, latency_ns, _ = load_tpu_v4_gemm_data()
    X = gemm_features(mnk[:, 0], mnk[:, 1], mnk[:, 2], 1, 2)
    return TpuGemmLatencyRegressor().fit(X, latency_ns)


def dot_general_gemm(op: OpInfo) -> tuple[int, int, int, int]:
    """(batch, M, N, K) of a dot_general: free lhs dims -> M, free rhs dims -> N, contracting -> K.

    Without dimension numbers the last lhs dim contracts with the first rhs dim
    (`stablehlo.dot` semantics).
    """
    lhs, rhs = op.operands[0].shape, op.operands[1].shape
    if lhs is None or rhs is None or not op.is_static:
        raise ValueError(f"{op.name}: dot_general needs static operand shapes")
    lb = tuple(op.attrs.get("lhs_batch_dims", ()))
    rb = tuple(op.attrs.get("rhs_batch_dims", ()))
    lc = tuple(op.attrs.get("lhs_contracting_dims", (len(lhs) - 1,) if lhs else ()))
    rc = tuple(op.attrs.get("rhs_contracting_dims", (0,) if rhs else ()))
    batch = math.prod(lhs[d] for d in lb)
    m = math.prod(s for d, s in enumerate(lhs) if d not in lb and d not in lc)
    n = math.prod(s for d, s in enumerate(rhs) if d not in rb and d not in rc)
    k = math.prod(lhs[d] for d in lc)
    return batch, m, n, k  # type: ignore[return-value]


class TpuV4GemmLatency:
    """Batched service: prices `stablehlo.dot_general`/`dot` on tpu-v4 with the fitted GEMM model."""

    name = MODEL_NAME

    def supports(self, op: OpInfo, target: Target) -> bool:
        return (
            target.name == "tpu-v4"
            and op.short_name in ("dot_general", "dot")
            and len(op.operands) >= 2
            and op.is_static
            and all(d > 0 for t in op.operands[:2] for d in t.shape)  # type: ignore[union-attr]
        )

    def predict(self, ops: Sequence[OpInfo], target: Target) -> list[OpCost]:
        """One model call for the whole batch; cycles at the target clock, util = MXU busy fraction."""
        if not ops:
            return []
        shapes = np.array([dot_general_gemm(op) for op in ops], dtype=float)
        eb = np.array([op.operands[0].elem_bytes for op in ops])
        X = gemm_features(shapes[:, 1], shapes[:, 2], shapes[:, 3], shapes[:, 0], eb)
        latency_ns = tpu_v4_gemm_model().predict(X)
        macs = shapes.prod(axis=1)
        peak_macs_per_ns = MXUS * MXU_DIM * MXU_DIM * target.clock_ghz
        util = macs / (latency_ns * peak_macs_per_ns)
        return [
            OpCost(
                cycles=round(float(t) * target.clock_ghz),
                latency_ns=float(t),
                dram_bytes=int(bb),
                model=self.name,
                extra={"util": float(u)},
            )
            for t, bb, u in zip(latency_ns, X[:, _F["hbm_bytes"]], util, strict=True)
        ]
