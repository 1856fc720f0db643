"""Helpers shared by the fusion benchmark and its test: XLA's kernels and our flat blocks.

`xla_kernels` reads XLA's optimised HLO text (`compiled.as_text()`) and lists
the instructions that launch work in the entry computation and in every
computation control flow reaches (while bodies and conditions, conditional
branches, calls): fusions, custom calls, dots, convolutions, copies, sorts,
unfused elementwise ops. Parameters, constants, tuples, get-tuple-element and
bitcasts launch nothing; while/conditional/call are counted apart as control.

`flat_blocks` turns a parsed StableHLO module into the blocks `fuse_block`
sees, with `func.call`s inlined by the pipeline's `perf-inline-calls` (as XLA's
CallInliner does before fusion), so both sides count the same program.
Imported by path (not a package).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from jaxlib.mlir import ir
from stablehlo_perf.analysis.fusion import (
    FusionPlan,
    group_deps,
    loop_body_copies,
    plan_fusion,
    while_init_copies,
)
from stablehlo_perf.analysis.opinfo import MERGED_STATE, OpInfo
from stablehlo_perf.passes.extract import view_module
from stablehlo_perf.passes.inline import inline_calls
from stablehlo_perf.passes.ir import make_context, parse_module

NO_KERNEL = frozenset(
    {
        "parameter", "constant", "tuple", "get-tuple-element", "bitcast", "after-all",
        "partition-id", "replica-id", "opt-barrier", "domain", "add-dependency",
    }
)  # fmt: skip
CONTROL = frozenset({"while", "conditional", "call"})
# Instructions inside a fusion whose positions say nothing about which ops it fused.
_PLUMBING = NO_KERNEL | {"reshape", "copy"}
_COMP = re.compile(r"^(ENTRY )?%([\w.\-]+) ")
_INSTR = re.compile(r"^\s*(?:ROOT\s+)?%([\w.\-]+) = (.*?) ([\w\-]+)\((.*)$")
_CALLED = re.compile(r"(?:condition|body|to_apply|true_computation|false_computation)=%([\w.\-]+)")
_BRANCHES = re.compile(r"branch_computations=\{([^}]*)\}")
_FRAME_ID = re.compile(r"stack_frame_id=(\d+)")
_FILE_LOCATION = re.compile(r"^(\d+) \{.*?\bline=(\d+) .*?\bcolumn=(\d+)")
_STACK_FRAME = re.compile(r"^(\d+) \{file_location_id=(\d+)")
_FUSED_CALL = re.compile(r"calls=%([\w.\-]+)")


@dataclass(frozen=True)
class XlaKernel:
    """One instruction of XLA's optimised HLO that launches work, and the source
    positions (line, column) of the instructions it covers."""

    computation: str
    name: str
    opcode: str
    kind: str
    lines: frozenset[tuple[int, int]]


@dataclass
class XlaKernels:
    """XLA's kernels over the computations a run reaches, and its control-flow instructions."""

    kernels: list[XlaKernel] = field(default_factory=list)
    control: int = 0


def _computations(hlo: str) -> tuple[dict[str, list[str]], str]:
    comps: dict[str, list[str]] = {}
    entry = ""
    current: list[str] | None = None
    for line in hlo.splitlines():
        m = _COMP.match(line)
        if m and line.rstrip().endswith("{"):
            current = comps.setdefault(m.group(2), [])
            if m.group(1):
                entry = m.group(2)
            continue
        if line.startswith("}"):
            current = None
        elif current is not None:
            current.append(line)
    return comps, entry


def _frames(hlo: str) -> dict[str, tuple[int, int]]:
    """Stack frame id -> (line, column) of its innermost location, from the HLO's tables."""
    locations: dict[str, tuple[int, int]] = {}
    frames: dict[str, tuple[int, int]] = {}
    for line in hlo.splitlines():
        m = _FILE_LOCATION.match(line)
        if m:
            locations[m.group(1)] = (int(m.group(2)), int(m.group(3)))
            continue
        m = _STACK_FRAME.match(line)
        if m and m.group(2) in locations:
            frames[m.group(1)] = locations[m.group(2)]
    return frames


def xla_kernels(hlo: str) -> XlaKernels:
    """Kernels XLA launches for one program (each reachable computation counted once)."""
    comps, entry = _computations(hlo)
    frames = _frames(hlo)

    def positions(text: str) -> set[tuple[int, int]]:
        return {frames[f] for f in _FRAME_ID.findall(text) if f in frames}

    out = XlaKernels()
    todo, done = [entry], set()
    while todo:
        comp = todo.pop(0)
        if comp in done or comp not in comps:
            continue
        done.add(comp)
        for line in comps[comp]:
            m = _INSTR.match(line)
            if not m:
                continue
            name, opcode, rest = m.group(1), m.group(3), m.group(4)
            if opcode in CONTROL:
                out.control += 1
                todo.extend(_CALLED.findall(rest))
                for branches in _BRANCHES.findall(rest):
                    todo.extend(b.strip().lstrip("%") for b in branches.split(","))
                continue
            if opcode in NO_KERNEL:
                continue
            lines = positions(rest)
            called = _FUSED_CALL.search(rest)
            if opcode == "fusion" and called:
                lines = set()
                for inner in comps.get(called.group(1), ()):
                    im = _INSTR.match(inner)
                    if im and im.group(3) not in _PLUMBING:
                        lines |= positions(im.group(4))
            kind = re.search(r"kind=(k\w+)", rest)
            out.kernels.append(
                XlaKernel(comp, name, opcode, kind.group(1) if kind else "", frozenset(lines))
            )
    return out


@dataclass
class FlatBlock:
    """One block as fusion sees it: ops in order, their operand producers, and its live-out ops.

    `owner` names where it comes from (`main`, or `while#12/1` for region 1 of
    op 12); sources use negative ids for values from outside the block; `locs`
    are the ops' `file:line:col`, an inlined op without one taking its call's
    (as XLA's inliner does).
    """

    owner: str
    ops: list[OpInfo] = field(default_factory=list)
    sources: list[list[int | None]] = field(default_factory=list)
    live_out: list[int] = field(default_factory=list)
    carried: dict[int, list[bool]] = field(default_factory=dict)
    locs: list[str] = field(default_factory=list)
    arguments: tuple[dict[int, set[int]], list[tuple[str, int]]] | None = None  # while bodies
    merged: tuple[tuple[int, int], ...] = ()  # a while body's state folded into a counter
    updates: dict[int, list[int]] = field(default_factory=dict)  # `ModuleView.block_updates`

    @property
    def deps(self) -> list[list[int]]:
        return [sorted({s for s in src if s is not None and s >= 0}) for src in self.sources]

    def plan(self, kind: str) -> FusionPlan:
        return plan_fusion(self.ops, self.deps, kind, self.sources, self.live_out)


def _while_carried(op: ir.Operation, merged: Sequence[tuple[int, int]] = ()) -> list[bool]:
    """Per loop-carried value: does the body change it (not returned as its own argument,
    nor an induction variable XLA merges into the trip counter)?"""
    body = op.regions[1].blocks[0]
    ret = list(body.operations)[-1]
    folded = {j for j, _ in merged}
    return [
        not (isinstance(v, ir.BlockArgument) and v.owner == body and v.arg_number == k)
        and k not in folded
        for k, v in enumerate(ret.operands)
    ]


def flat_blocks(text: str, entry: str = "main") -> list[FlatBlock]:
    """The entry function's block and every control-op region block under it, after
    `perf-inline-calls` (the pipeline's own inliner, as XLA's CallInliner)."""
    ctx = make_context()
    with ctx:
        module = parse_module(text, "<fusion>", ctx)
        inline_calls(module.operation)
        view = view_module(module, "<fusion>")
        blocks: list[FlatBlock] = []

        def add(owner: str, ids: list[int], body: bool = False, merged: tuple = ()) -> None:
            recs = [view.records[i] for i in ids]
            flat = FlatBlock(
                owner,
                [r.info for r in recs],
                view.block_sources(ids),
                view.block_live_out(ids),
                {
                    k: _while_carried(r.op, r.info.attrs.get(MERGED_STATE, ()))
                    for k, r in enumerate(recs)
                    if r.op.name == "stablehlo.while"
                },
                [r.info.loc for r in recs],
                view.block_arguments(ids) if body else None,
                merged,
                view.block_updates(ids) if body else {},
            )
            blocks.append(flat)
            for i in ids:
                short = view.records[i].info.short_name
                merged = view.records[i].info.attrs.get(MERGED_STATE, ())
                for ri, region in enumerate(view.regions.get(i, ())):
                    add(f"{short}#{i}/{ri}", region, short == "while" and ri == 1, merged)

        add(entry, view.funcs[entry].top)
    return blocks


@dataclass(frozen=True)
class OurKernels:
    """Our grouping of a module: kernels (launches of non-control groups, plus the copies
    XLA inserts before while loops and in their bodies), control ops, and each kernel's op
    names."""

    kernels: int
    control: int
    while_copies: int
    groups: list[tuple[str, list[str]]]


def our_kernels(blocks: Sequence[FlatBlock], kind: str = "cpu") -> OurKernels:
    """Count kernels over all blocks (each block once, as `xla_kernels` counts computations)."""
    kernels = control = copies = 0
    listed: list[tuple[str, list[str]]] = []
    for b in blocks:
        plan = b.plan(kind)
        members = plan.members()
        for i, carried in b.carried.items():
            if not b.ops[i].dead:  # XLA removes a loop nothing reads
                copies += len(while_init_copies(b.ops, b.sources, i, carried))
        if b.arguments is not None and b.ops and not all(o.dead for o in b.ops):
            readers, returns = b.arguments
            deps = group_deps(plan, b.deps)
            copies += sum(
                loop_body_copies(plan.groups, deps, readers, returns, b.merged, b.updates)
            )
        for g, k in enumerate(plan.kinds):
            names = [b.ops[i].short_name for i in members[g]]
            if k == "free":
                continue
            if k == "opaque" and b.ops[plan.roots[g]].op_class == "control":
                control += 1
                continue
            kernels += plan.launches[g]
            listed.append((b.owner, names))
    return OurKernels(kernels + copies, control, copies, listed)
