"""Longest path through a dataflow graph weighted by op latency.

Nodes come in program order (a valid topological order for SSA), each with
its latency and the indices of the nodes it uses. Earliest start is the latest
finish of its inputs; slack is how much a node can slip without lengthening
the longest path; the critical path is traced back from the node that
finishes last.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Schedule", "longest_path", "static_trip_count"]


@dataclass(frozen=True)
class Schedule:
    """Per-node earliest start and slack, the span (critical-path length), work and the path."""

    start_ns: list[float]
    slack_ns: list[float]
    span_ns: float
    work_ns: float
    path: list[int]


def longest_path(latency_ns: Sequence[float], deps: Sequence[Sequence[int]]) -> Schedule:
    """Critical-path analysis of a DAG whose nodes are listed in topological order."""
    n = len(latency_ns)
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
