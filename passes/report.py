"""Build the report of an analysed module from the values the passes recorded in the analysis cache."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from stablehlo_perf.analysis.calibration_files import RELEVEL_TIME_FORMAT
from stablehlo_perf.analysis.cc4cs import load_module_lasso
from stablehlo_perf.analysis.opinfo import WRITTEN_AS
from stablehlo_perf.analysis.report import OpReport, Report
from stablehlo_perf.analysis.targets import Target
from stablehlo_perf.passes.base import AnalysisCache
from stablehlo_perf.passes.executed import lasso_features
from stablehlo_perf.passes.extract import ModuleView

__all__ = ["collect_report"]

_REASONS = {
    "unknown-shape": "dynamic or unranked shape: cost not known statically",
}


def collect_report(view: ModuleView, cache: AnalysisCache, target: Target) -> Report:
    """Report over every analysed op from the values the passes wrote; totals are the entry function's."""
    caveats = list(cache.warnings)
    ops: list[OpReport] = []
    unmodelled: list[dict[str, str | int]] = []
    entry = view.entry()
    entry_top = set(entry.top) if entry else set()
    for rec in view.records:
        info = rec.info
        name = info.attrs.get(WRITTEN_AS, info.name)
        values = cache.values.get(info.id, {})
        model = str(values.get("perf.model", "none"))
        ops.append(
            OpReport(
                id=info.id,
                name=name,
                loc=info.loc,
                func=info.func,
                cycles=int(values.get("perf.cycles", 0)),
                latency_ns=float(values.get("perf.latency_ns", 0.0)),
                flops=info.flops,
                bytes=info.bytes,
                dram_bytes=int(values.get("perf.dram_bytes", 0)),
                model=model,
                critical=bool(values.get("perf.critical", False)),
                slack_ns=float(values.get("perf.slack_ns", 0.0)),
                start_ns=float(values.get("perf.start_ns", 0.0)),
                top_level=info.id in entry_top,
                unit=str(values.get("unit", "")),
                fusion=values.get("perf.fusion"),  # type: ignore[arg-type]
                latency_p10_ns=values.get("perf.latency_p10_ns"),  # type: ignore[arg-type]
                latency_p90_ns=values.get("perf.latency_p90_ns"),  # type: ignore[arg-type]
            )
        )
        if model in _REASONS:
            unmodelled.append(
                {"id": info.id, "name": name, "loc": info.loc, "reason": _REASONS[model]}
            )
        elif model == "roofline" and info.op_class == "other":
            unmodelled.append(
                {"id": info.id, "name": name, "loc": info.loc,
                 "reason": "no dedicated model knows this op; priced by the roofline fallback"}
            )  # fmt: skip
        warning = values.get("perf.warning", None)
        if warning:
            caveats = [*caveats, f"op {info.id} `{name}` at {info.loc}: {warning}"]
    extrapolated = [i for i, v in cache.values.items() if v.get("perf.extrapolated")]
    if extrapolated:
        caveats.append(
            f"{len(extrapolated)} op(s) lie outside their learned model's training range "
            f"(perf.extrapolated), e.g. op {extrapolated[0]}"
        )
    if target.borrowed_from:
        caveats.append(
            f"the {target.name} calibration is borrowed from a reference measured on another "
            f"machine, its times scaled to this one's speed ({target.borrowed_from}; run "
            f"stablehlo-perf-calibrate --target {target.name} --quick to measure it here)"
        )
    if target.relevelled:
        caveats.append(
            f"the {target.name} calibration is this machine's reference re-levelled to the speed"
            f" it ran at when gauged{_age(target.relevelled)} ({target.relevelled}); a shared"
            f" machine's speed moves: stablehlo-perf-calibrate --target {target.name} --relevel"
            " gauges it again"
        )
    if target.kind == "cpu" and any(v.get("other_machine") for v in cache.values.values()):
        caveats.append(
            f"some predictions come from a calibration measured on another machine than this one "
            f"(run stablehlo-perf-calibrate --target {target.name} --quick to measure it here, "
            "~40 min, or --borrow to scale the nearest reference to it, ~1 min)"
        )
    top_ops = [o for o in ops if o.top_level]
    work = sum(o.latency_ns for o in top_ops)
    totals = cache.totals or {"total_latency_ns": work, "critical_path_ns": work, "work_ns": work}
    if not cache.totals:
        caveats.append("perf-critical-path did not run: ops assumed to run one after another")
    groups = []
    for bf in cache.fusion.values():
        for g, members in enumerate(bf.group_members()):
            if not bf.costs or bf.plan.kinds[g] == "free":
                continue
            root = view.records[bf.ids[bf.plan.roots[g]]]
            if root.info.op_class == "control":
                continue
            cost = bf.costs[g]
            groups.append({
                "id": bf.first_group + g, "kind": bf.plan.kinds[g], "ops": members,
                "root": root.info.name, "func": root.info.func, "parent": root.parent,
                "latency_ns": cost.latency_ns, "bytes": cost.dram_bytes, "model": cost.model,
                "kernels": bf.plan.launches[g],
            })  # fmt: skip
    lasso = load_module_lasso(target.name)
    loops = sorted(cache.one_kernel_loops)
    estimate = None if lasso is None else lasso.estimate(lasso_features(view, loops)).to_dict()
    note = "" if target.calibrated else f"target `{target.name}`: {target.calibration_note}"
    return Report(
        target=target.name,
        entry=entry.name if entry else "",
        total_latency_ns=totals["total_latency_ns"],
        critical_path_ns=totals["critical_path_ns"],
        work_ns=totals["work_ns"],
        call_overhead_ns=totals.get("call_overhead_ns", 0.0),
        contention_ns=totals.get("contention_ns", 0.0),
        ops=ops,
        critical_path=list(cache.critical_path),
        fusion_groups=groups,
        module_estimate=estimate,
        one_kernel_loops=loops,
        unmodelled=unmodelled,
        caveats=list(dict.fromkeys(caveats)),
        target_note=note,
    )


def _age(label: str) -> str:
    """How long ago a re-level's label (`runtime.borrow.relevel`: "re-timed " and the time in
    `RELEVEL_TIME_FORMAT`) was gauged, as ", N h ago" ("" where it names no time): a VM's
    level moves within hours."""
    found = re.search(r"re-timed (\S+)", label)
    try:
        then = datetime.strptime(found.group(1) if found else "", RELEVEL_TIME_FORMAT)
    except ValueError:
        return ""
    then = then.replace(tzinfo=UTC)
    hours = (datetime.now(UTC) - then).total_seconds() / 3600
    return f", {hours:.1f} h ago"
