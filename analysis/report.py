"""The analysis report: per-op records, totals, the critical path; JSON and Markdown forms.

The JSON layout is the contract in DESIGN.md. FLOP and byte counts stay
exact Python integers here even where the IR attribute had to be clamped to
int64.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields

__all__ = ["OpReport", "Report"]


@dataclass
class OpReport:
    """One analysed op as the report lists it."""

    id: int
    name: str
    loc: str
    func: str
    cycles: int
    latency_ns: float
    flops: int | None
    bytes: int | None
    dram_bytes: int
    model: str
    critical: bool
    slack_ns: float
    start_ns: float
    top_level: bool
    unit: str = ""
    fusion: int | None = None
    latency_p10_ns: float | None = None
    latency_p90_ns: float | None = None


_OP_FIELDS = [f.name for f in fields(OpReport) if f.name not in ("top_level", "unit", "fusion")]


@dataclass
class Report:
    """Whole-module results for the entry function: `total_latency_ns` is the makespan of its
    schedule on the target's units, `critical_path_ns` the dataflow bound, `work_ns` the sum;
    the first two include `call_overhead_ns`, what a call costs beyond its kernels, and
    `contention_ns`, what the entry's kernels cost beyond their own latencies for running
    beside a library call's polling threads (`Target.pool_contention`)."""

    target: str
    entry: str
    total_latency_ns: float
    critical_path_ns: float
    work_ns: float
    ops: list[OpReport]
    critical_path: list[int]
    fusion_groups: list[dict] = field(default_factory=list)
    call_overhead_ns: float = 0.0
    contention_ns: float = 0.0
    module_estimate: dict | None = None
    # while ops XLA:CPU compiles into one kernel (their model reads `while(xN, one kernel)`)
    one_kernel_loops: list[int] = field(default_factory=list)
    unmodelled: list[dict[str, str | int]] = field(default_factory=list)
    caveats: list[str] = field(default_factory=list)
    target_note: str = ""

    @property
    def parallelism(self) -> float:
        """Work over the kernels' dataflow bound (the call overhead is no kernel's)."""
        span = self.critical_path_ns - self.call_overhead_ns
        return self.work_ns / span if span > 0 else 0.0

    def to_dict(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "ops"}
        d["ops"] = [{f: getattr(o, f) for f in _OP_FIELDS} for o in self.ops]
        return d

    def to_json(self, indent: int | None = 2) -> str:
        """JSON text; with `indent`, top-level keys and each op go on lines of their own
        (each op compact), which keeps json's fast C encoder for the bulk."""
        d = self.to_dict()
        if indent is None:
            return json.dumps(d)
        pad = " " * indent
        parts = []
        for key, value in d.items():
            if key == "ops":
                ops = f",\n{pad}{pad}".join(json.dumps(op) for op in value)
                parts.append(
                    f'{pad}"ops": [\n{pad}{pad}{ops}\n{pad}]' if value else f'{pad}"ops": []'
                )
            else:
                parts.append(f"{pad}{json.dumps(key)}: {json.dumps(value)}")
        return "{\n" + ",\n".join(parts) + "\n}"

    def to_trace(self) -> dict:
        """The predicted schedule as a Chrome/Perfetto trace: one track per execution unit
        (per function), ops as slices with their attributes as args, µs timestamps."""
        events: list[dict] = [
            {"name": "process_name", "ph": "M", "pid": 1,
             "args": {"name": f"stablehlo-perf: {self.target} (predicted)"}}
        ]  # fmt: skip
        tracks: dict[str, int] = {}
        for o in self.ops:
            if o.latency_ns <= 0:
                continue
            track = f"{o.func}: {o.unit or 'ops'}"
            if track not in tracks:
                tracks[track] = len(tracks) + 1
                events.append({"name": "thread_name", "ph": "M", "pid": 1, "tid": tracks[track],
                               "args": {"name": track}})  # fmt: skip
            events.append(
                {
                    "name": o.name.split(".", 1)[-1],
                    "cat": "critical" if o.critical else "op",
                    "ph": "X",
                    "pid": 1,
                    "tid": tracks[track],
                    "ts": o.start_ns / 1e3,
                    "dur": o.latency_ns / 1e3,
                    "args": {"id": o.id, "loc": o.loc, "model": o.model, "flops": o.flops,
                             "bytes": o.bytes, "slack_ns": o.slack_ns, "critical": o.critical},
                }
            )  # fmt: skip
        return {"traceEvents": events, "displayTimeUnit": "ns"}

    def _path_steps(self) -> list[list[OpReport]]:
        """The critical path with consecutive ops of one fusion group (one kernel) merged."""
        by_id = {o.id: o for o in self.ops}
        steps: list[list[OpReport]] = []
        for i in self.critical_path:
            o = by_id[i]
            if o.latency_ns == 0 and o.model in ("free", "dead-code"):
                continue
            if steps and o.fusion is not None and steps[-1][0].fusion == o.fusion:
                steps[-1].append(o)
            else:
                steps.append([o])
        return steps

    def to_markdown(self, top: int = 15) -> str:
        """Summary, top ops by latency (with the model that priced each), the critical path."""
        lines = [
            f"# stablehlo-perf report — target `{self.target}`",
            "",
            f"Entry function: `@{self.entry}`",
            "",
            "| total latency | critical path | work | parallelism | ops |",
            "|---:|---:|---:|---:|---:|",
            (
                f"| {_ns(self.total_latency_ns)} | {_ns(self.critical_path_ns)} | "
                f"{_ns(self.work_ns)} | {self.parallelism:.2f} | "
                f"{len(self.ops)} |"
            ),
            "",
        ]
        if self.target_note:
            lines += [f"> {self.target_note}", ""]
        if self.call_overhead_ns:
            lines += [
                (
                    f"Includes {_ns(self.call_overhead_ns)} of per-call overhead beyond the kernels "
                    "(argument handling, thread-pool wake-up; measured by the target's calibration)."
                ),
                "",
            ]
        if self.contention_ns:
            lines += [
                (
                    f"Includes {_ns(self.contention_ns)} of contention: kernels after a "
                    "library dot or pool run beside its still-polling threads (measured by "
                    "the target's calibration)."
                ),
                "",
            ]
        if self.module_estimate:
            m = self.module_estimate
            lines += [
                (
                    f"Cross-check: the module-level LASSO ({m['model']}, trained on {m['trained_on']}) "
                    f"estimates {_ns(m['estimate_ns'])}."
                ),
                "",
            ]
        ranked = sorted(
            (o for o in self.ops if o.top_level), key=lambda o: o.latency_ns, reverse=True
        )[:top]
        share = self.total_latency_ns or 1.0
        lines += [
            f"## Top {len(ranked)} ops by latency",
            "",
            "| id | op | latency | share | FLOPs | bytes | model | location |",
            "|---:|---|---:|---:|---:|---:|---|---|",
        ]
        for o in ranked:
            lines.append(
                f"| {o.id} | `{o.name}` | {_ns(o.latency_ns)} | {100 * o.latency_ns / share:.1f}% | "
                f"{_num(o.flops)} | {_num(o.bytes)} | {o.model} | {o.loc} |"
            )
        groups = sorted(
            (g for g in self.fusion_groups if g["func"] == self.entry and g["parent"] is None),
            key=lambda g: -g["latency_ns"],
        )[:top]
        if groups:
            lines += [
                "",
                f"## Top {len(groups)} fusion groups (kernels) by latency",
                "",
                "| group | kind | ops | root | latency | share | bytes in+out | model |",
                "|---:|---|---:|---|---:|---:|---:|---|",
            ]
            for g in groups:
                lines.append(
                    f"| {g['id']} | {g['kind']} | {len(g['ops'])} | `{g['root']}` | "
                    f"{_ns(g['latency_ns'])} | {100 * g['latency_ns'] / share:.1f}% | "
                    f"{_num(g['bytes'])} | {g['model']} |"
                )
        lines += [
            "",
            "## Critical path",
            "",
            "| # | ops | kernel | latency | start | location |",
            "|---:|---|---|---:|---:|---|",
        ]
        for k, step in enumerate(self._path_steps()):
            first = step[0]
            names = ", ".join(f"`{o.name.split('.', 1)[-1]}`" for o in step[:6])
            names += f" … (+{len(step) - 6})" if len(step) > 6 else ""
            kernel = (
                f"fusion {first.fusion}"
                if first.fusion is not None and len(step) > 1
                else first.model
            )
            lines.append(
                f"| {k} | {names} | {kernel} | {_ns(sum(o.latency_ns for o in step))} | "
                f"{_ns(first.start_ns)} | {first.loc} |"
            )
        if self.unmodelled:
            lines += ["", "## Not modelled", ""]
            lines += [
                f"- op {u['id']} `{u['name']}` at {u['loc']}: {u['reason']}"
                for u in self.unmodelled
            ]
        if self.caveats:
            lines += ["", "## Caveats", ""] + [f"- {c}" for c in self.caveats]
        return "\n".join(lines) + "\n"


def _ns(x: float) -> str:
    if x >= 1e6:
        return f"{x / 1e6:.3f} ms"
    if x >= 1e3:
        return f"{x / 1e3:.2f} µs"
    return f"{x:.1f} ns"


def _num(x: int | None) -> str:
    return "?" if x is None else f"{x:,}"
