"""Measure a PASCAL cache calibration on an NVIDIA GPU (paper §4.5, §5.1, Algorithm 3).

Runs a shared cyclic scan kernel written in Pallas (Triton backend) with the knobs of the
configuration key ``z = (o, pi, d, m)``: ``o * SMs`` programs (one per resident worker),
``pi = sync`` (one pipeline stage, loads wait before use) or ``pi = tma`` (``d`` software
pipeline stages of asynchronous copies), and ``m`` dependent 128x64x64 matrix products per
block.  Each block is one 16 KiB FP16 tile of a ring of ``N`` blocks scanned ``W`` times
from an aligned start.  DRAM-to-L2 fill bytes come from Nsight Compute (``ncu``, metric
``dram__bytes_read.sum``), which must be on ``PATH`` and allowed to read counters.  A
Pallas 128x128x64 GEMM provides the GEMM references of §4.6.

Usage on a GPU machine::

    python -m stablehlo_perf.runtime.gpu_cache_calibration --device h200 \\
        --l2-mib 50 --out h200_cache_calibration.json

This module imports nothing GPU-specific at import time (JAX is imported inside the
functions that launch kernels), and no test depends on it.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from stablehlo_perf.analysis.cache_predictor import (
    HORIZONS,
    Calibration,
    ConfigKey,
    GemmReference,
    ScanReference,
)

BLOCK_ROWS, BLOCK_COLS = 128, 64  # one 16 KiB FP16 block (paper §4.2: b = 16 KiB)
BLOCK_BYTES = BLOCK_ROWS * BLOCK_COLS * 2
FILL_METRIC = "dram__bytes_read.sum"
SCAN_KERNEL = "pascal_scan"
GEMM_KERNEL = "pascal_gemm"


@dataclass(frozen=True)
class ScanJob:
    """One scan launch: configuration key, ring size and number of scans."""

    occupancy: int
    path: str
    depth: int
    compute: int
    n_blocks: int
    scans: int
    sms: int

    @property
    def key(self) -> ConfigKey:
        """The configuration key of this launch."""
        return ConfigKey(self.occupancy, self.path, self.depth, self.compute)

    @property
    def workers(self) -> int:
        """Resident programs ``M = o * SMs``."""
        return self.occupancy * self.sms


@dataclass(frozen=True)
class GemmJob:
    """One FP16 GEMM launch with ``(nr, nc, nk)`` tiles of 128x128x64."""

    nr: int
    nc: int
    nk: int
    stages: int = 3


def _scan_call(job: ScanJob, interpret: bool = False) -> Callable[..., Any]:
    """Build the jitted Pallas scan kernel for ``job`` (imports JAX lazily)."""
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import triton as plt

    n, steps, m = job.n_blocks, job.n_blocks * job.scans, job.compute

    def pascal_scan(x_ref, w_ref, o_ref):
        w = w_ref[...]

        def body(i, acc):
            tile = x_ref[i % n].astype(jnp.float32)
            for _ in range(m):
                acc = jnp.dot(acc.astype(jnp.float16), w, preferred_element_type=jnp.float32)
            return acc + tile

        zero = jnp.zeros((BLOCK_ROWS, BLOCK_COLS), jnp.float32)
        o_ref[...] = jax.lax.fori_loop(0, steps, body, zero)

    stages = 1 if job.path == "sync" else job.depth
    call = pl.pallas_call(
        pascal_scan,
        grid=(job.workers,),
        in_specs=[
            pl.BlockSpec((n, BLOCK_ROWS, BLOCK_COLS), lambda p: (0, 0, 0)),
            pl.BlockSpec((BLOCK_COLS, BLOCK_COLS), lambda p: (0, 0)),
        ],
        out_specs=pl.BlockSpec((None, BLOCK_ROWS, BLOCK_COLS), lambda p: (p, 0, 0)),
        out_shape=jax.ShapeDtypeStruct((job.workers, BLOCK_ROWS, BLOCK_COLS), jnp.float32),
        compiler_params=plt.CompilerParams(num_warps=4, num_stages=stages),
        name=SCAN_KERNEL,
        interpret=interpret,
    )
    return jax.jit(call)


def _gemm_call(job: GemmJob, interpret: bool = False) -> Callable[..., Any]:
    """Build a raster-ordered 128x128x64 FP16 Pallas GEMM (paper App. C.8)."""
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import triton as plt

    bm, bn, bk = 128, 128, 64

    def pascal_gemm(a_ref, b_ref, o_ref):
        def body(k, acc):
            a = a_ref[:, pl.ds(k * bk, bk)]
            b = b_ref[pl.ds(k * bk, bk), :]
            return acc + jnp.dot(a, b, preferred_element_type=jnp.float32)

        acc = jax.lax.fori_loop(0, job.nk, body, jnp.zeros((bm, bn), jnp.float32))
        o_ref[...] = acc

    call = pl.pallas_call(
        pascal_gemm,
        grid=(job.nr, job.nc),
        in_specs=[
            pl.BlockSpec((bm, job.nk * bk), lambda i, j: (i, 0)),
            pl.BlockSpec((job.nk * bk, bn), lambda i, j: (0, j)),
        ],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j: (i, j)),
        out_shape=jax.ShapeDtypeStruct((job.nr * bm, job.nc * bn), jnp.float32),
        compiler_params=plt.CompilerParams(num_warps=4, num_stages=job.stages),
        name=GEMM_KERNEL,
        interpret=interpret,
    )
    return jax.jit(call)


def run_scan(job: ScanJob, interpret: bool = False) -> Any:
    """Launch the scan once (the process that ``ncu`` profiles); ``interpret`` runs on CPU."""
    import jax
    import jax.numpy as jnp

    key = jax.random.PRNGKey(0)
    x = jax.random.normal(key, (job.n_blocks, BLOCK_ROWS, BLOCK_COLS), jnp.float16)
    w = (jnp.eye(BLOCK_COLS) * 0.5).astype(jnp.float16)
    return _scan_call(job, interpret)(x, w).block_until_ready()


def run_gemm(job: GemmJob, interpret: bool = False) -> Any:
    """Launch the GEMM once (the process that ``ncu`` profiles); ``interpret`` runs on CPU."""
    import jax
    import jax.numpy as jnp

    ka, kb = jax.random.split(jax.random.PRNGKey(0))
    a = jax.random.normal(ka, (job.nr * 128, job.nk * 64), jnp.float16)
    b = jax.random.normal(kb, (job.nk * 64, job.nc * 128), jnp.float16)
    return _gemm_call(job, interpret)(a, b).block_until_ready()


def smoke() -> int:
    """Run tiny scan and GEMM kernels in Pallas interpret mode (CPU) against jnp references."""
    import jax
    import jax.numpy as jnp

    job = ScanJob(1, "tma", 3, 2, 4, 2, 2)
    out = run_scan(job, interpret=True)
    x = jax.random.normal(jax.random.PRNGKey(0), (4, BLOCK_ROWS, BLOCK_COLS), jnp.float16)
    w = (jnp.eye(BLOCK_COLS) * 0.5).astype(jnp.float16)
    acc = jnp.zeros((BLOCK_ROWS, BLOCK_COLS), jnp.float32)
    for i in range(job.n_blocks * job.scans):
        for _ in range(job.compute):
            acc = jnp.dot(acc.astype(jnp.float16), w, preferred_element_type=jnp.float32)
        acc = acc + x[i % job.n_blocks].astype(jnp.float32)
    scan_err = float(jnp.abs(out - acc[None]).max())
    gemm = GemmJob(2, 3, 2)
    ka, kb = jax.random.split(jax.random.PRNGKey(0))
    a = jax.random.normal(ka, (gemm.nr * 128, gemm.nk * 64), jnp.float16)
    b = jax.random.normal(kb, (gemm.nk * 64, gemm.nc * 128), jnp.float16)
    ref = jnp.dot(a, b, preferred_element_type=jnp.float32)
    gemm_err = float(jnp.abs(run_gemm(gemm, interpret=True) - ref).max())
    print(f"scan kernel max error {scan_err:.3g}, GEMM kernel max error {gemm_err:.3g}")
    return 0 if scan_err == 0.0 and gemm_err < 1e-3 else 1


def sm_count() -> int:
    """Streaming multiprocessors of the first CUDA device."""
    import jax

    dev = jax.devices("gpu")[0]
    return int(getattr(dev, "core_count", 0)) or int(os.environ.get("PASCAL_SMS", "0"))


def parse_ncu_csv(text: str, kernel: str, metric: str = FILL_METRIC) -> float:
    """Sum ``metric`` (converted to bytes) over the rows of ``kernel`` in ``ncu --csv`` output."""
    scale = {"byte": 1.0, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "KB": 1e3, "MB": 1e6}
    start = text.find('"ID"')
    if start < 0:
        raise ValueError("no ncu CSV table in the output")
    total, rows = 0.0, 0
    for row in csv.DictReader(io.StringIO(text[start:])):
        if row.get("Metric Name") != metric or kernel not in row.get("Kernel Name", ""):
            continue
        value = float(row["Metric Value"].replace(",", ""))
        total += value * scale.get(row.get("Metric Unit", "byte"), 1.0)
        rows += 1
    if rows == 0:
        raise ValueError(f"ncu reported no {metric} for kernel {kernel!r}")
    return total


def _profile(payload: dict, kernel: str) -> float:
    """Run this module's child mode under ``ncu`` and return the kernel's DRAM read bytes."""
    ncu = shutil.which("ncu")
    if ncu is None:
        raise RuntimeError("Nsight Compute (ncu) is not on PATH; cannot read L2 fill counters")
    cmd = [
        ncu,
        "--csv",
        "--metrics",
        FILL_METRIC,
        "--kernel-name",
        f"regex:{kernel}",
        "--target-processes",
        "all",
        sys.executable,
        "-m",
        __name__,
        "--child",
        json.dumps(payload),
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=1800)
    return parse_ncu_csv(out.stdout, kernel)


def measure_scan(job: ScanJob) -> float:
    """Cumulative DRAM fills of one scan launch, in blocks."""
    return _profile({"scan": asdict(job)}, SCAN_KERNEL) / BLOCK_BYTES


def measure_gemm(job: GemmJob) -> float:
    """DRAM fill bytes of one GEMM launch."""
    return _profile({"gemm": asdict(job)}, GEMM_KERNEL)


def calibrate(
    device: str,
    l2_bytes: int,
    families: Sequence[tuple[int, str, int]],
    computes: Sequence[int],
    sizes: Sequence[int],
    gemm_grid: tuple[Sequence[int], Sequence[int], Sequence[int]],
    repeats: int = 2,
) -> Calibration:
    """Measure every reference configuration at every size and horizon (paper §4.5)."""
    sms = sm_count()
    capacity = l2_bytes // BLOCK_BYTES
    scans = []
    for occupancy, path, depth in families:
        for m in computes:
            for n in sizes:
                fills = {}
                for w in HORIZONS:
                    job = ScanJob(occupancy, path, depth, m, n, w, sms)
                    fills[w] = tuple(measure_scan(job) for _ in range(repeats))
                scans.append(
                    ScanReference(ConfigKey(occupancy, path, depth, m), n, occupancy * sms, fills)
                )
    gemms = [
        GemmReference(
            nr, nc, nk, sms, tuple(measure_gemm(GemmJob(nr, nc, nk)) for _ in range(repeats))
        )
        for nr in gemm_grid[0]
        for nc in gemm_grid[1]
        for nk in gemm_grid[2]
    ]
    return Calibration(
        device=device,
        source="measured",
        capacity_blocks=capacity,
        block_bytes=BLOCK_BYTES,
        scans=tuple(scans),
        gemms=tuple(gemms),
        note=f"measured with ncu {FILL_METRIC} on {sms} SMs; Pallas Triton scan and GEMM",
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: measure a calibration, or (``--child``) launch one profiled kernel."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--device", default="gpu")
    ap.add_argument("--l2-mib", type=float, help="effective L2 capacity (paper §5.1)")
    ap.add_argument("--out", default="cache_calibration.json")
    ap.add_argument("--quick", action="store_true", help="small grid for a smoke run")
    ap.add_argument("--smoke", action="store_true", help="run both kernels in interpret mode")
    args = ap.parse_args(argv)
    if args.smoke:
        return smoke()
    if args.child:
        payload = json.loads(args.child)
        if "scan" in payload:
            run_scan(ScanJob(**payload["scan"]))
        else:
            run_gemm(GemmJob(**payload["gemm"]))
        return 0
    if args.l2_mib is None:
        ap.error("--l2-mib is required")
    l2 = int(args.l2_mib * 2**20)
    c = l2 // BLOCK_BYTES
    if args.quick:
        families, computes = [(1, "sync", 0), (1, "tma", 3)], [0, 1, 2]
        sizes, grid = [2 ** math.ceil(math.log2(2 * c))], ((8, 16), (8, 16), (8, 16))
    else:
        families = [(o, "sync", 0) for o in (1, 2)] + [
            (o, "tma", d) for o in (1, 2) for d in (2, 3, 4)
        ]
        computes = [0, 1, 2, 8, 9, 11]
        # powers of two keep the Pallas Triton block shapes legal
        sizes = [2 ** math.ceil(math.log2(c * f)) for f in (1.5, 2.5, 4.0)]
        grid = ((4, 16, 64), (4, 16, 32), (16, 64))
    cal = calibrate(args.device, l2, families, computes, sizes, grid)
    cal.save(args.out)
    print(f"wrote {args.out}: {len(cal.scans)} scan and {len(cal.gemms)} GEMM references")
    return 0


if __name__ == "__main__":
    sys.exit(main())
