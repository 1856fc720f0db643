"""Probe for what a call pays to fault in a temporary arena the allocator maps afresh.

XLA:CPU packs a program's temporaries into one allocation. glibc's malloc serves a request
of at least its mmap threshold with a fresh mapping and unmaps it on free; the threshold
grows with the freed mappings' sizes, but never past 32 MiB on a 64-bit machine
(`analysis.temp_arena.MMAP_THRESHOLD_BYTES`). A call whose arena is larger therefore faults
in every 4 KiB page of it again each time, where a smaller arena comes back from the heap
already mapped. On the project's Zen 4 VM (2026-12-07) a max pool's gradient of
8x56x56x64 f32 (arena 33.7 MiB by XLA's memory analysis) took 8,626 minor page faults and
20 ms a call against 8 ms a trip in a loop; with glibc told never to map
(GLIBC_TUNABLES=glibc.malloc.mmap_max=0) the faults went and the call took 12 ms. The
6x56x56x64 gradient (25.3 MiB) faulted only on its first call.

The probe times, as calls and inside loops in the same rounds, a program whose only
temporary is one elementwise loop's result (`exp(x) @ b`, x of N x 256, b 256 x 8), at an
arena of `BELOW_MIB` and of `ABOVE_MIB`: what the call costs beyond its loop trips at the
larger arena, less the same at the smaller (the call's other overheads), per MiB of the
larger arena is the fault-in cost (`FreshPages.ns_per_mib`). The page faults a call takes
are counted too (`faults_per_mib`: 256 where pages are 4 KiB and faulted one by one).
Which kernel first touches the arena matters: on the Xeon VM (2026-12-07, 9 rounds) an
arena a split elementwise loop writes cost 278 us a MiB, one a product writes (`(x @ a) @ b`,
the probe until then) 132, and a max pool's gradient, whose arena its iota and select loops
write, 270 (9.3 ms a call beyond its loop trips for 34 MiB); on the Zen 4 VM the product's
arena had cost 235 us a MiB and the pool's gradients 370-440.
"""

from __future__ import annotations

import math
import resource
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
from stablehlo_perf.analysis.host_params import FRESH_PAGES_KEY as KEY
from stablehlo_perf.runtime import sweeps, timing

__all__ = ["ABOVE_MIB", "BELOW_MIB", "KEY", "FreshPages", "measure_fresh_pages"]

BELOW_MIB = 24
ABOVE_MIB = 48
_WIDTH, _OUT = 256, 8


@dataclass(frozen=True)
class FreshPages:
    """ns a call pays per MiB of a freshly mapped arena, and the minor faults it took a MiB."""

    ns_per_mib: float
    faults_per_mib: float

    def pairs(self) -> dict[str, float]:
        """The header's `key=value` pairs."""
        return {"ns_per_mib": self.ns_per_mib, "faults_per_mib": self.faults_per_mib}


def _program(x: jax.Array, b: jax.Array) -> jax.Array:
    return jnp.exp(x) @ b


def _operands(mib: int, rng: np.random.Generator) -> tuple[jax.Array, ...]:
    rows = mib * 2**20 // (4 * _WIDTH)
    return tuple(
        jnp.asarray(rng.standard_normal(s) * 0.1, jnp.float32)
        for s in ((rows, _WIDTH), (_WIDTH, _OUT))
    )


def _faults_per_call(fn: jax.stages.Compiled, args: tuple[jax.Array, ...], calls: int = 5) -> float:
    jax.block_until_ready(fn(*args))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(calls):
        jax.block_until_ready(fn(*args))
    return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / calls


def measure_fresh_pages(repeats: int = 9, seed: int = 0) -> FreshPages:
    """This machine's `FreshPages` from one set of interleaved rounds (~10 s)."""
    rng = np.random.default_rng(seed)
    trips = jnp.asarray(1, jnp.int32)
    looped, calls, arena, faults = [], [], {}, {}
    for mib in (BELOW_MIB, ABOVE_MIB):
        args = _operands(mib, rng)
        spec = sweeps.Spec("fresh_pages", "f32", (mib,))
        loop = jax.jit(sweeps.in_loop(_program)).lower(trips, *args).compile()
        call = jax.jit(_program).lower(*args).compile()
        arena[mib] = call.memory_analysis().temp_size_in_bytes / 2**20
        faults[mib] = _faults_per_call(call, args)
        looped.append((spec.key, sweeps.LoopCase(spec, loop, args)))
        calls.append(timing.Case(f"{spec.key}@call", call, args))
    per_trip, timed, _ = timing.time_in_loop(looped, repeats=repeats, seed=seed, extra=calls)
    beyond = {
        mib: np.array(timed[f"{key}@call"].rounds_us) - np.array(per_trip[key][0].rounds_us)
        for mib, (key, _) in zip((BELOW_MIB, ABOVE_MIB), looped, strict=True)
    }
    fresh_us = float(np.median(beyond[ABOVE_MIB] - beyond[BELOW_MIB]))
    above = arena[ABOVE_MIB]
    return FreshPages(
        max(fresh_us, 0.0) * 1e3 / above if above > 0 else math.nan,
        faults[ABOVE_MIB] / above if above > 0 else math.nan,
    )
