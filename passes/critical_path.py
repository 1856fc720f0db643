"""perf-critical-path: schedule each function onto the target's units and find its critical path."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from jaxlib.mlir import ir

from stablehlo_perf.analysis.critical_path import Schedule
from stablehlo_perf.analysis.schedule import ScheduledBlock, list_schedule
from stablehlo_perf.analysis.targets import DEFAULT_TARGET, load_target
from stablehlo_perf.passes.base import AnalysisCache
from stablehlo_perf.passes.extract import ModuleView

__all__ = ["CriticalPathPass", "read_latency"]


def read_latency(cache: AnalysisCache, op_id: int) -> float:
    """The latency perf-annotate-cycles wrote (0 where it has not run)."""
    return float(cache.values.get(op_id, {}).get("perf.latency_ns", 0.0))


@dataclass(frozen=True)
class CriticalPathPass:
    """Write `perf.start_ns`, `perf.slack_ns` on every op and `perf.critical` on the critical path.

    Options: target — decides which units overlap (TPU: MXU, VPU, DMA; GPU:
    stream + copy engine; CPU: in order). Each block's ops are list-scheduled
    in program order over SSA def-use edges weighted by `perf.latency_ns`;
    region bodies start at their op's start. A path is traced from every
    public function into the regions and callees it runs through; the entry
    function's path and totals go on the module (`perf.critical_path`,
    `perf.total_latency_ns` = makespan, `perf.critical_path_ns` = dataflow
    bound, `perf.work_ns` = sum of latencies).
    """

    name: ClassVar[str] = "perf-critical-path"
    target: str = DEFAULT_TARGET

    def apply(self, module: ir.Operation, cache: AnalysisCache) -> None:
        view = cache.view(module)
        kind = load_target(self.target).kind
        schedules: dict[tuple[int, ...], ScheduledBlock] = {}

        def schedule(ids: Sequence[int], offset: float) -> ScheduledBlock:
            latency = [read_latency(cache, i) for i in ids]
            classes = [view.records[i].info.op_class for i in ids]
            sb = list_schedule(latency, view.block_deps(ids), classes, kind)
            schedules[tuple(ids)] = sb
            s = sb.schedule
            for k, i in enumerate(ids):
                rec = view.records[i]
                cache.write(rec, "perf.start_ns", offset + s.start_ns[k])
                cache.write(rec, "perf.slack_ns", s.slack_ns[k])
                cache.values[i]["unit"] = sb.units[k]
                for block in view.regions.get(i, ()):
                    schedule(block, offset + s.start_ns[k])
            return sb

        for func in view.funcs.values():
            schedule(func.top, 0.0)
        entry = view.entry()
        for func in view.funcs.values():
            if func.public or func is entry:
                path: list[int] = []
                self._mark(view, cache, func.top, schedules, set(), path)
                if func is entry:
                    sb = schedules[tuple(func.top)]
                    attrs = module.attributes
                    attrs["perf.critical_path"] = ir.DenseI64ArrayAttr.get(path)
                    attrs["perf.total_latency_ns"] = ir.FloatAttr.get_f64(sb.makespan_ns)
                    attrs["perf.critical_path_ns"] = ir.FloatAttr.get_f64(sb.dataflow.span_ns)
                    attrs["perf.work_ns"] = ir.FloatAttr.get_f64(sb.schedule.work_ns)
                    cache.totals = {
                        "total_latency_ns": sb.makespan_ns,
                        "critical_path_ns": sb.dataflow.span_ns,
                        "work_ns": sb.schedule.work_ns,
                    }
                    cache.critical_path = path

    def _mark(
        self,
        view: ModuleView,
        cache: AnalysisCache,
        ids: Sequence[int],
        schedules: dict[tuple[int, ...], ScheduledBlock],
        seen: set[str],
        path: list[int],
    ) -> None:
        """Mark the path through `ids`, descending into the regions and callees on it."""
        sb = schedules.get(tuple(ids))
        if sb is None:
            return
        s: Schedule = sb.schedule
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
