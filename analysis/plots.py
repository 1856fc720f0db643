"""Pictures of a report: a roofline of the ops against the target's ceilings, and where time goes.

matplotlib is imported only here (and only when a plot is asked for), with
the non-interactive Agg backend.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np
from stablehlo_perf.analysis.opinfo import op_class
from stablehlo_perf.analysis.report import Report
from stablehlo_perf.analysis.targets import Target

__all__ = ["plot_report"]


def plot_report(report: Report, target: Target, path: str | Path) -> None:
    """Write a PNG: roofline (FLOPs/byte vs achieved FLOP/s) and latency by op class."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ops = [o for o in report.ops if o.latency_ns > 0 and o.flops and o.bytes]
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(13, 5.5), gridspec_kw={"width_ratios": [3, 2]})
    bw = target.memory_bandwidth
    matrix = target.peak_flops("bf16", matrix=True)
    vector = target.peak_flops("f32", matrix=False)
    ai = np.logspace(-3, 4, 200)
    for peak, style, width, what in (
        (matrix, "k-", 1.5, "matrix peak (bf16)"),
        (vector, "k--", 1.0, "vector peak (f32)"),
    ):
        label = f"{what} {peak / 1e12:g} TFLOP/s"
        ax.loglog(ai, np.minimum(ai * bw, peak), style, lw=width, label=label)
    by_class: dict[str, list] = defaultdict(list)
    for o in ops:
        by_class[op_class(o.name)].append(o)
    for cls, members in sorted(by_class.items()):
        x = [o.flops / o.bytes for o in members]
        y = [o.flops / (o.latency_ns * 1e-9) for o in members]
        ax.scatter(x, y, s=18, alpha=0.75, label=cls)
    ax.set_xlabel("arithmetic intensity (FLOPs / byte)")
    ax.set_ylabel("achieved FLOP/s (predicted)")
    ax.set_title(f"Roofline — {report.target} ({bw / 1e9:g} GB/s)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")

    time_by_class: dict[str, float] = defaultdict(float)
    for o in report.ops:
        if o.top_level:
            time_by_class[op_class(o.name)] += o.latency_ns
    names = sorted(time_by_class, key=time_by_class.get)
    values = [time_by_class[n] / 1e3 for n in names]
    bx.barh(names, values, color="tab:blue")
    bx.set_xlabel("predicted latency (µs), entry function")
    bx.set_title(f"Where time goes (total {report.total_latency_ns / 1e3:.1f} µs)")
    for y, v in enumerate(values):
        bx.text(v, y, f" {v:.1f}", va="center", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
