"""A terminal view of a report (rich): totals, top ops with their models, the critical path."""

from __future__ import annotations

from typing import IO

from stablehlo_perf.analysis.report import Report

__all__ = ["print_summary"]


def print_summary(report: Report, file: IO[str] | None = None, top: int = 12) -> None:
    """Render the report's summary tables to `file` (default stderr)."""
    from rich.console import Console
    from rich.table import Table

    console = Console(file=file, stderr=file is None)
    totals = Table(title=f"stablehlo-perf — {report.target} — @{report.entry}")
    for col in ("total latency", "critical path", "work", "parallelism", "ops"):
        totals.add_column(col, justify="right")
    par = report.work_ns / report.critical_path_ns if report.critical_path_ns else 0.0
    totals.add_row(
        _us(report.total_latency_ns), _us(report.critical_path_ns), _us(report.work_ns),
        f"{par:.2f}", str(len(report.ops)),
    )  # fmt: skip
    console.print(totals)
    if report.target_note:
        console.print(f"[dim]{report.target_note}[/dim]")
    ranked = sorted((o for o in report.ops if o.top_level), key=lambda o: -o.latency_ns)[:top]
    share = report.work_ns or 1.0
    table = Table(title=f"top {len(ranked)} ops by latency")
    for col, just in (("id", "right"), ("op", "left"), ("latency", "right"), ("share", "right"),
                      ("model", "left"), ("critical", "center"), ("location", "left")):  # fmt: skip
        table.add_column(col, justify=just)
    for o in ranked:
        table.add_row(
            str(o.id), o.name, _us(o.latency_ns), f"{100 * o.latency_ns / share:.1f}%",
            o.model, "●" if o.critical else "", o.loc,
        )  # fmt: skip
    console.print(table)
    by_id = {o.id: o for o in report.ops}
    path = " → ".join(by_id[i].name.split(".", 1)[-1] for i in report.critical_path[:40])
    more = len(report.critical_path) - 40
    console.print(f"[bold]critical path[/bold] ({len(report.critical_path)} ops): {path}"
                  + (f" … (+{more})" if more > 0 else ""))  # fmt: skip
    for u in report.unmodelled:
        console.print(
            f"[yellow]not modelled[/yellow] op {u['id']} {u['name']} at {u['loc']}: {u['reason']}"
        )
    for c in report.caveats:
        console.print(f"[yellow]caveat[/yellow] {c}")


def _us(ns: float) -> str:
    return f"{ns / 1e3:,.2f} µs"
