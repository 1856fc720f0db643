"""Speed and agreement: the same layers through SCALE-Sim 3.0.0 and the closed-form model.

Prints one row per layer: SCALE-Sim's wall time, the model's, their ratio, and whether every
number the model claims as exact equals SCALE-Sim's. SCALE-Sim only runs on layers of at most
``--max-cycles`` cycles (it steps through every cycle in Python, about a minute for a 1024^3 GEMM
on 128x128), so the benchmark finishes in minutes; larger layers show the model's time alone.

    python benchmarks/systolic_vs_scalesim.py [--max-cycles 100000]
"""

from __future__ import annotations

import argparse
import tempfile
import time
import timeit
from dataclasses import dataclass

from stablehlo_perf.analysis import systolic
from stablehlo_perf.analysis.scalesim_io import run_scalesim
from stablehlo_perf.analysis.systolic import ArrayConfig, LayerResult

TPU = ArrayConfig(128, 128, "ws", 4096, 4096, 4096)


@dataclass(frozen=True)
class Bench:
    """A named GEMM (M, N, K) or conv (H, W, R, S, C, N, stride) layer on an array."""

    name: str
    dims: tuple[int, ...]
    arr: ArrayConfig

    @property
    def gemm(self) -> bool:
        return len(self.dims) == 3

    def model(self) -> LayerResult:
        if self.gemm:
            return systolic.simulate_gemm(*self.dims, self.arr)
        return systolic.simulate_conv(*self.dims, self.dims[-1], self.arr)


LAYERS = [
    Bench("gemm 64^3 8x8 os 1KB", (64, 64, 64), ArrayConfig(8, 8, "os", 1, 1, 16)),
    Bench(
        "conv 28x28 3x3 32x32 is", (28, 28, 3, 3, 16, 32, 1), ArrayConfig(32, 32, "is", 64, 64, 64)
    ),
    Bench("gemm 100x300x200 16x8 ws", (100, 300, 200), ArrayConfig(16, 8, "ws", 64, 64, 256)),
    # ResNet-50 convs (padding folded into the ifmap), 128x128 WS.
    Bench("resnet50 conv1 7x7/2", (230, 230, 7, 7, 3, 64, 2), TPU),
    Bench("resnet50 res2 1x1 64->64", (56, 56, 1, 1, 64, 64, 1), TPU),
    Bench("resnet50 res2 3x3 64", (58, 58, 3, 3, 64, 64, 1), TPU),
    Bench("resnet50 res3 1x1 256->512/2", (56, 56, 1, 1, 256, 512, 2), TPU),
    Bench("resnet50 res5 3x3 512", (9, 9, 3, 3, 512, 512, 1), TPU),
    # BERT-base (sequence 128) and GPT-2 / GPT-3 GEMMs, 128x128 WS.
    Bench("bert-base qkv 128x2304x768", (128, 2304, 768), TPU),
    Bench("bert-base ffn1 128x3072x768", (128, 3072, 768), TPU),
    Bench("bert-base ffn2 128x768x3072", (128, 768, 3072), TPU),
    Bench("gemm 512^3", (512, 512, 512), TPU),
    Bench("gemm 1024^3", (1024, 1024, 1024), TPU),
    Bench("gpt2 ffn1 1024x3072x768", (1024, 3072, 768), TPU),
    Bench("gpt3 qkv 2048x36864x12288", (2048, 36864, 12288), TPU),
]

COUNT_FIELDS = (
    ("Total Cycles", "total_cycles"),
    ("Stall Cycles", "stall_cycles"),
    ("Overall Util %", "overall_util_pct"),
    ("Mapping Efficiency %", "mapping_eff_pct"),
    ("Compute Util %", "compute_util_pct"),
)
DETAIL_FIELDS = (
    ("SRAM IFMAP Reads", "ifmap_sram_reads", "count"),
    ("SRAM Filter Reads", "filter_sram_reads", "count"),
    ("SRAM OFMAP Writes", "ofmap_sram_writes", "count"),
    ("DRAM IFMAP Reads", "ifmap_dram_reads", "dram"),
    ("DRAM Filter Reads", "filter_dram_reads", "dram"),
    ("DRAM OFMAP Writes", "ofmap_dram_writes", "dram"),
)


def matches(ours: LayerResult, compute: dict[str, str], detail: dict[str, str]) -> bool:
    """Every number the model claims as exact equals SCALE-Sim's (floats to 1e-12 relative)."""
    pairs = [(compute[c], getattr(ours, a)) for c, a in COUNT_FIELDS if ours.exact_cycles]
    pairs += [
        (detail[c], getattr(ours, a))
        for c, a, kind in DETAIL_FIELDS
        if kind == "count" or ours.exact_dram
    ]
    return all(abs(float(theirs) - mine) <= 1e-12 * max(1.0, abs(mine)) for theirs, mine in pairs)


def model_seconds(bench: Bench) -> float:
    """Best-of-5 mean wall time of one model call."""
    timer = timeit.Timer(bench.model)
    number, _ = timer.autorange()
    return min(timer.repeat(5, number)) / number


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--max-cycles", type=int, default=100_000, help="longest layer (cycles) to run SCALE-Sim on"
    )
    args = parser.parse_args(argv)
    header = f"{'layer':32} {'cycles':>14} {'SCALE-Sim s':>12} {'model us':>9} {'ratio':>10}  match"
    print(header)
    print("-" * len(header))
    for bench in LAYERS:
        ours = bench.model()
        t_model = model_seconds(bench)
        if ours.total_cycles > args.max_cycles:
            t_sim, ratio, verdict = "skipped", "", "-"
        else:
            with tempfile.TemporaryDirectory() as folder:
                start = time.perf_counter()
                reports = run_scalesim(folder, [bench.dims], bench.arr, bench.gemm)
                seconds = time.perf_counter() - start
            ok = matches(ours, reports["COMPUTE_REPORT"][0], reports["DETAILED_ACCESS_REPORT"][0])
            verdict = ("yes" if ok else "NO") + ("" if ours.exact_dram else " (DRAM est.)")
            t_sim, ratio = f"{seconds:.3f}", f"{seconds / t_model:.2e}"
        print(
            f"{bench.name:32} {ours.total_cycles:>14} {t_sim:>12} {t_model * 1e6:>9.1f} {ratio:>10}  {verdict}"
        )


if __name__ == "__main__":
    main()
