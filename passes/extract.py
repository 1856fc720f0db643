"""Turn MLIR ops into OpInfo records, and find the structure passes walk.

Every op inside a function body is analysed, including ops in control-flow
regions (while / if / case). Ops in *applied* regions (the scalar reducer of a
reduce, the comparator of a sort, the update of a scatter) are not: they run
once per element inside their parent, whose OpInfo carries their FLOPs as
`body_flops` and, where the first region is one op combining its two arguments (a sum, a
max), that op's short name as `reducer`. Terminators are not analysed either.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo
from stablehlo_perf.analysis.aggregate import branch_shares
from stablehlo_perf.analysis.critical_path import static_trip_count
from stablehlo_perf.analysis.opinfo import (
    DEAD,
    MERGED_INDUCTION,
    MERGED_STATE,
    PASSES_THROUGH,
    WRITTEN_AS,
    OpInfo,
    TensorType,
    count_flops,
    op_class,
)
from stablehlo_perf.passes.ir import InputError, op_location

__all__ = [
    "BRANCH_OPS",
    "BRANCH_WEIGHTS",
    "FuncView",
    "ModuleView",
    "OpRecord",
    "tensor_type",
    "view_module",
]

APPLIED_REGION_OPS = frozenset(
    {
        "stablehlo.reduce", "stablehlo.reduce_window", "stablehlo.sort", "stablehlo.scatter",
        "stablehlo.select_and_scatter", "stablehlo.map", "stablehlo.all_reduce",
        "stablehlo.reduce_scatter",
    }
)  # fmt: skip
BRANCH_OPS = frozenset({"stablehlo.if", "stablehlo.case"})
CONTROL_OPS = frozenset({"stablehlo.while"}) | BRANCH_OPS
TERMINATORS = frozenset({"func.return", "stablehlo.return"})
# How often each branch of an if/case runs, relative to the others (f64 array, one per branch).
BRANCH_WEIGHTS = "perf.branch_weights"
# Attributes too large or useless for the models.
_SKIP_ATTRS = frozenset({"value", "mhlo.sharding", "mhlo.frontend_attributes"})


@dataclass
class OpRecord:
    """An analysed op: the MLIR handle, its OpInfo, its enclosing control op and its block."""

    op: ir.Operation
    info: OpInfo
    parent: int | None
    block_key: tuple[int, int, int]


@dataclass
class FuncView:
    """A function's top-level analysed ops (ids, in order)."""

    name: str
    public: bool
    top: list[int] = field(default_factory=list)
    result_sizes: tuple[int, ...] = ()  # each result's bytes (0 where unknown)

    @property
    def result_bytes(self) -> int:
        """What a call returns (unknown sizes count 0)."""
        return sum(self.result_sizes)


@dataclass
class ModuleView:
    """All analysed ops of a module by id, its functions, and each control op's region blocks
    (and their terminators, `region_returns`)."""

    records: list[OpRecord]
    funcs: dict[str, FuncView]
    regions: dict[int, list[list[int]]]
    filename: str
    terminators: dict[tuple[int, ...], ir.Operation] = field(default_factory=dict)
    region_returns: dict[int, list[ir.Operation]] = field(default_factory=dict)

    def block_deps(self, ids: Sequence[int]) -> list[list[int]]:
        """For each op of a block, the block-local indices of the ops its operands come from,
        including operands used inside its regions (values captured from the block)."""
        local = self._local(ids)
        deps: list[list[int]] = []
        for k, i in enumerate(ids):
            found = {local.get(v.owner) for v in self._operands_within(i)}
            deps.append(sorted(src for src in found if src is not None and src != k))
        return deps

    def _operands_within(self, op_id: int) -> Iterator[ir.Value]:
        """The operands of an op and of every op inside its regions, their terminators' too
        (a branch may return a value of the block as it is)."""
        stack = [op_id]
        while stack:
            j = stack.pop()
            yield from self.records[j].op.operands
            for terminator in self.region_returns.get(j, ()):
                yield from terminator.operands
            for block in self.regions.get(j, ()):
                stack.extend(block)

    def _local(self, ids: Sequence[int]) -> dict:
        """MLIR op -> block-local index, for a block's ops. Built per call: an op's hash
        covers its attributes (jaxlib 0.10's bindings), which the passes keep writing, so a
        table kept from before a write no longer finds the op."""
        return {self.records[i].op: k for k, i in enumerate(ids)}

    def block_sources(self, ids: Sequence[int]) -> list[list[int | None]]:
        """Per op and operand: the block-local index of the producing op, or a negative
        number naming a value from outside the block (the same number for the same value)."""
        local = self._local(ids)
        outside: dict[ir.Value, int] = {}
        out: list[list[int | None]] = []
        for i in ids:
            row: list[int | None] = []
            for v in self.records[i].op.operands:
                src = local.get(v.owner)
                if src is not None:
                    row.append(src)
                else:
                    row.append(outside.setdefault(v, -1 - len(outside)))
            out.append(row)
        return out

    def block_arguments(
        self, ids: Sequence[int]
    ) -> tuple[dict[int, set[int]], list[tuple[str, int]]]:
        """A region block's arguments: which ops (block-local indices) read each, from their
        own operands or from inside their regions, and what its terminator returns, per
        operand: ("op", local index), ("arg", argument number) or ("outside", -1)."""
        term = self.terminators.get(tuple(ids))
        if term is None:
            return {}, []
        block = term.block
        readers: dict[int, set[int]] = {}
        for k, i in enumerate(ids):
            for v in self._operands_within(i):
                arg = _block_arg_index(v, block)
                if arg is not None:
                    readers.setdefault(arg, set()).add(k)
        local = self._local(ids)
        returns: list[tuple[str, int]] = []
        for v in term.operands:
            arg = _block_arg_index(v, block)
            src = local.get(v.owner)
            if arg is not None:
                returns.append(("arg", arg))
            elif src is not None:
                returns.append(("op", src))
            else:
                returns.append(("outside", -1))
        return readers, returns

    def block_updates(self, ids: Sequence[int]) -> dict[int, list[int]]:
        """Per argument of a region block, the ops (block-local, in order) that write into its
        buffer in place: a dynamic_update_slice or scatter of the argument, one of that op's
        result, and so on."""
        term = self.terminators.get(tuple(ids))
        if term is None:
            return {}
        local = self._local(ids)
        chains: dict[int, list[int]] = {}
        chain_of: dict[int, int] = {}
        for k, i in enumerate(ids):
            op = self.records[i].op
            if op.name not in _IN_PLACE or not len(op.operands):
                continue
            base = op.operands[0]
            j = _block_arg_index(base, term.block)
            if j is None:
                j = chain_of.get(local.get(base.owner, -1))
            if j is not None:
                chains.setdefault(j, []).append(k)
                chain_of[k] = j
        return chains

    def block_live_out(self, ids: Sequence[int]) -> list[int]:
        """Block-local indices of the ops whose results the block's terminator returns."""
        term = self.terminators.get(tuple(ids))
        if term is None:
            return []
        local = self._local(ids)
        found = {local[v.owner] for v in term.operands if v.owner in local}
        return sorted(found)

    def branch_shares(self, op_id: int) -> np.ndarray | None:
        """Each branch's share of an if/case's runs where it carries `perf.branch_weights`."""
        return branch_shares(
            self.records[op_id].info.attrs.get(BRANCH_WEIGHTS), len(self.regions.get(op_id, ()))
        )

    def blocks_inside(self, op_id: int) -> list[list[int]]:
        """Every block a control op runs, the blocks of control ops nested in them included."""
        out: list[list[int]] = []
        for block in self.regions.get(op_id, []):
            out.append(block)
            for i in block:
                out.extend(self.blocks_inside(i))
        return out

    def blocks(self) -> list[list[int]]:
        """Every block: each function's top level, then every control op's region blocks."""
        out = [f.top for f in self.funcs.values()]
        for region_blocks in self.regions.values():
            out.extend(region_blocks)
        return out

    def entry(self) -> FuncView | None:
        """The function a report is about: `main`, else the first public one, else the first."""
        if "main" in self.funcs:
            return self.funcs["main"]
        public = [f for f in self.funcs.values() if f.public]
        return (public or list(self.funcs.values()) or [None])[0]


class _TypeCache(dict):
    """Memoises `tensor_type` for one walk (MLIR types are uniqued, so hashing is cheap),
    and locations in `locs` the same way."""

    def __init__(self) -> None:
        super().__init__()
        self.locs: dict = {}

    def __missing__(self, t: ir.Type) -> TensorType:
        value = self[t] = tensor_type(t)
        return value


def tensor_type(t: ir.Type) -> TensorType:
    """Static facts of an MLIR type; non-tensor types become a rank-0 placeholder."""
    if isinstance(t, ir.RankedTensorType):
        rt = t
        dyn = ir.ShapedType.get_dynamic_size()
        shape = tuple(None if d == dyn else d for d in rt.shape)
        return TensorType(shape, str(rt.element_type))
    if isinstance(t, ir.UnrankedTensorType):
        return TensorType(None, str(t.element_type))
    return TensorType((), "i1" if "token" in str(t) else str(t))


def view_module(module: ir.Operation | ir.Module, filename: str) -> ModuleView:
    """Walk every function and number its analysed ops in pre-order."""
    if isinstance(module, ir.Module):
        module = module.operation
    view = ModuleView(records=[], funcs={}, regions={}, filename=filename)
    types = _TypeCache()
    for fop in module.regions[0].blocks[0].operations:
        fop = fop.operation
        if fop.name != "func.func":
            continue
        name = fop.attributes["sym_name"].value
        vis = fop.attributes.get("sym_visibility", None)
        results = ir.FunctionType(ir.TypeAttr(fop.attributes["function_type"]).value).results
        fv = FuncView(
            name=name,
            public=vis is None or vis.value == "public",
            result_sizes=tuple(types[t].nbytes or 0 for t in results),
        )
        view.funcs[name] = fv
        for bi, block in enumerate(fop.regions[0].blocks):
            fv.top.extend(_visit_block(view, types, block, name, None, (id(fv), 0, bi)))
    for fv in view.funcs.values():
        _mark_dead(view, fv.top)
    _mark_induction_variables(view)
    return view


# Ops XLA keeps though nothing reads them: they talk to the host or other devices.
_EFFECTS = frozenset(
    {
        "stablehlo.infeed", "stablehlo.outfeed", "stablehlo.send", "stablehlo.recv",
        "stablehlo.all_reduce", "stablehlo.all_gather", "stablehlo.all_to_all",
        "stablehlo.reduce_scatter", "stablehlo.collective_permute",
        "stablehlo.collective_broadcast", "func.call",
    }
)  # fmt: skip


def _has_effects(view: ModuleView, i: int) -> bool:
    """Whether op i, or an op inside its regions, has an effect beyond its results."""
    op = view.records[i].op
    if op.name in _EFFECTS:
        return True
    if op.name == "stablehlo.custom_call":
        attrs = op.attributes
        return "has_side_effect" in attrs and ir.BoolAttr(attrs["has_side_effect"]).value
    return any(_has_effects(view, j) for block in view.regions.get(i, ()) for j in block)


def _mark_dead(view: ModuleView, ids: Sequence[int]) -> None:
    """Mark the ops of a block whose results nothing reads and that have no effect (OpInfo
    attribute `DEAD`), last to first, and everything inside a dead op's regions; then the
    blocks of the live ones. XLA's dead-code elimination removes them before it compiles
    (jnp.linalg.det's LU permutation, a 384-trip while loop, is no kernel of XLA:CPU's,
    jax 0.10.2). A block without a terminator to say what it returns is left as it is."""
    if not ids or tuple(ids) not in view.terminators:
        return
    users: list[list[int]] = [[] for _ in ids]
    for k, deps in enumerate(view.block_deps(ids)):
        for d in deps:
            users[d].append(k)
    live_out = set(view.block_live_out(ids))
    dead = [False] * len(ids)
    for k in range(len(ids) - 1, -1, -1):
        dead[k] = (
            k not in live_out and all(dead[u] for u in users[k]) and not _has_effects(view, ids[k])
        )
    for k, i in enumerate(ids):
        if dead[k]:
            for j in [i, *(j for block in view.blocks_inside(i) for j in block)]:
                _set_attr(view, j, DEAD, True)
        else:
            for block in view.regions.get(i, ()):
                _mark_dead(view, block)


# Ops that write their result into their first operand's buffer.
_IN_PLACE = frozenset({"stablehlo.dynamic_update_slice", "stablehlo.scatter"})

# Integer types whose induction variables XLA's while-loop simplifier merges (not 16-bit:
# it has no literals of those).
_INDUCTION_TYPES = frozenset({"i8", "si8", "ui8", "i32", "si32", "ui32", "i64", "si64", "ui64"})


def _mark_induction_variables(view: ModuleView) -> None:
    """Mark the induction variables of each live while loop that XLA's while-loop simplifier
    merges (OpInfo attributes `MERGED_INDUCTION` of the step, `MERGED_STATE` of the loop):
    loop state j of an integer type, one element, that the body steps by a constant (`j +
    c`). Where two or more of one type are (the trip counter, 0 stepped by 1, among them),
    XLA keeps one counter and computes the others from it wherever they are read: their
    steps are no kernels and their state is no longer carried (jax.random's threefry loop
    carries its own counter beside the fori_loop's: one scalar kernel and one copy fewer,
    jax 0.10.2)."""
    for rec in view.records:
        regions = view.regions.get(rec.info.id, ())
        if rec.info.name != "stablehlo.while" or rec.info.dead or len(regions) < 2:
            continue
        body = regions[1]
        term = view.terminators.get(tuple(body))
        if term is None:
            continue
        local = view._local(body)
        by_type: dict[str, list[tuple[int, int, bool]]] = {}
        for j, v in enumerate(term.operands):
            step = v.owner
            if not isinstance(step, (ir.OpView, ir.Operation)):
                continue
            step = step.operation
            k = local.get(step)
            if k is None or step.name != "stablehlo.add":
                continue
            t = view.records[body[k]].info.results[0]
            if t.element_type not in _INDUCTION_TYPES or t.num_elements != 1:
                continue
            c = _constant_step(step, term.block, j)
            if c is None:
                continue
            counter = c == 1 and _const_int(rec.op.operands[j]) == 0
            by_type.setdefault(t.element_type, []).append((j, k, counter))
        merged: list[tuple[int, int]] = []
        for found in by_type.values():
            if len(found) < 2:
                continue
            kept = next((x for x in found if x[2]), found[0])
            for j, k, _ in found:
                if j != kept[0]:
                    merged.append((j, kept[0]))
                    _set_attr(view, body[k], MERGED_INDUCTION, True)
        if merged:
            _set_attr(view, rec.info.id, MERGED_STATE, tuple(sorted(merged)))


def _set_attr(view: ModuleView, i: int, key: str, value: Any) -> None:
    rec = view.records[i]
    rec.info = replace(rec.info, attrs={**rec.info.attrs, key: value})


def _visit_block(
    view: ModuleView,
    types: _TypeCache,
    block: ir.Block,
    func: str,
    parent: int | None,
    key: tuple[int, int, int],
) -> list[int]:
    ids: list[int] = []
    terminator = None
    for op in block.operations:
        op = op.operation
        if op.name in TERMINATORS:
            terminator = op
            continue
        rid = len(view.records)
        info = _opinfo(rid, op, func, view.filename, types)
        view.records.append(OpRecord(op, info, parent, key))
        ids.append(rid)
        if op.name not in APPLIED_REGION_OPS and len(op.regions):
            view.regions[rid] = [
                _visit_block(view, types, b, func, rid, (rid, ri, bi))
                for ri, region in enumerate(op.regions)
                for bi, b in enumerate(region.blocks)
            ]
    if terminator is not None:
        view.terminators[tuple(ids)] = terminator
        if parent is not None:
            view.region_returns.setdefault(parent, []).append(terminator)
    return ids


def _opinfo(rid: int, op: ir.Operation, func: str, filename: str, types: _TypeCache) -> OpInfo:
    attrs = _attrs(op)
    if op.name in APPLIED_REGION_OPS:
        flops = [_region_flops(r, types) for r in op.regions]
        attrs["body_flops"] = flops[0] if flops else 0
        reducer = _reducer(op.regions[0]) if len(op.regions) else None
        if reducer:
            attrs["reducer"] = reducer
        if len(flops) > 1:
            attrs["scatter_body_flops"] = flops[1]
    elif op.name == "stablehlo.while":
        trips = _while_trip_count(op)
        attrs["trip_count"] = trips
    elif op.name == "stablehlo.constant" and (types[op.results[0].type].num_elements or 0) == 1:
        attrs["scalar"] = _scalar_text(op)  # a reduce's init, for fusion's CSE
    elif len(op.operands) == 2 and op_class(op.name) in _SPLAT_AWARE:
        splats = sum(_is_splat(v, types) for v in op.operands)
        if splats:
            attrs["splat_operands"] = splats
        if op.name in _DIVISIONS and _is_constant_splat(op.operands[1], types):
            attrs["constant_divisor"] = 1
        kept = _identity_kept(op, types) if splats else None
        if kept is not None:
            attrs[PASSES_THROUGH] = kept
    elif _returns_operand(op, attrs):
        attrs[PASSES_THROUGH] = 0
    if BRANCH_WEIGHTS in attrs:
        attrs[BRANCH_WEIGHTS] = _branch_weights(op, filename, types)
    name = op.name
    if name == "stablehlo.dot_general" and _outer_product(op, attrs, types):
        attrs[WRITTEN_AS], name = name, "stablehlo.multiply"
    file, line, col = op_location(op, filename, types.locs)
    return OpInfo.build(
        id=rid,
        name=name,
        operands=[types[v.type] for v in op.operands],
        results=[types[v.type] for v in op.results],
        attrs=attrs,
        loc=f"{file}:{line}:{col}",
        func=func,
    )


_SPLAT_AWARE = frozenset({"binary", "compare_select"})


def _outer_product(op: ir.Operation, attrs: dict[str, Any], types: _TypeCache) -> bool:
    """Whether a dot_general contracts only dimensions of size 1 (or none): XLA's algebraic
    simplifier makes it a multiply of its broadcast operands, which XLA:CPU fuses into a loop
    kernel (jax 0.10.2: `jnp.outer`, a 64x1 @ 1x32 dot and the per-example weight gradient
    `vmap(grad)` of `x @ w` each compile to one broadcast_multiply or transpose_copy fusion,
    no library call)."""
    shape = types[op.operands[0].type].shape
    dims = attrs.get("lhs_contracting_dims", ())
    return shape is not None and all(shape[d] == 1 for d in dims)


def _branch_weights(op: ir.Operation, filename: str, types: _TypeCache) -> tuple[float, ...]:
    """An if/case's `perf.branch_weights`, checked: one finite weight >= 0 per branch, not all 0."""
    attr = op.attributes[BRANCH_WEIGHTS]
    weights: list[float] | None = None
    if isinstance(attr, ir.DenseF64ArrayAttr):
        weights = list(attr)
    elif isinstance(attr, ir.ArrayAttr):
        items = [attr[k] for k in range(len(attr))]
        if all(isinstance(a, (ir.FloatAttr, ir.IntegerAttr)) for a in items):
            weights = [float(a.value) for a in items]
    problem = None
    if op.name not in BRANCH_OPS:
        problem = "is only read on stablehlo.if and stablehlo.case"
    elif weights is None:
        problem = "must be an array of numbers, e.g. array<f64: 0.0, 1.0>"
    elif len(weights) != len(op.regions):
        problem = f"has {len(weights)} weights for {len(op.regions)} branches"
    elif not all(math.isfinite(w) and w >= 0 for w in weights) or sum(weights) <= 0:
        problem = "must be finite, non-negative and not all zero"
    if problem is not None:
        raise InputError(*op_location(op, filename, types.locs), f"{BRANCH_WEIGHTS} {problem}")
    return tuple(weights)


# Divisions whose divisor a compiler can turn into a multiply and shifts when it is a constant.
_DIVISIONS = frozenset({"stablehlo.divide", "stablehlo.remainder"})


# The identity splat each side of a binary op may carry for XLA's algebraic simplifier to
# drop the op (`x + 0`, `0 + x`, `x - 0`, `x * 1`, `1 * x`, `x / 1`: checked on XLA:CPU,
# jax 0.10.2, f32; no compiled kernel computes them).
_IDENTITIES = {
    "stablehlo.add": (0, 0),
    "stablehlo.subtract": (None, 0),
    "stablehlo.multiply": (1, 1),
    "stablehlo.divide": (None, 1),
}


def _returns_operand(op: ir.Operation, attrs: dict[str, Any]) -> bool:
    """A pad of nothing or a slice of everything (a max pool's gradient has both around its
    select_and_scatter): XLA's simplifier returns the operand."""
    if op.name == "stablehlo.slice":
        return op.operands[0].type == op.results[0].type
    pads = ("edge_padding_low", "edge_padding_high", "interior_padding")
    return op.name == "stablehlo.pad" and not any(any(attrs.get(k) or ()) for k in pads)


def _identity_kept(op: ir.Operation, types: _TypeCache) -> int | None:
    """The operand a binary op returns unchanged because the other is its identity splat
    (`_IDENTITIES`), else None."""
    sides = _IDENTITIES.get(op.name)
    if sides is None or op.operands[0].type != op.operands[1].type:
        return None
    for k, identity in enumerate(sides):
        if identity is not None and _splat_number(op.operands[k], types) == identity:
            return 1 - k
    return None


def _splat_number(v: ir.Value, types: _TypeCache) -> float | None:
    """The number a compile-time constant splat (`_is_constant_splat`) repeats, else None."""
    if not _is_constant_splat(v, types):
        return None
    owner = v.owner.operation  # type: ignore[union-attr]
    if owner.name == "stablehlo.broadcast_in_dim":
        owner = owner.operands[0].owner.operation  # type: ignore[union-attr]
    dense = _constant_value(owner)
    if not isinstance(dense, (ir.DenseFPElementsAttr, ir.DenseIntElementsAttr)):
        return None
    value = dense.get_splat_value() if dense.is_splat else dense[0] if len(dense) == 1 else None
    return getattr(value, "value", value)


def _is_constant_splat(v: ir.Value, types: _TypeCache) -> bool:
    """A splat (`_is_splat`) whose number is a compile-time constant, not a runtime scalar."""
    if not _is_splat(v, types):
        return False
    owner = v.owner.operation  # type: ignore[union-attr]
    if owner.name == "stablehlo.broadcast_in_dim":
        source = owner.operands[0]
        return (
            isinstance(source, ir.OpResult) and source.owner.operation.name == "stablehlo.constant"
        )
    return True


def _is_splat(v: ir.Value, types: _TypeCache) -> bool:
    """A value that is one number repeated: a splat constant or a broadcast of a single
    element (a fused kernel reads it once, not as a tensor)."""
    if not isinstance(v, ir.OpResult):
        return False  # a block argument
    owner = v.owner.operation
    if owner.name == "stablehlo.constant":
        if (types[v.type].num_elements or 0) <= 1:
            return True
        value = _constant_value(owner)
        return isinstance(value, ir.DenseElementsAttr) and value.is_splat
    if owner.name == "stablehlo.broadcast_in_dim":
        return (types[owner.operands[0].type].num_elements or 0) <= 1
    return False


def _region_flops(region: ir.Region, types: _TypeCache) -> int:
    """FLOPs of one application of an applied region (its scalar ops, XLA-style)."""
    total = 0
    for block in region.blocks:
        for op in block.operations:
            op = op.operation
            if op.name in TERMINATORS:
                continue
            operands = [types[v.type] for v in op.operands]
            results = [types[v.type] for v in op.results]
            total += count_flops(op.name, operands, results, _attrs(op)) or 0
    return total


def _reducer(region: ir.Region) -> str | None:
    """The short name of an applied region's one op, when the region is that op combining
    its block's two arguments and returning it (`stablehlo.maximum` -> "maximum"): what a
    library decides a reduction by (XLA:CPU hands YNNPACK sums, maxima and minima)."""
    blocks = list(region.blocks)
    if len(blocks) != 1:
        return None
    ops = [op.operation for op in blocks[0].operations]
    if len(ops) != 2 or ops[1].name not in TERMINATORS or len(ops[0].operands) != 2:
        return None
    args = list(blocks[0].arguments)
    if len(args) != 2 or {_block_arg_index(v, blocks[0]) for v in ops[0].operands} != {0, 1}:
        return None
    return ops[0].name.split(".", 1)[-1]


def _constant_value(op: ir.Operation) -> ir.Attribute | None:
    """A constant's value attribute; None where the bindings cannot read it (a complex
    constant: jnp.linalg.eigvals' NaN fill)."""
    try:
        return op.attributes["value"]
    except TypeError:
        return None


def _scalar_text(op: ir.Operation) -> str:
    """A one-element constant's value as text (the op's own text where unreadable)."""
    value = _constant_value(op)
    return str(op) if value is None else str(value)


def _attrs(op: ir.Operation) -> dict[str, Any]:
    out: dict[str, Any] = {}
    attributes = op.attributes
    for name in attributes:
        if name in _SKIP_ATTRS:
            continue
        attr = attributes[name]
        if name == "dot_dimension_numbers":
            dn = stablehlo.DotDimensionNumbers(attr)
            out["lhs_batch_dims"] = tuple(dn.lhs_batching_dimensions)
            out["rhs_batch_dims"] = tuple(dn.rhs_batching_dimensions)
            out["lhs_contracting_dims"] = tuple(dn.lhs_contracting_dimensions)
            out["rhs_contracting_dims"] = tuple(dn.rhs_contracting_dimensions)
        elif name == "scatter_dimension_numbers":
            out["index_vector_dim"] = stablehlo.ScatterDimensionNumbers(attr).index_vector_dim
        elif name == "dimension_numbers" and op.name == "stablehlo.convolution":
            cn = stablehlo.ConvDimensionNumbers(attr)
            out["input_batch_dim"] = cn.input_batch_dimension
            out["input_feature_dim"] = cn.input_feature_dimension
            out["input_spatial_dims"] = tuple(cn.input_spatial_dimensions)
            out["kernel_input_feature_dim"] = cn.kernel_input_feature_dimension
            out["kernel_output_feature_dim"] = cn.kernel_output_feature_dimension
            out["kernel_spatial_dims"] = tuple(cn.kernel_spatial_dimensions)
            out["output_batch_dim"] = cn.output_batch_dimension
            out["output_feature_dim"] = cn.output_feature_dimension
            out["output_spatial_dims"] = tuple(cn.output_spatial_dimensions)
        else:
            out[name] = _plain(attr)
    if op.name == "stablehlo.convolution" and "padding" in out and out["padding"] is not None:
        pads = out["padding"]
        out["padding"] = tuple(tuple(p) for p in pads) if pads else pads
    return out


def _plain(attr: ir.Attribute) -> Any:
    """A Python value for the attribute kinds models read; the text form otherwise."""
    if isinstance(attr, (ir.DenseI64ArrayAttr, ir.DenseBoolArrayAttr)):
        return tuple(attr)
    if isinstance(attr, (ir.BoolAttr, ir.IntegerAttr, ir.StringAttr, ir.FlatSymbolRefAttr)):
        return attr.value
    if isinstance(attr, ir.DenseIntElementsAttr):
        dense = attr
        shape = ir.ShapedType(dense.type).shape
        values = [dense[i] for i in range(len(dense))] if not dense.is_splat else None
        if values is None:
            n = 1
            for d in shape:
                n *= d
            values = [dense.get_splat_value().value] * n
        if len(shape) == 2:
            return tuple(tuple(values[r * shape[1] : (r + 1) * shape[1]]) for r in range(shape[0]))
        return tuple(values)
    text = str(attr)
    for prefix in ("#stablehlo<comparison_direction ", "#stablehlo<comparison_type "):
        if text.startswith(prefix):
            return text[len(prefix) : -1]
    return text


def _const_int(value: ir.Value) -> int | None:
    owner = value.owner
    if not isinstance(owner, ir.OpView) and not isinstance(owner, ir.Operation):
        return None
    owner = owner.operation
    if owner.name != "stablehlo.constant":
        return None
    dense = _constant_value(owner)
    if not isinstance(dense, ir.DenseIntElementsAttr):
        return None
    if not dense.is_splat and len(dense) != 1:
        return None
    return dense.get_splat_value().value if dense.is_splat else dense[0]


def _block_arg_index(value: ir.Value, block: ir.Block) -> int | None:
    if isinstance(value, ir.BlockArgument) and value.owner == block:
        return value.arg_number
    return None


def _while_trip_count(op: ir.Operation) -> int | None:
    """Trips of a counted while (`i = c0; while (i < N) { ...; i += s }`), else None."""
    cond, body = op.regions[0].blocks[0], op.regions[1].blocks[0]
    ret = list(cond.operations)[-1]
    if not len(ret.operands):
        return None
    cmp = ret.operands[0].owner
    if not isinstance(cmp, (ir.OpView, ir.Operation)):
        return None
    cmp = cmp.operation
    if cmp.name != "stablehlo.compare":
        return None
    direction = _plain(cmp.attributes["comparison_direction"])
    lhs, rhs = cmp.operands[0], cmp.operands[1]
    idx, bound = _block_arg_index(lhs, cond), _const_int(rhs)
    if idx is None:
        idx, bound = _block_arg_index(rhs, cond), _const_int(lhs)
        direction = {"LT": "GT", "LE": "GE", "GT": "LT", "GE": "LE"}.get(direction, direction)
    if idx is None or bound is None:
        return None
    init = _const_int(op.operands[idx])
    body_ret = list(body.operations)[-1]
    upd = body_ret.operands[idx].owner
    if init is None or not isinstance(upd, (ir.OpView, ir.Operation)):
        return None
    step = _constant_step(upd.operation, body, idx)
    if step is None:
        return None
    return static_trip_count(init, bound, step, direction)


def _constant_step(op: ir.Operation, block: ir.Block, idx: int) -> int | None:
    """The constant `op` adds to argument `idx` of `block` (`i + c`, `c + i`; `i - c` as
    -c), else None."""
    if op.name not in ("stablehlo.add", "stablehlo.subtract"):
        return None
    a, b = op.operands[0], op.operands[1]
    step = _const_int(b) if _block_arg_index(a, block) == idx else None
    if step is None and op.name == "stablehlo.add" and _block_arg_index(b, block) == idx:
        step = _const_int(a)
    if step is None:
        return None
    return -step if op.name == "stablehlo.subtract" else step
