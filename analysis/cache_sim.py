"""Ground-truth trace simulators for the shared cyclic scan: exact LRU, slotted TTL, Belady MIN.

These replay the request trace of paper §3.1 and count fills; the closed forms in ``cache``
are validated against them (paper §5.2).  They are deliberately independent of ``cache``:
nothing here uses gaps, footprints or reuse distances.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

__all__ = [
    "SimResult",
    "scan_trace",
    "simulate_belady",
    "simulate_lru",
    "simulate_ttl",
    "ttl_trace_counts",
]


@dataclass(frozen=True)
class SimResult:
    """Misses per round measured over ``rounds`` steady-state rounds (exact fraction)."""

    misses_per_round: Fraction
    rounds: int

    def __float__(self) -> float:
        """The miss count per round as a float."""
        return float(self.misses_per_round)


def scan_trace(n_blocks: int, phases: Sequence[int], rounds: int) -> tuple[np.ndarray, np.ndarray]:
    """Blocks and rounds of every request in time order: round ``k``, workers in index order."""
    s = np.asarray(phases, dtype=np.int64)
    k = np.repeat(np.arange(rounds, dtype=np.int64), s.size)
    return (np.tile(s, rounds) + k) % n_blocks, k


def simulate_lru(n_blocks: int, capacity: int, phases: Sequence[int]) -> SimResult:
    """Fully associative LRU on the trace; counts misses over rounds ``[N, 2N)``.

    After ``N`` rounds every block has been requested, and the trace is periodic in ``N``
    rounds, so one measured period is the exact steady state.
    """
    blocks, _ = scan_trace(n_blocks, phases, 2 * n_blocks)
    warm = n_blocks * len(phases)
    cache: OrderedDict[int, None] = OrderedDict()
    misses = 0
    for i, b in enumerate(blocks.tolist()):
        if b in cache:
            cache.move_to_end(b)
            continue
        if i >= warm:
            misses += 1
        cache[b] = None
        if len(cache) > capacity:
            cache.popitem(last=False)
    return SimResult(Fraction(misses, n_blocks), n_blocks)


@dataclass(frozen=True)
class _TtlTrace:
    """Per-request previous/next request rounds of the same block, shared by all windows."""

    n_blocks: int
    rnd: np.ndarray
    prev: np.ndarray
    nxt: np.ndarray

    @classmethod
    def build(cls, n_blocks: int, phases: Sequence[int]) -> _TtlTrace:
        """Replay ``2N`` rounds and link each request to its block's neighbouring requests."""
        n = n_blocks
        blocks, rnd = scan_trace(n, phases, 2 * n)
        order = np.lexsort((np.arange(blocks.size), blocks))
        same = blocks[order][1:] == blocks[order][:-1]
        prev = np.full(blocks.size, -(10**9), dtype=np.int64)
        prev[order[1:][same]] = rnd[order[:-1][same]]
        nxt = np.full(blocks.size, 4 * n, dtype=np.int64)
        nxt[order[:-1][same]] = rnd[order[1:][same]]
        return cls(n, rnd, prev, nxt)

    def counts(self, window: int) -> tuple[Fraction, int]:
        """Misses per round over rounds ``[N, 2N)`` and the largest boundary occupancy there."""
        n, rnd = self.n_blocks, self.rnd
        misses = int(np.count_nonzero((self.prev < rnd - window) & (rnd >= n)))
        # a request of b in round r keeps b counted at boundaries (r, min(next round, r + T)]
        last = self.nxt > rnd
        lo = rnd[last] + 1
        hi = np.minimum(self.nxt[last], rnd[last] + window)
        keep = hi >= lo
        delta = np.zeros(4 * n + 2, dtype=np.int64)
        np.add.at(delta, lo[keep], 1)
        np.add.at(delta, hi[keep] + 1, -1)
        return Fraction(misses, n), int(np.cumsum(delta)[n : 2 * n].max())


def ttl_trace_counts(n_blocks: int, phases: Sequence[int], window: int) -> tuple[Fraction, int]:
    """Slotted TTL with a ``window``-round memory: (misses per round, max boundary occupancy).

    At the start of round ``k`` the cache holds the blocks requested in rounds
    ``[k - window, k)``; a request hits if its block is held or was already fetched this round
    (current-round duplicates share one fill, paper §3.2).  Measured over rounds ``[N, 2N)``.
    """
    return _TtlTrace.build(n_blocks, phases).counts(window)


def simulate_ttl(n_blocks: int, capacity: int, phases: Sequence[int]) -> SimResult:
    """Capacity-C slotted TTL: the longest window whose boundary occupancy never exceeds C."""
    trace = _TtlTrace.build(n_blocks, phases)
    best = Fraction(len(phases))
    lo, hi = 0, n_blocks
    while lo <= hi:
        mid = (lo + hi) // 2
        misses, occupancy = trace.counts(mid)
        if occupancy <= capacity:
            best, lo = misses, mid + 1
        else:
            hi = mid - 1
    return SimResult(best, n_blocks)


def simulate_belady(
    n_blocks: int, capacity: int, phases: Sequence[int], max_periods: int = 10_000
) -> SimResult:
    """Belady's MIN with forced allocation on the infinite periodic trace.

    A miss always inserts its block and evicts the resident whose next request is farthest.
    The trace repeats every ``N`` rounds, so the resident set at period boundaries determines
    the future; the run stops when a boundary state recurs and reports misses per round over
    that whole cycle of periods (a periodic steady state may span several periods).
    """
    n = n_blocks
    blocks, _ = scan_trace(n, phases, n)
    period = blocks.size
    # distance to the next request of the same block in the infinite periodic trace
    order = np.lexsort((np.arange(period), blocks))
    sb = blocks[order]
    nxt = np.empty(period, dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, sb[1:] != sb[:-1]])
    ends = np.r_[starts[1:], period]
    for s, e in zip(starts.tolist(), ends.tolist()):
        pos = order[s:e]
        nxt[pos] = np.r_[pos[1:], pos[0] + period] - pos
    blist, dlist = blocks.tolist(), nxt.tolist()

    resident: dict[int, int] = {}  # block -> absolute time of its next request
    heap: list[tuple[int, int]] = []  # (-next request time, block), lazily invalidated
    seen: dict[frozenset[int], tuple[int, int]] = {}
    misses = 0
    for p in range(max_periods):
        state = frozenset(resident)
        if state in seen:
            p0, m0 = seen[state]
            return SimResult(Fraction(misses - m0, (p - p0) * n), (p - p0) * n)
        seen[state] = (p, misses)
        base = p * period
        for i in range(period):
            t = base + i
            b = blist[i]
            due = t + dlist[i]
            if b not in resident:
                misses += 1
                if len(resident) >= capacity:
                    while True:
                        neg, victim = heapq.heappop(heap)
                        if resident.get(victim) == -neg:
                            del resident[victim]
                            break
            resident[b] = due
            heapq.heappush(heap, (-due, b))
    raise RuntimeError(f"Belady state did not recur within {max_periods} periods")
