"""CC4CS carried over to StableHLO: a per-target, per-class distribution of cycles per unit of work.

The CC4CS paper (`shared/papers/cc4cs.txt`) characterises a processor by the
distribution of one unified metric, clock cycles per executed C statement
(Eq. 9), fitted over many functions and inputs; the family is chosen by
goodness of fit (NLogL, BIC, AIC, AICc, §4.1: lognormal for processors,
normal for accelerators), lognormal parameters come from moment matching, and
a function's time is statements x median metric x clock period (Eq. 12). A
LASSO regression on statement counts (CLRA, Eq. 10-13; 10-fold CV, alpha=1
i.e. pure L1) corrects it, scored by PE, MAPE, R² and a reliability metric.

Here the "statement" is a StableHLO op. An op pays a fixed per-kernel cost
(launch, pipeline fill: the paper's β0 per statement) and then cycles in
proportion to its work, so the metric is the *marginal* cycles per unit of
work, `(cycles - floor) / work`, with work in FLOPs (matmul), elements
(elementwise classes) or bytes (movement, reduction, other). That makes the
metric comparable across targets (for matmul it is the inverse of achieved
FLOPs per cycle). Per (target, class) this module keeps the floor, the
selected family and its parameters; an op's median and p10/p90 latency are
`floor + Q(m) x work` over the clock.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np
from stablehlo_perf.analysis.opinfo import OpInfo
from stablehlo_perf.analysis.service import OpCost
from stablehlo_perf.analysis.targets import Target


def _scipy_stats():
    """scipy.stats, imported when a fit or a non-normal quantile needs it (it takes ~1 s)."""
    from scipy import stats

    return stats


__all__ = [
    "CANDIDATES",
    "CLRA",
    "FEATURE_CLASSES",
    "CC4CSModel",
    "ClassDistribution",
    "DistributionFit",
    "MeasuredOp",
    "ModuleEstimate",
    "TargetCharacterisation",
    "characterise",
    "error_metrics",
    "fit_candidates",
    "intervals_for",
    "load_characterisation",
    "load_module_lasso",
    "metric_class",
    "module_features",
    "moment_match_lognormal",
    "op_work",
    "select_distribution",
    "tpu_v4_records",
    "work_of",
]

# Work unit per op class: what the metric is normalised by.
_ELEMENT_CLASSES = {"binary", "unary", "compare_select", "convert", "transcendental"}
FEATURE_CLASSES = (
    "matmul", "binary", "compare_select", "transcendental", "unary", "convert",
    "movement", "reduction", "other", "small_loop",
)  # fmt: skip
# Candidate families (paper §4.1 names normal, lognormal, beta, Weibull). Beta
# needs a bounded support and this metric has none, so gamma takes its place.
CANDIDATES = ("lognorm", "norm", "gamma", "weibull_min")
_CRITERIA = ("nlogl", "aic", "bic", "aicc")


def work_unit(op_class: str) -> str:
    """Unit the metric of `op_class` is normalised by: flop, element or byte."""
    if op_class == "matmul":
        return "flop"
    if op_class in _ELEMENT_CLASSES:
        return "element"
    return "byte"


def work_of(
    op_class: str, flops: int | None, transcendentals: int | None, nbytes: int | None
) -> float:
    """The op's work in its class's unit (0 when unknown)."""
    unit = work_unit(op_class)
    if unit == "flop":
        return float(flops or 0)
    if unit == "element":
        return float((flops or 0) + (transcendentals or 0))
    return float(nbytes or 0)


def op_work(op: OpInfo) -> float:
    """`work_of` for an OpInfo."""
    return work_of(op.op_class, op.flops, op.transcendentals, op.bytes)


def metric_class(op: OpInfo) -> str:
    """The class an op's metric is characterised in: its op class, or the class of its own
    the learned models give it (`elementwise.op_model_class`: sort, argmax, pools and
    scans, top_k, FFT, gather). Their cost per unit of work is unlike their op class's:
    with sort, top_k and pools inside "reduction", the host's median cycles per byte
    rose 40x (0.08 -> 3.1) and the CC4CS op sum of the e2e zoo went from 41% to 117% MAPE."""
    from stablehlo_perf.analysis.elementwise import op_model_class  # sklearn: imported on use

    return op_model_class(op)


@dataclass(frozen=True)
class MeasuredOp:
    """One measured op: its class, its work (in the class's unit) and the measured latency."""

    target: str
    op_class: str
    work: float
    latency_ns: float
    source: str = ""


# ---------------------------------------------------------------- distributions


@dataclass(frozen=True)
class DistributionFit:
    """One candidate family fitted by maximum likelihood, with its goodness-of-fit scores."""

    family: str
    params: tuple[float, ...]
    nlogl: float
    aic: float
    bic: float
    aicc: float
    n: int

    def score(self, criterion: str) -> float:
        return float(getattr(self, criterion))


def _mle(family: str, x: np.ndarray) -> tuple[tuple[float, ...], int]:
    """MLE parameters and their count; positive families have their location fixed at 0."""
    from scipy import stats  # fitting only: kept off the import path of every analysis

    dist = getattr(stats, family)
    if family == "norm":
        return (float(np.mean(x)), float(np.std(x))), 2
    if family == "lognorm":
        logs = np.log(x)
        return (float(np.std(logs)), 0.0, float(np.exp(np.mean(logs)))), 2
    return tuple(float(p) for p in dist.fit(x, floc=0)), 2


def fit_candidates(
    x: Sequence[float], candidates: Sequence[str] = CANDIDATES
) -> list[DistributionFit]:
    """Fit every candidate family to `x`; a family that cannot hold the data (x <= 0 for a
    positive family) gets infinite scores. NLogL is the negative log-likelihood, and
    AIC = 2k + 2 NLogL, BIC = k ln n + 2 NLogL, AICc = AIC + 2k(k+1)/(n-k-1) (paper §4.1)."""
    arr = np.asarray(x, dtype=float)
    n = len(arr)
    fits = []
    for family in candidates:
        if family != "norm" and np.any(arr <= 0):
            fits.append(DistributionFit(family, (), math.inf, math.inf, math.inf, math.inf, n))
            continue
        params, k = _mle(family, arr)
        nlogl = float(-np.sum(getattr(_scipy_stats(), family).logpdf(arr, *params)))
        if not math.isfinite(nlogl):
            nlogl = math.inf
        aic = 2 * k + 2 * nlogl
        bic = k * math.log(n) + 2 * nlogl
        aicc = aic + (2 * k * (k + 1) / (n - k - 1) if n > k + 1 else math.inf)
        fits.append(DistributionFit(family, params, nlogl, aic, bic, aicc, n))
    return fits


def select_distribution(
    x: Sequence[float], criterion: str = "bic", candidates: Sequence[str] = CANDIDATES
) -> tuple[DistributionFit, list[DistributionFit]]:
    """The candidate with the lowest `criterion` (nlogl, aic, bic or aicc), and all fits."""
    if criterion not in _CRITERIA:
        raise ValueError(f"criterion must be one of {_CRITERIA}, got {criterion!r}")
    fits = fit_candidates(x, candidates)
    return min(fits, key=lambda f: f.score(criterion)), fits


def moment_match_lognormal(x: Sequence[float]) -> tuple[float, float]:
    """(mu_x, sigma_x) of the lognormal with the sample's mean and mean square (paper §4.1, MMA):
    sigma_x² = ln(m2 / m1²), mu_x = ln(m1) - sigma_x² / 2."""
    arr = np.asarray(x, dtype=float)
    m1, m2 = float(np.mean(arr)), float(np.mean(arr**2))
    sigma2 = math.log(m2 / (m1 * m1))
    return math.log(m1) - sigma2 / 2, math.sqrt(sigma2)


# ---------------------------------------------------------------- characterisation


@dataclass(frozen=True)
class ClassDistribution:
    """A (target, class) characterisation: floor cycles, metric family and parameters.

    `params` are (mu_x, sigma_x) of ln(metric) for lognormal, (mean, std) for
    normal; other families keep their scipy MLE parameters. `estimator` says
    how they were obtained (`mma`: the paper's moment matching; `mle`: mean
    and std of the logs).
    `floor_ratio_p10/p90` are the spread of the floor-bound ops around the
    floor, so small ops get an interval too.
    """

    op_class: str
    unit: str
    family: str
    params: tuple[float, ...]
    floor_cycles: float
    floor_ratio_p10: float
    floor_ratio_p90: float
    n: int
    n_metric: int
    estimator: str = "mle"
    gof: Mapping[str, Mapping[str, float]] = field(default_factory=dict)

    def metric_quantile(self, q: float) -> float:
        """Quantile `q` of cycles per unit of work."""
        if self.family == "lognorm":
            mu, sigma = self.params
            return float(math.exp(mu + sigma * NormalDist().inv_cdf(q)))
        if self.family == "norm":
            mean, std = self.params
            return float(max(mean + std * NormalDist().inv_cdf(q), 0.0))
        return float(getattr(_scipy_stats(), self.family).ppf(q, *self.params))

    def cycles(self, work: np.ndarray | float, q: float = 0.5) -> np.ndarray:
        """Predicted cycles at quantile q (0.1, 0.5 or 0.9): floor part plus metric x work."""
        ratios = {0.1: self.floor_ratio_p10, 0.5: 1.0, 0.9: self.floor_ratio_p90}
        if q not in ratios:
            raise ValueError(f"q must be 0.1, 0.5 or 0.9, got {q}")
        ratio = ratios[q]
        return self.floor_cycles * ratio + self.metric_quantile(q) * np.asarray(work, float)


@dataclass(frozen=True)
class TargetCharacterisation:
    """Every class distribution of one target, with the clock the cycles were counted at.

    `program_floor_ns` is the fixed cost of running a whole program (dispatch),
    where the sweep measured it; per-op floors are then net of it.
    """

    target: str
    clock_ghz: float
    source: str
    classes: Mapping[str, ClassDistribution]
    program_floor_ns: float = 0.0
    machine: str = ""  # `calibration_files.machine_fingerprint()` of a measured host

    def to_json(self) -> str:
        d = asdict(self)
        return json.dumps(d, indent=1)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TargetCharacterisation:
        classes = {
            k: ClassDistribution(**{**v, "params": tuple(v["params"])})
            for k, v in d["classes"].items()
        }
        floor = float(d.get("program_floor_ns", 0.0))
        return cls(
            d["target"], float(d["clock_ghz"]), d["source"], classes, floor, d.get("machine", "")
        )

    def distribution(self, op: OpInfo) -> ClassDistribution | None:
        """The op's class distribution (`metric_class`); a convolution where only dots were
        characterised (tpu-v4's GEMM data) takes theirs: both are priced per FLOP; a special
        function (erf, lgamma, ...) where none were (a reference measured before they had
        rows of their own) takes the transcendentals'."""
        cls = metric_class(op)
        if cls not in self.classes and op.op_class in ("matmul", "transcendental"):
            cls = op.op_class
        return self.classes.get(cls)


def _characterise_class(
    op_class: str,
    work: np.ndarray,
    cycles: np.ndarray,
    criterion: str,
    min_metric: int,
    lognormal: str,
) -> ClassDistribution:
    order = np.argsort(work)
    smallest = order[: max(1, len(order) // 10)]
    floor = float(np.median(cycles[smallest]))
    floor_ratio = cycles[smallest] / floor
    # Work-bound ops (at least twice the floor) carry the metric; if too few, all above it.
    keep = cycles > 2 * floor
    if keep.sum() < min_metric:
        keep = cycles > floor
    metric = (cycles[keep] - floor) / work[keep]
    best, fits = select_distribution(metric, criterion)
    params: tuple[float, ...]
    estimator = "mle"
    if best.family == "lognorm" and lognormal == "mma":
        params, estimator = moment_match_lognormal(metric), "mma"
    elif best.family == "lognorm":
        params = (float(np.mean(np.log(metric))), float(np.std(np.log(metric))))
    elif best.family == "norm":
        params = (float(np.mean(metric)), float(np.std(metric, ddof=1)))
    else:
        params = best.params
    return ClassDistribution(
        op_class=op_class,
        unit=work_unit(op_class),
        family=best.family,
        params=params,
        floor_cycles=floor,
        floor_ratio_p10=float(np.percentile(floor_ratio, 10)),
        floor_ratio_p90=float(np.percentile(floor_ratio, 90)),
        n=len(work),
        n_metric=int(keep.sum()),
        estimator=estimator,
        gof={f.family: {c: f.score(c) for c in _CRITERIA} for f in fits},
    )


def characterise(
    records: Iterable[MeasuredOp],
    target: str,
    clock_ghz: float,
    source: str,
    criterion: str = "bic",
    min_samples: int = 20,
    lognormal: str = "mle",
    program_floor_ns: float = 0.0,
) -> TargetCharacterisation:
    """Fit every class of `target` that has at least `min_samples` measured ops with work > 0.

    `lognormal="mma"` takes lognormal parameters by the paper's moment matching;
    the default, `"mle"`, takes the mean and std of the logs. On the TPU v4
    GEMMs the metric has a heavy right tail (small GEMMs far from peak), the
    mean square is dominated by it, and MMA's median lands 7x above the data's
    (MAPE 600% vs 40%), so MLE is the default and MMA stays available.
    """
    by_class: dict[str, list[MeasuredOp]] = {}
    for r in records:
        if r.target == target and r.work > 0 and r.latency_ns > 0:
            by_class.setdefault(r.op_class, []).append(r)
    classes = {}
    for cls, rs in sorted(by_class.items()):
        if len(rs) < min_samples:
            continue
        work = np.array([r.work for r in rs])
        cycles = np.array([r.latency_ns * clock_ghz for r in rs])
        classes[cls] = _characterise_class(
            cls, work, cycles, criterion, min_samples // 2, lognormal
        )
    return TargetCharacterisation(target, clock_ghz, source, classes, program_floor_ns)


def tpu_v4_records(folder: str | Path) -> list[MeasuredOp]:
    """The shared TPU v4 measurements (f16) as MeasuredOps: add/multiply (binary), relu
    (compare_select: `maximum`), GEMMs and the VALID 3x3 convolutions (matmul, 2·M·N·K FLOPs).
    One row per shape (`primary == 1`); relu rows without a median use their mean."""
    folder = Path(folder)
    out: list[MeasuredOp] = []
    classes = {"add": "binary", "multiply": "binary", "relu": "compare_select"}
    with open(folder / "elementwise.csv") as f:
        for row in csv.DictReader(f):
            if row["primary"] != "1":
                continue
            us = float(row["measured_us_median"] or row["measured_us_mean"])
            out.append(
                MeasuredOp(
                    "tpu-v4", classes[row["op"]], float(row["numel"]), us * 1e3, "elementwise.csv"
                )
            )
    with open(folder / "gemm.csv") as f:
        for row in csv.DictReader(f):
            if row["primary"] != "1":
                continue
            flops = 2.0 * int(row["M"]) * int(row["N"]) * int(row["K"])
            out.append(
                MeasuredOp("tpu-v4", "matmul", flops, float(row["measured_us"]) * 1e3, "gemm.csv")
            )
    with open(folder / "conv.csv") as f:
        for row in csv.DictReader(f):
            n, c, k, r, s = (int(row[x]) for x in ("N", "C", "K", "R", "S"))
            flops = 2.0 * n * c * k * r * s * int(row["out_h"]) * int(row["out_w"])
            out.append(
                MeasuredOp("tpu-v4", "matmul", flops, float(row["measured_us"]) * 1e3, "conv.csv")
            )
    return out


def _stored_json(stem: str) -> dict[str, Any] | None:
    """`analysis/data/<stem>_<tag>.json` whose "machine" is this machine (a host has one per
    reference calibration), else one of this machine's CPU on other threads, else
    `<stem>.json`; None if none exists."""
    from stablehlo_perf.analysis.calibration_files import nearest_machine

    data = resources.files("stablehlo_perf.analysis.data")
    stored = {
        p.name: json.loads(p.read_text())
        for p in sorted(data.iterdir(), key=lambda p: p.name)
        if p.name == f"{stem}.json" or (p.name.startswith(f"{stem}_") and p.name.endswith(".json"))
    }
    found = nearest_machine([d.get("machine", "") for d in stored.values()])
    return list(stored.values())[found[0]] if found else stored.get(f"{stem}.json")


@cache
def load_characterisation(target: str) -> TargetCharacterisation | None:
    """The stored characterisation of `target` (`_stored_json`), or None if there is none."""
    d = _stored_json(f"cc4cs_{target}")
    return None if d is None else TargetCharacterisation.from_dict(d)


# ---------------------------------------------------------------- per-op service


def _quantiles(ch: TargetCharacterisation, ops: Sequence[OpInfo], q: float) -> np.ndarray:
    return np.array(
        [float(ch.distribution(op).cycles(op_work(op), q)) / ch.clock_ghz for op in ops]  # type: ignore[union-attr]
    )


class CC4CSModel:
    """Statistical fallback: latency = (floor + median metric x work) / clock, with p10/p90.

    Answers an op whose class has a characterisation for the target; its name,
    `cc4cs`, is what `perf.model` records. `extra` carries `latency_p10_ns` and
    `latency_p90_ns`, which perf-annotate-cycles writes as `perf.latency_p10_ns`/`_p90_ns`.
    """

    name = "cc4cs"

    def supports(self, op: OpInfo, target: Target) -> bool:
        ch = load_characterisation(target.name)
        return (
            ch is not None and op.is_static and ch.distribution(op) is not None and op_work(op) > 0
        )

    def predict(self, ops: Sequence[OpInfo], target: Target) -> list[OpCost]:
        ch = load_characterisation(target.name)
        assert ch is not None
        p10, p50, p90 = (_quantiles(ch, ops, q) for q in (0.1, 0.5, 0.9))
        return [
            OpCost(
                cycles=round(float(m) * target.clock_ghz),
                latency_ns=float(m),
                dram_bytes=int(op.bytes or 0),
                model=self.name,
                extra={"latency_p10_ns": float(lo), "latency_p90_ns": float(hi)},
            )
            for op, lo, m, hi in zip(ops, p10, p50, p90, strict=True)
        ]


def intervals_for(
    ops: Sequence[OpInfo], target: str, latency_ns: Sequence[float]
) -> list[tuple[float, float] | None]:
    """p10/p90 around another model's prediction: its latency times the CC4CS relative spread
    (p10/p50, p90/p50) of the op's class at the op's work. None where the target or class has
    no characterisation (an uncalibrated target gets no interval rather than a made-up one)."""
    ch = load_characterisation(target)
    out: list[tuple[float, float] | None] = []
    for op, lat in zip(ops, latency_ns, strict=True):
        dist = ch.distribution(op) if ch is not None else None
        w = op_work(op)
        if dist is None or not op.is_static or lat <= 0:
            out.append(None)
            continue
        mid = float(dist.cycles(w, 0.5))
        out.append((lat * float(dist.cycles(w, 0.1)) / mid, lat * float(dist.cycles(w, 0.9)) / mid))
    return out


# ---------------------------------------------------------------- module-level LASSO (CLRA)


def module_features(
    ops: Iterable[tuple[OpInfo, float]], one_kernel: Collection[int] = ()
) -> dict[str, float]:
    """Executed op count `n_<class>` and work `w_<class>` per class, from (op, times executed).

    Ops whose ids are in `one_kernel` (inside a loop XLA:CPU compiles into one kernel) form
    class `small_loop`: each of their executions is a few instructions of that kernel, not a
    kernel of its own, so counting them with the other ops of their class would make a
    1000-trip loop of four adds look like 4000 kernels.
    """
    feats = {f"{p}_{c}": 0.0 for c in FEATURE_CLASSES for p in ("n", "w")}
    for op, times in ops:
        cls = op.op_class
        if cls not in FEATURE_CLASSES or not op.is_static:
            continue
        if op.id in one_kernel:
            cls = "small_loop"
        feats[f"n_{cls}"] += times
        feats[f"w_{cls}"] += times * op_work(op)
    return feats


def error_metrics(
    measured: Sequence[float], predicted: Sequence[float], tol: float = 0.10
) -> dict[str, float]:
    """PE (mean signed % error), MAPE, R² and reliability (paper §5).

    The paper's reliability formula is not in our copy of the text; here it
    is the share of estimates within ±`tol` (the paper's 10% error bar).
    """
    t = np.asarray(measured, float)
    p = np.asarray(predicted, float)
    pe = 100 * (t - p) / t
    ss_res = float(np.sum((t - p) ** 2))
    ss_tot = float(np.sum((t - t.mean()) ** 2))
    return {
        "pe": float(np.mean(pe)),
        "mape": float(np.mean(np.abs(pe))),
        "r2": 1 - ss_res / ss_tot if ss_tot > 0 else float("nan"),
        "reliability": float(np.mean(np.abs(pe) <= 100 * tol)),
    }


class CLRA:
    """CC4CS LASSO regression (paper Eq. 13): time = β0 + Σ β_i x_i, λ by k-fold CV, pure L1.

    Features are standardised before the L1 penalty (so λ treats them alike)
    and the coefficients reported in the features' own units. With
    `relative=True` each program is weighted by 1/time², so the squared loss
    is on relative error, which is what MAPE measures across programs that
    span orders of magnitude. `positive` keeps every β_i ≥ 0: more work
    never makes a program faster.
    """

    def __init__(
        self, cv: int = 10, relative: bool = True, positive: bool = True, random_state: int = 0
    ) -> None:
        self.cv = cv
        self.relative = relative
        self.positive = positive
        self.random_state = random_state

    def fit(self, X: np.ndarray, y: np.ndarray) -> CLRA:
        from sklearn.linear_model import LassoCV
        from sklearn.model_selection import KFold

        X = np.asarray(X, float)
        y = np.asarray(y, float)
        self.mean_ = X.mean(axis=0)
        self.scale_ = X.std(axis=0)
        self.scale_[self.scale_ == 0] = 1.0
        Z = (X - self.mean_) / self.scale_
        folds = KFold(min(self.cv, len(y)), shuffle=True, random_state=self.random_state)
        weights = 1.0 / y**2 if self.relative else None
        lasso = LassoCV(
            cv=folds, positive=self.positive, max_iter=100_000, random_state=self.random_state
        )
        lasso.fit(Z, y, sample_weight=weights)
        self.alpha_ = float(lasso.alpha_)
        self.coef_ = lasso.coef_ / self.scale_
        self.intercept_ = float(lasso.intercept_ - np.sum(lasso.coef_ * self.mean_ / self.scale_))
        return self

    def predict(self, X: np.ndarray) -> np.ndarray:
        return np.asarray(X, float) @ self.coef_ + self.intercept_

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        return {"cv": self.cv, "relative": self.relative, "positive": self.positive,
                "random_state": self.random_state}  # fmt: skip

    def set_params(self, **params: Any) -> CLRA:
        for k, v in params.items():
            setattr(self, k, v)
        return self


@dataclass(frozen=True)
class ModuleEstimate:
    """The LASSO cross-check for one module: estimate and the fit's held-out scores."""

    target: str
    estimate_ns: float
    model: str
    trained_on: str
    cv_metrics: Mapping[str, float]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class StoredLasso:
    """A fitted CLRA as stored in `analysis/data/cc4cs_lasso_<target>.json`."""

    target: str
    features: tuple[str, ...]
    coef: tuple[float, ...]
    intercept: float
    trained_on: str
    cv_metrics: Mapping[str, float]
    machine: str = ""  # `calibration_files.machine_fingerprint()` of the machine measured

    def estimate(self, feats: Mapping[str, float]) -> ModuleEstimate:
        x = np.array([feats.get(f, 0.0) for f in self.features])
        value = float(x @ np.array(self.coef) + self.intercept)
        return ModuleEstimate(self.target, value, "cc4cs-lasso", self.trained_on, self.cv_metrics)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1)


@cache
def load_module_lasso(target: str) -> StoredLasso | None:
    """The stored module-level LASSO for `target` (`_stored_json`), or None when none was
    trained."""
    d = _stored_json(f"cc4cs_lasso_{target}")
    if d is None:
        return None
    return StoredLasso(
        d["target"], tuple(d["features"]), tuple(d["coef"]), float(d["intercept"]),
        d["trained_on"], d["cv_metrics"], d.get("machine", ""),
    )  # fmt: skip


TPU_V4_SOURCE = (
    "shared/data/tpu_v4 (elementwise.csv, gemm.csv, conv.csv; primary rows; f16; "
    "SCALE-Sim TPU authors, commit dad9479): device-op time per kernel"
)


def main(argv: Sequence[str] | None = None) -> None:
    """Characterise TPU v4 from the shared measurements and write `cc4cs_tpu-v4.json`."""
    import argparse

    from stablehlo_perf.analysis.targets import load_target

    p = argparse.ArgumentParser(description="Fit the CC4CS characterisation of tpu-v4.")
    p.add_argument("data", type=Path, help="folder with elementwise.csv, gemm.csv, conv.csv")
    p.add_argument("--out", type=Path, default=Path("analysis/data/cc4cs_tpu-v4.json"))
    a = p.parse_args(argv)
    ch = characterise(
        tpu_v4_records(a.data), "tpu-v4", load_target("tpu-v4").clock_ghz, TPU_V4_SOURCE
    )
    a.out.write_text(ch.to_json() + "\n")


if __name__ == "__main__":
    main()
