"""XLA:CPU's temporary arena for one call, estimated from a block's fusion plan.

XLA packs a program's temporaries (results its kernels pass to later kernels, and the
buffers some ops add inside their own kernels) into one allocation whose size is the most
that is live at once. A call whose arena reaches glibc's largest mmap threshold gets it
mapped afresh and faults every page of it in again (`runtime/page_probes.py`,
`Target.fresh_page_ns_per_mib`); a smaller one comes back from the heap already mapped.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from stablehlo_perf.analysis.fusion import FusionPlan, cpu_conv_layout_copies
from stablehlo_perf.analysis.opinfo import OpInfo

__all__ = ["MMAP_THRESHOLD_BYTES", "arena_bytes", "internal_temps"]

MMAP_THRESHOLD_BYTES = 32 * 2**20
"""glibc's largest dynamic mmap threshold on a 64-bit machine (DEFAULT_MMAP_THRESHOLD_MAX,
4 MiB x sizeof(long)): an allocation at least this large is always a fresh mapping."""


def internal_temps(
    op: OpInfo, at: int, ready: Sequence[int], returned: bool
) -> list[tuple[float, int, int]]:
    """Temporaries XLA:CPU adds for an op run at position `at` whose operands are ready at
    `ready` (0 for a parameter), as (bytes, first position, last position).

    A select_and_scatter becomes a reduce_window over the operand and an s32 iota of each of
    its dims (XLA runs it as soon as the operand is ready, the iotas first of all kernels),
    whose indices are packed into one array and scattered with a copy of the source as the
    updates (made once the source is ready) into a zeroed buffer, the op's result (a
    temporary unless `returned`). XLA's memory analysis of the gradient of a 2x2 max pool of
    8x56x56x64 f32, its operand and source parameters: 35,323,944 bytes, the 4 iotas, the
    window's value and 4 indices, the source's copy and 40 bytes of tuple; of a small CNN's
    SGD step on 32 images: 35,625,064, both pools' iotas live from the start. A convolution
    not in NHWC / HWIO / NHWC layout holds its transposed copies
    (`fusion.cpu_conv_layout_copies`) while it runs."""
    if op.short_name == "select_and_scatter" and len(op.operands) > 1:
        x, src = op.operands[0], op.operands[1]
        rank = len(x.shape or ())
        n_in, n_src = x.num_elements or 0, src.num_elements or 0
        iotas = float(rank * n_in * 4)
        window = float(n_src * (x.elem_bytes + 4 * rank))
        updates = float(n_src * src.elem_bytes)
        operand_at, source_at = ready[0], ready[1]
        spans = [(updates, source_at, at)]
        if operand_at >= at:
            return [*spans, (iotas + window, at, at)]
        spans += [
            (iotas, 0, operand_at),
            (window, operand_at, operand_at),
            (float(rank * n_src * 4), operand_at + 1, at),
        ]
        return spans if returned else [*spans, (float(n_in * x.elem_bytes), operand_at, at - 1)]
    copies = cpu_conv_layout_copies(op)
    return [(float(sum(t.nbytes or 0 for t in copies)), at, at)] if copies else []


def arena_bytes(
    ops: Sequence[OpInfo],
    plan: FusionPlan,
    deps: Sequence[Sequence[int]],
    sources: Sequence[Sequence[int | None]],
    live_out: Sequence[int],
    order: Sequence[int],
) -> float:
    """The most bytes of temporaries live at once while a block's kernels run in `order`
    (group ids): each group's results that a later group reads, from the group to its last
    reader, and the temporaries XLA adds for each op (`internal_temps`). What the block
    returns is no temporary; an op of a free group (a reshape, a no-op pad or slice) shares
    its first operand's buffer; a loop kernel writes its result over an operand of the same
    size whose last reader it is (XLA's in-place elementwise fusions). `ops`, `deps`, `sources` and
    `live_out` are block-local, as `fusion.plan_fusion` takes them."""
    n = len(ops)
    pos = {g: p for p, g in enumerate(order)}
    owner = list(range(n))  # whose buffer an op's result is; -1: none (a constant, a parameter)
    for k in range(n):
        if plan.kinds[plan.groups[k]] == "free":
            srcs = [s for s in sources[k] if s is not None and s >= 0]
            owner[k] = owner[srcs[0]] if srcs else -1
    # owner -> [bytes, first position, last position]
    live: dict[int, list[float]] = {}
    for k in range(n):
        if owner[k] == k:
            p = pos[plan.groups[k]]
            live[k] = [float(sum(t.nbytes or 0 for t in ops[k].results)), p, p]
    for j in range(n):
        for s in deps[j]:
            o = owner[s]
            if o >= 0 and o in live:
                live[o][2] = max(live[o][2], pos[plan.groups[j]])
    returned = {owner[k] for k in live_out}
    temps = {o: v for o, v in live.items() if o not in returned and v[2] > v[1]}
    starting: dict[int, list[int]] = {}
    ending: dict[int, list[int]] = {}
    for o, (_, start, end) in temps.items():
        starting.setdefault(int(start), []).append(o)
        ending.setdefault(int(end), []).append(o)
    for p, g in enumerate(order):
        if plan.kinds[g] != "loop":
            continue
        dying = [q for q in ending.get(p, []) if temps[q][1] < p]
        for o in starting.get(p, []):
            same = next((q for q in dying if temps[q][0] == temps[o][0]), None)
            if same is not None:  # o is written over `same`, which lives on as o
                dying.remove(same)
                temps[same][2] = temps[o][2]
                ending.setdefault(int(temps[o][2]), []).append(same)
                temps[o][0] = 0.0
    change = [0.0] * (len(order) + 1)
    for nbytes, start, end in temps.values():
        change[int(start)] += nbytes
        change[int(end) + 1] -= nbytes
    for k in range(n):
        if plan.kinds[plan.groups[k]] == "free":
            continue
        ready = [
            pos[plan.groups[owner[s]]] if s is not None and s >= 0 and owner[s] >= 0 else 0
            for s in sources[k]
        ]
        for nbytes, start, end in internal_temps(
            ops[k], pos[plan.groups[k]], ready, owner[k] in returned
        ):
            change[start] += nbytes
            change[end + 1] -= nbytes
    usage = list(itertools.accumulate(change))[: len(order)]
    return max(usage, default=0.0)
