"""Costs of control flow and calls from the costs of what they contain.

A `while` costs its body times the trip count plus its condition once more
than that; an unknown trip count counts one trip (and says so); `if`/`case`
cost their costliest branch (the others are reported), or, where the node has
branch weights (a profile, or the branches observed on real inputs), the
weighted mean of its branches; a `func.call` costs its
callee's ops run one after another. Costs are vectors (latency, cycles, DRAM
bytes, ...) combined the same way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

__all__ = ["BRANCH_POLICIES", "Aggregation", "ControlNode", "aggregate", "branch_shares"]

# How an if/case without weights is priced: its costliest branch (an upper bound, the
# default) or the mean of its branches (each equally likely).
BRANCH_POLICIES = ("max", "mean")


@dataclass(frozen=True)
class ControlNode:
    """A control op or call: its kind, the op ids of each region block, trip count, callee,
    and (if/case) how often each branch runs relative to the others."""

    kind: str
    regions: Sequence[Sequence[int]] = ()
    trips: int | None = None
    callee: str | None = None
    weights: Sequence[float] | None = None


def branch_shares(weights: Sequence[float] | None, n: int) -> np.ndarray | None:
    """Each branch's share of the runs (summing to 1), or None where `weights` do not give
    one non-negative finite number per branch with a positive sum."""
    if weights is None or len(weights) != n or n == 0:
        return None
    w = np.asarray(weights, dtype=float)
    if not np.all(np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
        return None
    return w / w.sum()


@dataclass
class Aggregation:
    """Inclusive cost of every op (own + contained), branch costs of if/case, and caveats."""

    total: np.ndarray
    branch_costs: dict[int, list[float]] = field(default_factory=dict)
    caveats: list[str] = field(default_factory=list)


def aggregate(
    own: np.ndarray,
    controls: Mapping[int, ControlNode],
    funcs: Mapping[str, Sequence[int]],
    names: Mapping[int, str] | None = None,
    xla_while_convention: bool = False,
    policy: str = "max",
) -> Aggregation:
    """Inclusive costs: `own` is (n_ops, k); row i of the result adds what op i contains.

    With `xla_while_convention` a while costs its body and condition once each,
    as XLA's HloCostAnalysis counts it, whatever the trip count. `policy`
    (one of BRANCH_POLICIES) prices an if/case that has no weights.
    """
    if policy not in BRANCH_POLICIES:
        raise ValueError(f"policy must be one of {', '.join(BRANCH_POLICIES)}, not {policy!r}")
    total = np.array(own, dtype=float, copy=True)
    done = np.zeros(len(own), dtype=bool)
    out = Aggregation(total=total)
    func_cost: dict[str, np.ndarray] = {}
    in_progress: set[str] = set()
    label = (lambda i: names.get(i, f"op {i}")) if names else (lambda i: f"op {i}")

    def block_sum(ids: Sequence[int]) -> np.ndarray:
        acc = np.zeros(total.shape[1])
        for i in ids:
            acc += op_total(i)
        return acc

    def call_cost(callee: str, caller: int) -> np.ndarray:
        if callee in func_cost:
            return func_cost[callee]
        if callee not in funcs:
            out.caveats.append(f"{label(caller)}: callee @{callee} not found; counted as free")
            return np.zeros(total.shape[1])
        if callee in in_progress:
            out.caveats.append(f"{label(caller)}: recursive call to @{callee} counted once")
            return np.zeros(total.shape[1])
        in_progress.add(callee)
        cost = block_sum(funcs[callee])
        in_progress.discard(callee)
        func_cost[callee] = cost
        return cost

    def op_total(i: int) -> np.ndarray:
        if done[i]:
            return total[i]
        node = controls.get(i)
        if node is not None:
            if node.kind == "call":
                total[i] += call_cost(node.callee or "", i)
            elif node.kind == "while":
                cond = block_sum(node.regions[0]) if node.regions else 0.0
                body = block_sum(node.regions[1]) if len(node.regions) > 1 else 0.0
                trips = node.trips
                if xla_while_convention:
                    total[i] += body + cond
                    done[i] = True
                    return total[i]
                if trips is None:
                    out.caveats.append(f"{label(i)}: trip count not static; counted one trip")
                    trips = 1
                total[i] += body * trips + cond * (trips + 1)
            else:
                branches = [block_sum(r) for r in node.regions]
                if branches:
                    costs = [float(b[0]) for b in branches]
                    out.branch_costs[i] = costs
                    shares = branch_shares(node.weights, len(branches))
                    if shares is None and node.weights is not None:
                        out.caveats.append(
                            f"{label(i)}: branch weights {list(node.weights)} do not weigh its "
                            f"{len(branches)} branches; priced by the '{policy}' policy"
                        )
                    if shares is None and policy == "mean":
                        shares = np.full(len(branches), 1.0 / len(branches))
                    if shares is None:
                        total[i] += branches[int(np.argmax(costs))]
                    else:
                        total[i] += shares @ np.stack(branches)
        done[i] = True
        return total[i]

    for i in range(len(own)):
        op_total(i)
    return out
