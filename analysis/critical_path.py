"""Longest path through a dataflow graph weighted by op latency.

Nodes come in program order (a valid topological order for SSA), each with
its latency and the indices of the nodes it uses. Earliest start is the latest
finish of its inputs; slack is how much a node can slip without lengthening
the longest path; the critical path is traced back from the node that
finishes last.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Schedule", "level_order", "longest_path", "static_trip_count", "topological_order"]


@dataclass(frozen=True)
class Schedule:
    """Per-node earliest start and slack, the span (critical-path length), work and the path."""

    start_ns: list[float]
    slack_ns: list[float]
    span_ns: float
    work_ns: float
    path: list[int]


def topological_order(deps: Sequence[Sequence[int]]) -> list[int] | None:
    """Nodes in an order where every node follows its deps, earliest index first among the
    ready ones (so program order is kept where it can be); None if there is a cycle."""
    n = len(deps)
    indegree = [0] * n
    users: list[list[int]] = [[] for _ in range(n)]
    for i, ds in enumerate(deps):
        for d in set(ds):
            indegree[i] += 1
            users[d].append(i)
    ready = [i for i in range(n) if indegree[i] == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for u in users[i]:
            indegree[u] -= 1
            if indegree[u] == 0:
                heapq.heappush(ready, u)
    return order if len(order) == n else None


def level_order(deps: Sequence[Sequence[int]], order: Sequence[int]) -> list[int]:
    """The nodes of a topological `order` sorted by level (the most edges on a path from a
    node without deps to them), keeping `order` within a level: the order XLA:CPU runs a
    program's kernels in. Its compiled entry computations list kernels by level (jax 0.10.2,
    2026-12-07: 225 of the 227 programs of benchmarks/end_to_end.py and unseen_programs.py,
    3 pairs out of level order in the other two), so kernels on parameters alone (slices of
    stacked weights) run first, not where the program uses them."""
    level: dict[int, int] = {}
    for i in order:
        level[i] = 1 + max((level[d] for d in deps[i]), default=-1)
    return sorted(order, key=lambda i: level[i])


def longest_path(latency_ns: Sequence[float], deps: Sequence[Sequence[int]]) -> Schedule:
    """Critical-path analysis of a DAG whose nodes are listed in topological order."""
    n = len(latency_ns)
    for i, ds in enumerate(deps):
        if any(d >= i for d in ds):
            raise ValueError(
                f"node {i} depends on a later node: nodes must be in topological order"
            )
    start = [0.0] * n
    finish = [0.0] * n
    pred = [-1] * n
    for i in range(n):
        best, arg = 0.0, -1
        for d in deps[i]:
            if arg == -1 or finish[d] > best:
                best, arg = finish[d], d
        start[i] = best
        pred[i] = arg
        finish[i] = best + latency_ns[i]
    span = max(finish, default=0.0)
    latest_finish = [span] * n
    for i in range(n - 1, -1, -1):
        ls = latest_finish[i] - latency_ns[i]
        for d in deps[i]:
            latest_finish[d] = min(latest_finish[d], ls)
    eps = 1e-9 * max(1.0, span)  # float noise, not slack
    slack = [s if s > eps else 0.0 for s in (latest_finish[i] - finish[i] for i in range(n))]
    path: list[int] = []
    if n:
        node = max(range(n), key=lambda i: (finish[i], -i))
        while node != -1:
            path.append(node)
            node = pred[node]
        path.reverse()
    return Schedule(start, slack, span, float(sum(latency_ns)), path)


def static_trip_count(init: int, bound: int, step: int, direction: str) -> int | None:
    """Trips of `for (i = init; i <direction> bound; i += step)`, or None if not countable.

    This is the shape `fori_loop` and `scan` lower to: a counter compared
    against a constant in the condition and incremented by a constant in the body.
    """
    if step == 0:
        return None
    if direction in ("LT", "LE"):
        if step < 0:
            return None
        end = bound + (1 if direction == "LE" else 0)
        return max(0, -(-(end - init) // step))
    if direction in ("GT", "GE"):
        if step > 0:
            return None
        end = bound - (1 if direction == "GE" else 0)
        return max(0, -(-(init - end) // -step))
    if direction == "NE":
        if (bound - init) % step or (bound - init) // step < 0:
            return None
        return (bound - init) // step
    return None
