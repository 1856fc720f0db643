"""Per-kernel device times of a jitted program from JAX's profiler.

XLA's runtimes record one trace event per executed kernel (XLA:CPU: per thunk, with
an `hlo_op` stat naming the fusion or instruction; GPU: per launched kernel on the
device plane). `kernel_times` traces a few calls with `jax.profiler` (public API:
`start_trace` / `stop_trace`, `ProfileData.from_file`), groups the events by HLO
op and run, and returns each kernel's median time per call.

Caveat, measured on the project's 2-vCPU VM: tracing slows kernels XLA:CPU splits
over its thread pool (a 1M-element add traced at 2.1 ms against 0.7 ms untraced), so
per-kernel times are for *where* the time goes, and the program's own timing (the
harness, untraced) for *how much*.
"""

from __future__ import annotations

import tempfile
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import numpy as np

__all__ = ["KernelTime", "kernel_times"]


@dataclass(frozen=True)
class KernelTime:
    """One kernel (HLO op) of a program: median time per call (ns) and launches per call."""

    name: str
    median_ns: float
    per_call: float


def _events(path: Path) -> list[tuple[str, int, float]]:
    """(hlo_op, run id, duration ns) of every kernel event in an xplane file."""
    from jax.profiler import ProfileData

    out = []
    for plane in ProfileData.from_file(str(path)).planes:
        for line in plane.lines:
            for event in line.events:
                stats = dict(event.stats)
                name = stats.get("hlo_op")
                if name:
                    out.append((str(name), int(stats.get("run_id", 0)), float(event.duration_ns)))
    return out


def kernel_times(
    fn: Callable[..., Any],
    args: Sequence[Any],
    kwargs: dict[str, Any] | None = None,
    calls: int = 10,
) -> list[KernelTime]:
    """Kernels of `fn(*args)` by median time per call, longest first ([] if the backend's
    trace names no kernels). `fn` is called once untraced first (compilation)."""
    kw = kwargs or {}
    jax.block_until_ready(fn(*args, **kw))
    with tempfile.TemporaryDirectory(prefix="stablehlo-perf-trace-") as tmp:
        jax.profiler.start_trace(tmp)
        try:
            for _ in range(calls):
                jax.block_until_ready(fn(*args, **kw))
        finally:
            jax.profiler.stop_trace()
        files = sorted(Path(tmp).rglob("*.xplane.pb"))
        events = [e for f in files for e in _events(f)]
    per_run: dict[str, dict[int, float]] = defaultdict(lambda: defaultdict(float))
    launches: dict[str, int] = defaultdict(int)
    runs = {run for _, run, _ in events}
    for name, run, ns in events:
        per_run[name][run] += ns
        launches[name] += 1
    n = max(len(runs), 1)
    out = [
        KernelTime(
            name,
            # A run where the kernel did not execute (a cond branch) counts as zero.
            float(np.median([*times.values(), *[0.0] * (n - len(times))])),
            launches[name] / n,
        )
        for name, times in per_run.items()
    ]
    return sorted(out, key=lambda k: -k.median_ns)
