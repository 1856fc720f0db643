"""Host roofline parameters fitted from a loop calibration, and the host target using them."""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import op_infos
from stablehlo_perf.analysis import calibration_files as cf
from stablehlo_perf.analysis.host_params import (
    HOST_PARAMS_KEY,
    INLINE_FLOPS,
    UNFITTED_DTYPES,
    UNFITTED_ROWS,
    HostParams,
    _row_flops,
    _row_splits,
    _row_wakes,
    eigen_uses_pool,
    fit_host_params,
    parallel_tasks,
    reduce_wake_fit,
    runs_on_eigen,
    splits_over_threads,
    wakes_by_time,
    wakes_pool,
    xla_cpu_flops,
)
from stablehlo_perf.analysis.targets import load_target

NAN = math.nan
ROWS = [
    # 2^20 f32 adds: 12 MiB moved in 250 us -> 50.33 GB/s; in 200 us -> 62.91 GB/s.
    ("add", "f32", (1 << 20,), 250.0, NAN),
    ("multiply", "f32", (1024, 1024), 200.0, NAN),
    ("add", "f32", (1 << 21,), 420.0, NAN),  # 25.17 MB / 420 us = 59.92 GB/s
    ("add", "bf16", (1 << 22,), 900.0, NAN),  # not f32: ignored for bandwidth
    ("add", "f32", (524288, 3), 1000.0, NAN),  # rows of 3: the vector tail's time, no bandwidth
    # Small cheap elementwise ops (<= 1024 elements): the per-kernel overhead is their
    # median, 400 ns; 4096 elements do work beyond it, and so does a transcendental.
    ("add", "f32", (32,), 0.3, NAN),
    ("maximum", "f32", (1024,), 0.5, NAN),
    ("exponential", "f32", (1024,), 2.5, NAN),
    ("maximum", "bf16", (4096,), 3.0, NAN),
    ("transpose", "f32", (32, 32), 5.0, NAN),  # movement: not an overhead sample
    ("fft", "f32", (1024,), 12.0, NAN),  # nor library calls and comparator reduces
    ("argmax", "f32", (1024,), 3.0, NAN),
    ("sort", "f32", (1024,), 20.0, NAN),
    # Dots: the eight with the most FLOPs set the rate (median): 2*512^3 / 2000 us.
    *[("dot_general", "f32", (1, 8, 8, 8), 1.0, NAN)] * 3,
    *[("dot_general", "f32", (1, 256, 256, 256), 400.0, NAN)] * 3,
    *[("dot_general", "f32", (1, 512, 512, 512), 2000.0, NAN)] * 5,
]


def test_fit_host_params_by_hand() -> None:
    p = fit_host_params(ROWS)
    assert p.bandwidth_gbps == pytest.approx(12 * 2**21 / 420.0 / 1e3)  # median of three
    assert p.kernel_overhead_ns == pytest.approx(400.0)
    assert p.f32_tflops == pytest.approx(2 * 512**3 / 2000.0 / 1e6)
    assert math.isnan(p.program_overhead_ns) and math.isnan(p.threadpool_wake_ns)


def test_call_overhead_is_a_step_in_kernel_time() -> None:
    """Programs of short kernels pay 5 us beyond them (median), of long ones 205 us: base 5,
    wake 200,
    and the threshold falls between the longest short kernel (8 us) and the shortest long one
    (30 us). One outlier per side moves medians, not the fit."""
    short = [(1.0, 6.0), (2.0, 4.0), (4.0, 5.0), (8.0, 5.0), (3.0, 90.0)]
    long = [(30.0, 205.0), (60.0, 205.0), (100.0, 206.0), (500.0, 204.0), (40.0, 20.0)]
    rows = [("add", "f32", (1024,), k, k + o) for k, o in [*short, *long]]
    p = fit_host_params(rows)
    assert p.program_overhead_ns == pytest.approx(5000.0)
    assert p.threadpool_wake_ns == pytest.approx(200000.0)
    assert 8000.0 < p.parallel_kernel_ns <= 30000.0


def test_rows_of_ops_xla_undercounts_stay_out_of_the_overhead_fit() -> None:
    """The step fit of `test_call_overhead_is_a_step_in_kernel_time`'s rows is unmoved by
    remainders, integer divisions, sines, cosines, tangents, negates and floors
    (`UNFITTED_ROWS`) and by f64 and f16 rows (`UNFITTED_DTYPES`) whose 15-25 us kernels paid
    no wake, where the same rows as f32 adds pull the threshold above them."""
    short = [(1.0, 6.0), (2.0, 4.0), (4.0, 5.0), (8.0, 5.0), (3.0, 90.0)]
    long = [(30.0, 205.0), (60.0, 205.0), (100.0, 206.0), (500.0, 204.0), (40.0, 20.0)]
    rows = [("add", "f32", (1024,), k, k + o) for k, o in [*short, *long]]
    fitted = fit_host_params(rows)
    ops = ("remainder", "integer_divide", "sine", "cosine", "tan", "negate", "floor")
    slow = [(op, "f32", (1024,), k, k + 5.0) for op in ops for k in (15.0, 20.0, 25.0)]
    assert set(ops) <= UNFITTED_ROWS and {"f64", "f16"} <= UNFITTED_DTYPES
    assert fit_host_params([*rows, *slow]) == fitted
    # f64 and f16 rows too (the parameters were chosen on f32 and bf16 rows).
    for dtype in ("f64", "f16"):
        assert fit_host_params([*rows, *(("add", dtype, *r[2:]) for r in slow)]) == fitted
    as_adds = fit_host_params([*rows, *(("add", *r[1:]) for r in slow)])
    assert as_adds.parallel_kernel_ns > 25000.0 >= fitted.parallel_kernel_ns


def test_a_loop_kernel_split_over_threads_wakes_the_pool_whatever_its_time() -> None:
    """XLA:CPU splits a loop kernel writing >= 256 KiB over its threads, which wakes the pool
    however short the kernel: 4 us adds of 65,536 f32 pay the 200 us wake-up that 4 us adds
    of 256 elements do not. No threshold in time can tell them apart; the split flag does."""
    small = [("add", "f32", (2048,), k, k + 5.0) for k in (2.0, 3.0, 4.0, 5.0)]
    split = [("add", "f32", (1 << 16,), k, k + 205.0) for k in (2.0, 3.0, 4.0, 5.0)]
    long = [("dot_general", "f32", (1, 256, 256, 256), k, k + 205.0) for k in (300.0, 400.0)]
    p = fit_host_params([*small, *split, *long])
    assert p.program_overhead_ns == pytest.approx(5000.0)
    assert p.threadpool_wake_ns == pytest.approx(200000.0)
    assert p.parallel_kernel_ns > 5000.0  # the short split kernels did not drag it down
    host = replace(
        load_target("host"), threadpool_wake_ns=200e3, parallel_kernel_ns=20e3, multi_kernel_ns=0.0
    )
    assert host.call_overhead_ns(4e3, wakes=True) - host.call_overhead_ns(4e3) == pytest.approx(
        200e3
    )


def test_a_library_call_wakes_the_pool_whatever_its_time() -> None:
    """Dots, convolutions and FFTs run as library calls on XLA:CPU's pool: 3 us dots pay the
    200 us wake-up that 3 us adds do not, so they count as woken in the fit (without it
    they sat among the short kernels, and the base and threshold moved to them)."""
    small = [("add", "f32", (2048,), k, k + 5.0) for k in (2.0, 3.0, 4.0, 5.0)]
    dots = [("dot_general", "f32", (1, 8, 8, 8), k, k + 205.0) for k in (2.0, 3.0, 4.0, 5.0, 6.0)]
    fft = [("fft", "f32", (64,), 3.0, 208.0)]
    long = [("exponential", "bf16", (2048,), k, k + 205.0) for k in (300.0, 400.0)]
    p = fit_host_params([*small, *dots, *fft, *long])
    assert p.program_overhead_ns == pytest.approx(5000.0)
    assert p.threadpool_wake_ns == pytest.approx(200000.0)
    assert p.parallel_kernel_ns > 5000.0
    assert p.threadpool_wake_slope == math.inf  # 2 us dots pay all of it: a plain step
    assert wakes_pool(["dot_general"], False)
    assert wakes_pool(["convolution"], False)
    assert not wakes_pool(["add", "tanh"], False)
    assert wakes_pool(["add"], True)


def _sloped_host(**change: float) -> Any:
    """The host target with a 200 us wake at 3 x the pool's time, no other per-call term
    (but those in `change`, which override these)."""
    terms = {
        "program_overhead_ns": 0.0,
        "threadpool_wake_ns": 200e3,
        "threadpool_wake_slope": 3.0,
        "multi_kernel_ns": 0.0,
        "kernel_dispatch_ns": 0.0,
        "long_call_start_ns": math.inf,
    }
    return replace(load_target("host"), **{**terms, **change})


def test_a_short_woken_call_pays_a_slope_of_its_kernels_time_up_to_the_wake() -> None:
    """Dots of 2, 4 and 8 us pay 3 x their time (11, 17, 29 us with the 5 us base) and long
    ones the whole 200 us wake: the step fits base 5 and wake 200 (its woken rows' median),
    the slope 3 exactly (no other candidate fits every row). A target with it charges a
    woken call min(3 x its pool kernels' time, the wake)."""
    adds = [("add", "f32", (2048,), k, k + 5.0) for k in (2.0, 3.0, 4.0, 5.0)]
    short = [("dot_general", "f32", (1, 8, 8, 8), k, k + 5.0 + 3.0 * k) for k in (2.0, 4.0, 8.0)]
    long = [("dot_general", "f32", (1, 256, 256, 256), k, k + 205.0) for k in (100.0, 200.0)]
    long += [("dot_general", "f32", (1, 256, 256, 256), k, k + 205.0) for k in (300.0, 400.0)]
    p = fit_host_params([*adds, *short, *long, ("exponential", "bf16", (2048,), 500.0, 705.0)])
    assert p.program_overhead_ns == pytest.approx(5000.0)
    assert p.threadpool_wake_ns == pytest.approx(200000.0)
    assert p.threadpool_wake_slope == 3.0
    host = _sloped_host()
    assert host.call_overhead_ns(4e3, wakes=True, pool_ns=10e3) == pytest.approx(30e3)
    assert host.call_overhead_ns(4e3, wakes=True, pool_ns=1e6) == pytest.approx(200e3)
    assert host.call_overhead_ns(4e3, wakes=True) == pytest.approx(200e3)  # pool time unknown
    # Its multi-kernel cost too (50 us here): a two-kernel call of 10 us on the pool pays 30.
    multi = _sloped_host(multi_kernel_ns=50e3, threadpool_wake_ns=0.0)
    assert multi.call_overhead_ns(4e3, kernels=2, wakes=True, pool_ns=10e3) == pytest.approx(30e3)
    assert multi.call_overhead_ns(4e3, kernels=2, wakes=True, pool_ns=1e6) == pytest.approx(50e3)


def test_a_reduction_handed_to_ynnpack_wakes_the_pool_whatever_its_time() -> None:
    """XLA:CPU hands float reductions of 4096+ elements to YNNPACK (`fusion.cpu_reduce_mode`),
    a library call: the AMD reference's reduce rows of 5-50 us kernels paid a median 145 us
    of call overhead where adds paid 71. Counted as woken, 10-20 us sums and adds of the same
    kernel times no longer pull the threshold down to them."""
    adds = [("add", "f32", (256 * j,), k, k + 5.0) for j, k in enumerate((2.0, 3, 10, 15, 20))]
    sums = [("reduce", "f32", (64, 64 * j), k, k + 205.0) for j, k in ((1, 10.0), (2, 15), (4, 20))]
    tiny = [("reduce", "f32", (8, 64), 2.5, 7.5)]  # 512 elements: a loop kernel of XLA's own
    long = [("exponential", "bf16", (2048,), k, k + 205.0) for k in (300.0, 400.0)]
    p = fit_host_params([*adds, *sums, *tiny, *long])
    assert p.program_overhead_ns == pytest.approx(5000.0)
    assert p.threadpool_wake_ns == pytest.approx(200000.0)
    assert 20000.0 < p.parallel_kernel_ns <= 300000.0


SUM = """
func.func @main(%a: tensor<{n}xf32>) -> tensor<f32> {{
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %0 = stablehlo.reduce(%a init: %z) applies stablehlo.add across dimensions = [0]
      : (tensor<{n}xf32>, tensor<f32>) -> tensor<f32>
  return %0 : tensor<f32>
}}
"""


def test_a_program_summing_4096_floats_pays_the_wake(tmp_path: Path) -> None:
    """The pass applies the same rule: a sum of 4,096 f32 (a YNNPACK call) pays the 150 ns
    wake-up on a target whose parallel-kernel threshold no kernel reaches; of 4,095 not."""
    import stablehlo_perf as sp

    target = tmp_path / "unit_cpu_calls.toml"
    target.write_text(
        UNIT_CPU.read_text()
        + "\n[program]\noverhead_ns = 7.0\nthreadpool_wake_ns = 150.0\n"
        + "parallel_kernel_ns = 1e9\nmulti_kernel_ns = 40.0\nkernel_dispatch_ns = 3.0\n"
    )
    ynn = sp.analyze(SUM.format(n=4096), target=str(target)).report
    loop = sp.analyze(SUM.format(n=4095), target=str(target)).report
    assert ynn.call_overhead_ns == pytest.approx(7.0 + 150.0 + 3.0)
    assert loop.call_overhead_ns == pytest.approx(7.0 + 3.0)


def test_a_ynnpack_reduce_pays_the_whole_wake_from_a_size_on() -> None:
    """Sums up to 64x512 f32 (128 KiB) pay nothing beyond the base, larger ones the whole
    200 us wake however short their kernels (4-12 us, where dots of 2-8 us pay 3 x their
    time): the fit puts the size at 131072 bytes, keeps the slope to the dots and the wake
    at 200 us. Where every sum pays it (the Xeon reference), the size is 0."""
    adds = [("add", "f32", (2048,), k, k + 5.0) for k in (2.0, 3.0, 4.0, 5.0)]
    short = [("dot_general", "f32", (1, 8, 8, 8), k, k + 5.0 + 3.0 * k) for k in (2.0, 4.0, 8.0)]
    long = [("dot_general", "f32", (1, 256, 256, 256), k, k + 205.0) for k in (100.0, 200.0)]
    small = [
        ("reduce", "f32", (64, c), k, k + 5.0) for c, k in ((128, 1.0), (256, 1.5), (512, 2.0))
    ]
    large = [
        ("reduce", "f32", (64, c), k, k + 205.0) for c, k in ((513, 4.0), (1000, 8), (2048, 12))
    ]
    p = fit_host_params([*adds, *short, *long, *small, *large])
    assert p.reduce_wake_bytes == 64 * 512 * 4
    assert p.threadpool_wake_ns == pytest.approx(200000.0)
    assert p.threadpool_wake_slope == 3.0
    woken = fit_host_params(
        [*adds, *short, *long, *((*r[:4], r[3] + 205.0) for r in small), *large]
    )
    assert woken.reduce_wake_bytes == 0.0
    sizes = np.array([4096.0, 8192.0, 16384.0, 32768.0])
    assert reduce_wake_fit(sizes, np.array([1.0, 2.0, 199.0, 201.0]), 200.0) == 8192.0
    assert math.isnan(reduce_wake_fit(np.array([]), np.array([]), 200.0))


def test_a_program_summing_more_than_the_size_pays_the_whole_wake(tmp_path: Path) -> None:
    """The pass applies it: on a target whose YNNPACK reduces wake the pool above 128 KiB
    and whose wake slope (0.05 x the pool's time) would charge a short kernel almost none of
    the 150 ns, a sum of 32,768 f32 pays no wake and one of 32,769 all of it."""
    import stablehlo_perf as sp

    target = _unit_cpu_with(
        tmp_path,
        "unit_cpu_reduce_wake",
        "overhead_ns = 7.0\nthreadpool_wake_ns = 150.0\nparallel_kernel_ns = 1e9\n"
        "threadpool_wake_slope = 0.05\nreduce_wake_bytes = 131072.0\n",
    )
    below = sp.analyze(SUM.format(n=32768), target=target).report
    above = sp.analyze(SUM.format(n=32769), target=target).report
    assert below.call_overhead_ns == pytest.approx(7.0)
    assert above.call_overhead_ns == pytest.approx(7.0 + 150.0)


def test_a_split_loop_kernel_pays_the_whole_wake_however_short() -> None:
    """Adds of 64x1024 f32 (768 KiB accessed: XLA splits them in two) of 4-12 us kernels pay
    the whole 200 us wake, where dots of 2-8 us pay 3 x their time (the Zen 4 reference's
    split loop rows of 4-16 us kernels paid a median 60-75 us beyond the base, its dots 14-28):
    the fit keeps the slope to the dots, which the adds would pull up. Adds that pay 230 us
    set a split kernel's wake of their own, 230 us (`split_wake_ns`), the dots' stays 200."""
    adds = [("add", "f32", (2048,), k, k + 5.0) for k in (2.0, 3.0, 4.0, 5.0)]
    short = [("dot_general", "f32", (1, 8, 8, 8), k, k + 5.0 + 3.0 * k) for k in (2.0, 4.0, 8.0)]
    long = [("dot_general", "f32", (1, 256, 256, 256), k, k + 205.0) for k in (100.0, 200.0)]
    split = [("add", "f32", (64, 1024), k, k + 205.0) for k in (4.0, 6.0, 8.0, 10.0, 12.0)]
    assert all(_row_splits(*r[:3]) for r in split) and not _row_splits(*adds[0][:3])
    p = fit_host_params([*adds, *short, *long, *split])
    assert p.threadpool_wake_ns == pytest.approx(200000.0)
    assert p.threadpool_wake_slope == 3.0
    assert p.split_wake_ns == pytest.approx(200000.0)
    long += [("dot_general", "f32", (1, 256, 256, 256), k, k + 205.0) for k in (300.0, 400.0)]
    dearer = [(*r[:4], r[4] + 30.0) for r in split]
    p = fit_host_params([*adds, *short, *long, *dearer])
    assert p.threadpool_wake_ns == pytest.approx(200000.0)
    # (less the 1 us a long-call ramp fitted on the adds' excess over the 200 takes of it)
    assert p.split_wake_ns == pytest.approx(230000.0, abs=1000.0)


BINARY = """
func.func @main(%a: tensor<64x{c}xf32>, %b: tensor<64x{c}xf32>) -> tensor<64x{c}xf32> {{
  %0 = stablehlo.add %a, %b : tensor<64x{c}xf32>
  return %0 : tensor<64x{c}xf32>
}}
"""


def test_a_program_of_a_split_add_pays_the_whole_wake(tmp_path: Path) -> None:
    """The pass applies it: on a 2-core target whose wake slope (0.001 x the pool's time)
    would charge the add's 8 us kernel 8 ns of the 150 ns wake and whose threshold no kernel
    reaches, an add of two 64x1024 f32 (split in two) pays all of it, one of 64x512 (384 KiB
    accessed: one task) none. Where the target has a split kernel's wake of its own (170 ns),
    the split add pays it, a sum of 32,769 f32 (a YNNPACK reduce) the 150 ns."""
    import stablehlo_perf as sp

    program = (
        "overhead_ns = 7.0\nthreadpool_wake_ns = 150.0\nparallel_kernel_ns = 1e9\n"
        "threadpool_wake_slope = 0.001\n"
    )
    target = _unit_cpu_with(tmp_path, "unit_cpu_split_wake", program, cores=2)
    split = sp.analyze(BINARY.format(c=1024), target=target).report
    single = sp.analyze(BINARY.format(c=512), target=target).report
    assert split.call_overhead_ns == pytest.approx(7.0 + 150.0)
    assert single.call_overhead_ns == pytest.approx(7.0)
    own = program + "split_wake_ns = 170.0\nreduce_wake_bytes = 131072.0\n"
    target = _unit_cpu_with(tmp_path, "unit_cpu_split_own", own, cores=2)
    assert sp.analyze(BINARY.format(c=1024), target=target).report.call_overhead_ns == (
        pytest.approx(7.0 + 170.0)
    )
    assert sp.analyze(SUM.format(n=32769), target=target).report.call_overhead_ns == (
        pytest.approx(7.0 + 150.0)
    )


def test_a_ynnpack_pool_wakes_the_pool_whatever_its_time() -> None:
    """A 2x2/2 max pool of 4096+ elements is YNNPACK's (`fusion.ynn_pools`): the Zen 5
    reference's such rows of 1-5 us kernels pay 15-28 us a call, where 3x3/2 pools (XLA's
    own loop) of the same kernel times pay 2-4 us. Counted as woken, they leave the
    threshold to the long kernels."""
    pools = [
        ("reduce_window", "f32", (1, 16, 16, c, 2, 2), k, k + 205.0)
        for c, k in ((16, 10.0), (32, 15.0), (64, 20.0))
    ]
    loops = [
        ("reduce_window", "f32", (1, 8, 8, c, 3, 2), k, k + 5.0) for c, k in ((16, 2.0), (32, 3.0))
    ]
    small = [("reduce_window", "f32", (1, 8, 8, 32, 2, 2), 2.5, 7.5)]  # 2048 elements: a loop
    adds = [("add", "f32", (256 * j,), k, k + 5.0) for j, k in enumerate((2.0, 3, 10, 15, 20))]
    long = [("exponential", "bf16", (2048,), k, k + 205.0) for k in (300.0, 400.0)]
    p = fit_host_params([*pools, *loops, *small, *adds, *long])
    assert p.program_overhead_ns == pytest.approx(5000.0)
    assert p.threadpool_wake_ns == pytest.approx(200000.0)
    assert 20000.0 < p.parallel_kernel_ns <= 300000.0


def test_a_top_k_never_wakes_the_pool_by_its_time() -> None:
    """top_k runs on the calling thread: the Zen 5 reference's top_k rows of 20-100 us
    kernels paid a median 40 us less call overhead than the wake. Left out of the time rule,
    long top_k rows that pay 5 us do not pull the wake down or the threshold up."""
    adds = [("add", "f32", (2048,), k, k + 5.0) for k in (2.0, 3.0, 4.0, 5.0)]
    top_k = [("top_k", "f32", (512, 1000, 8), k, k + 5.0) for k in (100.0, 200.0, 300.0, 500.0)]
    long = [("exponential", "bf16", (2048,), k, k + 205.0) for k in (30.0, 40.0, 300.0)]
    p = fit_host_params([*adds, *top_k, *long])
    assert p.program_overhead_ns == pytest.approx(5000.0)
    assert p.threadpool_wake_ns == pytest.approx(200000.0)
    assert 5000.0 < p.parallel_kernel_ns <= 30000.0
    assert not wakes_by_time(["top_k"])
    assert wakes_by_time(["sort"]) and wakes_by_time(["top_k", "add"])


def test_a_program_of_a_long_top_k_pays_no_wake_where_a_sort_does(tmp_path: Path) -> None:
    """The pass applies the same rule: on a target whose every kernel reaches the threshold,
    a sort pays the 150 ns wake-up and a top_k of the same rows does not."""
    import jax
    import jax.numpy as jnp
    import stablehlo_perf as sp

    target = tmp_path / "unit_cpu_calls.toml"
    target.write_text(
        UNIT_CPU.read_text()
        + "\n[program]\noverhead_ns = 7.0\nthreadpool_wake_ns = 150.0\n"
        + "parallel_kernel_ns = 1.0\nmulti_kernel_ns = 40.0\nkernel_dispatch_ns = 3.0\n"
    )
    x = jax.ShapeDtypeStruct((512, 1000), jnp.float32)
    top_k = sp.analyze(jax.jit(lambda v: jax.lax.top_k(v, 8)[0]).lower(x), target=str(target))
    sort = sp.analyze(jax.jit(lambda v: jnp.sort(v, axis=-1)).lower(x), target=str(target))
    assert top_k.report.total_latency_ns > 1.0
    assert top_k.report.call_overhead_ns == pytest.approx(7.0 + 3.0)
    assert sort.report.call_overhead_ns == pytest.approx(7.0 + 150.0 + 3.0)


POOL = """
func.func @main(%a: tensor<1x16x16x{c}xf32>) -> tensor<1x8x8x{c}xf32> {{
  %z = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %0 = "stablehlo.reduce_window"(%a, %z) ({{
  ^bb0(%x: tensor<f32>, %y: tensor<f32>):
    %m = stablehlo.maximum %x, %y : tensor<f32>
    stablehlo.return %m : tensor<f32>
  }}) {{window_dimensions = array<i64: 1, 2, 2, 1>, window_strides = array<i64: 1, {s}, {s}, 1>}}
      : (tensor<1x16x16x{c}xf32>, tensor<f32>) -> tensor<1x8x8x{c}xf32>
  return %0 : tensor<1x8x8x{c}xf32>
}}
"""


def test_a_program_pooling_4096_floats_pays_the_wake(tmp_path: Path) -> None:
    """The pass applies the same rule: a 2x2/2 max pool of 1x16x16x16 f32 (4096 elements,
    YNNPACK's) pays the 150 ns wake-up; of 1x16x16x8 (2048 elements, XLA's own loop) not."""
    import stablehlo_perf as sp

    target = tmp_path / "unit_cpu_calls.toml"
    target.write_text(
        UNIT_CPU.read_text()
        + "\n[program]\noverhead_ns = 7.0\nthreadpool_wake_ns = 150.0\n"
        + "parallel_kernel_ns = 1e9\nmulti_kernel_ns = 40.0\nkernel_dispatch_ns = 3.0\n"
    )
    ynn = sp.analyze(POOL.format(c=16, s=2), target=str(target)).report
    small = sp.analyze(POOL.format(c=8, s=2), target=str(target)).report
    assert ynn.call_overhead_ns == pytest.approx(7.0 + 150.0 + 3.0)
    assert small.call_overhead_ns == pytest.approx(7.0 + 3.0)


def _gelu(x: Any) -> Any:
    """A GELU plus one: 9 FLOPs and 1 transcendental an element by XLA's count."""
    import jax.numpy as jnp

    return 0.5 * x * (1.0 + jnp.tanh(0.7978845608 * (x + 0.044715 * x * x * x))) + 1.0


def test_split_rule_matches_the_compiled_hlo() -> None:
    """`parallel_tasks` against XLA:CPU's own choice (`outer_dimension_partitions` in the
    compiled HLO, 2 threads): an I/O-bound `x * 2` (1 FLOP, 8 bytes an f32 element) splits
    from 512 KiB accessed; a compute-bound GELU (9 FLOPs, 1 transcendental, 8 bytes) from
    (9 + 2 + 80) x elements >= 200,000, i.e. between 2,048 and 3,072 elements; a reduction
    never."""
    import jax
    import jax.numpy as jnp

    def xla_splits(fn, shape, dtype) -> bool:
        text = jax.jit(fn).lower(jax.ShapeDtypeStruct(shape, dtype)).compile().as_text()
        return re.search(r'outer_dimension_partitions":\["[2-9]', text) is not None

    for n, dtype, eb in ((32768, jnp.float32, 4), (65536, jnp.float32, 4), (65536, jnp.bfloat16, 2),
                         (131072, jnp.bfloat16, 2)):  # fmt: skip
        ours = parallel_tasks(n, 0, 2 * n * eb, 2) > 1
        assert xla_splits(lambda x: x * 2, (n,), dtype) == ours
    for shape in ((2048,), (16, 128), (3072,), (12, 256), (4096, 1)):
        n = math.prod(shape)
        assert xla_splits(_gelu, shape, jnp.float32) == (parallel_tasks(9 * n, n, 8 * n, 2) > 1)
    assert parallel_tasks(9 * 2048, 2048, 8 * 2048, 2) == 1
    assert parallel_tasks(9 * 3072, 3072, 8 * 3072, 2) == 2
    assert parallel_tasks(9 * 3072, 3072, 8 * 3072, 8) == 2  # 280,000 // 100,000
    assert not xla_splits(lambda x: x.sum(-1), (1024, 1024), jnp.float32)
    assert not splits_over_threads(["binary", "reduction"], 0, 0, 4 << 20, 2)
    assert not splits_over_threads(["matmul"], 0, 0, 4 << 20, 2)
    assert splits_over_threads(["binary"], 0, 0, 512 << 10, 2)


def test_output_cost_per_mib_from_large_elementwise_rows() -> None:
    """Past the wake-up step (base 5 us, wake 200 us), programs writing 1-16 MiB pay 40 us per
    MiB more: the fit finds it; rows under 1 MiB, a reduction (its output is not its input's
    size) and one outlier do not move it."""
    short = [("add", "f32", (2048,), k, k + 5.0) for k in (1.0, 2.0, 3.0, 4.0)]
    long = [
        ("add", "f32", (1 << 16,), 30.0, 235.0),  # 0.25 MiB, 30 us more: under 1 MiB
        *[("add", "f32", (m << 18,), 300.0, 300.0 + 205.0 + 40.0 * m) for m in (1, 2, 4, 8, 16)],
        ("exponential", "bf16", (1 << 21,), 900.0, 900.0 + 205.0 + 160.0),  # 4 MiB in bf16
        ("add", "f32", (3 << 18,), 500.0, 500.0 + 205.0 + 4000.0),  # outlier
        ("reduce", "f32", (1024, 4096), 800.0, 805.0 + 200.0),
    ]
    p = fit_host_params([*short, *long])
    assert p.program_overhead_ns == pytest.approx(5000.0)
    assert p.threadpool_wake_ns == pytest.approx(200000.0)
    assert p.output_ns_per_mib == pytest.approx(40000.0)
    assert math.isnan(fit_host_params(short).output_ns_per_mib)


def test_a_long_call_pays_a_ramp_in_its_kernel_time() -> None:
    """Beyond the step (base 5 us, wake 200 us), programs whose kernel runs longer than 150 us
    pay 0.3 us per us beyond it, at most 250 us (the shape of the Xeon reference's rows):
    the fit recovers the ramp, one outlier aside, and the per-MiB term sees only what it
    leaves (40 us per MiB, as in the test above)."""
    short = [("add", "f32", (2048,), k, k + 5.0) for k in (1.0, 2.0, 3.0, 4.0, 6.0, 8.0)]

    def ramp(k: float) -> float:
        return min(0.3 * max(k - 150.0, 0.0), 250.0)

    long = [
        ("dot_general", "f32", (1, 64, 64, 64), k, k + 205.0 + ramp(k))
        for k in (10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 80.0, 100.0, 120.0, 150.0)
        + (200.0, 300.0, 500.0, 800.0, 1000.0, 2000.0, 4000.0)
    ]
    outlier = [("dot_general", "f32", (1, 64, 64, 64), 3000.0, 3000.0 - 800.0)]
    mib = [
        ("add", "f32", (m << 18,), 400.0, 400.0 + 205.0 + ramp(400.0) + 40.0 * m) for m in (1, 2, 4)
    ]
    p = fit_host_params([*short, *long, *outlier, *mib])
    assert p.threadpool_wake_ns == pytest.approx(200000.0)
    for k in (100.0, 250.0, 400.0, 600.0, 3000.0):
        assert p.long_call(k * 1e3) == pytest.approx(ramp(k) * 1e3, abs=1e3), k
    assert p.output_ns_per_mib == pytest.approx(40000.0, rel=0.01)  # the ramp is on a grid
    host = _sloped_host(
        threadpool_wake_ns=0.0,
        output_ns_per_mib=0.0,
        long_call_start_ns=150e3,
        long_call_slope=0.3,
        long_call_cap_ns=250e3,
    )
    assert host.call_overhead_ns(50e3, kernels_ns=400e3) == pytest.approx(75e3)
    assert host.call_overhead_ns(50e3, kernels_ns=5e6) == pytest.approx(250e3)
    assert host.call_overhead_ns(50e3, kernels_ns=100e3) == 0.0


def test_header_round_trip_and_missing_rows() -> None:
    p = HostParams(
        51.25,
        0.125,
        380.0,
        4500.0,
        180000.0,
        25000.0,
        41000.0,
        20000.0,
        7000.0,
        0.2,
        1.5e5,
        0.3,
        9e4,
        21000.0,
        0.7,
        1.5,
        2.5,
        3.2,
        131072.0,
        12500.0,
        64000.0,
    )
    assert HostParams.parse(p.header()) == p
    assert p.long_call(1e9) == 9e4
    assert replace(p, long_call_cap_ns=math.nan).long_call(1e9) == 0.0  # a term unknown: none
    ramp = replace(p, long_call_cap_ns=math.inf, threadpool_wake_slope=math.inf)
    assert HostParams.parse(ramp.header()) == ramp
    assert ramp.long_call(1.15e6) == pytest.approx(3e5)
    assert HostParams.parse("bandwidth_gbps=3") is None
    assert HostParams.parse("bandwidth_gbps=x f32_tflops=1 kernel_overhead_ns=2") is None
    old = HostParams.parse("bandwidth_gbps=3 f32_tflops=1 kernel_overhead_ns=2")
    assert old is not None and math.isnan(old.threadpool_wake_ns)
    assert math.isnan(old.kernel_dispatch_ns)
    empty = fit_host_params([("add", "f32", (8,), 0.0, NAN)])
    assert all(math.isnan(v) for v in (empty.bandwidth_gbps, empty.f32_tflops))
    assert math.isnan(empty.kernel_overhead_ns)


def _calibration(path: Path, params: HostParams, machine: str) -> None:
    body = "op,dtype,shape,measured_us_median\nadd,f32,32,0.3\n"
    digest = hashlib.sha256(body.encode()).hexdigest()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f"# machine: {machine}\n# date: 2026-11-30T09:00Z\n"
        f"# {HOST_PARAMS_KEY}: {params.header()}\n# sha256: {digest}\n{body}"
    )


def test_host_target_takes_parameters_only_from_this_machine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(cf, "_SHIPPED", {})
    monkeypatch.setattr(cf, "shipped_file", lambda name: tmp_path / "none" / name)
    plain = load_target("host")
    assert not plain.calibrated and "uncalibrated" in plain.calibration_note
    params = HostParams(bandwidth_gbps=41.5, f32_tflops=0.0875, kernel_overhead_ns=612.0)
    _calibration(cf.calibration_path("host"), params, cf.machine_fingerprint())
    host = load_target("host")
    assert host.calibrated and "calibrated on this machine" in host.calibration_note
    assert host.memory_bandwidth_gbps == 41.5 and host.launch_overhead_ns == 612.0
    assert host.peak_flops("f32", matrix=True) == pytest.approx(0.0875e12)
    # The vector unit keeps the OS-derived peak; only the matrix rate was measured.
    assert host.peak_flops("f32", matrix=False) == plain.peak_flops("f32", matrix=False)
    # A calibration from another machine is not applied.
    other = tmp_path / "shipped.csv"
    _calibration(other, params, "Some Other CPU, 96 cores, aarch64")
    cf.calibration_path("host").unlink()
    monkeypatch.setattr(cf, "shipped_file", lambda name: other)
    assert not load_target("host").calibrated


UNIT_CPU = Path(__file__).resolve().parents[1] / "test_ir" / "Inputs" / "unit_cpu.toml"
ADD = """
func.func @main(%a: tensor<1000xf32>, %b: tensor<1000xf32>) -> tensor<1000xf32> {
  %0 = stablehlo.add %a, %b : tensor<1000xf32>
  return %0 : tensor<1000xf32>
}
"""
# Two kernels on a CPU: the reduce is an input fusion of its own, the add a loop fusion.
TWO = """
func.func @main(%a: tensor<1000xf32>, %b: tensor<1000xf32>) -> (tensor<1000xf32>, tensor<f32>) {
  %0 = stablehlo.add %a, %b : tensor<1000xf32>
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %1 = stablehlo.reduce(%0 init: %z) applies stablehlo.add across dimensions = [0]
      : (tensor<1000xf32>, tensor<f32>) -> tensor<f32>
  return %0, %1 : tensor<1000xf32>, tensor<f32>
}
"""


@pytest.mark.parametrize(("parallel_at", "wake"), [(200.0, 150.0), (300.0, 0.0)])
def test_call_overhead_joins_the_module_total(
    tmp_path: Path, parallel_at: float, wake: float
) -> None:
    """unit-cpu prices the add at 12,000 B / 100 B/ns + 100 ns launch = 220 ns; the call adds
    7 ns, 1 ns per byte it returns, and the 150 ns wake-up only when 220 ns reaches the
    parallel-kernel threshold."""
    import stablehlo_perf as sp

    target = tmp_path / "unit_cpu_calls.toml"
    target.write_text(
        UNIT_CPU.read_text()
        + "\n[program]\noverhead_ns = 7.0\nthreadpool_wake_ns = 150.0\n"
        + f"parallel_kernel_ns = {parallel_at}\nmulti_kernel_ns = 40.0\n"
        + "kernel_dispatch_ns = 3.0\noutput_ns_per_mib = 1048576.0\n"
    )
    t = load_target(str(target))
    # One kernel: its dispatch, no multi-kernel wake; the pool wakes at most once.
    assert t.call_overhead_ns(220.0) == 7.0 + wake + 3.0
    # Two kernels: the multi-kernel cost only where the call wakes the pool (the probes it
    # is fitted on all do).
    assert t.call_overhead_ns(220.0, kernels=2) == 7.0 + (max(wake, 40.0) if wake else 0.0) + 6.0
    assert t.call_overhead_ns(220.0, output_bytes=100) == 7.0 + wake + 3.0 + 100.0
    wake += 3.0 + 4000.0  # the add's dispatch and its 4,000-byte result at 1 ns per byte
    res = sp.analyze(ADD, target=str(target))
    assert res.report.work_ns == pytest.approx(220.0)
    assert res.report.call_overhead_ns == pytest.approx(7.0 + wake)
    assert res.report.total_latency_ns == pytest.approx(227.0 + wake)
    assert res.report.critical_path_ns == pytest.approx(227.0 + wake)
    assert "per-call overhead" in res.report.to_markdown()
    assert res.report.parallelism == pytest.approx(1.0)  # one kernel: work = its span
    plain = sp.analyze(ADD, target=str(UNIT_CPU))
    assert plain.report.total_latency_ns == pytest.approx(220.0)
    assert plain.report.call_overhead_ns == 0.0
    assert "perf.call_overhead_ns" not in str(plain.annotated_ir)
    two = sp.analyze(TWO, target=str(target)).report
    kernels = [g for g in two.fusion_groups if g["latency_ns"] > 0]
    assert len(kernels) == 2
    longest = max(g["latency_ns"] for g in kernels)
    assert two.call_overhead_ns == pytest.approx(t.call_overhead_ns(longest, 2, 4004))
    assert two.total_latency_ns == pytest.approx(two.work_ns + two.call_overhead_ns)


def test_the_pass_ramps_the_call_on_its_kernels_time(tmp_path: Path) -> None:
    """The 220 ns add (unit-cpu) runs 120 ns past a ramp starting at 100 ns: 0.5 ns per ns
    adds 60 ns to the call; the cap (30 ns) bounds it; TWO's ramp runs on both kernels'
    time (460 ns: 180), not its longer kernel's (70)."""
    import stablehlo_perf as sp

    def report(cap: float) -> Any:
        target = tmp_path / f"ramp_{cap:g}.toml"
        target.write_text(
            UNIT_CPU.read_text()
            + "\n[program]\nlong_call_start_ns = 100.0\nlong_call_slope = 0.5\n"
            + f"long_call_cap_ns = {cap}\n"
        )
        return sp.analyze(ADD, target=str(target)).report, sp.analyze(TWO, target=str(target))

    (add, two), (capped, _) = report(1000.0), report(30.0)
    assert add.work_ns == pytest.approx(220.0)
    assert add.call_overhead_ns == pytest.approx(60.0)
    assert add.total_latency_ns == pytest.approx(280.0)
    assert capped.call_overhead_ns == pytest.approx(30.0)
    kernels = [g["latency_ns"] for g in two.report.fusion_groups if g["latency_ns"] > 0]
    assert len(kernels) == 2 and two.report.work_ns == pytest.approx(sum(kernels))
    assert two.report.call_overhead_ns == pytest.approx(0.5 * (sum(kernels) - 100.0))
    assert two.report.call_overhead_ns > 0.5 * (max(kernels) - 100.0) + 50.0


FORI_LOOP = Path(__file__).resolve().parents[1] / "test_ir" / "corpus" / "fori_loop.mlir"


def _unit_cpu_with(tmp_path: Path, name: str, program: str, cores: int = 1) -> str:
    """unit-cpu with these `[program]` keys (and `cores` threads), as a target file path."""
    target = tmp_path / f"{name}.toml"
    unit = UNIT_CPU.read_text().replace("cores = 1", f"cores = {cores}")
    target.write_text(unit + "\n[program]\n" + program)
    return str(target)


def test_the_ramp_runs_on_a_loops_total(tmp_path: Path) -> None:
    """fori_loop (10 trips): the ramp (from 1 ns, 1 ns per ns) runs on the call's kernels'
    time, the loop's total (each trip's kernels counted), not on its longest kernel (its
    body's dot); it is the only per-call term this target has."""
    import stablehlo_perf as sp

    target = _unit_cpu_with(
        tmp_path,
        "ramp",
        "long_call_start_ns = 1.0\nlong_call_slope = 1.0\nlong_call_cap_ns = 1e12\n",
    )
    rep = sp.analyze(FORI_LOOP.read_text(), target=target).report
    loop = next(o for o in rep.ops if o.name == "stablehlo.while")
    assert loop.model == "while(x10, copies: 2 before)" and loop.top_level
    makespan = rep.total_latency_ns - rep.call_overhead_ns
    assert makespan == pytest.approx(loop.latency_ns) and makespan > 0  # the loop is the call
    longest = max(g["latency_ns"] for g in rep.fusion_groups)
    assert [g["root"] for g in rep.fusion_groups if g["latency_ns"] == longest] == [
        "stablehlo.dot_general"
    ]
    assert rep.call_overhead_ns == pytest.approx(makespan - 1.0)
    assert makespan > 5 * longest


def test_a_loop_is_not_a_kernel_of_the_call(tmp_path: Path) -> None:
    """fori_loop's entry runs one while (its constant operand grouped with it): the loop's
    total is no kernel, so it neither wakes the pool by its time nor counts as an entry
    kernel. A dot in its body is a library call, which wakes the pool whatever its size."""
    import stablehlo_perf as sp

    calls = (
        "overhead_ns = 7.0\nthreadpool_wake_ns = 150.0\nparallel_kernel_ns = 1000.0\n"
        "multi_kernel_ns = 40.0\nkernel_dispatch_ns = 3.0\n"
    )
    target = _unit_cpu_with(tmp_path, "unit_cpu_calls", calls)
    text = FORI_LOOP.read_text()
    rep = sp.analyze(text, target=target).report
    loop = next(o for o in rep.ops if o.name == "stablehlo.while")
    assert loop.latency_ns > 1000.0  # ten trips of the body: above the parallel threshold
    assert rep.call_overhead_ns == pytest.approx(7.0 + 150.0)  # the body's dot, no entry kernel
    # With a slope on the wake, it is the dot's time in all ten trips that bounds it.
    sloped_target = _unit_cpu_with(tmp_path, "sloped", calls + "threadpool_wake_slope = 0.05\n")
    sloped = sp.analyze(text, target=sloped_target).report
    dot = next(o for o in sloped.ops if o.name == "stablehlo.dot_general")
    assert 0.05 * 10 * dot.latency_ns < 150.0
    assert sloped.call_overhead_ns == pytest.approx(7.0 + 0.05 * 10 * dot.latency_ns)
    no_dot = text.replace(
        "%2 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0], "
        "precision = [DEFAULT, DEFAULT] : (tensor<32x32xf32>, tensor<32xf32>) -> tensor<32xf32>",
        "%2 = stablehlo.exponential %arg1 : tensor<32xf32>",
    )
    assert no_dot != text
    rep = sp.analyze(no_dot, target=target).report
    # Without the dot, 32 floats: XLA:CPU runs the whole loop as one kernel (small_loops),
    # which no more wakes the pool than the loop's kernels did.
    loop = next(o for o in rep.ops if o.name == "stablehlo.while")
    assert loop.model == "while(x10, one kernel)"
    assert rep.call_overhead_ns == pytest.approx(7.0)


def test_a_split_kernel_after_the_pool_slept_pays_the_rewake(tmp_path: Path) -> None:
    """Two GELU kernels XLA splits over threads (16x256 f32, 9 FLOPs an element) with a sort
    of the first's rows between them: on a target charging 1 us per split kernel that finds
    the pool asleep again, the second pays where the gap it leaves exceeds `rewake_gap_ns`
    (1 ns: it does; 1e12: it does not); the first's wake-up is the call's own
    (`threadpool_wake_ns`). With the rows' mean subtracted between them instead, a YNNPACK
    reduction, the pool stays awake: no rewake at any gap."""
    import jax
    import jax.numpy as jnp
    import stablehlo_perf as sp

    between = (
        lambda h: jnp.sort(h, axis=-1),
        lambda h: h - jnp.mean(h, axis=-1, keepdims=True),
    )
    x = jax.ShapeDtypeStruct((16, 256), jnp.float32)
    texts = [jax.jit(lambda x, f=f: _gelu(f(_gelu(x)))).lower(x).as_text() for f in between]
    calls: dict[tuple[int, int], float] = {}
    for k, (rewake, gap) in enumerate(((1e-9, 1.0), (1000.0, 1e12), (1000.0, 1.0))):
        target = _unit_cpu_with(
            tmp_path,
            f"unit_cpu_rewake_{k}",
            "overhead_ns = 7.0\nthreadpool_wake_ns = 150.0\nparallel_kernel_ns = 1e9\n"
            + f"rewake_ns = {rewake}\nrewake_gap_ns = {gap}\n",
            cores=2,
        )
        for t, text in enumerate(texts):
            calls[k, t] = sp.analyze(text, target=target).report.call_overhead_ns
    assert calls[1, 0] == pytest.approx(calls[0, 0])
    assert calls[2, 0] - calls[1, 0] == pytest.approx(1000.0)
    assert calls[2, 1] == pytest.approx(calls[1, 1]) == pytest.approx(calls[0, 1])


def test_a_gathering_kernel_splits_by_its_whole_operand_as_xla_counts_it(
    tmp_path: Path,
) -> None:
    """Softmax cross-entropy's take_along_axis kernel evaluates `z - m` at one position a row
    but XLA's cost analysis counts all of z: XLA:CPU splits it over two threads at 192 rows
    of 1000 f32 (750 KiB), not at 128 (500 KiB; `parallel_tasks`: 512 KiB), and the split
    kernel wakes the pool (a 150 ns wake-up on this target) where jnp's bounds check, a
    reduce over a unit dimension, is XLA's bitcast and no reduction that would keep it
    whole."""
    import jax
    import jax.numpy as jnp
    import stablehlo_perf as sp

    def nll(z: Any, m: Any, labels: Any) -> Any:
        return -jnp.mean(jnp.take_along_axis(z - m[:, None], labels[:, None], axis=-1))

    target = _unit_cpu_with(
        tmp_path,
        "unit_cpu_gather",
        "overhead_ns = 7.0\nthreadpool_wake_ns = 150.0\nparallel_kernel_ns = 1e9\n",
        cores=2,
    )
    for rows, splits in ((128, False), (192, True)):
        args = (
            jax.ShapeDtypeStruct((rows, 1000), jnp.float32),
            jax.ShapeDtypeStruct((rows,), jnp.float32),
            jax.ShapeDtypeStruct((rows,), jnp.int32),
        )
        lowered = jax.jit(nll).lower(*args)
        hlo = lowered.compile().as_text()
        assert (re.search(r'outer_dimension_partitions":\["[2-9]', hlo) is not None) == splits
        rep = sp.analyze(lowered.as_text(), target=target).report
        assert rep.call_overhead_ns == pytest.approx(7.0 + 150.0 * splits), rows


def test_dots_whose_lhs_contracts_elsewhere_run_on_eigen() -> None:
    """`runs_on_eigen` against XLA:CPU's compiled HLO: a dot_general whose lhs contracts over
    its last dimension becomes a YNNPACK fusion, over its first a plain `dot` (Eigen)."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    for lhs_c, rhs_c in (((1,), (0,)), ((0,), (0,)), ((1,), (1,)), ((0,), (1,))):
        a = (64, 128) if lhs_c == (1,) else (128, 64)
        b = (128, 32) if rhs_c == (0,) else (32, 128)

        def fn(x: Any, y: Any, lc: Any = lhs_c, rc: Any = rhs_c) -> Any:
            return lax.dot_general(x, y, ((lc, rc), ((), ())))

        lowered = jax.jit(fn).lower(*(jax.ShapeDtypeStruct(s, jnp.float32) for s in (a, b)))
        hlo = lowered.compile().as_text()
        entry = hlo[hlo.index("ENTRY") :]
        eigen = re.search(r"= \S+ dot\(", entry) is not None
        assert eigen == (lhs_c == (0,)) and ("__ynn_fusion" in entry) == (not eigen)
        (dot,) = [o for o in op_infos(lowered.as_text()) if o.short_name == "dot_general"]
        assert runs_on_eigen(dot) == eigen, (lhs_c, rhs_c)


def test_small_eigen_dots_run_inline_and_a_first_one_on_the_pool_pays_the_rewake(
    tmp_path: Path,
) -> None:
    """x^T g dots (Eigen) of 128x128x32 (m·n·k 0.5M, below `EIGEN_POOL_MNK`) stay on the
    calling thread, of 256x256x32 (2.1M) go to the pool, written as a dot_general contracting
    x over its first dimension or as `x.T @ g` (a transpose XLA folds into the dot); a
    YNNPACK dot of that size is no Eigen dot at all. On a target charging 1 us per rewake, a
    program whose only pool kernel is the large Eigen dot pays it once (a split kernel's first
    wake is covered by the call's own, an Eigen dot's is not), one of the small dot nothing."""
    import jax
    import jax.numpy as jnp
    import stablehlo_perf as sp
    from jax import lax

    def xtg(x: Any, g: Any) -> Any:
        return jnp.tanh(lax.dot_general(x, g, (((0,), (0,)), ((), ()))))

    def xw(x: Any, w: Any) -> Any:
        return jnp.tanh(x @ w)

    def lowered(fn: Any, a: tuple[int, int], b: tuple[int, int]) -> Any:
        return jax.jit(fn).lower(*(jax.ShapeDtypeStruct(s, jnp.float32) for s in (a, b)))

    programs = {
        "small": lowered(xtg, (32, 128), (32, 128)),
        "large": lowered(xtg, (32, 256), (32, 256)),
        "folded": lowered(lambda x, g: xw(x.T, g), (32, 256), (32, 256)),
        "ynn": lowered(xw, (256, 32), (32, 256)),
    }
    for k, v in programs.items():  # XLA:CPU's own choice: Eigen `dot` thunks or a YNN fusion
        hlo = v.compile().as_text()
        assert (re.search(r"= \S+ dot\(", hlo[hlo.index("ENTRY") :]) is not None) == (k != "ynn")
    dots = {
        k: next(o for o in op_infos(v.as_text()) if o.short_name == "dot_general")
        for k, v in programs.items()
    }
    assert {k: eigen_uses_pool(d) for k, d in dots.items()} == {
        "small": False,
        "large": True,
        "folded": False,  # as written; with the transpose's permutation, as compiled
        "ynn": False,
    }
    assert eigen_uses_pool(dots["folded"], (1, 0))
    calls: dict[str, list[float]] = {k: [] for k in programs}
    for rewake in (1e-9, 1000.0):
        target = _unit_cpu_with(
            tmp_path,
            f"unit_cpu_eigen_{rewake:g}",
            "overhead_ns = 7.0\nthreadpool_wake_ns = 150.0\nparallel_kernel_ns = 1e9\n"
            + f"rewake_ns = {rewake}\nrewake_gap_ns = 5000.0\n",
            cores=2,
        )
        for k, v in programs.items():
            calls[k].append(sp.analyze(v.as_text(), target=target).report.call_overhead_ns)
    assert calls["large"][1] - calls["large"][0] == pytest.approx(1000.0)
    assert calls["folded"][1] - calls["folded"][0] == pytest.approx(1000.0)
    assert calls["small"][1] == pytest.approx(calls["small"][0])
    assert calls["ynn"][1] == pytest.approx(calls["ynn"][0])


@pytest.mark.parametrize(("rows", "split"), [(256, True), (16, False)])
def test_a_split_kernel_read_by_a_ynn_kernel_pays_per_mib_handed_over_up_to_the_cap(
    tmp_path: Path, rows: int, split: bool
) -> None:
    """`(x[:, ::-1, ::-1] * x).sum(1)` on rows x 8 x 128 f32: XLA splits the reverse of 256
    rows (1 MiB) over two threads and hands it to a YNN reduce; on a target charging 1 ms a
    MiB handed over on at most 256 KiB a kernel, the call pays exactly 0.25 ms more. The
    reverse of 16 rows is not split and pays nothing."""
    import jax
    import jax.numpy as jnp
    import stablehlo_perf as sp

    def fn(x: Any) -> Any:
        return (x[:, ::-1, ::-1] * x).sum(axis=1)

    lowered = jax.jit(fn).lower(jax.ShapeDtypeStruct((rows, 8, 128), jnp.float32))
    hlo = lowered.compile().as_text()
    reverse = next(line for line in hlo.splitlines() if "%wrapped_reverse = " in line)
    assert ("outer_dimension_partitions" in reverse) == split
    entry = hlo[hlo.index("ENTRY") :]
    assert "ynn_fusion" in next(line for line in entry.splitlines() if "ROOT" in line)
    calls = [
        sp.analyze(lowered.as_text(), target=target).report.call_overhead_ns
        for target in _handoff_targets(tmp_path)
    ]
    assert calls[1] - calls[0] == pytest.approx(0.25e6 if split else 0.0)


@pytest.mark.parametrize(("columns", "paid"), [(64, False), (1024, True)])
def test_a_dot_for_one_thread_takes_no_handoff(tmp_path: Path, columns: int, paid: bool) -> None:
    """An embedding lookup: XLA:CPU splits the gather of 64 x 8 rows of 128 (256 KiB) over
    two threads, and a YNNPACK kernel sums them and multiplies by w (128 x `columns`). A dot
    of 64 x 128 x 64 (2^19 multiply-adds) runs on the calling thread and pays no handoff; of
    64 x 128 x 1024 (2^23) it pays 0.25 ms on a target charging 1 ms a MiB."""
    import jax
    import jax.numpy as jnp
    import stablehlo_perf as sp

    def fn(table: Any, ids: Any, w: Any) -> Any:
        return jnp.tanh(table[ids].sum(axis=1) @ w)

    args = (
        jax.ShapeDtypeStruct((5000, 128), jnp.float32),
        jax.ShapeDtypeStruct((64, 8), jnp.int32),
        jax.ShapeDtypeStruct((128, columns), jnp.float32),
    )
    lowered = jax.jit(fn).lower(*args)
    entry = lowered.compile().as_text().split("ENTRY")[1].splitlines()
    (gather,) = [line for line in entry if "gather_fusion = " in line]
    assert "outer_dimension_partitions" in gather
    calls = [
        sp.analyze(lowered.as_text(), target=target).report.call_overhead_ns
        for target in _handoff_targets(tmp_path)
    ]
    assert calls[1] - calls[0] == pytest.approx(0.25e6 if paid else 0.0)


def _handoff_targets(tmp_path: Path) -> list[str]:
    """unit-cpu on 2 threads charging nothing, then 1 ms a MiB, for a split kernel's output a
    YNN kernel reads (at most 256 KiB a kernel)."""
    return [
        _unit_cpu_with(
            tmp_path,
            f"unit_cpu_handoff_{handoff:g}",
            f"handoff_ns_per_mib = {handoff}\nhandoff_cap_bytes = 262144\n",
            cores=2,
        )
        for handoff in (1e-9, 1e6)
    ]


def test_xla_cpu_runs_kernels_by_level_and_a_call_pays_one_handoff(tmp_path: Path) -> None:
    """Four dots on 256 KiB slices of a stacked weight (`tanh(x @ ws[i])`, 128 x 256, more
    multiply-adds than one thread takes: `critical_path.ONE_THREAD_MACS`): XLA:CPU
    splits each slice over two threads and runs all four before the second dot (level 0, on
    a parameter alone), where the program uses them one by one. The pass schedules them so
    (`analysis.critical_path.level_order`), and on a target charging 1 ms a MiB handed over
    (at most 256 KiB a kernel) the call pays 0.25 ms more once, not four times."""
    import jax
    import jax.numpy as jnp
    import stablehlo_perf as sp

    def fn(x: Any, ws: Any) -> Any:
        for i in range(4):
            x = jnp.tanh(x @ ws[i])
        return x

    args = (
        jax.ShapeDtypeStruct((128, 256), jnp.float32),
        jax.ShapeDtypeStruct((4, 256, 256), jnp.float32),
    )
    lowered = jax.jit(fn).lower(*args)
    entry = lowered.compile().as_text().split("ENTRY")[1].splitlines()
    slices = [k for k, line in enumerate(entry) if "slice" in line.split("=")[0]]
    dots = [k for k, line in enumerate(entry) if "ynn_fusion" in line.split("=")[0]]
    assert len(slices) == 4 and all("outer_dimension_partitions" in entry[k] for k in slices)
    assert max(slices) < sorted(dots)[1]
    calls, starts = [], {}
    for target in _handoff_targets(tmp_path):
        result = sp.analyze(lowered.as_text(), target=target)
        calls.append(result.report.call_overhead_ns)
        for op in result.module.body.operations[0].regions[0].blocks[0].operations:
            if op.name in ("stablehlo.slice", "stablehlo.dot_general"):
                starts.setdefault(op.name, []).append(op.attributes["perf.start_ns"].value)
    assert calls[1] - calls[0] == pytest.approx(0.25e6)
    assert max(starts["stablehlo.slice"][:4]) < sorted(starts["stablehlo.dot_general"][:4])[1]


def test_a_ynnpack_reduction_keeps_an_awake_pool_awake_but_wakes_no_sleeping_one() -> None:
    """Spans in us of a 5 us gap: split kernels at 0-4 and 12-16 with a YNNPACK sum at 4-11
    between them: no rewake (without the sum: one); the sum 9 us after the first split, the
    pool slept first: one; an Eigen dot right after a sum that found the pool asleep pays
    too, and a first Eigen dot always."""
    from stablehlo_perf.passes.critical_path import PoolSpan, _rewakes

    def span(a: float, b: float, eigen: bool = False, wakes: bool = True) -> PoolSpan:
        return PoolSpan(a * 1e3, b * 1e3, eigen, wakes)

    split, late = span(0, 4), span(12, 16)
    assert _rewakes([split, late], 5e3) == 1
    assert _rewakes([split, span(4, 11, wakes=False), late], 5e3) == 0
    assert _rewakes([split, span(13, 14, wakes=False), span(14, 18)], 5e3) == 1
    assert _rewakes([span(0, 1, wakes=False), span(1, 9, eigen=True)], 5e3) == 1
    assert _rewakes([split, span(30, 31, wakes=False), span(31, 40, eigen=True)], 5e3) == 1


def test_a_call_under_the_inline_flops_pays_neither_base_nor_multi_kernel(tmp_path: Path) -> None:
    """The PjRt CPU client runs a program of fewer than 1000 XLA flops on the calling thread
    (`INLINE_FLOPS`): ADD on 999 elements (999 flops) pays its dispatch and output but not the
    7 ns base; on 1000 it pays it. Two kernels inline pay no multi-kernel cost either, nor
    the wake for a kernel however long (the Zen 4 reference's f32 exps and tanhs of 0 flops,
    14-140 us kernels, paid none), where a library call's wake is paid whatever the flops.
    TWO on 999 counts 999 flops for its add and 998 for its sum: handed over."""
    import stablehlo_perf as sp

    target = tmp_path / "unit_cpu_inline.toml"
    target.write_text(
        UNIT_CPU.read_text()
        + "\n[program]\noverhead_ns = 7.0\ninline_flops = 1000.0\nmulti_kernel_ns = 40.0\n"
        + "threadpool_wake_ns = 150.0\nparallel_kernel_ns = 200.0\n"
    )
    t = load_target(str(target))
    assert t.inline_flops == INLINE_FLOPS == 1000
    small_wake = replace(t, threadpool_wake_ns=10.0)  # under the multi-kernel cost
    assert small_wake.call_overhead_ns(0.0, kernels=2, xla_flops=999, wakes=True) == 10.0
    assert small_wake.call_overhead_ns(0.0, kernels=2, xla_flops=1000, wakes=True) == 47.0
    assert t.call_overhead_ns(0.0, kernels=2, xla_flops=1000) == 7.0  # the pool sleeps
    assert t.call_overhead_ns(0.0, kernels=2, xla_flops=999) == 0.0
    assert t.call_overhead_ns(220.0, kernels=2, xla_flops=999) == 0.0
    assert t.call_overhead_ns(220.0, kernels=2, xla_flops=1000) == 7.0 + 150.0
    handed = sp.analyze(ADD, target=str(target)).report
    inline = sp.analyze(ADD.replace("1000x", "999x"), target=str(target)).report
    assert handed.call_overhead_ns == pytest.approx(7.0 + 150.0)  # 1000 flops: 220 ns wakes
    assert inline.call_overhead_ns == pytest.approx(0.0)
    two = sp.analyze(TWO.replace("1000x", "999x"), target=str(target)).report
    assert two.call_overhead_ns == pytest.approx(7.0 + 150.0)
    one_kernel = replace(t, parallel_kernel_ns=math.inf)
    assert one_kernel.call_overhead_ns(220.0, kernels=2, xla_flops=500) == 0.0


def test_xla_cpu_flops_counts_the_converts_of_16_bit_elementwise_ops() -> None:
    """XLA:CPU widens a bf16 elementwise op to f32 and narrows its result: its cost analysis
    counts a bf16 add of 1024 as 4096 flops (1024 for the add, 3072 converts), an exp as
    2048, a convert as 1024 (jax 0.10.2); f32 ops count XLA's plain flops."""
    add_bf, exp_bf, add_f32, cvt = op_infos(
        """
func.func @main(%a: tensor<1024xbf16>, %b: tensor<1024xf32>)
    -> (tensor<1024xbf16>, tensor<1024xbf16>, tensor<1024xf32>, tensor<1024xf32>) {
  %0 = stablehlo.add %a, %a : tensor<1024xbf16>
  %1 = stablehlo.exponential %a : tensor<1024xbf16>
  %2 = stablehlo.add %b, %b : tensor<1024xf32>
  %3 = stablehlo.convert %a : (tensor<1024xbf16>) -> tensor<1024xf32>
  return %0, %1, %2, %3 : tensor<1024xbf16>, tensor<1024xbf16>, tensor<1024xf32>, tensor<1024xf32>
}
"""
    )[:4]
    assert [xla_cpu_flops(op) for op in (add_bf, exp_bf, add_f32, cvt)] == [4096, 2048, 1024, 1024]


def test_the_step_fit_charges_the_base_only_to_calls_handed_to_the_pool() -> None:
    """Adds of 512 f32 (512 flops) run inline and pay nothing beyond their kernels; adds of
    2048 (2048 flops, not split) pay the 30 us handoff; adds of 2^16 (split) the handoff and the
    200 us wake. The fit finds base 30 and wake 200 where, with every row handed over, the
    inline rows' zeros pull the base to their median (they are half the short rows)."""
    inline = [("add", "f32", (512,), k, k) for k in (1.0, 2.0, 3.0, 4.0, 5.0)]
    handed = [("add", "f32", (2048,), k, k + 30.0) for k in (1.0, 2.0, 3.0, 4.0)]
    woken = [("add", "f32", (1 << 16,), k, k + 230.0) for k in (50.0, 60.0, 80.0, 100.0)]
    p = fit_host_params([*inline, *handed, *woken])
    assert p.program_overhead_ns == pytest.approx(30e3)
    assert p.threadpool_wake_ns == pytest.approx(200e3)
    assert (
        _row_flops("add", "f32", (512,)) == 512 < INLINE_FLOPS <= _row_flops("add", "f32", (2048,))
    )
    as_handed = fit_host_params(
        [*((op, dt, (4096,), k, t) for op, dt, _, k, t in inline), *handed, *woken]
    )
    assert as_handed.program_overhead_ns < 30e3


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_a_calibration_rows_flops_are_xlas(dtype: str) -> None:
    """`_row_flops` of each row kind that can run inline is the flop count of XLA's cost
    analysis of that row's compiled program (`runtime.sweeps`), so the fit sorts rows into
    inline and handed-over calls as the PjRt client does (a bf16 logistic's expansion widened
    op by op, an rsqrt row's add, a select row's compare, the polynomials XLA expands a CHLO
    special function into)."""
    import jax
    from stablehlo_perf.runtime import sweeps

    ops = (
        "add", "multiply", "divide", "maximum", "select", "exponential", "tanh", "logistic",
        "negate", "floor", "rsqrt", "sqrt", "log", "convert", "copy", "transpose", "reduce",
        "sum_axis0", "sum_axis1", "sine", "digamma", "erf_inv", "erfc", "lgamma",
    )  # fmt: skip
    for op in ops:
        for shape in ((8, 128), (4, 30), (16, 64)):
            fn, args = sweeps.op_and_shapes(sweeps.Spec(op, dtype, shape))
            cost = jax.jit(fn).lower(*args).compile().cost_analysis()
            xla = (cost[0] if isinstance(cost, list) else cost).get("flops", 0.0)
            ours = _row_flops(op, dtype, shape)
            assert ours == xla, (op, shape)
    assert _row_flops("argmax", dtype, (8, 128)) == math.inf


def _xla_splits(hlo: str) -> bool:
    """Whether compiled HLO splits a kernel over threads: any `outer_dimension_partitions`
    entry above 1 (a leading unit dimension is partitioned as ["1","2"])."""
    parts = re.findall(r'outer_dimension_partitions":\[([^\]]*)\]', hlo)
    return any(int(v) > 1 for p in parts for v in re.findall(r"\d+", p))


def test_a_rows_split_is_xlas() -> None:
    """`_row_wakes` of unary and binary rows against XLA:CPU's own split of the row's compiled
    program (`_xla_splits`): CHLO special functions are compute-bound by XLA's flops and
    split from a few thousand elements, a bf16 rsqrt by its converts, an exp of 64x1000
    (0 flops, 512 KB accessed) not, of 1x2^18 it does."""
    import jax
    from stablehlo_perf.runtime import sweeps

    rows = [
        (op, dtype, shape)
        for op in ("digamma", "lgamma", "erfc", "erf_inv", "rsqrt", "exponential", "add")
        for dtype in ("f32", "bf16")
        for shape in ((64, 100), (64, 1000), (1, 1 << 18), (16, 30))
    ]
    for op, dtype, shape in rows:
        fn, args = sweeps.op_and_shapes(sweeps.Spec(op, dtype, shape))
        hlo = jax.jit(fn).lower(*args).compile().as_text()
        assert _row_wakes(op, dtype, shape) == _xla_splits(hlo), (op, dtype, shape)


def test_a_long_kernel_run_on_the_calling_thread_pays_no_wake() -> None:
    """Beside adds of 0.5-3.5 us paying the 5 us base, rows of multiplies (1000+ flops:
    handed to the pool) whose kernels of 4-40 us pay 3 x their time up to the 200 us wake,
    and exps of 0 flops (run on the calling thread) whose kernels of 5-400 us pay nothing:
    the fit puts the threshold at 3.5-4 us with slope 3 (not where a plain step errs least),
    and a target with it charges a 40 us kernel the wake only in a call of 1000+ flops."""
    adds = [("add", "f32", (2048,), k, k + 5.0) for k in (0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5)]
    handed = [
        ("multiply", "f32", (4096,), k, k + 5.0 + min(3.0 * k, 200.0))
        for k in (4.0, 8, 12, 20, 30, 40)
    ]
    long = [("multiply", "f32", (4096,), k, k + 205.0) for k in (100.0, 150, 200, 250, 300)]
    inline = [("exponential", "f32", (4096,), k, k) for k in (5.0, 10.0, 40.0, 100.0, 400.0)]
    p = fit_host_params([*adds, *handed, *long, *inline])
    assert p.threadpool_wake_ns == pytest.approx(200e3)
    assert 3.5e3 < p.parallel_kernel_ns <= 4e3  # between the adds and the first multiply
    assert p.threadpool_wake_slope == 3.0
    host = _sloped_host(inline_flops=1000.0, parallel_kernel_ns=4e3)
    assert host.call_overhead_ns(40e3, pool_ns=40e3, xla_flops=0.0) == 0.0
    assert host.call_overhead_ns(40e3, pool_ns=40e3, xla_flops=4096.0) == pytest.approx(120e3)


def test_a_kernel_splits_by_the_flops_xla_counts(tmp_path: Path) -> None:
    """XLA:CPU weighs a kernel for its threads by its own FLOP count: a bf16 lgamma (54 flops
    an element once expanded, with its converts) of 64x96 splits where its StableHLO op
    counts none, one of 16x16 and a bf16 exp of 64x96 (2 flops an element, I/O-bound) do
    not; the pass agrees with the compiled HLO and charges the split kernel's wake."""
    import jax
    import jax.numpy as jnp
    import stablehlo_perf as sp
    from jax import lax

    target = _unit_cpu_with(
        tmp_path,
        "unit_cpu_chlo_split",
        "overhead_ns = 7.0\nthreadpool_wake_ns = 150.0\nparallel_kernel_ns = 1e9\n",
        cores=2,
    )
    for fn, shape, splits in (
        (lax.lgamma, (64, 96), True),
        (lax.lgamma, (16, 16), False),
        (jnp.exp, (64, 96), False),
    ):
        lowered = jax.jit(fn).lower(jax.ShapeDtypeStruct(shape, jnp.bfloat16))
        assert _xla_splits(lowered.compile().as_text()) == splits
        rep = sp.analyze(lowered.as_text(), target=target).report
        assert rep.call_overhead_ns == pytest.approx(7.0 + 150.0 * splits), (fn, shape)
