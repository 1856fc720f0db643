"""Which branch an if/case takes: the module surgery that lets a runner observe it, and the
`perf.branch_weights` that record it.

A static analysis cannot know which branch a data-dependent if/case runs, so
perf-annotate-cycles prices the costliest one. Where the inputs are known (the
jax.jit hook is given arrays, or times the program on synthetic ones), a runner
compiles the module with each selector of the entry function's top-level
if/case ops (calls inlined first) appended to its results, runs it once on
those inputs and marks the branch each took with one-hot weights. Branches
inside loops change from trip to trip and are left to the policy.
"""

from __future__ import annotations

from collections.abc import Sequence

from jaxlib.mlir import ir
from stablehlo_perf.passes.api import module_text
from stablehlo_perf.passes.extract import BRANCH_OPS, BRANCH_WEIGHTS, view_module
from stablehlo_perf.passes.inline import inline_calls
from stablehlo_perf.passes.ir import make_context, op_location, parse_module

__all__ = ["BRANCH_OPS", "branch_taken", "expose_selectors", "weigh_branches"]


def _entry_branches(module: ir.Module) -> tuple[list[ir.Operation], ir.Operation | None]:
    """The entry function's top-level if/case ops, in order, and its return op."""
    inline_calls(module.operation)
    view = view_module(module, "<branches>")
    entry = view.entry()
    if entry is None:
        return [], None
    ops = [view.records[i].op for i in entry.top if view.records[i].info.name in BRANCH_OPS]
    return ops, view.terminators.get(tuple(entry.top))


def expose_selectors(text: str) -> tuple[str, int]:
    """`text` (calls inlined) with each top-level if/case selector of the entry function
    appended to its results, and how many were appended (0: the text is returned as is)."""
    with make_context() as ctx:
        module = parse_module(text, "<branches>", ctx)
        ops, ret = _entry_branches(module)
        if not ops or ret is None:
            return text, 0
        func = ret.parent
        selectors = [op.operands[0] for op in ops]
        with ir.Location.unknown(), ir.InsertionPoint(ret):
            ir.Operation.create("func.return", operands=[*ret.operands, *selectors])
        ret.erase()
        ftype = ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)
        results = [*ftype.results, *(v.type for v in selectors)]
        func.attributes["function_type"] = ir.TypeAttr.get(
            ir.FunctionType.get(list(ftype.inputs), results)
        )
        if "res_attrs" in func.attributes:
            old = ir.ArrayAttr(func.attributes["res_attrs"])
            extra = [ir.DictAttr.get({}) for _ in selectors]
            func.attributes["res_attrs"] = ir.ArrayAttr.get([*old, *extra])
        return module_text(module), len(ops)


def branch_taken(selector: object, num_branches: int, is_if: bool) -> int:
    """The branch a selector picks: an if's predicate (true: 0), a case's index (out of
    range: the last branch, as StableHLO specifies)."""
    value = int(selector)  # type: ignore[call-overload]
    if is_if:
        return 0 if value else 1
    return value if 0 <= value < num_branches else num_branches - 1


def weigh_branches(text: str, selectors: Sequence[object]) -> tuple[str, list[tuple[str, int]]]:
    """`text` (calls inlined) with one-hot `perf.branch_weights` on each top-level if/case of
    the entry function, from the selector values its `expose_selectors` form returned; and
    each op's `file:line:col` with the branch it took."""
    with make_context() as ctx:
        module = parse_module(text, "<branches>", ctx)
        ops, _ = _entry_branches(module)
        if len(ops) != len(selectors):
            raise ValueError(f"{len(selectors)} selectors for {len(ops)} if/case ops")
        taken: list[tuple[str, int]] = []
        for op, sel in zip(ops, selectors, strict=True):
            n = len(op.regions)
            branch = branch_taken(sel, n, op.name == "stablehlo.if")
            op.attributes[BRANCH_WEIGHTS] = ir.DenseF64ArrayAttr.get(
                [1.0 if b == branch else 0.0 for b in range(n)]
            )
            file, line, col = op_location(op, "<input>")
            taken.append((f"{file}:{line}:{col}", branch))
        return module_text(module), taken
