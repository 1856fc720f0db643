"""perf-inline-calls: inline every `func.call`, as XLA's CallInliner does before fusion."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar

from jaxlib.mlir import ir
from stablehlo_perf.passes.base import AnalysisCache

__all__ = ["InlineCallsPass", "clone_ops", "inline_calls"]

_SYMBOL = re.compile(r"@([\w.$\-]+)")


@dataclass(frozen=True)
class InlineCallsPass:
    """Inline every `func.call` into its caller and drop private functions left unused.

    Calls into a recursive cycle stay calls (perf-annotate-cycles counts them once
    and says so).

    XLA inlines calls before it fuses, so the ops of `jax.nn.relu`, `_where` and
    other jitted helpers fuse with their callers' ops; without this pass each
    call is a fusion barrier and, on a TPU, an extra kernel launch. Inlined ops
    keep their own location inside a callsite location of the call, so the
    report still names the user's line. Run it first: the other passes only
    add attributes and share one view of the module, built after it.
    """

    name: ClassVar[str] = "perf-inline-calls"

    def apply(self, module: ir.Operation, cache: AnalysisCache) -> None:
        if inline_calls(module):
            cache.reset_view()


def _functions(module: ir.Operation) -> dict[str, ir.Operation]:
    out = {}
    for op in module.regions[0].blocks[0].operations:
        op = op.operation
        if op.name == "func.func":
            out[ir.StringAttr(op.attributes["sym_name"]).value] = op
    return out


def _calls(module: ir.Operation) -> list[ir.Operation]:
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "func.call":
            found.append(op)
        return ir.WalkResult.ADVANCE

    module.walk(visit)
    return found


def clone_ops(
    ops: Sequence[ir.Operation],
    ip: ir.InsertionPoint,
    mapping: dict[ir.Value, ir.Value],
    location: Callable[[ir.Operation], ir.Location] | None = None,
) -> None:
    """Clone `ops` at `ip` with their operands remapped through `mapping`, which gains each
    clone's results; `location(op)`, where given, becomes the clone's location."""

    def remap(op: ir.Operation) -> ir.WalkResult:
        for k, v in enumerate(op.operands):
            new = mapping.get(v)
            if new is not None:
                op.operands[k] = new
        return ir.WalkResult.ADVANCE

    for op in ops:
        new = op.clone(ip=ip)
        new.walk(remap)
        if location is not None:
            new.location = location(op)
        mapping.update(zip(op.results, new.results, strict=True))


def _inline_one(call: ir.Operation, callee: ir.Operation) -> None:
    body = callee.regions[0].blocks[0]
    mapping: dict[ir.Value, ir.Value] = dict(zip(body.arguments, call.operands, strict=True))
    ops = [op.operation for op in body.operations]
    clone_ops(
        ops[:-1],
        ir.InsertionPoint(call),
        mapping,
        lambda op: ir.Location.callsite(op.location, [call.location]),
    )
    returned = ops[-1].operands
    for res, v in zip(call.results, returned, strict=True):
        res.replace_all_uses_with(mapping.get(v, v))
    call.erase()


def inline_calls(module: ir.Operation) -> int:
    """Inline every call in `module` whose callee is not recursive; returns how many calls.

    Callees are flattened before their callers, so every call is inlined once.
    Private functions no longer called are erased; public ones stay (they are
    entry points of their own).
    """
    funcs = _functions(module)
    # Inlining a flattened callee adds no call to inline later, so one walk per function lists
    # every call this function will inline.
    calls = {name: _calls(f) for name, f in funcs.items()}
    graph = {name: {_callee(c) for c in cs} & funcs.keys() for name, cs in calls.items()}
    recursive = _recursive(graph)
    # A declaration (no body) or a multi-block body (not StableHLO) is left as a call.
    inlinable = {n for n, f in funcs.items() if len(f.regions[0].blocks) == 1} - recursive
    inlined: set[str] = set()
    count = 0
    with module.context:
        for name in _callees_first(graph):
            for call in calls[name]:
                callee = _callee(call)
                if callee in inlinable:
                    _inline_one(call, funcs[callee])
                    inlined.add(callee)
                    count += 1
        for name in inlined - (_referenced(module) if inlined else set()):
            fop = funcs[name]
            if "sym_visibility" in fop.attributes and (
                ir.StringAttr(fop.attributes["sym_visibility"]).value == "private"
            ):
                fop.erase()
    return count


def _callees_first(graph: dict[str, set[str]]) -> list[str]:
    """Functions in post-order of the call graph (a cycle is entered once)."""
    order: list[str] = []
    seen: set[str] = set()

    def visit(name: str) -> None:
        seen.add(name)
        for callee in sorted(graph[name]):
            if callee not in seen:
                visit(callee)
        order.append(name)

    for name in graph:
        if name not in seen:
            visit(name)
    return order


def _recursive(graph: dict[str, set[str]]) -> set[str]:
    """Functions that can reach themselves through calls."""
    out = set()
    for start, callees in graph.items():
        seen, todo = set(), list(callees)
        while todo:
            f = todo.pop()
            if f == start:
                out.add(start)
                break
            if f not in seen:
                seen.add(f)
                todo.extend(graph[f])
    return out


def _callee(call: ir.Operation) -> str:
    return ir.FlatSymbolRefAttr(call.attributes["callee"]).value


def _referenced(module: ir.Operation) -> set[str]:
    """Functions still named by an op (e.g. a custom call's `called_computations`)."""
    names: set[str] = set()

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name != "func.func":
            for key in op.attributes:
                if key == "value":
                    continue  # a constant's payload: names nothing, unreadable if complex
                attr = op.attributes[key]
                if isinstance(attr, ir.FlatSymbolRefAttr):
                    names.add(attr.value)
                elif key == "called_computations":
                    names.update(_SYMBOL.findall(str(attr)))
        return ir.WalkResult.ADVANCE

    module.walk(visit)
    return names
