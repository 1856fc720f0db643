"""How many times each op of a module runs: the executed-statement counts CC4CS works from.

While bodies run their static trip count (the condition once more), each
if/case branch its share of `perf.branch_weights` (1/branches without), and a
callee as often as its call sites run (paper §3, N_k^st counts executed
statements).
"""

from __future__ import annotations

from collections.abc import Iterable

from stablehlo_perf.analysis.cc4cs import module_features
from stablehlo_perf.analysis.opinfo import OpInfo
from stablehlo_perf.passes.extract import BRANCH_OPS, ModuleView

__all__ = ["executed_ops", "lasso_features"]


def executed_ops(view: ModuleView) -> list[tuple[OpInfo, float]]:
    """Every analysed op of the entry function (and what it calls) with its execution count."""
    recs = view.records
    entry = view.entry()
    func_times: dict[str, float] = {}
    op_times: dict[int, float] = {}

    def times_of_func(name: str, stack: frozenset[str]) -> float:
        if name in func_times:
            return func_times[name]
        if entry is not None and name == entry.name:
            total = 1.0
        else:
            total = sum(
                times_of_op(r.info.id, stack | {name})
                for r in recs
                if r.info.name == "func.call"
                and r.info.attrs.get("callee", "").lstrip("@") == name
                and r.info.func not in stack | {name}
            )
        func_times[name] = total
        return total

    def times_of_op(i: int, stack: frozenset[str]) -> float:
        if i in op_times:
            return op_times[i]
        rec = recs[i]
        if rec.info.dead:  # XLA removes it: it runs no times
            t = 0.0
        elif rec.parent is None:
            t = times_of_func(rec.info.func, stack)
        else:
            parent = recs[rec.parent].info
            t = times_of_op(rec.parent, stack)
            region = rec.block_key[1]
            if parent.name == "stablehlo.while":
                trips = parent.attrs.get("trip_count") or 1
                t *= trips + 1 if region == 0 else trips
            elif parent.name in BRANCH_OPS:
                shares = view.branch_shares(rec.parent)
                t *= (
                    shares[region]
                    if shares is not None
                    else 1 / (len(view.regions[rec.parent]) or 1)
                )
        op_times[i] = t
        return t

    return [(r.info, times_of_op(r.info.id, frozenset())) for r in recs]


def lasso_features(view: ModuleView, one_kernel_loops: Iterable[int] = ()) -> dict[str, float]:
    """The CC4CS LASSO's features of a module: executed counts and work per class, the ops
    inside `one_kernel_loops` (while ops XLA:CPU compiles into one kernel) a class apart."""
    inside = {i for loop in one_kernel_loops for block in view.blocks_inside(loop) for i in block}
    return module_features(executed_ops(view), inside)
