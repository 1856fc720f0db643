"""stablehlo-perf: annotate StableHLO with predicted cycles, latency and memory traffic."""

from __future__ import annotations

from typing import Any

__all__ = ["analyze", "perf_jit"]


def analyze(module: Any, target: str | None = None, **kwargs: Any) -> Any:
    """Analyse a StableHLO module (text, MLIR module or JAX `Lowered`) for `target`."""
    from stablehlo_perf.passes.api import analyze as _analyze

    return _analyze(module, target=target, **kwargs)


def perf_jit(fun: Any = None, **kwargs: Any) -> Any:
    """`jax.jit` with `.analyze(...)` (and `measure=True`): see `stablehlo_perf.runtime.jit_hook`."""
    from stablehlo_perf.runtime.jit_hook import perf_jit as _perf_jit

    return _perf_jit(fun, **kwargs)
