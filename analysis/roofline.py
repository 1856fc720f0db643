"""Roofline cost model: the honest fallback that prices every op.

time = max(FLOPs / peak of the unit and dtype the op runs on,
           bytes / memory bandwidth) + the target's per-kernel launch overhead;
cycles = time x clock. When the cache-traffic pass predicted an op's DRAM
bytes (`attrs["dram_bytes"]`), those move at memory bandwidth and the rest of
its logical bytes at L2 bandwidth. dot_general and convolution run on the matrix unit,
everything else on the vector unit; each transcendental counts as one vector
operation. An op that moves no bytes and does no work (zero-size tensors)
costs nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from stablehlo_perf.analysis.opinfo import OpInfo
from stablehlo_perf.analysis.service import OpCost
from stablehlo_perf.analysis.targets import Target

__all__ = ["RooflineModel"]


class RooflineModel:
    """max(compute, memory) + launch overhead, vectorised over a batch of ops."""

    name = "roofline"

    def supports(self, op: OpInfo, target: Target) -> bool:
        return op.is_static

    def predict(self, ops: Sequence[OpInfo], target: Target) -> list[OpCost]:
        flops = np.array([float((op.flops or 0) + (op.transcendentals or 0)) for op in ops])
        nbytes = np.array([float(op.bytes or 0) for op in ops])
        dram = np.array([float(op.attrs.get("dram_bytes", op.bytes or 0)) for op in ops])
        peak = np.array(
            [target.peak_flops(op.element_type, matrix=op.op_class == "matmul") for op in ops]
        )
        compute_s = flops / peak
        l2_bw = target.l2_bandwidth_gbps * 1e9 or target.memory_bandwidth
        memory_s = dram / target.memory_bandwidth + np.maximum(nbytes - dram, 0.0) / l2_bw
        busy = (flops > 0) | (nbytes > 0)
        latency_ns = np.where(
            busy, np.maximum(compute_s, memory_s) * 1e9 + target.launch_overhead_ns, 0.0
        )
        cycles = np.rint(latency_ns * target.clock_ghz)
        bound = np.where(compute_s >= memory_s, "compute", "memory")
        return [
            OpCost(
                cycles=int(c),
                latency_ns=float(t),
                dram_bytes=int(d),
                model=f"{self.name}+l2" if "dram_bytes" in op.attrs else self.name,
                extra={"bound": str(b)},
            )
            for op, c, t, b, d in zip(ops, cycles, latency_ns, bound, dram, strict=True)
        ]
