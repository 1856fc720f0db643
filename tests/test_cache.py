"""PASCAL static model (paper §3): closed forms against trace simulators and hand-worked cases."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
from stablehlo_perf.analysis import cache
from stablehlo_perf.analysis import cache_sim as sim


def exhaustive_cases() -> list[tuple[int, int, tuple[int, ...]]]:
    """Every N = 2..6, M = 1..3, ordered phase vector and 1 <= C < N (paper §5.2)."""
    return [
        (n, c, phases)
        for n in range(2, 7)
        for m in range(1, 4)
        for phases in itertools.product(range(n), repeat=m)
        for c in range(1, n)
    ]


def test_exhaustive_set_has_paper_count() -> None:
    """The paper's count 2254 is all ordered phase vectors (within-round order matters)."""
    assert len(exhaustive_cases()) == 2254


def test_exhaustive_against_simulators() -> None:
    """Thm 2 = TTL, lru_misses = LRU, Thm 3 brackets LRU when D <= C, Belady >= Thm 4."""
    failures: list[str] = []
    collapsed = undecided = outside_when_d_exceeds_c = 0
    for n, c, phases in exhaustive_cases():
        k = cache.gap_law_misses(n, c, phases)
        ttl = sim.simulate_ttl(n, c, phases).misses_per_round
        lru = sim.simulate_lru(n, c, phases).misses_per_round
        belady = sim.simulate_belady(n, c, phases).misses_per_round
        lo, hi = cache.lru_bounds(n, c, phases)
        bound = cache.policy_lower_bound_exact(n, c, phases)
        if k != ttl:
            failures.append(f"TTL {n} {c} {phases}: {k} vs {ttl}")
        if cache.lru_misses(n, c, phases) != lru:
            failures.append(f"LRU {n} {c} {phases}")
        if len(set(phases)) <= c:
            if not lo <= lru <= hi or not lo <= k <= hi:
                failures.append(f"Thm3 {n} {c} {phases}: {lru} not in [{lo}, {hi}]")
            collapsed += lo == hi
            undecided += lo != hi
        else:
            outside_when_d_exceeds_c += not lo <= lru <= hi
        if belady < bound:
            failures.append(f"Thm4 {n} {c} {phases}: Belady {belady} < {bound}")
    assert failures == []
    # the bracket is informative: it often collapses to the exact count, but not always
    assert collapsed == 804 and undecided == 1554 - 804
    # and the D <= C condition is needed: same-phase repeats can miss once D > C
    assert outside_when_d_exceeds_c == 70


def test_random_larger_cases() -> None:
    """500 seeded larger geometries: the same four checks as the exhaustive set."""
    rng = np.random.default_rng(2026)
    for _ in range(500):
        n = int(rng.integers(7, 41))
        c = int(rng.integers(1, n))
        phases = rng.integers(0, n, int(rng.integers(1, 7))).tolist()
        lru = sim.simulate_lru(n, c, phases).misses_per_round
        assert cache.gap_law_misses(n, c, phases) == sim.simulate_ttl(n, c, phases).misses_per_round
        assert cache.lru_misses(n, c, phases) == lru
        if len(set(phases)) <= c:
            lo, hi = cache.lru_bounds(n, c, phases)
            assert lo <= lru <= hi
        belady = sim.simulate_belady(n, c, phases).misses_per_round
        assert belady >= cache.policy_lower_bound_exact(n, c, phases)


PAPER_N, PAPER_M, PAPER_C = 8192, 48, 1280


def _paper_phase_patterns() -> dict[str, list[int]]:
    """Phase patterns of §5.2 at paper scale: aligned, clustered, spaced, random, gaussian."""
    rng = np.random.default_rng(7)
    m, n = PAPER_M, PAPER_N
    return {
        "aligned": [0] * m,
        "equally_spaced": [(w * n) // m for w in range(m)],
        "12_clusters": [((w % 12) * n) // 12 for w in range(m)],
        "tight_group": [7 * w for w in range(m)],
        "uniform_random": rng.integers(0, n, m).tolist(),
        "wrapped_gaussian": (np.round(rng.normal(0, 300, m)).astype(int) % n).tolist(),
    }


@pytest.mark.parametrize("name", sorted(_paper_phase_patterns()))
def test_paper_scale(name: str) -> None:
    """N = 8192, M = 48, C = 1280: gap law = TTL trace, lru_misses = LRU trace (paper §5.2)."""
    phases = _paper_phase_patterns()[name]
    lru = sim.simulate_lru(PAPER_N, PAPER_C, phases).misses_per_round
    assert cache.lru_misses(PAPER_N, PAPER_C, phases) == lru
    ttl = sim.simulate_ttl(PAPER_N, PAPER_C, phases).misses_per_round
    assert cache.gap_law_misses(PAPER_N, PAPER_C, phases) == ttl
    lo, hi = cache.lru_bounds(PAPER_N, PAPER_C, phases)
    assert lo <= lru <= hi
    assert cache.policy_lower_bound(PAPER_N, PAPER_C, phases) <= cache.gap_law_misses(
        PAPER_N, PAPER_C, phases
    )


def test_paper_scale_hand_values() -> None:
    """Aligned workers pay one fill per round; 12 evenly spaced clusters pay twelve."""
    pats = _paper_phase_patterns()
    assert cache.gap_law_misses(PAPER_N, PAPER_C, pats["aligned"]) == 1.0
    # 12 gaps of ~683 blocks, waterline 1280/12 ~ 107: every cluster pays its own fill
    assert cache.gap_law_misses(PAPER_N, PAPER_C, pats["12_clusters"]) == 12.0
    # 48 workers 7 blocks apart: footprint of one 7-round gap is 47*7 + 7 = 336 <= 1280
    assert cache.gap_law_misses(PAPER_N, PAPER_C, pats["tight_group"]) == 1.0


def test_policy_bound_paper_example() -> None:
    """§3.4: N=8, M=2, C=2, phases (0, 4): tau = (7/2, 9/2) and the bound is 10/7 > 1."""
    assert cache.reuse_intervals(8, (0, 4)) == [Fraction(7, 2), Fraction(9, 2)]
    assert cache.policy_lower_bound_exact(8, 2, (0, 4)) == Fraction(10, 7)
    assert cache.policy_lower_bound(8, 2, (0, 4)) == pytest.approx(10 / 7)


def test_reuse_intervals_aligned_pair_and_sum() -> None:
    """Two aligned workers give (N - 1/2, 1/2); the intervals always sum to N (§3.4)."""
    assert cache.reuse_intervals(10, (3, 3)) == [Fraction(19, 2), Fraction(1, 2)]
    rng = np.random.default_rng(1)
    for _ in range(50):
        n = int(rng.integers(2, 30))
        phases = rng.integers(0, n, int(rng.integers(1, 9))).tolist()
        assert sum(cache.reuse_intervals(n, phases)) == n


def test_within_round_order_changes_bound() -> None:
    """Reversing worker order changes tau and can change the Thm 4 bound, not the gap law."""
    # N=4: worker 0 at 0 reuses worker 1's fill half a round later, tau = (1/2, 7/2);
    # swapped, the cheap reuse costs 3/2 rounds, tau = (5/2, 3/2)
    assert cache.reuse_intervals(4, (0, 1)) == [Fraction(1, 2), Fraction(7, 2)]
    assert cache.reuse_intervals(4, (1, 0)) == [Fraction(5, 2), Fraction(3, 2)]
    assert cache.gap_law_misses(4, 2, (0, 1)) == cache.gap_law_misses(4, 2, (1, 0)) == 1.0
    assert cache.policy_lower_bound_exact(4, 2, (0, 1)) == Fraction(4, 7)
    assert cache.policy_lower_bound_exact(4, 2, (1, 0)) == Fraction(4, 5)


def test_gap_law_hand_cases() -> None:
    """Water-filling by hand: distinct phases, shared fills, strict waterline."""
    # one phase: gap N > C, one fill per round
    assert cache.gap_law_misses(16, 15, (5, 5, 5)) == 1.0
    # gaps (4, 4, 4) all exceed C/D = 1: each distinct phase pays its own fill
    assert cache.gap_law_misses(12, 3, (0, 4, 8)) == 3.0
    # workers sharing a phase share one fill: gaps (6, 6), not three fills
    assert cache.gap_law_misses(12, 5, (0, 0, 6)) == 2.0
    # gaps (1, 5, 6): 1 + 2*theta = 6 gives theta = 5/2, so the gaps 5 and 6 lie above it
    assert cache.waterline(12, 6, (0, 1, 6)) == Fraction(5, 2)
    assert cache.gap_law_misses(12, 6, (0, 1, 6)) == 2.0
    # a gap exactly at the waterline is not above it: gaps (2, 2, 8), U(2) = 6 = C
    assert cache.waterline(12, 6, (0, 2, 4)) == 2
    assert cache.ttl_horizon(12, 6, (0, 2, 4)) == 2
    assert cache.gap_law_misses(12, 6, (0, 2, 4)) == 1.0
    assert cache.footprint(12, (0, 2, 4), 2) == 6
    assert cache.gaps(12, (4, 0, 2, 2)).tolist() == [2, 2, 8]


def test_lru_differs_from_ttl_at_waterline() -> None:
    """N=3, C=2, phases (0, 2): trace 0 2 1 0 2 1 ... misses every request under LRU.

    The gap 2 sits one round above the waterline theta = 1, inside Thm 3's undecided band:
    TTL keeps 1 fill per round, LRU pays 2, and Thm 3 gives [1, 2].
    """
    assert cache.gap_law_misses(3, 2, (0, 2)) == 1.0
    assert cache.lru_misses(3, 2, (0, 2)) == 2.0
    assert cache.lru_bounds(3, 2, (0, 2)) == (1.0, 2.0)
    assert sim.simulate_lru(3, 2, (0, 2)).misses_per_round == 2


def test_reuse_distances_hand_case() -> None:
    """Two workers 3 blocks apart on N=20, worker 0 leading.

    The follower reuses the leader's fill 3 rounds later, after its own 3 blocks behind and the
    leader's 3 blocks ahead: distance 6.  The leader reuses the follower's fill 17 rounds later,
    after every other block of the ring: distance N - 1 = 19.
    """
    assert cache.reuse_distances(20, (3, 0)).tolist() == [19, 6]


@pytest.mark.parametrize("sigma", range(1, 8))
def test_capacity_for_lead_is_sharp(sigma: int) -> None:
    """Thm 5: lead sigma keeps sharing at 2*sigma - 1 blocks and loses it at 2*sigma - 2."""
    c = cache.capacity_for_lead(sigma)
    assert c == 2 * sigma - 1
    n = 4 * sigma + 6
    # the leader (worker 0) is sigma requests ahead when the follower reaches its block
    phases = (sigma - 1, 0)
    assert sim.simulate_lru(n, c, phases).misses_per_round == 1
    if c > 1:
        assert sim.simulate_lru(n, c - 1, phases).misses_per_round == 2


def test_che_ignores_phases() -> None:
    """Che-IRM: hit probability C/N for every request, so aligned and spread phases agree."""
    assert cache.che_misses(10, 4, (0, 0, 0)) == pytest.approx(3 * 0.6)
    assert cache.che_misses(10, 4, (0, 3, 7)) == pytest.approx(3 * 0.6)


def test_sdcm_limits() -> None:
    """SDCM equals exact LRU when fully associative, and is the binomial rule otherwise."""
    rng = np.random.default_rng(3)
    for _ in range(30):
        n = int(rng.integers(3, 40))
        c = int(rng.integers(1, n))
        phases = rng.integers(0, n, int(rng.integers(1, 6))).tolist()
        assert cache.sdcm_misses(n, c, phases, ways=c) == cache.lru_misses(n, c, phases)
    # N=20, C=8, two workers: distances (14, 6); one way over 8 sets hits w.p. (7/8)^d
    rd = cache.reuse_distances(20, (3, 0)).tolist()
    expected = sum(1 - (7 / 8) ** d for d in rd)
    assert cache.sdcm_misses(20, 8, (3, 0), ways=1) == pytest.approx(expected)


def test_numpy_phase_arrays() -> None:
    """Integer numpy phase arrays (the fast path) give the same answers as lists."""
    phases = [0, 4, 4, 9]
    for fn in (cache.gap_law_misses, cache.lru_misses, cache.policy_lower_bound):
        assert fn(12, 5, np.array(phases, dtype=np.int32)) == fn(12, 5, phases)


def test_static_forecast_record() -> None:
    """The combined record agrees with the individual functions."""
    f = cache.static_forecast(8, 2, (0, 4))
    assert f.gap_law == cache.gap_law_misses(8, 2, (0, 4)) == 2.0
    assert f.policy_lower == pytest.approx(10 / 7)
    assert f.distinct_phases == 2 and f.miss_rate == 1.0


def test_pycachesim_cross_check() -> None:
    """Third-party fully associative LRU (pycachesim, optional) agrees with lru_misses."""
    cachesim = pytest.importorskip("cachesim")
    rng = np.random.default_rng(11)
    for _ in range(20):
        n = int(rng.integers(4, 60))
        c = int(rng.integers(1, n))
        phases = rng.integers(0, n, int(rng.integers(1, 6))).tolist()
        mem = cachesim.MainMemory()
        l2 = cachesim.Cache("L2", 1, c, 64, "LRU")
        mem.load_to(l2)
        mem.store_from(l2)
        simulator = cachesim.CacheSimulator(l2, mem)
        blocks, _ = sim.scan_trace(n, phases, 2 * n)
        warm = n * len(phases)
        for b in blocks[:warm].tolist():
            simulator.load(b * 64, length=1)
        simulator.reset_stats()
        for b in blocks[warm:].tolist():
            simulator.load(b * 64, length=1)
        assert l2.backend.MISS_count / n == cache.lru_misses(n, c, phases)


BAD_INPUTS = [
    (0, 1, [0], "N must be positive"),
    (-4, 1, [0], "N must be positive"),
    (8, 8, [0], "C must be smaller than N"),
    (8, 9, [0], "C must be smaller than N"),
    (8, 0, [0], "C must be at least 1"),
    (8, 2, [8], "outside"),
    (8, 2, [-1], "outside"),
    (8, 2, [], "at least one worker"),
    (8.0, 2, [0], "N must be an integer"),
    (8, 2.5, [0], "C must be an integer"),
    (8, 2, [0, 1.0], "phases\\[1\\] must be an integer"),
    (8, True, [0], "C must be an integer"),
    (8, 2, "01", "sequence of integers"),
    (8, 2, np.array([0.0, 4.0]), "phases\\[0\\] must be an integer"),
    (8, 2, np.array([0, 8]), "phases\\[1\\] = 8 is outside"),
]


@pytest.mark.parametrize("n,c,phases,message", BAD_INPUTS)
@pytest.mark.parametrize(
    "fn",
    [
        cache.gap_law_misses,
        cache.lru_bounds,
        cache.lru_misses,
        cache.policy_lower_bound,
        cache.che_misses,
        cache.sdcm_misses,
    ],
)
def test_bad_input(fn, n, c, phases, message) -> None:
    """Every public entry point refuses bad geometry with a clear ValueError."""
    with pytest.raises(ValueError, match=message):
        fn(n, c, phases)


@pytest.mark.parametrize("sigma", [0, -2, 1.5, "3"])
def test_capacity_for_lead_bad_input(sigma) -> None:
    """Lead must be a positive integer number of requests."""
    with pytest.raises(ValueError, match="sigma"):
        cache.capacity_for_lead(sigma)
