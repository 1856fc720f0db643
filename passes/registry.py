"""Pass registry: name -> lazy factory, so the CLI starts without importing every pass."""

from __future__ import annotations

import dataclasses
import importlib
from dataclasses import dataclass

__all__ = ["PASSES", "PassDoc", "describe_passes", "pass_class"]

PASSES: dict[str, str] = {
    "perf-inline-calls": "stablehlo_perf.passes.inline:InlineCallsPass",
    "perf-op-info": "stablehlo_perf.passes.op_info:OpInfoPass",
    "perf-fusion": "stablehlo_perf.passes.fusion:FusionPass",
    "perf-annotate-cache-traffic": "stablehlo_perf.passes.cache_traffic:CacheTrafficPass",
    "perf-annotate-cycles": "stablehlo_perf.passes.annotate_cycles:AnnotateCyclesPass",
    "perf-critical-path": "stablehlo_perf.passes.critical_path:CriticalPathPass",
}


@dataclass(frozen=True)
class PassDoc:
    """A pass's name, one-line summary and options (name, type, default)."""

    name: str
    summary: str
    options: tuple[tuple[str, str, object], ...]


def pass_class(name: str) -> type:
    """The class registered under `name` (KeyError if none)."""
    module, cls = PASSES[name].split(":")
    return getattr(importlib.import_module(module), cls)


def describe_passes() -> list[PassDoc]:
    """Every registered pass with its summary and options, for --list-passes."""
    docs = []
    for name in PASSES:
        cls = pass_class(name)
        summary = (cls.__doc__ or "").strip().splitlines()[0]
        options = tuple(
            (
                f.name.replace("_", "-"),
                f.type if isinstance(f.type, str) else f.type.__name__,
                f.default,
            )
            for f in dataclasses.fields(cls)
        )
        docs.append(PassDoc(name, summary, options))
    return docs
