"""perf-critical-path: longest latency-weighted path over each function's SSA def-use graph."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from jaxlib.mlir import ir
from stablehlo_perf.analysis.critical_path import Schedule, longest_path
from stablehlo_perf.passes.base import AnalysisCache
from stablehlo_perf.passes.extract import ModuleView

__all__ = ["CriticalPathPass", "block_schedule", "read_latency"]


def read_latency(cache: AnalysisCache, op_id: int) -> float:
    """The latency perf-annotate-cycles wrote (0 where it has not run)."""
    return float(cache.values.get(op_id, {}).get("perf.latency_ns", 0.0))


def block_schedule(
    view: ModuleView, cache: AnalysisCache, ids: Sequence[int], op_ids: dict
) -> Schedule:
    """Longest path over one block's ops; an op depends on the ops its (nested) operands come from."""
    local = {i: k for k, i in enumerate(ids)}
    deps: list[list[int]] = []
    for i in ids:
        found: set[int] = set()
        stack = [i]
        while stack:
            j = stack.pop()
            for v in view.records[j].op.operands:
                src = op_ids.get(v.owner)
                if src is not None and src in local and src != i:
                    found.add(local[src])
            for block in view.regions.get(j, []):
                stack.extend(block)
        deps.append(sorted(found))
    latency = [read_latency(cache, i) for i in ids]
    return longest_path(latency, deps)


@dataclass(frozen=True)
class CriticalPathPass:
    """Write `perf.start_ns`, `perf.slack_ns` on every op and `perf.critical` on the critical path.

    Each function's body (and each region body, from its op's start) is a DAG
    of SSA def-use edges weighted by `perf.latency_ns`; a path is traced from
    every public function into the regions and callees it runs through, and
    the entry function's path is recorded on the module (`perf.critical_path`).
    """

    name: ClassVar[str] = "perf-critical-path"

    def apply(self, module: ir.Operation, cache: AnalysisCache) -> None:
        view = cache.view(module)
        op_ids = {rec.op: rec.info.id for rec in view.records}
        schedules: dict[tuple[int, ...], Schedule] = {}

        def schedule(ids: Sequence[int], offset: float) -> Schedule:
            s = block_schedule(view, cache, ids, op_ids)
            schedules[tuple(ids)] = s
            for k, i in enumerate(ids):
                rec = view.records[i]
                cache.write(rec, "perf.start_ns", float(offset + s.start_ns[k]))
                cache.write(rec, "perf.slack_ns", float(s.slack_ns[k]))
                for block in view.regions.get(i, []):
                    schedule(block, offset + s.start_ns[k])
            return s

        for func in view.funcs.values():
            schedule(func.top, 0.0)
        entry = view.entry()
        for func in view.funcs.values():
            if func.public or func is entry:
                path: list[int] = []
                self._mark(view, cache, func.top, schedules, set(), path)
                if func is entry:
                    module.attributes["perf.critical_path"] = ir.DenseI64ArrayAttr.get(path)

    def _mark(
        self,
        view: ModuleView,
        cache: AnalysisCache,
        ids: Sequence[int],
        schedules: dict[tuple[int, ...], Schedule],
        seen: set[str],
        path: list[int],
    ) -> None:
        """Mark the path through `ids`, descending into the regions and callees on it."""
        s = schedules.get(tuple(ids))
        if s is None:
            return
        for k in s.path:
            i = ids[k]
            rec = view.records[i]
            cache.write(rec, "perf.critical", True)
            path.append(i)
            blocks = view.regions.get(i, [])
            if rec.info.name == "stablehlo.while" and len(blocks) > 1:
                self._mark(view, cache, blocks[1], schedules, seen, path)
            elif blocks:
                costliest = max(blocks, key=lambda b: sum(read_latency(cache, j) for j in b))
                self._mark(view, cache, costliest, schedules, seen, path)
            callee = (
                rec.info.attrs.get("callee", "").lstrip("@") if rec.info.name == "func.call" else ""
            )
            if callee in view.funcs and callee not in seen:
                seen.add(callee)
                self._mark(view, cache, view.funcs[callee].top, schedules, seen, path)
