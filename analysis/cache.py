"""PASCAL shared-cache traffic model for shared cyclic scans (paper §3, Thms 2-5).

Model (paper §3.1): a ring of ``N`` blocks is scanned cyclically by ``M``
workers with phases ``s_w``; in round ``k`` worker ``w`` requests block
``(s_w + k) mod N`` at time ``k + w/M``.  The cache holds ``C`` blocks,
``1 <= C < N``.  Every function returns misses (fills) per round, ``K``, so
``K / M`` is the miss rate per request.

The results depend on the phases only through the *gaps*: the cyclic distances
between consecutive distinct phases (a single phase has gap ``N``).  The
footprint ``U(t) = sum_i min(g_i, t)`` is the number of distinct blocks in any
``t`` consecutive complete rounds (§3.2), and the waterline ``theta`` solves
``U(theta) = C``.  All threshold tests below compare integers ``U(t)`` with
``C``, so they are exact.

The dynamic predictor (paper §4) lives in ``cache_predictor``; this module
re-exports its public entry points lazily (PEP 562), so ``cache`` is the one public API and
importing it for the static model does not import scikit-learn.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from numbers import Integral

import numpy as np
from scipy.stats import binom

_PREDICTOR_EXPORTS = (
    "Calibration",
    "ConfigKey",
    "GemmTraffic",
    "ScanForecast",
    "ScanPredictor",
    "execution_class",
    "gemm_cold_bytes",
    "gemm_dram_traffic",
    "gemm_k0",
    "heldout_report",
    "load_calibration",
    "simulated_calibration",
)

__all__ = [
    "StaticForecast",
    "capacity_for_lead",
    "che_misses",
    "footprint",
    "gap_law_misses",
    "gaps",
    "lru_bounds",
    "lru_misses",
    "policy_lower_bound",
    "policy_lower_bound_exact",
    "reuse_distances",
    "reuse_intervals",
    "sdcm_misses",
    "static_forecast",
    "ttl_horizon",
    "waterline",
]


def _as_int(name: str, value: object) -> int:
    """Return ``value`` as a Python int, refusing bools, floats and other non-integers."""
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise ValueError(f"{name} must be an integer, got {value!r}")  # noqa: TRY004 (API contract)
    return int(value)


def _check_ring(n_blocks: object, phases: object) -> tuple[int, np.ndarray]:
    """Validate the ring size and the phase vector (one phase per worker, in [0, N))."""
    n = _as_int("N", n_blocks)
    if n <= 0:
        raise ValueError(f"N must be positive, got {n}")
    if isinstance(phases, (str, bytes)) or not isinstance(phases, (Sequence, np.ndarray)):
        raise ValueError(f"phases must be a sequence of integers, got {phases!r}")  # noqa: TRY004
    if len(phases) == 0:
        raise ValueError("phases must name at least one worker")
    if isinstance(phases, np.ndarray) and phases.dtype.kind in "iu" and phases.ndim == 1:
        arr = phases.astype(np.int64)  # fast path for large integer arrays
    else:
        arr = np.asarray([_as_int(f"phases[{w}]", p) for w, p in enumerate(phases)], np.int64)
    bad = (arr < 0) | (arr >= n)
    if bad.any():
        w = int(np.flatnonzero(bad)[0])
        raise ValueError(f"phases[{w}] = {arr[w]} is outside [0, N) for N = {n}")
    return n, arr


def _check(n_blocks: object, capacity: object, phases: object) -> tuple[int, int, np.ndarray]:
    """Validate ``(N, C, phases)``: integers, ``1 <= C < N``, phases in ``[0, N)``."""
    n, arr = _check_ring(n_blocks, phases)
    c = _as_int("C", capacity)
    if c < 1:
        raise ValueError(f"C must be at least 1 block, got {c}")
    if c >= n:
        raise ValueError(f"C must be smaller than N (C = {c}, N = {n}); the scan then fits")
    return n, c, arr


def _gaps(n: int, arr: np.ndarray) -> np.ndarray:
    """Cyclic gaps between consecutive distinct phases, in phase order; sum is ``N``."""
    ordered = np.sort(arr)  # sort-based distinct values: O(D log D), no hashing
    distinct = ordered[np.r_[True, ordered[1:] != ordered[:-1]]]
    if distinct.size == 1:
        return np.array([n], dtype=np.int64)
    return np.diff(np.append(distinct, distinct[0] + n))


def gaps(n_blocks: int, phases: Sequence[int]) -> np.ndarray:
    """Gaps between consecutive *distinct* phases (paper Fig. 1a); one phase has gap ``N``."""
    n, arr = _check_ring(n_blocks, phases)
    return _gaps(n, arr)


def _footprint(sorted_gaps: np.ndarray, prefix: np.ndarray, t: np.ndarray) -> np.ndarray:
    """``U(t) = sum_i min(g_i, t)`` for many ``t`` at once, from sorted gaps and prefix sums."""
    below = np.searchsorted(sorted_gaps, t, side="right")
    return prefix[below] + (sorted_gaps.size - below) * t


def _gap_table(n: int, arr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted gaps and their prefix sums (with a leading zero), the O(D log D) core."""
    g = np.sort(_gaps(n, arr))
    return g, np.concatenate(([0], np.cumsum(g)))


def footprint(n_blocks: int, phases: Sequence[int], t: int) -> int:
    """Distinct blocks in any ``t`` consecutive complete rounds, ``U(t)`` (paper §3.2)."""
    n, arr = _check_ring(n_blocks, phases)
    t = _as_int("t", t)
    if t < 0:
        raise ValueError(f"t must be non-negative, got {t}")
    g, prefix = _gap_table(n, arr)
    return int(_footprint(g, prefix, np.asarray([t]))[0])


def waterline(n_blocks: int, capacity: int, phases: Sequence[int]) -> Fraction:
    """The water level ``theta`` with ``U(theta) = C`` (paper Fig. 1b), as an exact fraction."""
    n, c, arr = _check(n_blocks, capacity, phases)
    g, prefix = _gap_table(n, arr)
    d = g.size
    # On [g_(j), g_(j+1)] the footprint is prefix[j] + (D - j) * theta; pick the first j whose
    # level does not exceed the next gap (water-filling).
    for j in range(d):
        level = Fraction(int(c - prefix[j]), d - j)
        if level <= g[j]:
            return level
    raise AssertionError("unreachable: C < N guarantees the water level is below the largest gap")


def ttl_horizon(n_blocks: int, capacity: int, phases: Sequence[int]) -> int:
    """Largest slotted-TTL window ``T*`` with boundary occupancy ``U(T*) <= C`` (paper §3.2)."""
    return int(waterline(n_blocks, capacity, phases))


def gap_law_misses(n_blocks: int, capacity: int, phases: Sequence[int]) -> float:
    """Misses per round of the capacity-C slotted TTL cache: gaps above the waterline (Thm 2).

    Worker(s) at a phase reuse the block the next phase ahead fetched ``g`` rounds earlier, so
    a phase hits iff its gap fits in the TTL window, i.e. ``U(g) <= C``; workers sharing a phase
    share one fill.  Cost O(D log D) in the number of distinct phases ``D``.
    """
    n, c, arr = _check(n_blocks, capacity, phases)
    g, prefix = _gap_table(n, arr)
    return float(np.count_nonzero(_footprint(g, prefix, g) > c))


def lru_bounds(n_blocks: int, capacity: int, phases: Sequence[int]) -> tuple[float, float]:
    """Fully associative LRU misses per round lie in these bounds when ``D <= C`` (Thm 3).

    A phase's reuse window spans between ``g - 1`` and ``g + 1`` complete rounds, so its
    reuse distance lies in ``[U(g-1), U(g+1) - 1]``: it surely misses when ``U(g-1) >= C``
    (``g >= theta + 1``) and surely hits when ``U(g+1) <= C`` (``g <= theta - 1``).  Only gaps
    within one round of the waterline are undecided.  With ``D <= C`` a worker that repeats
    another's phase in the same round always hits; for ``D > C`` the bounds are not guaranteed.
    """
    n, c, arr = _check(n_blocks, capacity, phases)
    g, prefix = _gap_table(n, arr)
    lower = np.count_nonzero(_footprint(g, prefix, g - 1) >= c)
    upper = np.count_nonzero(_footprint(g, prefix, g + 1) > c)
    return float(lower), float(upper)


def _phase_members(arr: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Distinct phases and, per phase, its first and last worker index; plus worker -> phase id."""
    distinct, inverse = np.unique(arr, return_inverse=True)
    idx = np.arange(arr.size)
    first = np.full(distinct.size, arr.size, dtype=np.int64)
    last = np.full(distinct.size, -1, dtype=np.int64)
    np.minimum.at(first, inverse, idx)
    np.maximum.at(last, inverse, idx)
    return distinct, first, last, inverse


def _reuse_distances(n: int, arr: np.ndarray) -> np.ndarray:
    """Exact steady-state LRU reuse distance of every worker's request (paper §3.3).

    The first worker of phase ``i`` reuses the block last requested by the last worker of the
    next phase ahead, ``g_i`` rounds earlier.  Phase ``j`` requested a contiguous run of rounds
    in between: ``[k - g + a_j, k - 1 + c_j]`` where ``a_j`` drops round ``k - g`` unless one of
    its workers comes after that last worker and ``c_j`` adds round ``k`` if one of its workers
    comes before.  The reuse distance is the size of the union of these ``D`` cyclic block
    intervals, which never contains the reused block itself, so cutting the ring there makes
    them linear.  A later worker of the same phase reuses within the round: its distance is the
    number of distinct phases requested strictly between the two.
    """
    distinct, first, last, inverse = _phase_members(arr)
    d = distinct.size
    ahead = np.roll(np.arange(d), -1)
    gap = (distinct[ahead] - distinct) % n
    gap[gap == 0] = n
    # rows: reusing phase i; columns: intervening phase j
    a = (last[None, :] <= last[ahead][:, None]).astype(np.int64)
    c = (first[None, :] < first[:, None]).astype(np.int64)
    length = gap[:, None] - a + c
    start = (distinct[None, :] - distinct[:, None] - gap[:, None] + a) % n
    empty = length <= 0
    start = np.where(empty, n, start)
    end = np.where(empty, n - 1, start + length - 1)
    order = np.argsort(start, axis=1, kind="stable")
    start = np.take_along_axis(start, order, axis=1)
    end = np.take_along_axis(end, order, axis=1)
    covered = np.maximum.accumulate(np.concatenate((np.zeros((d, 1), np.int64), end), 1), 1)
    phase_rd = np.maximum(0, end - np.maximum(start - 1, covered[:, :-1])).sum(axis=1)

    rd = phase_rd[inverse].astype(np.int64)
    for w in range(arr.size):
        p = inverse[w]
        if first[p] != w:
            prev = int(np.flatnonzero(inverse[:w] == p)[-1])
            rd[w] = np.unique(inverse[prev + 1 : w]).size
    return rd


def reuse_distances(n_blocks: int, phases: Sequence[int]) -> np.ndarray:
    """Exact steady-state LRU reuse distance per worker, without a trace (paper §3.3)."""
    n, arr = _check_ring(n_blocks, phases)
    return _reuse_distances(n, arr)


def lru_misses(n_blocks: int, capacity: int, phases: Sequence[int]) -> float:
    """Exact fully associative LRU misses per round: requests whose reuse distance is >= C."""
    n, c, arr = _check(n_blocks, capacity, phases)
    return float(np.count_nonzero(_reuse_distances(n, arr) >= c))


def _reuse_intervals_scaled(n: int, arr: np.ndarray) -> np.ndarray:
    """``M * tau_w`` as integers: elapsed time since the block's preceding request (Thm 4)."""
    m = arr.size
    w = np.arange(m)
    lag = (arr[:, None] - arr[None, :]) % n  # [w', w]
    lag = np.where((lag == 0) & (w[:, None] >= w[None, :]), n, lag)
    return (lag * m + (w[None, :] - w[:, None])).min(axis=0)


def reuse_intervals(n_blocks: int, phases: Sequence[int]) -> list[Fraction]:
    """Per-worker reuse intervals ``tau_w`` in rounds; they sum to ``N`` (paper §3.4)."""
    n, arr = _check_ring(n_blocks, phases)
    return [Fraction(int(t), arr.size) for t in _reuse_intervals_scaled(n, arr)]


def policy_lower_bound_exact(n_blocks: int, capacity: int, phases: Sequence[int]) -> Fraction:
    """Thm 4 as an exact fraction: ``M`` minus the fractional-knapsack hits per round.

    A hit on worker ``w``'s request keeps its block resident for ``tau_w`` rounds, and a
    capacity-C cache offers ``C`` block-rounds per round; the cheapest intervals are retained
    first and the next one fractionally.  Holds for every demand-paging policy, Belady included.
    """
    n, c, arr = _check(n_blocks, capacity, phases)
    m = arr.size
    scaled = np.sort(_reuse_intervals_scaled(n, arr))
    budget = c * m
    spent = np.cumsum(scaled)
    full = int(np.searchsorted(spent, budget, side="right"))
    hits = Fraction(full)
    if full < m:
        left = budget - (int(spent[full - 1]) if full else 0)
        hits += Fraction(left, int(scaled[full]))
    return m - hits


def policy_lower_bound(n_blocks: int, capacity: int, phases: Sequence[int]) -> float:
    """Misses per round that every demand-paging policy pays at capacity C (Thm 4)."""
    return float(policy_lower_bound_exact(n_blocks, capacity, phases))


def capacity_for_lead(sigma: int) -> int:
    """Capacity that preserves all sharing when no worker leads another by more than sigma.

    Thm 5 (§3.5): ``2*sigma - 1`` blocks suffice and ``2*sigma - 2`` can already lose sharing.
    The lead counts requests: a leader ``sigma - 1`` blocks ahead has issued ``sigma`` more
    requests (its fill of the shared block included) when the follower reaches that block,
    and the reuse window then holds ``2*(sigma - 1)`` other blocks.
    """
    s = _as_int("sigma", sigma)
    if s < 1:
        raise ValueError(f"sigma must be at least 1 request, got {s}")
    return 2 * s - 1


def che_misses(n_blocks: int, capacity: int, phases: Sequence[int]) -> float:
    """Che's characteristic-time approximation under the independent reference model (§2.1).

    Every block has the same request rate ``M/N`` per round, so the characteristic time gives
    hit probability ``C/N`` for every request, whatever the phases: ``K = M (1 - C/N)``.
    """
    n, c, arr = _check(n_blocks, capacity, phases)
    return float(arr.size * (1.0 - c / n))


def sdcm_misses(n_blocks: int, capacity: int, phases: Sequence[int], ways: int = 8) -> float:
    """SDCM: a reuse hits if fewer than ``ways`` of its intervening lines map to its set (§5.4).

    Uses the exact symbolic reuse distances and random set mapping over ``C / ways`` sets (the
    exact binomial, no normal approximation); ``ways >= C`` is fully associative LRU.
    """
    n, c, arr = _check(n_blocks, capacity, phases)
    a = _as_int("ways", ways)
    if a < 1:
        raise ValueError(f"ways must be at least 1, got {a}")
    rd = _reuse_distances(n, arr)
    if a >= c:
        return float(np.count_nonzero(rd >= c))
    hit = binom.cdf(a - 1, rd, a / c)
    return float(np.sum(1.0 - hit))


@dataclass(frozen=True)
class StaticForecast:
    """All fixed-phase traffic figures for one scan geometry, in misses per round."""

    n_blocks: int
    capacity: int
    workers: int
    distinct_phases: int
    gap_law: float
    lru: float
    lru_lower: float
    lru_upper: float
    policy_lower: float
    che: float
    sdcm: float

    @property
    def miss_rate(self) -> float:
        """Gap-law misses per request, ``K / M``."""
        return self.gap_law / self.workers


def static_forecast(
    n_blocks: int, capacity: int, phases: Sequence[int], ways: int = 8
) -> StaticForecast:
    """Evaluate every static model of §3 on one geometry (for reports and comparisons)."""
    n, c, arr = _check(n_blocks, capacity, phases)
    lo, hi = lru_bounds(n, c, arr)
    return StaticForecast(
        n_blocks=n,
        capacity=c,
        workers=int(arr.size),
        distinct_phases=int(np.unique(arr).size),
        gap_law=gap_law_misses(n, c, arr),
        lru=lru_misses(n, c, arr),
        lru_lower=lo,
        lru_upper=hi,
        policy_lower=policy_lower_bound(n, c, arr),
        che=che_misses(n, c, arr),
        sdcm=sdcm_misses(n, c, arr, ways),
    )


def __getattr__(name: str) -> object:
    """Lazily re-export the dynamic predictor's entry points from ``cache_predictor``."""
    if name in _PREDICTOR_EXPORTS:
        from . import cache_predictor

        return getattr(cache_predictor, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
