"""Which branch an if/case takes: the module surgery that lets a runner observe it, and the
`perf.branch_weights` that record it.

A static analysis cannot know which branch a data-dependent if/case runs, so
perf-annotate-cycles prices the costliest one. Where the inputs are known (the
jax.jit hook is given arrays, or times the program on synthetic ones), a runner
compiles the module with more results for its entry function (calls inlined
first) — each top-level if/case's selector, and for each if/case at the top of a
top-level while loop's body or of loops nested at the top of it, counts of the
runs that took each branch (the loops carry them) — runs it once on those inputs
and weighs each op's branches by what it saw: one-hot for a top-level op, the
counts for one in a loop (a `lax.cond(step % 100 == 0, evaluate, update)` in a
training loop is priced at one evaluation in a hundred, not at one every step).
If/case ops inside other if/case branches are left to the policy.
"""

from __future__ import annotations

from collections.abc import Sequence

from jaxlib.mlir import ir
from stablehlo_perf.passes.api import module_text
from stablehlo_perf.passes.extract import BRANCH_OPS, BRANCH_WEIGHTS, view_module
from stablehlo_perf.passes.inline import clone_ops, inline_calls
from stablehlo_perf.passes.ir import make_context, op_location, parse_module

__all__ = ["branch_taken", "expose_selectors", "weigh_branches"]


def _observed(
    module: ir.Module,
) -> tuple[list[ir.Operation], list[ir.Operation], ir.Operation | None]:
    """The entry function's (calls inlined) top-level if/case ops, its top-level while loops
    whose trips run if/case ops (`_trip_ops`), and its return op."""
    inline_calls(module.operation)
    view = view_module(module, "<branches>")
    entry = view.entry()
    if entry is None:
        return [], [], None
    top = [view.records[i].op for i in entry.top]
    ops = [op for op in top if op.name in BRANCH_OPS]
    loops = [op for op in top if op.name == "stablehlo.while" and _trip_ops(op)]
    return ops, loops, view.terminators.get(tuple(entry.top))


def _trip_ops(loop: ir.Operation) -> list[ir.Operation]:
    """The if/case ops at the top of a while loop's body and, in body order among them,
    those of the loops nested at its top: what `_count_branches` counts."""
    out: list[ir.Operation] = []
    for op in loop.regions[1].blocks[0].operations:
        op = op.operation
        if op.name in BRANCH_OPS:
            out.append(op)
        elif op.name == "stablehlo.while":
            out += _trip_ops(op)
    return out


def _i32(shape: list[int], value: int, ip: ir.InsertionPoint) -> ir.Value:
    """A constant i32 tensor of `shape` filled with `value`."""
    i32 = ir.IntegerType.get_signless(32)
    t = ir.RankedTensorType.get(shape, i32)
    attr = ir.DenseElementsAttr.get_splat(t, ir.IntegerAttr.get(i32, value))
    return ir.Operation.create(
        "stablehlo.constant", results=[t], attributes={"value": attr}, ip=ip
    ).result


def _clone_into(src: ir.Block, dst: ir.Block, mapping: dict) -> ir.Operation:
    """Clone `src`'s ops but its terminator into `dst`, operands remapped; the terminator."""
    ops = [op.operation for op in src.operations]
    clone_ops(ops[:-1], ir.InsertionPoint(dst), mapping)
    return ops[-1]


def _one_hot(selector: ir.Value, op: ir.Operation, ip: ir.InsertionPoint) -> ir.Value:
    """i32[branches]: 1 at the branch `op` (an if/case) takes for `selector`, else 0."""
    n = len(op.regions)
    i32 = ir.IntegerType.get_signless(32)
    t = ir.RankedTensorType.get([n], i32)
    scalar = ir.RankedTensorType.get([], i32)
    if op.name == "stablehlo.if":  # true runs region 0
        p = ir.Operation.create("stablehlo.convert", results=[scalar], operands=[selector], ip=ip)
        selector = ir.Operation.create(
            "stablehlo.subtract", results=[scalar], operands=[_i32([], 1, ip), p.result], ip=ip
        ).result
    else:  # a case index out of range runs the last branch (StableHLO spec, `case`)
        last = _i32([], n - 1, ip)
        flag = ir.RankedTensorType.get([], ir.IntegerType.get_signless(1))
        outside = [
            ir.Operation.create(
                "stablehlo.compare", results=[flag], operands=[selector, bound],
                attributes={"comparison_direction": ir.Attribute.parse(
                    f"#stablehlo<comparison_direction {direction}>"
                )},
                ip=ip,
            ).result
            for bound, direction in ((_i32([], 0, ip), "LT"), (last, "GT"))
        ]  # fmt: skip
        either = ir.Operation.create("stablehlo.or", results=[flag], operands=outside, ip=ip)
        selector = ir.Operation.create(
            "stablehlo.select", results=[scalar], operands=[either.result, last, selector], ip=ip
        ).result
    wide = ir.Operation.create(
        "stablehlo.broadcast_in_dim", results=[t], operands=[selector],
        attributes={"broadcast_dimensions": ir.DenseI64ArrayAttr.get([])}, ip=ip,
    ).result  # fmt: skip
    iota = ir.Operation.create(
        "stablehlo.iota", results=[t],
        attributes={"iota_dimension": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 0)},
        ip=ip,
    ).result  # fmt: skip
    pred = ir.RankedTensorType.get([n], ir.IntegerType.get_signless(1))
    direction = ir.Attribute.parse("#stablehlo<comparison_direction EQ>")
    eq = ir.Operation.create(
        "stablehlo.compare", results=[pred], operands=[wide, iota],
        attributes={"comparison_direction": direction}, ip=ip,
    ).result  # fmt: skip
    return ir.Operation.create("stablehlo.convert", results=[t], operands=[eq], ip=ip).result


def _count_branches(loop: ir.Operation) -> list[ir.Value]:
    """Replace `loop` by one that also carries, for each if/case its trips run
    (`_trip_ops`, nested loops' included), how many runs took each branch; those counts
    after the loop ([] and `loop` kept where it runs none)."""
    ops = _trip_ops(loop)
    if not ops:
        return []
    k = len(loop.results)
    i32 = ir.IntegerType.get_signless(32)
    counts = [ir.RankedTensorType.get([len(op.regions)], i32) for op in ops]
    before = ir.InsertionPoint(loop)
    zeros = [_i32([len(op.regions)], 0, before) for op in ops]
    types = [r.type for r in loop.results] + counts
    new = ir.Operation.create(
        "stablehlo.while", results=types, operands=[*loop.operands, *zeros], regions=2, ip=before
    )
    cond, body = (new.regions[r].blocks.append(*types) for r in (0, 1))
    old_cond, old_body = loop.regions[0].blocks[0], loop.regions[1].blocks[0]
    mapping = dict(zip(old_cond.arguments, list(cond.arguments)[:k], strict=True))
    test = _clone_into(old_cond, cond, mapping)
    ir.Operation.create(
        "stablehlo.return", operands=[mapping.get(v, v) for v in test.operands],
        ip=ir.InsertionPoint(cond),
    )  # fmt: skip
    mapping = dict(zip(old_body.arguments, list(body.arguments)[:k], strict=True))
    ret = _clone_into(old_body, body, mapping)
    cloned = [op.operation for op in body.operations]
    # The body's results as a use, so that rebuilding a nested loop below updates them.
    results = ir.Operation.create(
        "stablehlo.return", operands=[mapping.get(v, v) for v in ret.operands],
        ip=ir.InsertionPoint(body),
    )  # fmt: skip
    end = ir.InsertionPoint(results)
    this_trip: list[ir.Value] = []
    for op in cloned:
        if op.name in BRANCH_OPS:
            this_trip.append(_one_hot(op.operands[0], op, end))
        elif op.name == "stablehlo.while":
            this_trip += _count_branches(op)
    updated = [
        ir.Operation.create(
            "stablehlo.add", results=[t], operands=[list(body.arguments)[k + j], trip], ip=end
        ).result
        for j, (t, trip) in enumerate(zip(counts, this_trip, strict=True))
    ]
    ir.Operation.create("stablehlo.return", operands=[*results.operands, *updated], ip=end)
    results.erase()
    for old, now in zip(loop.results, list(new.results)[:k], strict=True):
        old.replace_all_uses_with(now)
    loop.erase()
    return list(new.results)[k:]


def expose_selectors(text: str) -> tuple[str, int]:
    """`text` (calls inlined) with more results for its entry function: the selector of each
    top-level if/case, then for each if/case a top-level loop's trips run (at the top of its
    body or of loops nested there) how many runs took each branch; and how many results were
    added (0: the text as is)."""
    with make_context() as ctx, ir.Location.unknown():
        module = parse_module(text, "<branches>", ctx)
        ops, loops, ret = _observed(module)
        if not (ops or loops) or ret is None:
            return text, 0
        _refuse_host_callbacks(module)
        func = ret.parent
        extra = [op.operands[0] for op in ops]
        for loop in loops:
            extra += _count_branches(loop)
        ir.Operation.create(
            "func.return", operands=[*ret.operands, *extra], ip=ir.InsertionPoint(ret)
        )
        ret.erase()
        ftype = ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)
        results = [*ftype.results, *(v.type for v in extra)]
        func.attributes["function_type"] = ir.TypeAttr.get(
            ir.FunctionType.get(list(ftype.inputs), results)
        )
        if "res_attrs" in func.attributes:
            old = ir.ArrayAttr(func.attributes["res_attrs"])
            more = [ir.DictAttr.get({}) for _ in extra]
            func.attributes["res_attrs"] = ir.ArrayAttr.get([*old, *more])
        return module_text(module), len(extra)


def _refuse_host_callbacks(module: ir.Module) -> None:
    """Raise where the module calls back into the Python process (`jax.debug.print`,
    `pure_callback`, ...): such a call names a callback registered with JAX's own
    executable, and a copy compiled apart would call what is not there (the process dies)."""
    targets: list[str] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "stablehlo.custom_call":
            targets.append(ir.StringAttr(op.attributes["call_target_name"]).value)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    found = sorted({t for t in targets if "callback" in t})
    if found:
        raise ValueError(f"the program calls back into Python ({', '.join(found)}): not run apart")


def branch_taken(selector: object, num_branches: int, is_if: bool) -> int:
    """The branch a selector picks: an if's predicate (true: 0), a case's index (out of
    range: the last branch, as StableHLO specifies)."""
    value = int(selector)  # type: ignore[call-overload]
    if is_if:
        return 0 if value else 1
    return value if 0 <= value < num_branches else num_branches - 1


def weigh_branches(
    text: str, observed: Sequence[object]
) -> tuple[str, list[tuple[str, list[int]]]]:
    """`text` (calls inlined) with `perf.branch_weights` on the if/case ops `expose_selectors`
    observed, from the values its added results took (in that order): one-hot for a
    top-level op, the branch counts for one in a loop (none where the loop never ran it);
    and each op's `file:line:col` with how many runs each branch had."""
    with make_context() as ctx:
        module = parse_module(text, "<branches>", ctx)
        ops, loops, _ = _observed(module)
        inner = [op for loop in loops for op in _trip_ops(loop)]
        if len(ops) + len(inner) != len(observed):
            raise ValueError(
                f"{len(observed)} observations for {len(ops) + len(inner)} if/case ops"
            )
        runs: list[tuple[ir.Operation, list[int]]] = []
        for op, sel in zip(ops, observed[: len(ops)], strict=True):
            n = len(op.regions)
            taken = branch_taken(sel, n, op.name == "stablehlo.if")
            runs.append((op, [int(b == taken) for b in range(n)]))
        for op, counts in zip(inner, observed[len(ops) :], strict=True):
            runs.append((op, [int(c) for c in counts]))  # type: ignore[union-attr]
        out = []
        for op, counts in runs:
            if sum(counts) > 0:
                op.attributes[BRANCH_WEIGHTS] = ir.DenseF64ArrayAttr.get([float(c) for c in counts])
            file, line, col = op_location(op, "<input>")
            out.append((f"{file}:{line}:{col}", counts))
        return module_text(module), out
