"""List scheduling of a block's ops onto a target's execution units.

Which units overlap depends on the target: a TPU TensorCore runs its matrix
unit, vector unit and DMA engines concurrently; a GPU runs one compute stream
beside its async copy engine; a CPU runs kernels in order on one unit. Ops
are taken in program order (a valid topological order, and the order XLA
emits them in) and each starts when its inputs are ready and its unit is free.

The schedule is returned as extra dependency edges (each op after the
previous op on its unit), so the longest path over data + unit edges gives
the makespan, each op's slack under the resource limits, and the critical
path that decides the total latency.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from stablehlo_perf.analysis.critical_path import Schedule, longest_path

__all__ = ["UNITS", "ScheduledBlock", "list_schedule", "unit_of"]

# Units per target kind; op classes not named run on the kind's default (first) unit.
UNITS: dict[str, dict[str, str]] = {
    "tpu": {"matmul": "mxu", "movement": "dma"},  # everything else on "vpu"
    "gpu": {"movement": "copy"},  # everything else on "stream"
    "cpu": {},  # everything on "core"
}
_DEFAULT_UNIT = {"tpu": "vpu", "gpu": "stream", "cpu": "core"}


def unit_of(op_class: str, kind: str) -> str:
    """The execution unit an op of `op_class` occupies on a target of `kind`."""
    return UNITS.get(kind, {}).get(op_class, _DEFAULT_UNIT.get(kind, "core"))


@dataclass(frozen=True)
class ScheduledBlock:
    """Resource-constrained schedule of one block and its pure-dataflow bound."""

    schedule: Schedule  # start/slack/path with unit edges: span == makespan
    dataflow: Schedule  # unlimited units: span is the dataflow critical path
    units: list[str]

    @property
    def makespan_ns(self) -> float:
        return self.schedule.span_ns


def list_schedule(
    latency_ns: Sequence[float],
    deps: Sequence[Sequence[int]],
    op_classes: Sequence[str],
    kind: str,
) -> ScheduledBlock:
    """Schedule ops in program order onto the units of a `kind` target."""
    units = [unit_of(c, kind) for c in op_classes]
    last_on_unit: dict[str, int] = {}
    augmented: list[list[int]] = []
    for i, unit in enumerate(units):
        edges = list(deps[i])
        if latency_ns[i] > 0:
            prev = last_on_unit.get(unit)
            if prev is not None and prev not in edges:
                edges.append(prev)
            last_on_unit[unit] = i
        augmented.append(edges)
    return ScheduledBlock(
        schedule=longest_path(latency_ns, augmented),
        dataflow=longest_path(latency_ns, deps),
        units=units,
    )
