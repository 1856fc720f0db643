"""XLA:CPU's small while loops: compiled into one kernel, priced by their members' code alone.

XLA's CPU compiler (SmallWhileLoopHoistingPass, after fusion and copy
insertion) outlines a while loop into a call the backend emits as a single
kernel when nothing in it needs the thunk runtime (a custom call — on a CPU
also Cholesky and triangular solves, which call LAPACK —, scatter, sort, FFT,
infeed/outfeed, replica or partition id, or collective; jax 0.10.2's XLA
hoists loops with small dots and convolutions, and first rewrites a scatter at
one index into an update slice, so only a scatter at several keeps it out) and
HloCostAnalysis's bytes accessed of the loop are under `xla_cpu_small_while_loop_byte_threshold`
(1024 by default): its body's and condition's kernels once each (inputs and
outputs; copy insertion's copies in the body among them), plus 8 bytes per carried value
for the body's result tuple. Checked
against jax 0.10.2's compiled HLO (the `xla_cpu_small_call` attribute): a
fori_loop of `v * 0.5 + tanh(v)` is hoisted up to 123 f32 elements and not
from 124 (984 + 37 < 1024 <= 992 + 37), one carrying two f32 vectors up to 81.

Such a loop pays one kernel launch, not a thunk per kernel per trip: on the
project's Xeon VM (2026-12-01, runtime/timing.py, trips 100 vs 2000) an
iteration of `v * 0.5 + 1` costs 4-12 ns, of tanh / exp / sin on 64 elements
29 / 38 / 201 ns, where three thunked kernels would cost ~330 ns. A member is
priced at its measured compute per element (an elementwise op's time at
`REFERENCE_ELEMENTS`, less its launch and memory traffic, per element) times its
elements; other members at their own compute (`fusion_cost.member_compute_ns`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

import numpy as np
from stablehlo_perf.analysis.fusion import ELEMENTWISE_CLASSES, scatter_positions
from stablehlo_perf.analysis.fusion_cost import member_compute_ns
from stablehlo_perf.analysis.opinfo import OpInfo, TensorType, op_class
from stablehlo_perf.analysis.service import OpCost
from stablehlo_perf.analysis.targets import Target

__all__ = [
    "LATENCY_KEY",
    "REFERENCE_ELEMENTS",
    "SCALAR_ELEMENTS",
    "SMALL_LOOP_BYTES",
    "THUNKED_KEY",
    "format_latencies",
    "is_small_loop",
    "loop_member_ns",
    "needs_thunks",
    "op_latency_ns",
    "parse_latencies",
    "reference_op",
    "sized_key",
]

LATENCY_KEY = "small_loop_ns"
"""Calibration header line of the small-loop probe (`runtime/small_loop_probes.py`): ns a
trip of the loop itself costs (`base`) and each op's latency on one element, by short name."""

THUNKED_KEY = "thunked_loop"
"""Calibration header line of the thunked-loop probe (`runtime/thunked_loop_probes.py`):
`base`, `kernel` (ns) and `l1_gbps`, `l2_gbps`, as `name=value` pairs."""

SMALL_LOOP_BYTES = 1024
"""XLA:CPU's default `xla_cpu_small_while_loop_byte_threshold`."""
_TUPLE_SLOT_BYTES = 8  # HloCostAnalysis counts a tuple as a table of pointers
_NOT_INLINE = frozenset(
    {
        "custom_call", "cholesky", "triangular_solve", "scatter", "sort", "fft", "infeed",
        "outfeed", "replica_id", "partition_id", "after_all", "all_reduce", "all_gather",
        "all_to_all", "reduce_scatter", "collective_permute", "collective_broadcast", "send",
        "recv",
    }
)  # fmt: skip
REFERENCE_ELEMENTS = 4096
"""Size at which an elementwise member's per-element compute is read off its model: small
enough for a core's cache, large enough that its launch is a small part. Loops of 1000
trips of sin(v) * 0.9 on 1 / 16 / 64 elements (Xeon VM, program time, measured ~16 / ~54
/ ~205 us) are predicted 9.0 / 82 / 364 us with 4096, 13 / 159 / 716 us with 16384; the
e2e `small_loop` family (measured 28-54 us) 6.9 / 9.6 / 15 us with 4096, 8.4 / 12.7 /
21 us with 16384: a loop-carried chain pays each op's latency, which a throughput per
element misses."""

SCALAR_ELEMENTS = 16
"""Up to this many elements a small loop's ops ran as scalar code, one element after
another, in every body tried on the project's Xeon VM (2026-12-02, ns a trip of a
2000-trip fori_loop): tanh 56 ns on 16 f32 and 31 on 64, exp(-v*v), 1/(1+v*v) and
v*0.5+1 scalar below 48-64 elements, sin(v)*0.9 even at 64; a trip of the e2e
`small_loop` body costs 67 ns on 16, 27 on 32. Where LLVM vectorises above it is the
body's own (not predicted): larger loops are priced as vector code."""


def needs_thunks(op: OpInfo) -> bool:
    """Whether an op keeps its while loop out of one kernel: it runs on XLA:CPU's thunk
    runtime. A scatter at one index does not: XLA rewrites it into a dynamic-update-slice
    first (`v.at[i % 16].add(1.0)` in a 100-trip loop of 16 floats: hoisted; at two indices
    it stays a scatter and the loop is not; compiled HLO's `xla_cpu_small_call`, jax 0.10.2)."""
    if op.short_name == "scatter":
        return scatter_positions(op) != 1
    return op.short_name in _NOT_INLINE


def is_small_loop(
    ops: Iterable[OpInfo], kernel_bytes: int, carried: int, threshold: int = SMALL_LOOP_BYTES
) -> bool:
    """Whether XLA:CPU compiles a while loop into one kernel: none of its ops (regions
    included) needs the thunk runtime, and the bytes its kernels access once plus its
    result tuple stay under `threshold`."""
    if any(needs_thunks(op) for op in ops):
        return False
    return kernel_bytes + _TUPLE_SLOT_BYTES * carried < threshold


def reference_op(op: OpInfo) -> OpInfo | None:
    """An elementwise op at `REFERENCE_ELEMENTS` elements (1-D, same element types and
    attributes), whose model prices its code per element; None for other ops."""
    if op.op_class not in ELEMENTWISE_CLASSES or not op.is_static:
        return None

    def flat(t: TensorType) -> TensorType:
        return dataclasses.replace(t, shape=(REFERENCE_ELEMENTS,))

    attrs = {k: v for k, v in op.attrs.items() if k != "splat_operands"}
    return OpInfo.build(
        op.id, op.name, [flat(t) for t in op.operands], [flat(t) for t in op.results], attrs
    )


def loop_member_ns(
    op: OpInfo, cost: OpCost, reference_cost: OpCost | None, target: Target
) -> float:
    """What an op costs per trip of a loop compiled into one kernel, never a launch: an
    elementwise op its latency (`Target.small_loop_latency_ns`: a trip waits for the value
    the last one carried) and its compute: up to `SCALAR_ELEMENTS` elements the larger of
    the latency and the probe's scalar cost a trip there, pro rata; beyond, the latency
    plus its compute per element at the reference size (`reference_cost`, the model's answer
    for `reference_op`) on the elements past the first `SCALAR_ELEMENTS` (one AVX-512
    vector of f32, whose result the latency waits for; all of them where the latency is
    unknown); any other op its own compute.

    The latency and the rest's throughput add up: on the Xeon VM (2026-12-06, ns a trip of
    fori_loops of 2000 and 100 trips timed as programs, runtime/timing.py, two runs) five
    bodies (tanh, v/2 + 1, exp(-v^2), the zoo's `small_loop` step, sin(v) x 0.9) on 32-120
    f32 were priced at a mean 42.9% from their times with the larger of the two, 30.3% with
    the sum (32 and 64 elements of the zoo's step: 17.4 and 21.9 ns measured, 17.4 and 17.4
    with the larger, 18.3 and 19.9 with the sum); on the bodies of benchmarks/small_loops.py,
    not used to choose it, the hoisted loops' error factor went 1.39 -> 1.30 (two runs each).
    Bodies LLVM leaves scalar past 16 elements (a tanh on 32-48: 66-99 ns) are not told
    apart."""
    if reference_cost is not None:
        ref = reference_op(op)
        elements = (op.results[0].num_elements or 0) if op.results else 0
        if ref is not None:
            table = target.small_loop_latency_ns
            latency = op_latency_ns(op, table)
            scalar = op_latency_ns(op, table, SCALAR_ELEMENTS)
            if scalar and 1 < elements <= SCALAR_ELEMENTS:
                return max(scalar * elements / SCALAR_ELEMENTS, latency)
            per_element = member_compute_ns(ref, reference_cost, target) / REFERENCE_ELEMENTS
            waited = SCALAR_ELEMENTS if latency > 0 else 0
            return per_element * max(elements - waited, 0) + latency
    if op.op_class in ("constant", "control", "movement") or cost.latency_ns <= 0:
        return 0.0
    return max(member_compute_ns(op, cost, target), 0.0)


def sized_key(name: str, elements: int) -> str:
    """The probe table's key for op `name`'s cost a trip on `elements` elements."""
    return f"{name}@{elements}"


def op_latency_ns(op: OpInfo, latencies: Mapping[str, float], elements: int = 1) -> float:
    """An elementwise float op's cost a trip from the probe's table, on one element (its
    latency) or on `elements` (`name@elements`): its own, else its class's (a
    transcendental the median of those measured, any other an add's); 0 for integer and
    boolean ops (the loop counter, whose trip `base` covers) or without a table."""
    if not latencies or not op.element_type.startswith(("f", "bf")):
        return 0.0
    if elements == 1:
        sized = {k: v for k, v in latencies.items() if "@" not in k}
    else:
        at = sized_key("", elements)
        sized = {k.removesuffix(at): v for k, v in latencies.items() if k.endswith(at)}
    if op.short_name in sized:
        return sized[op.short_name]
    if op.op_class == "transcendental":
        known = [v for k, v in sized.items() if op_class(f"stablehlo.{k}") == "transcendental"]
        return float(np.median(known)) if known else 0.0
    return sized.get("add", 0.0)


def format_latencies(latencies: Mapping[str, float]) -> str:
    """The header value: `name=ns` pairs."""
    return " ".join(f"{k}={v:.4g}" for k, v in latencies.items())


def parse_latencies(text: str) -> dict[str, float]:
    """The inverse of `format_latencies`; {} for an empty or malformed value."""
    try:
        out = {k: float(v) for k, v in (item.split("=", 1) for item in text.split())}
    except ValueError:
        return {}
    return out if all(v >= 0 for v in out.values()) else {}
