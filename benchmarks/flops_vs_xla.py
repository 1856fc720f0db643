"""FLOPs and bytes per corpus module against XLA's own `compiled.cost_analysis()`.

Our count is the module's dynamic total: calls count their callee, while
loops their body times the static trip count, if/case their costliest branch.
Prints one row per module with the ratio ours / XLA and the reason for every
module that differs by more than 1%.
"""

from __future__ import annotations

import sys

import jax
import numpy as np
from _corpus import corpus_programs
from stablehlo_perf.analysis.aggregate import aggregate
from stablehlo_perf.passes.annotate_cycles import control_nodes
from stablehlo_perf.passes.extract import view_module
from stablehlo_perf.passes.ir import make_context, parse_module

# Why a module's count differs from XLA's (checked by reading the optimised HLO).
EXPLAINED = {
    "transformer_block": "XLA:CPU computes bf16 in f32: its optimised HLO has converts over "
    "165,442 elements (one FLOP each) where StableHLO has a few; the gap is 162,208",
    "mixed_dtypes": "XLA:CPU computes bf16/f16 arithmetic in f32: converts over 2,064 "
    "elements in its optimised HLO versus the module's own; the gap is 1,280",
}


def dynamic_totals(text: str, xla_while_convention: bool = False) -> tuple[int, int]:
    """Module FLOPs and bytes with calls, trip counts and branches applied."""
    ctx = make_context()
    with ctx:
        module = parse_module(text, "<bench>", ctx)
        view = view_module(module, "<bench>")
    own = np.array([[r.info.flops or 0, r.info.bytes or 0] for r in view.records], dtype=float)
    for i, r in enumerate(view.records):
        if r.info.name in ("stablehlo.while", "stablehlo.case", "stablehlo.if", "func.call"):
            own[i] = 0  # their own operands are not extra work; contents are added below
    funcs = {n: f.top for n, f in view.funcs.items()}
    agg = aggregate(own, control_nodes(view), funcs, xla_while_convention=xla_while_convention)
    entry = view.entry()
    total = agg.total[entry.top].sum(axis=0)
    return int(total[0]), int(total[1])


def main() -> int:
    rows = []
    for name, make in sorted(corpus_programs().PROGRAMS.items()):
        fn, args = make()
        lowered = jax.jit(fn).lower(*args)
        flops, nbytes = dynamic_totals(lowered.as_text())
        flops_once, _ = dynamic_totals(lowered.as_text(), xla_while_convention=True)
        cost = lowered.compile().cost_analysis()
        cost = cost[0] if isinstance(cost, list) else cost
        xf, xb = float(cost.get("flops", 0.0)), float(cost.get("bytes accessed", 0.0))
        rows.append((name, flops, flops_once, xf, nbytes, xb))
    print(f"{'module':18s} {'ours FLOPs':>11s} {'XLA FLOPs':>11s} {'ratio':>6s} "
          f"{'loops once':>11s} {'ratio':>6s} {'ours bytes':>11s} {'XLA bytes':>11s} {'ratio':>6s}")  # fmt: skip
    off = []
    for name, f, f1, xf, b, xb in rows:
        rf = f / xf if xf else float("nan")
        r1 = f1 / xf if xf else float("nan")
        rb = b / xb if xb else float("nan")
        print(f"{name:18s} {f:11,d} {xf:11,.0f} {rf:6.3f} {f1:11,d} {r1:6.3f} "
              f"{b:11,d} {xb:11,.0f} {rb:6.3f}")  # fmt: skip
        if not (0.99 <= r1 <= 1.01):
            off.append(name)
    print()
    print("'loops once' counts every while body and condition once, as XLA's HloCostAnalysis")
    print("does; 'ours' multiplies bodies by their static trip counts (fori_loop x10, scan x8).")
    print(f"modules within 1% of XLA's FLOPs (loops once): {len(rows) - len(off)} / {len(rows)}")
    for name in off:
        print(f"  {name}: {EXPLAINED.get(name, 'unexplained')}")
    print("bytes differ by design: XLA counts fused kernels' inputs and outputs once, "
          "we count every StableHLO op's operands and results (no fusion yet)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
