"""PASCAL dynamic predictor (paper §4, App. C): calibrated cumulative traffic under divergence.

Fixed-phase geometry (``cache``) cannot say how far freely running workers drift apart, so
the predictor reads a frozen per-device calibration of reference configurations and
transfers it to an unmeasured one along static program structure:

1. per reference and size, fit log cumulative traffic over the horizons ``W in {1, 4, 16,
   64}``: geometric mean of repeats, isotonic (nondecreasing) regression, PCHIP over
   ``log W``; ``K`` is held at the nearest endpoint outside the range (§4.2, App. C.2);
2. encode relative to the static reference ``K0`` (``K0 = 1``, aligned scans) in the excess
   coordinate ``a = log(max(K/K0 - 1, 0) + eps)`` and decode with
   ``K = min(M, K0 (1 + max(exp(a) - eps, 0)))`` (§4.3, §4.6, App. C.3);
3. transfer within the target's execution class ``chi(m) = min(m mod 4, 2)`` by anchored
   interpolation over compute ``m``, then linearly in ``eta = C/N`` across reference sizes,
   clamped outside the calibrated range (§4.4).  A class without references is refused
   (App. C.4).

GEMM (§4.6, App. C.8): ``B0 = 16384 (nr + nc) nk`` bytes and ``K0 = M (nr + nc) / (2 nr nc)``
for 128x128x64 FP16 tiles; fit over ``nk`` per reference grid ``(nr, nc)``, encode
``V / B0``, transfer along ``log nc`` then ``log nr``.

Constants the paper leaves open, chosen here:

* ``EPSILON = 0.05``: the excess floor.  The paper calls a run divergent when ``K > 1.05``
  (§5.4), so excesses below 5% are treated as the aligned level; it also bounds the
  relative decoding error of App. C.3 by ``(e + eps)|exp(a_hat - a) - 1|``.
* ``ANCHOR_WEIGHT = 4`` and the anchor term ``p``: strictly between two references the
  target is the minimiser of ``4 (a - a_lin)^2 + (a - p)^2``, i.e. ``(p + 4 a_lin) / 5``
  (App. C.5, C.8); at a reference it is that reference, beyond the end references it is
  clamped.  Scans use the aligned anchor ``p = log eps`` (the analytical ``K = 1``
  reference, ``ANCHOR``); GEMM uses the mean encoding of the references along the axis being
  transferred (``GEMM_ANCHOR``), because its static reference ``B0`` is a cold-input bound rather than
  the typical outcome.  Both were chosen by leave-one-reference-out error on the simulated
  references only (scan 7.6% aligned vs 7.9% class-mean; GEMM 32.0% class-mean vs 34.6%
  aligned; ``benchmarks/cache_predictor_mape.py`` prints the comparison).
"""

from __future__ import annotations

import bisect
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
from scipy.interpolate import PchipInterpolator
from sklearn.isotonic import isotonic_regression

__all__ = [
    "ANCHOR_WEIGHT",
    "EPSILON",
    "FORMAT",
    "GEMM_OPERAND_TILE_BYTES",
    "HORIZONS",
    "SIMULATED_CALIBRATION",
    "VERSION",
    "Calibration",
    "ConfigKey",
    "GemmPredictor",
    "GemmReference",
    "GemmTraffic",
    "HeldoutReport",
    "ScanForecast",
    "ScanPredictor",
    "ScanReference",
    "bundled_calibration_path",
    "decode_excess",
    "encode_excess",
    "execution_class",
    "gemm_cold_bytes",
    "gemm_dram_traffic",
    "gemm_k0",
    "heldout_report",
    "load_calibration",
    "simulated_calibration",
    "static_gemm_fill_multiple",
]

FORMAT = "stablehlo-perf.cache-calibration"
VERSION = 1
HORIZONS: tuple[int, ...] = (1, 4, 16, 64)
EPSILON = 0.05
ANCHOR_WEIGHT = 4.0
ANCHORS = ("class-mean", "aligned")
ANCHOR = "aligned"
GEMM_ANCHOR = "class-mean"
PATHS = ("sync", "tma")
# one 128x64 FP16 operand tile (App. C.8)
GEMM_OPERAND_TILE_BYTES = 16384


def execution_class(compute: int) -> int:
    """Execution class ``chi(m) = min(m mod 4, 2)`` of the unrolled compute loop (App. C.4)."""
    if isinstance(compute, bool) or not isinstance(compute, (int, np.integer)) or compute < 0:
        raise ValueError(f"compute per block must be a non-negative integer, got {compute!r}")
    return min(int(compute) % 4, 2)


@dataclass(frozen=True, order=True)
class ConfigKey:
    """Configuration key ``z = (o, pi, d, m)`` of paper §4.2; a family varies only ``m``."""

    occupancy: int
    path: str
    depth: int
    compute: int

    def __post_init__(self) -> None:
        """Refuse keys the scan kernel family cannot express."""
        for name in ("occupancy", "depth", "compute"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise ValueError(f"{name} must be an integer, got {value!r}")  # noqa: TRY004
        if self.path not in PATHS:
            raise ValueError(f"load path must be one of {PATHS}, got {self.path!r}")
        if self.occupancy < 1:
            raise ValueError(f"occupancy must be at least 1, got {self.occupancy}")
        if self.path == "sync" and self.depth != 0:
            raise ValueError("synchronous loads have prefetch depth 0 (paper §4.2)")
        if self.path == "tma" and self.depth < 2:
            raise ValueError(f"TMA pipelines need depth >= 2, got {self.depth}")
        execution_class(self.compute)

    @property
    def family(self) -> tuple[int, str, int]:
        """The family ``f = (o, pi, d)``."""
        return (self.occupancy, self.path, self.depth)

    @property
    def klass(self) -> int:
        """Execution class of the compute count."""
        return execution_class(self.compute)


@dataclass(frozen=True)
class ScanReference:
    """Measured (or simulated) cumulative fills, in blocks, per horizon ``W`` (repeats)."""

    key: ConfigKey
    n_blocks: int
    workers: int
    fills: Mapping[int, tuple[float, ...]]


@dataclass(frozen=True)
class GemmReference:
    """Measured (or simulated) DRAM fill bytes of one GEMM tile grid (repeats)."""

    nr: int
    nc: int
    nk: int
    workers: int
    fill_bytes: tuple[float, ...]


@dataclass(frozen=True)
class Calibration:
    """A frozen per-device calibration (paper §4.5, Table 5): references only, no targets."""

    device: str
    source: str
    capacity_blocks: int
    block_bytes: int
    scans: tuple[ScanReference, ...]
    gemms: tuple[GemmReference, ...] = ()
    horizons: tuple[int, ...] = HORIZONS
    epsilon: float = EPSILON
    anchor_weight: float = ANCHOR_WEIGHT
    anchor: str = ANCHOR
    gemm_anchor: str = GEMM_ANCHOR
    note: str = ""
    heldout: tuple[dict[str, Any], ...] = field(default=(), compare=False)

    def anchor_value(self, gemm: bool = False) -> float | None:
        """The prior ``p`` of anchored interpolation: ``log eps`` (aligned) or None (class mean)."""
        anchor = self.gemm_anchor if gemm else self.anchor
        return math.log(self.epsilon) if anchor == "aligned" else None

    @property
    def capacity_bytes(self) -> int:
        """Effective cache capacity in bytes."""
        return self.capacity_blocks * self.block_bytes

    def to_json(self) -> dict[str, Any]:
        """The versioned JSON document (format ``stablehlo-perf.cache-calibration`` v1)."""
        return {
            "format": FORMAT,
            "version": VERSION,
            "device": self.device,
            "source": self.source,
            "note": self.note,
            "capacity_blocks": self.capacity_blocks,
            "block_bytes": self.block_bytes,
            "horizons": list(self.horizons),
            "epsilon": self.epsilon,
            "anchor_weight": self.anchor_weight,
            "anchor": self.anchor,
            "gemm_anchor": self.gemm_anchor,
            "scan_references": [
                {
                    "occupancy": r.key.occupancy,
                    "path": r.key.path,
                    "depth": r.key.depth,
                    "compute": r.key.compute,
                    "n_blocks": r.n_blocks,
                    "workers": r.workers,
                    "fills": {str(w): list(v) for w, v in sorted(r.fills.items())},
                }
                for r in self.scans
            ],
            "gemm_references": [
                {
                    "nr": g.nr,
                    "nc": g.nc,
                    "nk": g.nk,
                    "workers": g.workers,
                    "fill_bytes": list(g.fill_bytes),
                }
                for g in self.gemms
            ],
            "heldout": list(self.heldout),
        }

    def save(self, path: str | Path) -> None:
        """Write the calibration as JSON."""
        Path(path).write_text(json.dumps(self.to_json(), indent=1) + "\n")

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Calibration:
        """Parse and validate a calibration document; raise ValueError on any defect."""
        if doc.get("format") != FORMAT:
            raise ValueError(f"not a cache calibration: format {doc.get('format')!r}")
        if doc.get("version") != VERSION:
            raise ValueError(f"unsupported calibration version {doc.get('version')!r}")
        missing = [
            k for k in ("device", "source", "capacity_blocks", "block_bytes") if k not in doc
        ]
        if missing:
            raise ValueError(f"calibration lacks {missing}")
        if doc["source"] not in ("simulated", "measured"):
            raise ValueError(f"source must be 'simulated' or 'measured', got {doc['source']!r}")
        horizons = tuple(int(w) for w in doc.get("horizons", HORIZONS))
        if sorted(set(horizons)) != list(horizons) or len(horizons) < 2 or horizons[0] < 1:
            raise ValueError(f"horizons must be increasing positive integers, got {horizons}")
        scans = []
        for i, r in enumerate(doc.get("scan_references", [])):
            try:
                key = ConfigKey(int(r["occupancy"]), r["path"], int(r["depth"]), int(r["compute"]))
                fills = {int(w): tuple(float(x) for x in v) for w, v in r["fills"].items()}
                ref = ScanReference(key, int(r["n_blocks"]), int(r["workers"]), fills)
            except KeyError as err:
                raise ValueError(f"scan reference {i} lacks field {err}") from None
            lacking = [w for w in horizons if not fills.get(w)]
            if lacking:
                raise ValueError(
                    f"scan reference {i} ({key}, N={ref.n_blocks}) lacks horizons {lacking}"
                )
            if any(x <= 0 for v in fills.values() for x in v):
                raise ValueError(f"scan reference {i} has non-positive fills")
            scans.append(ref)
        gemms = []
        for i, g in enumerate(doc.get("gemm_references", [])):
            try:
                ref = GemmReference(
                    int(g["nr"]),
                    int(g["nc"]),
                    int(g["nk"]),
                    int(g["workers"]),
                    tuple(float(x) for x in g["fill_bytes"]),
                )
            except KeyError as err:
                raise ValueError(f"GEMM reference {i} lacks field {err}") from None
            if not ref.fill_bytes or min(ref.fill_bytes) <= 0:
                raise ValueError(f"GEMM reference {i} has no positive fill measurements")
            gemms.append(ref)
        for name, default in (("anchor", ANCHOR), ("gemm_anchor", GEMM_ANCHOR)):
            if doc.get(name, default) not in ANCHORS:
                raise ValueError(f"{name} must be one of {ANCHORS}, got {doc.get(name)!r}")
        if not scans and not gemms:
            raise ValueError("calibration has no references")
        cal = cls(
            device=str(doc["device"]),
            source=str(doc["source"]),
            capacity_blocks=int(doc["capacity_blocks"]),
            block_bytes=int(doc["block_bytes"]),
            scans=tuple(scans),
            gemms=tuple(gemms),
            horizons=horizons,
            epsilon=float(doc.get("epsilon", EPSILON)),
            anchor_weight=float(doc.get("anchor_weight", ANCHOR_WEIGHT)),
            anchor=str(doc.get("anchor", ANCHOR)),
            gemm_anchor=str(doc.get("gemm_anchor", GEMM_ANCHOR)),
            note=str(doc.get("note", "")),
            heldout=tuple(doc.get("heldout", ())),
        )
        _check_classes(cal.scans)
        return cal


def _check_classes(scans: Iterable[ScanReference]) -> None:
    """Every family and size must sample all three execution classes (App. C.4)."""
    seen: dict[tuple[tuple[int, str, int], int], set[int]] = {}
    for r in scans:
        seen.setdefault((r.key.family, r.n_blocks), set()).add(r.key.klass)
    for (fam, n), classes in sorted(seen.items()):
        lacking = sorted({0, 1, 2} - classes)
        if lacking:
            raise ValueError(
                f"family (o, path, d) = {fam} at N = {n} has no reference in execution "
                f"class(es) {lacking}; an unsampled class cannot be predicted (App. C.4)"
            )


def load_calibration(path: str | Path) -> Calibration:
    """Read and validate a calibration JSON file."""
    return Calibration.from_json(json.loads(Path(path).read_text()))


SIMULATED_CALIBRATION = "cache_calibration_sim.json"


def bundled_calibration_path(name: str = SIMULATED_CALIBRATION) -> Path:
    """Path of a calibration shipped in ``stablehlo_perf.analysis.data``."""
    try:
        path = Path(str(resources.files("stablehlo_perf.analysis.data") / name))
    except ModuleNotFoundError:
        path = Path()
    if not path.is_file():
        # source-tree layout (an editable install links modules, not the data folder)
        path = Path(__file__).resolve().parent / "data" / name
    if not path.is_file():
        raise ValueError(f"no bundled calibration named {name!r}")
    return path


def simulated_calibration() -> Calibration:
    """The bundled calibration produced by ``cache_calibration_sim`` (labelled simulated)."""
    return load_calibration(bundled_calibration_path())


def encode_excess(k: float, k0: float, epsilon: float = EPSILON) -> float:
    """Excess coordinate ``a = log(max(K/K0 - 1, 0) + eps)`` relative to the static reference."""
    return math.log(max(k / k0 - 1.0, 0.0) + epsilon)


def decode_excess(a: float, k0: float, workers: int, epsilon: float = EPSILON) -> float:
    """Inverse of ``encode_excess``, clipped to ``[K0, M]`` (paper §4.6)."""
    return min(float(workers), k0 * (1.0 + max(math.exp(a) - epsilon, 0.0)))


def _isotonic_log(repeats: Sequence[Sequence[float]]) -> np.ndarray:
    """Log of the geometric mean of repeats at each horizon, made nondecreasing (App. C.2)."""
    return isotonic_regression(
        [float(np.mean(np.log(np.asarray(r, dtype=float)))) for r in repeats]
    )


def _anchored(
    x: float, xs: Sequence[float], values: Sequence[float], weight: float, anchor: float | None
) -> float:
    """Anchored interpolation within a class (§4.4, App. C.5); clamped beyond the ends.

    ``xs`` is increasing; ``anchor`` is the prior ``p`` and ``None`` means the mean of
    ``values`` (class-mean anchor).  An infinite weight is plain linear interpolation.
    """
    if x <= xs[0]:
        return float(values[0])
    if x >= xs[-1]:
        return float(values[-1])
    j = bisect.bisect_left(xs, x)
    if xs[j] == x:
        return float(values[j])
    t = (x - xs[j - 1]) / (xs[j] - xs[j - 1])
    linear = float((1.0 - t) * values[j - 1] + t * values[j])
    if math.isinf(weight):
        return linear
    p = float(sum(values) / len(values)) if anchor is None else anchor
    return (p + weight * linear) / (1.0 + weight)


@dataclass(frozen=True)
class _CurveSet:
    """PCHIP curves of one (family, size, class) as plain floats, for sub-millisecond forecasts."""

    computes: list[float]
    knots: list[float]
    coef: list[list[tuple[float, float, float, float]]]  # [interval][reference]

    @classmethod
    def build(cls, log_w: np.ndarray, computes: list[float], y: np.ndarray) -> _CurveSet:
        """Fit a multi-column PCHIP over ``log W`` and keep its piecewise-cubic coefficients."""
        c = PchipInterpolator(log_w, y, axis=0).c  # (4, intervals, references)
        coef = [
            [tuple(map(float, c[:, i, r])) for r in range(c.shape[2])] for i in range(c.shape[1])
        ]
        return cls(computes, [float(v) for v in log_w], coef)

    def __call__(self, lw: float) -> list[float]:
        """Every reference's log cumulative traffic at ``log W = lw`` (inside the knots)."""
        i = min(max(bisect.bisect_right(self.knots, lw) - 1, 0), len(self.coef) - 1)
        t = lw - self.knots[i]
        return [((a * t + b) * t + c) * t + d for a, b, c, d in self.coef[i]]


@dataclass(frozen=True)
class ScanForecast:
    """A prediction for one scan configuration at one horizon (paper Table 5)."""

    fill_multiple: float
    miss_rate: float
    fill_blocks: float
    fill_bytes: float
    source: str


class ScanPredictor:
    """Scan predictor (estimator protocol): ``fit(calibration)`` builds curves, ``predict`` is cheap.

    Its hyperparameters (``eps``, anchor, weight) travel with the calibration they were
    frozen with, so the constructor takes none.
    """

    def fit(self, calibration: Calibration) -> ScanPredictor:
        """Fit one cumulative-traffic curve per reference configuration and size."""
        self.calibration_ = cal = calibration
        if not cal.scans:
            raise ValueError(f"calibration {cal.device!r} has no scan references")
        _check_classes(cal.scans)
        grouped: dict[tuple[ConfigKey, int], list[ScanReference]] = {}
        for r in cal.scans:
            grouped.setdefault((r.key, r.n_blocks), []).append(r)
        per_slot: dict[tuple[tuple[int, str, int], int, int], list[tuple[int, np.ndarray]]] = {}
        self.workers_: dict[tuple[int, str, int], int] = {}
        ws = list(cal.horizons)
        for (key, n), refs in sorted(grouped.items()):
            repeats = [[x for r in refs for x in r.fills[w]] for w in ws]
            slot = (key.family, n, key.klass)
            per_slot.setdefault(slot, []).append((key.compute, _isotonic_log(repeats)))
            self.workers_[key.family] = refs[0].workers
        # one multi-column PCHIP per (family, size, class): a forecast is one call per size
        self.curves_: dict[tuple[tuple[int, str, int], int, int], _CurveSet] = {}
        log_w = np.log(np.asarray(ws, dtype=float))
        for slot, entries in per_slot.items():
            entries.sort(key=lambda e: e[0])
            y = np.column_stack([col for _, col in entries])
            self.curves_[slot] = _CurveSet.build(log_w, [float(m) for m, _ in entries], y)
        sizes: dict[tuple[int, str, int], set[int]] = {}
        for fam, n, _ in self.curves_:
            sizes.setdefault(fam, set()).add(n)
        # reference sizes per family, ordered by increasing eta = C / N
        self.sizes_ = {f: sorted(s, reverse=True) for f, s in sizes.items()}
        self.log_w_range_ = (math.log(cal.horizons[0]), math.log(cal.horizons[-1]))
        self.anchor_ = cal.anchor_value()
        return self

    def _encoded_at_size(self, key: ConfigKey, n: int, log_w: float) -> float:
        """Class-level encoded prediction at one reference size (§4.3-4.4)."""
        cal = self.calibration_
        entry = self.curves_.get((key.family, n, key.klass))
        if entry is None:
            raise ValueError(
                f"no reference for {key} in execution class {key.klass} at N = {n}: "
                "an unsampled class cannot be predicted (App. C.4)"
            )
        lo, hi = self.log_w_range_
        lw = min(max(log_w, lo), hi)
        base = math.log(n) + lw
        eps = cal.epsilon
        # encode_excess of every reference's K at this size and horizon
        enc = [math.log(max(math.exp(v - base) - 1.0, 0.0) + eps) for v in entry(lw)]
        return _anchored(float(key.compute), entry.computes, enc, cal.anchor_weight, self.anchor_)

    def forecast(self, key: ConfigKey, n_blocks: int, scans: int) -> ScanForecast:
        """Predicted cumulative fills of ``scans`` passes over ``n_blocks`` blocks for ``key``."""
        if not hasattr(self, "curves_"):
            raise ValueError("ScanPredictor.fit(calibration) must run before forecast()")
        for name, v in (("n_blocks", n_blocks), ("scans", scans)):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
        cal = self.calibration_
        if n_blocks <= cal.capacity_blocks:
            raise ValueError(f"N = {n_blocks} fits in the {cal.capacity_blocks}-block cache")
        sizes = self.sizes_.get(key.family)
        if sizes is None:
            raise ValueError(f"family (o, path, d) = {key.family} is not calibrated")
        workers = self.workers_[key.family]
        log_w = math.log(scans)
        c = cal.capacity_blocks
        eta = c / n_blocks
        if eta <= c / sizes[0] or eta >= c / sizes[-1]:
            n_ref = sizes[0] if eta <= c / sizes[0] else sizes[-1]
            k = decode_excess(self._encoded_at_size(key, n_ref, log_w), 1.0, workers, cal.epsilon)
        else:
            j = next(i for i, n in enumerate(sizes) if c / n > eta)
            e_lo, e_hi = c / sizes[j - 1], c / sizes[j]
            t = (eta - e_lo) / (e_hi - e_lo)
            k_lo, k_hi = (
                decode_excess(self._encoded_at_size(key, n, log_w), 1.0, workers, cal.epsilon)
                for n in (sizes[j - 1], sizes[j])
            )
            k = (1.0 - t) * k_lo + t * k_hi
        blocks = k * n_blocks * scans
        return ScanForecast(
            fill_multiple=k,
            miss_rate=k / workers,
            fill_blocks=blocks,
            fill_bytes=blocks * cal.block_bytes,
            source=f"calibrated:{cal.device} ({cal.source})",
        )

    def predict(self, queries: Sequence[tuple[ConfigKey, int, int]]) -> list[ScanForecast]:
        """Batched ``forecast`` over ``(key, n_blocks, scans)`` queries."""
        return [self.forecast(k, n, w) for k, n, w in queries]


def gemm_cold_bytes(nr: int, nc: int, nk: int) -> int:
    """Static reference ``B0 = 16384 (nr + nc) nk``: every input tile read once (App. C.8)."""
    return GEMM_OPERAND_TILE_BYTES * (nr + nc) * nk


def gemm_k0(workers: int, nr: int, nc: int) -> float:
    """Static misses per round ``K0 = M (nr + nc) / (2 nr nc)`` for 128x128x64 tiles (App. C.8)."""
    return workers * (nr + nc) / (2.0 * nr * nc)


def static_gemm_fill_multiple(workers: int, nr: int, nc: int, nk: int, l2_bytes: int) -> float:
    """Static aligned fill multiple ``V / B0`` of a raster-ordered tile schedule.

    The paper's aligned reference reads every input tile once (multiple 1), which holds when
    all inputs fit in L2 or one wave covers the grid.  Otherwise CTAs of a wave run aligned
    and share their operand panels (``K0`` geometry), and a later wave reuses the previous
    wave's panels only if that wave's panels fit in L2.
    """
    b0 = gemm_cold_bytes(nr, nc, nk)
    if b0 <= l2_bytes or workers >= nr * nc:
        return 1.0
    panel = GEMM_OPERAND_TILE_BYTES * nk
    total = 0
    prev_rows: set[int] = set()
    prev_cols: set[int] = set()
    for start in range(0, nr * nc, workers):
        tiles = range(start, min(start + workers, nr * nc))
        rows = {t // nc for t in tiles}
        cols = {t % nc for t in tiles}
        if (len(prev_rows) + len(prev_cols)) * panel <= l2_bytes:
            total += (len(rows - prev_rows) + len(cols - prev_cols)) * panel
        else:
            total += (len(rows) + len(cols)) * panel
        prev_rows, prev_cols = rows, cols
    return max(1.0, total / b0)


@dataclass(frozen=True)
class GemmTraffic:
    """Predicted DRAM fills of one GEMM tile schedule and where the figure came from."""

    fill_multiple: float
    dram_bytes: float
    cold_bytes: int
    k0: float
    source: str


class GemmPredictor:
    """GEMM transfer over reference tile grids (§4.6, App. C.8); same protocol as scans."""

    def fit(self, calibration: Calibration) -> GemmPredictor:
        """Fit one cumulative curve over ``nk`` per reference grid ``(nr, nc)``."""
        self.calibration_ = cal = calibration
        if not cal.gemms:
            raise ValueError(f"calibration {cal.device!r} has no GEMM references")
        grids: dict[tuple[int, int], dict[int, list[float]]] = {}
        for g in cal.gemms:
            grids.setdefault((g.nr, g.nc), {}).setdefault(g.nk, []).extend(g.fill_bytes)
        self.curves_: dict[int, list[tuple[int, _CurveSet, tuple[int, int]]]] = {}
        for (nr, nc), by_k in sorted(grids.items()):
            ks = sorted(by_k)
            if len(ks) < 2:
                raise ValueError(f"GEMM grid ({nr}, {nc}) needs at least two reduction lengths")
            y = _isotonic_log([by_k[k] for k in ks])[:, None]
            curve = _CurveSet.build(np.log(np.asarray(ks, dtype=float)), [float(nc)], y)
            self.curves_.setdefault(nr, []).append((nc, curve, (ks[0], ks[-1])))
        return self

    def _encoded(
        self, nr_entries: list[tuple[int, _CurveSet, tuple[int, int]]], nr: int, nc: int, nk: int
    ) -> float:
        """Encoded ``V / B0`` at requested ``nk``, transferred along ``log nc`` for one ``nr``."""
        cal = self.calibration_
        xs, enc = [], []
        for ref_nc, curve, (k_lo, k_hi) in nr_entries:
            k = min(max(nk, k_lo), k_hi)
            kappa = math.exp(curve(math.log(k))[0]) / gemm_cold_bytes(nr, ref_nc, k)
            xs.append(math.log(ref_nc))
            enc.append(math.log(max(kappa - 1.0, 0.0) + cal.epsilon))
        return _anchored(math.log(nc), xs, enc, cal.anchor_weight, cal.anchor_value(gemm=True))

    def fill_multiple(self, workers: int, nr: int, nc: int, nk: int) -> float:
        """Predicted ``V / B0``: transfer along ``log nc`` then ``log nr``, decode, clip."""
        if not hasattr(self, "curves_"):
            raise ValueError("GemmPredictor.fit(calibration) must run before fill_multiple()")
        cal = self.calibration_
        rows = sorted(self.curves_)
        xs = [math.log(r) for r in rows]
        enc = [self._encoded(self.curves_[r], r, nc, nk) for r in rows]
        a = _anchored(math.log(nr), xs, enc, cal.anchor_weight, cal.anchor_value(gemm=True))
        k0 = gemm_k0(workers, nr, nc)
        return decode_excess(a, k0, workers, cal.epsilon) / k0


_FITTED: dict[int, tuple[Calibration, GemmPredictor]] = {}


def _gemm_predictor(calibration: Calibration) -> GemmPredictor:
    """Fitted GEMM predictor for a calibration object, fitted once per object."""
    hit = _FITTED.get(id(calibration))
    if hit is None or hit[0] is not calibration:
        hit = (calibration, GemmPredictor().fit(calibration))
        _FITTED[id(calibration)] = hit
    return hit[1]


def _positive(name: str, value: object) -> int:
    """A positive integer argument, or ValueError."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def gemm_dram_traffic(
    workers: int,
    nr: int,
    nc: int,
    nk: int,
    l2_bytes: int,
    calibration: Calibration | None = None,
) -> GemmTraffic:
    """DRAM fill bytes of a GEMM tile schedule for the GPU pass, and which model answered.

    ``workers`` is the number of resident CTAs, ``(nr, nc, nk)`` the 128x128x64 tile counts.
    A calibration with GEMM references at the same L2 capacity gives the calibrated fill
    multiple (§4.6); otherwise the static aligned reference answers, and ``source`` says so.
    """
    m, r, c, k = (
        _positive(n, v) for n, v in (("workers", workers), ("nr", nr), ("nc", nc), ("nk", nk))
    )
    l2 = _positive("l2_bytes", l2_bytes)
    b0 = gemm_cold_bytes(r, c, k)
    k0 = gemm_k0(m, r, c)
    if calibration is not None and calibration.gemms and calibration.capacity_bytes == l2:
        multiple = _gemm_predictor(calibration).fill_multiple(m, r, c, k)
        source = f"calibrated:{calibration.device} ({calibration.source})"
    else:
        multiple = static_gemm_fill_multiple(m, r, c, k, l2)
        source = "static-aligned"
        if calibration is not None:
            why = "no GEMM references" if not calibration.gemms else "L2 capacity differs"
            source += f" (calibration {calibration.device!r} unused: {why})"
    return GemmTraffic(multiple, multiple * b0, b0, k0, source)


@dataclass(frozen=True)
class HeldoutReport:
    """Held-out error of the predictor and of the aligned ``K = 1`` (``B0``) baseline."""

    scan_cases: int
    scan_mape: float
    scan_baseline_mape: float
    gemm_cases: int
    gemm_mape: float
    gemm_baseline_mape: float


def _mape(pred: Sequence[float], true: Sequence[float]) -> float:
    """Mean absolute percentage error, in percent."""
    p, t = np.asarray(pred, dtype=float), np.asarray(true, dtype=float)
    return float(np.mean(np.abs(p - t) / t) * 100.0) if t.size else float("nan")


def heldout_report(calibration: Calibration) -> HeldoutReport:
    """Score the calibration's held-out runs (never used in fitting) by fill-multiple MAPE."""
    scan_q, scan_true, gemm_pred, gemm_true = [], [], [], []
    for h in calibration.heldout:
        if h["kind"] == "scan":
            key = ConfigKey(h["occupancy"], h["path"], h["depth"], h["compute"])
            scan_q.append((key, h["n_blocks"], h["scans"]))
            scan_true.append(h["fills"] / (h["n_blocks"] * h["scans"]))
        elif h["kind"] == "gemm":
            b0 = gemm_cold_bytes(h["nr"], h["nc"], h["nk"])
            multiple = _gemm_predictor(calibration).fill_multiple(
                h["workers"], h["nr"], h["nc"], h["nk"]
            )
            gemm_pred.append(multiple)
            gemm_true.append(h["fill_bytes"] / b0)
    scan_pred = []
    if scan_q:
        scan_pred = [f.fill_multiple for f in ScanPredictor().fit(calibration).predict(scan_q)]
    return HeldoutReport(
        scan_cases=len(scan_true),
        scan_mape=_mape(scan_pred, scan_true),
        scan_baseline_mape=_mape([1.0] * len(scan_true), scan_true),
        gemm_cases=len(gemm_true),
        gemm_mape=_mape(gemm_pred, gemm_true),
        gemm_baseline_mape=_mape([1.0] * len(gemm_true), gemm_true),
    )
