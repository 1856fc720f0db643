"""How XLA:CPU's thunk executor runs a block of kernels: one after another, or concurrently.

Each compiled computation (a program's entry, a while loop's body and condition, a branch
of a conditional) is a sequence of thunks (kernels, library calls, copies, control ops) in
level order, run by a thunk executor. The executor (XLA's
`xla/backends/cpu/runtime/thunk_executor.cc`, the version jaxlib 0.10.2 bundles) runs the
sequence inline, thunk by thunk on the calling thread, when any of these holds:

- it has at most `SEQUENTIAL_THUNKS` thunks;
- every thunk depends on the one before it (a chain);
- every buffer any thunk uses is at most `SMALL_BUFFER_BYTES`.

Otherwise it runs the thunks as a dataflow graph: ready thunks beyond the first are handed to
the thread pool, and a thunk that completes asynchronously (a library call) resumes the graph
on the thread that finished it, so the kernels after a dot run beside the pool's threads (the
critical-path pass charges them contention after any dot there, after a large one only
elsewhere: `passes.critical_path._leaves_pollers`). XLA's own `is_sequential` (its log with
`TF_CPP_VMODULE=thunk_executor=2`, 2026-12-07) ran 36 of the 194 programs of
benchmarks/end_to_end.py and the unseen sets with saved runs as graphs (the zoo's MLP
gradient, attention and both transformers among them); the pass's fusion plan gives the same
mode for 189 (it sees fewer kernels in the threefry loops of `jax.random` and a max pool's
gradient, more in an LSTM's step).

In graph mode the executor hands half its ready queue to a pool worker only while more than
8 thunks are ready (`Thunk::ExecuteSession::kSplitThreshold`, at most `kMaxWorkers` = 4
workers): only a level of 10 or more independent thunks runs on two cores. In loops on the
Xeon VM (2026-12-07, 11 rounds) 16 independent 64x256x256 dots (one thread each) took 626
us where 8 took 646 and the same 16 as a chain 1152; as calls the split paid for the cold
worker (16 branches 1023 us). The pass schedules every CPU block on one core; none of the
zoo's programs has such a level.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["SEQUENTIAL_THUNKS", "SMALL_BUFFER_BYTES", "runs_concurrently", "thunk_deps"]

SEQUENTIAL_THUNKS = 8
"""`ThunkExecutor::Options::execute_sequential_num_thunks_threshold`'s default."""
SMALL_BUFFER_BYTES = 512
"""`ThunkExecutor::Options::execute_sequential_buffer_threshold`'s default."""


def thunk_deps(deps: Sequence[Sequence[int]], is_thunk: Sequence[bool]) -> list[list[int]]:
    """Each thunk's deps on other thunks, nodes in a topological order with `deps` among
    them: a node that is no thunk (a bitcast, a reshape that only renames a buffer) passes
    its own deps through. Indices are positions among the thunks."""
    position: dict[int, int] = {}
    through: list[set[int]] = []
    for k, ds in enumerate(deps):
        reached: set[int] = set()
        for d in ds:
            reached |= {position[d]} if is_thunk[d] else through[d]
        through.append(reached)
        if is_thunk[k]:
            position[k] = len(position)
    return [sorted(through[k]) for k in range(len(deps)) if is_thunk[k]]


def runs_concurrently(deps: Sequence[Sequence[int]], largest_buffer_bytes: float) -> bool:
    """Whether the executor runs thunks with these deps (`thunk_deps`, in the order it runs
    them) as a dataflow graph, the largest buffer any of them uses `largest_buffer_bytes`."""
    if len(deps) <= SEQUENTIAL_THUNKS or largest_buffer_bytes <= SMALL_BUFFER_BYTES:
        return False
    return not all(k - 1 in deps[k] for k in range(1, len(deps)))
