"""Discrete-event simulation of shared-cache workers: the stand-in calibration source.

The project's machines have no GPU, so the dynamic predictor (paper §4) is calibrated and
tested against this simulation instead of Nsight Compute fill counters.  It models the
mechanisms of paper §3.6: ``M = occupancy * SMs`` workers start aligned and stream blocks
(a cyclic scan of ``N`` blocks ``W`` times, or the operand tiles of GEMM output tiles);
each keeps ``d - 1`` copies in flight on the TMA path (primed copies, a new one issued after
consuming a block, with a jittered barrier) or one on the synchronous path; it spends
per-block compute ``m`` (plus a loop tail that depends on the execution class) on an SM
shared with the other resident workers; and it waits for jittered L2 hits or DRAM fills
through one shared fully associative LRU cache of ``C`` blocks with in-flight fill merging
and a bandwidth-limited DRAM queue.  All traffic it produces is labelled ``simulated``.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .cache_predictor import (
    HORIZONS,
    Calibration,
    ConfigKey,
    GemmReference,
    ScanReference,
)

__all__ = [
    "ScanRun",
    "SimDevice",
    "build_calibration",
    "gemm_streams",
    "simulate_gemm",
    "simulate_scan",
    "simulate_streams",
]


@dataclass(frozen=True)
class SimDevice:
    """Time constants of the simulated device, in units of one block's base compute time."""

    name: str = "sim-small"
    sms: int = 6
    capacity: int = 16
    block_bytes: int = 16384
    dram_latency: float = 1.5
    dram_jitter: float = 0.35
    dram_service: float = 0.12
    l2_latency: float = 0.6
    l2_jitter: float = 0.15
    block_overhead: float = 1.0
    compute_per_op: float = 0.18
    # extra loop-tail time per execution class: none, early exit, predicated tail (App. C.4)
    tail: tuple[float, float, float] = (0.0, 0.1, 0.45)
    compute_jitter: float = 0.1
    tma_barrier: float = 0.5
    sync_issue: float = 0.05

    def workers(self, occupancy: int) -> int:
        """Resident workers ``M = o * SMs`` (paper §4.2)."""
        return occupancy * self.sms


@dataclass(frozen=True)
class ScanRun:
    """One simulated run: fills counted like the DRAM-to-L2 fill counter."""

    key: ConfigKey
    workers: int
    requests: int
    fills: int
    elapsed: float


def simulate_streams(
    device: SimDevice, key: ConfigKey, streams: Sequence[Sequence[int]], seed: int
) -> ScanRun:
    """Run one worker per block stream (all launched together) and count DRAM fills."""
    rng = np.random.default_rng(seed)
    m = len(streams)
    draws = sum(len(s) for s in streams) + 8
    dram_lat = (
        device.dram_latency * np.exp(device.dram_jitter * rng.standard_normal(draws))
    ).tolist()
    l2_lat = (device.l2_latency * np.exp(device.l2_jitter * rng.standard_normal(draws))).tolist()
    base = device.block_overhead + device.compute_per_op * key.compute + device.tail[key.klass]
    work = (base * np.exp(device.compute_jitter * rng.standard_normal(draws))).tolist()
    tma = key.path == "tma"
    gate = (rng.exponential(device.tma_barrier, draws) if tma else np.zeros(draws)).tolist()

    cache: OrderedDict[int, None] = OrderedDict()
    pending: dict[int, float] = {}
    dram_free = 0.0
    fills = 0
    draw = 0

    def load(block: int, now: float) -> float:
        """Look the block up at ``now``; return when its data reaches the worker."""
        nonlocal dram_free, fills, draw
        draw += 1
        ready = pending.get(block)
        if ready is not None and ready > now:
            if block in cache:
                cache.move_to_end(block)
            return max(ready, now + l2_lat[draw])
        if block in cache:
            cache.move_to_end(block)
            return now + l2_lat[draw]
        fills += 1
        start = max(now, dram_free)
        dram_free = start + device.dram_service
        arrival = start + dram_lat[draw]
        pending[block] = arrival
        cache[block] = None
        if len(cache) > device.capacity:
            cache.popitem(last=False)
        return arrival

    arrivals: list[dict[int, float]] = [{} for _ in range(m)]
    issued = [0] * m
    sm_free = [0.0] * device.sms

    def issue(w: int, now: float) -> None:
        """Issue worker ``w``'s next load, if any remain."""
        j = issued[w]
        if j < len(streams[w]):
            arrivals[w][j] = load(streams[w][j], now)
            issued[w] = j + 1

    events: list[tuple[float, int, int, int]] = []  # (time, kind, worker, stream position)
    ready_kind, done_kind = 0, 1
    for w in range(m):
        if not streams[w]:
            continue
        t0 = w * 1e-3
        for _ in range(key.depth - 1 if tma else 1):
            issue(w, t0)
        heapq.heappush(events, (arrivals[w][0] + gate[w], ready_kind, w, 0))

    finish = 0.0
    step = m
    while events:
        now, kind, w, j = heapq.heappop(events)
        if kind == ready_kind:
            if not tma:
                issue(w, now + device.sync_issue)
            sm = w % device.sms
            start = max(now, sm_free[sm])
            step += 1
            end = start + work[step % draws]
            sm_free[sm] = end
            heapq.heappush(events, (end, done_kind, w, j))
            continue
        del arrivals[w][j]
        if tma:
            issue(w, now)
        if j + 1 < len(streams[w]):
            step += 1
            t = max(now, arrivals[w][j + 1]) + gate[step % draws]
            heapq.heappush(events, (t, ready_kind, w, j + 1))
        else:
            finish = max(finish, now)
    return ScanRun(key, m, draws - 8, fills, finish)


def simulate_scan(
    device: SimDevice, key: ConfigKey, n_blocks: int, scans: int, seed: int
) -> ScanRun:
    """``M`` aligned workers each scan the ``n_blocks`` ring ``scans`` times."""
    if n_blocks <= device.capacity:
        raise ValueError(f"N = {n_blocks} must exceed the cache capacity {device.capacity}")
    if scans < 1:
        raise ValueError(f"scans must be at least 1, got {scans}")
    stream = [j % n_blocks for j in range(n_blocks * scans)]
    return simulate_streams(device, key, [stream] * device.workers(key.occupancy), seed)


def gemm_streams(workers: int, nr: int, nc: int, nk: int) -> list[list[int]]:
    """Operand-tile streams of persistent CTAs over a raster-ordered output grid (App. C.8).

    Worker ``w`` computes output tiles ``w, w + M, ...``; at reduction step ``k`` output tile
    ``(i, j)`` reads ``A[i, k]`` and ``B[k, j]``.
    """
    streams: list[list[int]] = [[] for _ in range(workers)]
    for t in range(nr * nc):
        i, j = divmod(t, nc)
        s = streams[t % workers]
        for k in range(nk):
            s.append(i * nk + k)
            s.append(nr * nk + k * nc + j)
    return streams


def simulate_gemm(
    device: SimDevice, key: ConfigKey, nr: int, nc: int, nk: int, seed: int
) -> ScanRun:
    """Simulated GEMM with ``(nr, nc, nk)`` tiles; fills are 16 KiB operand tiles."""
    return simulate_streams(
        device, key, gemm_streams(device.workers(key.occupancy), nr, nc, nk), seed
    )


# The simulated calibration grid (paper §4.5 protocol at a small scale): reference and
# held-out compute counts are disjoint, and every family samples every execution class.
FAMILIES: tuple[tuple[int, str, int], ...] = (
    (1, "sync", 0),
    (2, "sync", 0),
    (1, "tma", 2),
    (2, "tma", 2),
    (1, "tma", 3),
    (2, "tma", 3),
    (1, "tma", 4),
    (2, "tma", 4),
)
REFERENCE_COMPUTE = (0, 1, 2, 8, 9, 11, 16, 17, 18)
HELDOUT_COMPUTE = (3, 4, 5, 6, 12, 13, 15)
REFERENCE_SIZES = (32, 48, 64)
HELDOUT_SIZES = (40, 48, 56)
HELDOUT_HORIZONS = (8, 32, 64)
REPEATS = 2
GEMM_KEY = ConfigKey(2, "tma", 3, 2)
GEMM_REFERENCE_GRID = ((2, 4, 8), (2, 4, 8), (4, 8, 16))  # nr, nc, nk
GEMM_HELDOUT_GRID = ((3, 6), (3, 6), (6, 12, 24))


def build_calibration(device: SimDevice = SimDevice(), seed: int = 0) -> Calibration:
    """Simulate the reference grid (and held-out runs, stored apart) into a calibration."""
    rng_seed = seed * 1_000_003
    scans = []
    for fam in FAMILIES:
        for m in REFERENCE_COMPUTE:
            key = ConfigKey(*fam, m)
            for n in REFERENCE_SIZES:
                fills = {}
                for w in HORIZONS:
                    runs = []
                    for _ in range(REPEATS):
                        rng_seed += 1
                        runs.append(float(simulate_scan(device, key, n, w, rng_seed).fills))
                    fills[w] = tuple(runs)
                scans.append(ScanReference(key, n, device.workers(key.occupancy), fills))
    heldout = []
    for fam in FAMILIES:
        for m in HELDOUT_COMPUTE:
            key = ConfigKey(*fam, m)
            for n in HELDOUT_SIZES:
                for w in HELDOUT_HORIZONS:
                    rng_seed += 1
                    run = simulate_scan(device, key, n, w, rng_seed)
                    heldout.append(
                        {
                            "kind": "scan",
                            "occupancy": key.occupancy,
                            "path": key.path,
                            "depth": key.depth,
                            "compute": m,
                            "n_blocks": n,
                            "scans": w,
                            "fills": run.fills,
                        }
                    )
    mw = device.workers(GEMM_KEY.occupancy)
    gemms = []
    for nr in GEMM_REFERENCE_GRID[0]:
        for nc in GEMM_REFERENCE_GRID[1]:
            for nk in GEMM_REFERENCE_GRID[2]:
                runs = []
                for _ in range(REPEATS):
                    rng_seed += 1
                    run = simulate_gemm(device, GEMM_KEY, nr, nc, nk, rng_seed)
                    runs.append(float(run.fills * device.block_bytes))
                gemms.append(GemmReference(nr, nc, nk, mw, tuple(runs)))
    for nr in GEMM_HELDOUT_GRID[0]:
        for nc in GEMM_HELDOUT_GRID[1]:
            for nk in GEMM_HELDOUT_GRID[2]:
                rng_seed += 1
                run = simulate_gemm(device, GEMM_KEY, nr, nc, nk, rng_seed)
                heldout.append(
                    {
                        "kind": "gemm",
                        "nr": nr,
                        "nc": nc,
                        "nk": nk,
                        "workers": mw,
                        "fill_bytes": run.fills * device.block_bytes,
                    }
                )
    return Calibration(
        device=device.name,
        source="simulated",
        capacity_blocks=device.capacity,
        block_bytes=device.block_bytes,
        scans=tuple(scans),
        gemms=tuple(gemms),
        note=(
            "SIMULATED, not measured: discrete-event simulation "
            "(stablehlo_perf.analysis.cache_calibration_sim, "
            f"seed {seed}, {device}). 'heldout' runs never enter fitting."
        ),
        heldout=tuple(heldout),
    )
