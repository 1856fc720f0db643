"""Pool contention: kernels after a library call cost more while its threads poll.

The probe's fit (runtime/contention_probes.py), the critical-path pass's charge
(`passes.critical_path._contention`), and the calibration header that carries it.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest
import stablehlo_perf as sp
from stablehlo_perf.analysis import calibration_files as cf
from stablehlo_perf.analysis.small_loops import parse_latencies
from stablehlo_perf.analysis.targets import load_target
from stablehlo_perf.passes import critical_path
from stablehlo_perf.runtime import calibrate, contention_probes


def test_fit_is_the_median_fraction_of_short_chains_and_the_long_chains_extra() -> None:
    # Pool kernel 50 / 52 us in two rounds. Chains of 4 us: 2 and 4 us beyond pool + chain
    # (0.5, 1.0); of 8 us: 4 and 8 (0.5, 1.0): median 0.75. The long chain (40 us) pays 45
    # and 47 us beyond: cap 46 us.
    fit = contention_probes.contention_fit(
        [50.0, 52.0],
        [([4.0, 4.0], [56.0, 60.0]), ([8.0, 8.0], [62.0, 68.0])],
        ([40.0, 40.0], [135.0, 139.0]),
    )
    assert fit.fraction == pytest.approx(0.75)
    assert fit.cap_ns == pytest.approx(46e3)
    # A chain faster after the library call than alone is noise, not a negative cost.
    none = contention_probes.contention_fit([50.0], [([4.0], [53.0])], ([40.0], [89.0]))
    assert none == contention_probes.Contention(0.0, 0.0)
    assert math.isnan(none.int8_fraction) and "int8_fraction" not in none.pairs()
    # After an int8 dot of 30 / 31 us the same chains pay 1 and 1 us (0.25, 0.25), 1 and 3
    # (0.125, 0.375): median 0.25, beside the f32 dot's numbers.
    int8 = ([30.0, 31.0], [([4.0, 4.0], [35.0, 36.0]), ([8.0, 8.0], [39.0, 42.0])])
    both = contention_probes.contention_fit(
        [50.0, 52.0],
        [([4.0, 4.0], [56.0, 60.0]), ([8.0, 8.0], [62.0, 68.0])],
        ([40.0, 40.0], [135.0, 139.0]),
        int8,
    )
    assert (both.fraction, both.cap_ns) == (fit.fraction, fit.cap_ns)
    assert both.int8_fraction == pytest.approx(0.25)
    assert both.pairs()["int8_fraction"] == pytest.approx(0.25)
    # The loop probe: its dots' loop 400 / 410 us, its kernels' 60 / 64, the loop 490 / 500
    # (30 and 26 beyond: 0.5 and 0.40625), median 0.453125; none measured, none written.
    loop = ([400.0, 410.0], [60.0, 64.0], [490.0, 500.0])
    looped = contention_probes.contention_fit(
        [50.0, 52.0],
        [([4.0, 4.0], [56.0, 60.0]), ([8.0, 8.0], [62.0, 68.0])],
        ([40.0, 40.0], [135.0, 139.0]),
        loop=loop,
    )
    assert looped.loop_fraction == pytest.approx(0.453125)
    assert looped.pairs()["loop_fraction"] == pytest.approx(0.453125)
    assert "loop_fraction" not in both.pairs()


def test_kernels_after_a_library_call_pay_a_fraction_up_to_the_cap() -> None:
    # Program order: a kernel before any library call (free), a library call, three other
    # kernels (0.5 x 2, 0.5 x 3, then 3.5 of its 5: the cap of 6 is reached), a loop (its
    # regions are priced elsewhere), a second library call, 40 us (capped at 6), 1 us
    # (nothing left).
    latency = [5.0, 60.0, 2.0, 3.0, 10.0, 30.0, 50.0, 40.0, 1.0]
    library = [False, True, False, False, False, False, True, False, False]
    control = [False, False, False, False, False, True, False, False, False]
    extra = critical_path._contention(latency, library, control, 0.5, 6.0)
    assert extra == pytest.approx([0.0, 0.0, 1.0, 1.5, 3.5, 0.0, 0.0, 6.0, 0.0])


def test_a_library_call_that_leaves_no_pollers_resets_nothing() -> None:
    # As above, but the second library call (a convolution, say) leaves no threads polling:
    # it pays nothing and the 40 us kernel after it pays the 0.5 the first call left.
    latency = [5.0, 60.0, 2.0, 3.0, 10.0, 30.0, 50.0, 40.0, 1.0]
    library = [False, True, False, False, False, False, True, False, False]
    starts = [False, True, False, False, False, False, False, False, False]
    control = [False, False, False, False, False, True, False, False, False]
    extra = critical_path._contention(latency, library, control, 0.5, 6.0, starts)
    assert extra == pytest.approx([0.0, 0.0, 1.0, 1.5, 3.5, 0.0, 0.0, 0.0, 0.0])
    extra = critical_path._contention(latency, library, control, 0.5, 9.0, starts)
    assert extra == pytest.approx([0.0, 0.0, 1.0, 1.5, 5.0, 0.0, 0.0, 1.5, 0.0])


def _analyze_with(monkeypatch: pytest.MonkeyPatch, lowered: object, **change: float) -> object:
    host = replace(load_target("host"), **change)
    monkeypatch.setattr(critical_path, "load_target", lambda name, t=host: t)
    return sp.analyze(lowered, target="host")


def _kernels_ns(result: object) -> float:
    """The call's kernels' time: its total less its per-call overhead."""
    return result.report.total_latency_ns - result.report.call_overhead_ns


def _entry_ops(module: object) -> list[object]:
    """The main function's top-level ops, in program order."""
    for func in module.body.operations:
        if func.attributes["sym_name"].value == "main":
            return list(func.regions[0].blocks[0].operations)
    raise AssertionError("no main function")


def test_pass_charges_the_kernels_after_a_dot(monkeypatch: pytest.MonkeyPatch) -> None:
    """A dot (a YNNPACK library call on the host, of more multiply-adds than
    `critical_path.ONE_THREAD_MACS`) then a cumulative sum of its rows (a reduce_window,
    which XLA:CPU does not fuse into the dot): each op of the kernels after
    the dot pays half its latency more, written on it as
    `perf.contention_ns` and added to the total; the same program priced without contention
    is that much shorter."""
    x = jax.ShapeDtypeStruct((128, 256), jnp.float32)
    w = jax.ShapeDtypeStruct((256, 256), jnp.float32)
    lowered = jax.jit(lambda x, w: jnp.cumsum(x @ w, axis=0)).lower(x, w)
    off = _analyze_with(monkeypatch, lowered, pool_contention=0.0, pool_contention_cap_ns=0.0)
    on = _analyze_with(monkeypatch, lowered, pool_contention=0.5, pool_contention_cap_ns=1e9)
    assert off.report.contention_ns == 0.0
    paid, seen_dot = {}, False
    for op in _entry_ops(on.module):
        seen_dot = seen_dot or op.name == "stablehlo.dot_general"
        if "perf.contention_ns" in op.attributes:
            assert seen_dot and op.name != "stablehlo.dot_general"
            latency = op.attributes["perf.latency_ns"].value
            assert op.attributes["perf.contention_ns"].value == pytest.approx(0.5 * latency)
            paid[op.name] = 0.5 * latency
    assert "stablehlo.reduce_window" in paid
    assert on.report.contention_ns == pytest.approx(sum(paid.values()))
    delta = _kernels_ns(on) - _kernels_ns(off)
    assert delta == pytest.approx(on.report.contention_ns, rel=1e-9)
    assert "of contention" in on.report.to_markdown()
    # A cap below what the kernels would pay bounds it.
    capped = _analyze_with(monkeypatch, lowered, pool_contention=0.5, pool_contention_cap_ns=10.0)
    assert capped.report.contention_ns == pytest.approx(10.0)


@pytest.mark.parametrize(
    ("int8_fraction", "charged"), [(math.nan, True), (0.4, True), (0.2, False), (0.0, False)]
)
def test_an_int8_dot_leaves_pollers_as_its_probe_says(
    monkeypatch: pytest.MonkeyPatch, int8_fraction: float, charged: bool
) -> None:
    """A batched int8 dot (int32 products), then their convert and scaling, as the zoo's
    int8_bmm: the kernel after it pays the contention where the target's fraction after an
    int8 dot is unknown or at least half the f32 dot's (0.5 here), and nothing below; an f32
    dot's kernels pay it whatever the int8 fraction."""
    a = jax.ShapeDtypeStruct((4, 64, 256), jnp.int8)
    b = jax.ShapeDtypeStruct((4, 256, 128), jnp.int8)

    def f(a: jax.Array, b: jax.Array) -> jax.Array:
        dims = (((2,), (1,)), ((0,), (0,)))
        q = jax.lax.dot_general(a, b, dims, preferred_element_type=jnp.int32)
        return jnp.cumsum(q.astype(jnp.float32) * 0.01, axis=1)

    change = {"pool_contention": 0.5, "pool_contention_cap_ns": 1e9}
    res = _analyze_with(
        monkeypatch, jax.jit(f).lower(a, b), **change, pool_contention_int8=int8_fraction
    )
    assert (res.report.contention_ns > 0) == charged
    x = jax.ShapeDtypeStruct((128, 256), jnp.float32)
    lowered = jax.jit(lambda x, w: jnp.cumsum(x @ w, axis=0)).lower(x, x.update(shape=(256, 256)))
    f32 = _analyze_with(monkeypatch, lowered, **change, pool_contention_int8=int8_fraction)
    assert f32.report.contention_ns > 0


def _loop_of_dots(steps: int = 5) -> object:
    """A fori_loop of `steps` trips whose body runs a dot (of more multiply-adds than
    `critical_path.ONE_THREAD_MACS`) then a cumulative sum (lowered)."""
    x = jax.ShapeDtypeStruct((128, 256), jnp.float32)
    w = jax.ShapeDtypeStruct((256, 256), jnp.float32)

    def f(x: jax.Array, w: jax.Array) -> jax.Array:
        return jax.lax.fori_loop(0, steps, lambda i, c: jnp.cumsum(c @ w, axis=0) * 1e-3, x)

    return jax.jit(f).lower(x, w)


@pytest.mark.parametrize("loop_fraction", [math.nan, 0.5])
def test_a_loops_trips_each_pay_its_bodys_contention(
    monkeypatch: pytest.MonkeyPatch, loop_fraction: float
) -> None:
    """A fori_loop of 5 trips whose body runs a dot then a cumulative sum: the sum pays half
    its latency a trip (the target's fraction, or its loop fraction where measured: both 0.5
    here; `perf.contention_ns` on it, as do the body's other kernels after the dot), the
    while op 5 times what its regions' ops pay, and the entry's total grows by that."""
    lowered = _loop_of_dots()
    off = _analyze_with(monkeypatch, lowered, pool_contention=0.0, pool_contention_cap_ns=0.0)
    on = _analyze_with(
        monkeypatch,
        lowered,
        pool_contention=0.5,
        pool_contention_cap_ns=1e9,
        pool_contention_loop=loop_fraction,
    )
    (loop,) = [op for op in _entry_ops(on.module) if op.name == "stablehlo.while"]
    assert loop.attributes["perf.trip_count"].value == 5
    inside = [op for r in loop.regions for b in r.blocks for op in b.operations]
    (window,) = [op for op in inside if op.name == "stablehlo.reduce_window"]
    paid = window.attributes["perf.contention_ns"].value
    assert paid == pytest.approx(0.5 * window.attributes["perf.latency_ns"].value)
    per_trip = sum(
        op.attributes["perf.contention_ns"].value
        for op in inside
        if "perf.contention_ns" in op.attributes
    )
    assert per_trip > paid
    assert loop.attributes["perf.contention_ns"].value == pytest.approx(5 * per_trip)
    assert on.report.contention_ns == pytest.approx(5 * per_trip)
    # The kernels' time grows by that (the call's overhead, whose long-call ramp runs on
    # the kernels' time, apart).
    delta = _kernels_ns(on) - _kernels_ns(off)
    assert delta == pytest.approx(5 * per_trip, rel=1e-9)


def test_a_loops_body_pays_the_loop_fraction_and_straight_code_the_chains(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With a loop fraction of 0.1 beside the chains' 0.5 (the Xeon VM measured 0.94 and
    4.7: `runtime.contention_probes`), the loop body's kernels after its dot pay a tenth of
    their latency a trip, and a dot then a cumulative sum in straight code still half."""
    change = {"pool_contention": 0.5, "pool_contention_cap_ns": 1e9}
    res = _analyze_with(monkeypatch, _loop_of_dots(), **change, pool_contention_loop=0.1)
    (loop,) = [op for op in _entry_ops(res.module) if op.name == "stablehlo.while"]
    inside = [op for r in loop.regions for b in r.blocks for op in b.operations]
    charged = [op for op in inside if "perf.contention_ns" in op.attributes]
    assert any(op.name == "stablehlo.reduce_window" for op in charged)
    for op in charged:
        latency = op.attributes["perf.latency_ns"].value
        assert op.attributes["perf.contention_ns"].value == pytest.approx(0.1 * latency)
    per_trip = sum(op.attributes["perf.contention_ns"].value for op in charged)
    assert res.report.contention_ns == pytest.approx(5 * per_trip)
    x = jax.ShapeDtypeStruct((128, 256), jnp.float32)
    straight = jax.jit(lambda x, w: jnp.cumsum(x @ w, axis=0)).lower(x, x.update(shape=(256, 256)))
    res = _analyze_with(monkeypatch, straight, **change, pool_contention_loop=0.1)
    (window,) = [op for op in _entry_ops(res.module) if op.name == "stablehlo.reduce_window"]
    latency = window.attributes["perf.latency_ns"].value
    assert window.attributes["perf.contention_ns"].value == pytest.approx(0.5 * latency)


def _conv(x: jax.Array, k: jax.Array, stride: int = 1) -> jax.Array:
    return jax.lax.conv_general_dilated(
        x, k, (stride, stride), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")
    )


def _pool(x: jax.Array) -> jax.Array:
    return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")


@pytest.mark.parametrize(
    ("name", "fn", "shapes", "charged"),
    [
        ("YNNPACK pool", lambda x: _pool(x), [(1, 32, 32, 32)], True),
        ("YNNPACK convolution", lambda x, k: _conv(x, k), [(1, 32, 32, 32), (3, 3, 32, 32)], False),
        ("Eigen convolution", lambda x, k: _conv(x, k), [(2, 32, 32, 3), (3, 3, 3, 16)], False),
        ("YNNPACK row sums", lambda x: x.sum(2, keepdims=True), [(1, 32, 32, 32)], False),
    ],
)
def test_pools_leave_pollers_convolutions_and_reductions_none(
    monkeypatch: pytest.MonkeyPatch, name: str, fn: object, shapes: list, charged: bool
) -> None:
    """A cumulative sum after each library call: charged after a YNNPACK pool, as after a
    dot, and not after a convolution or a YNNPACK reduction (`critical_path._leaves_pollers`)."""

    def f(*args: jax.Array) -> jax.Array:
        y = fn(*args)
        return jnp.cumsum(y.reshape(y.shape[0], -1), axis=1)

    lowered = jax.jit(f).lower(*(jax.ShapeDtypeStruct(s, jnp.float32) for s in shapes))
    res = _analyze_with(monkeypatch, lowered, pool_contention=0.5, pool_contention_cap_ns=1e9)
    assert (res.report.contention_ns > 0) == charged, name


def test_handoff_fit_is_the_median_extra_of_the_pair() -> None:
    # Eigen convolution 40 / 42 / 44 us, the YNNPACK one 20 / 20 / 21, the pair 100 / 110 /
    # 95: 40, 48 and 30 us beyond both, median 40 us. A pair faster than its parts is noise.
    fit = contention_probes.handoff_fit([40.0, 42.0, 44.0], [20.0, 20.0, 21.0], [100, 110, 95])
    assert fit == pytest.approx(40e3)
    assert contention_probes.handoff_fit([40.0], [20.0], [55.0]) == 0.0
    pairs = contention_probes.Contention(0.5, 1e3, eigen_handoff_ns=fit).pairs()
    assert pairs == {"fraction": 0.5, "cap_ns": 1e3, "eigen_handoff_ns": pytest.approx(40e3)}


def _stem(images: int, features: int, between: str = "relu") -> object:
    """A stem convolution of 3 features (Eigen on XLA:CPU) to `features`, then `between`
    ("relu", "sum": a YNNPACK row sum added back, or "eigen": a second Eigen convolution),
    then a YNNPACK convolution (3x3, stride 2, 32 out), lowered."""

    def f(x: jax.Array, k1: jax.Array, k2: jax.Array, k3: jax.Array) -> jax.Array:
        h = jax.nn.relu(_conv(x, k1))
        if between == "sum":
            h = h + h.sum(-1, keepdims=True)
        elif between == "eigen":
            h = _conv(h, k3)
        return _conv(h, k2, stride=2)

    shapes = [(images, 32, 32, 3), (3, 3, 3, features), (3, 3, features, 32)]
    shapes.append((3, 3, features, features))
    return jax.jit(f).lower(*(jax.ShapeDtypeStruct(s, jnp.float32) for s in shapes))


@pytest.mark.parametrize(
    ("images", "features", "between", "charged"),
    [
        (2, 16, "relu", True),  # 128 KiB from the Eigen convolution
        (1, 16, "relu", True),  # 64 KiB: the least that paid on the Xeon VM
        (1, 8, "relu", False),  # 32 KiB: paid 2-7 us there
        (2, 16, "sum", False),  # a YNNPACK reduce between: its own library call
        (2, 8, "eigen", True),  # the second Eigen convolution's 64 KiB hand over
    ],
)
def test_a_ynnpack_convolution_after_an_eigen_one_pays_the_handoff(
    monkeypatch: pytest.MonkeyPatch, images: int, features: int, between: str, charged: bool
) -> None:
    """The first YNNPACK convolution after an Eigen convolution that writes at least
    `EIGEN_HANDOFF_MIN_BYTES` pays the target's `eigen_handoff_ns` (written on it as
    `perf.contention_ns`, added to the kernels' time), through loop kernels but not past
    another library call; nothing where the target has no handoff."""
    lowered = _stem(images, features, between)
    off = _analyze_with(monkeypatch, lowered, pool_contention=0.0, eigen_handoff_ns=0.0)
    on = _analyze_with(monkeypatch, lowered, pool_contention=0.0, eigen_handoff_ns=45e3)
    assert off.report.contention_ns == 0.0
    paying = [op for op in _entry_ops(on.module) if "perf.contention_ns" in op.attributes]
    if not charged:
        assert paying == [] and on.report.total_latency_ns == off.report.total_latency_ns
        return
    (conv,) = paying
    assert conv.name == "stablehlo.convolution"
    assert conv.attributes["perf.contention_ns"].value == pytest.approx(45e3)
    assert on.report.contention_ns == pytest.approx(45e3)
    assert _kernels_ns(on) - _kernels_ns(off) == pytest.approx(45e3, rel=1e-9)


def test_a_loops_trips_each_pay_the_handoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fori_loop of 3 trips whose body is the stem convolution, then a YNNPACK one (16 to
    32 features) and a second back to 3 features (YNNPACK too: 32 in): each trip pays the
    handoff once."""
    shapes = [(2, 32, 32, 3), (3, 3, 3, 16), (3, 3, 16, 32), (3, 3, 32, 3)]

    def f(x: jax.Array, k1: jax.Array, k2: jax.Array, k3: jax.Array) -> jax.Array:
        def body(i: jax.Array, h: jax.Array) -> jax.Array:
            return _conv(_conv(jax.nn.relu(_conv(h, k1)), k2), k3)

        return jax.lax.fori_loop(0, 3, body, x)

    lowered = jax.jit(f).lower(*(jax.ShapeDtypeStruct(s, jnp.float32) for s in shapes))
    off = _analyze_with(monkeypatch, lowered, pool_contention=0.0, eigen_handoff_ns=0.0)
    on = _analyze_with(monkeypatch, lowered, pool_contention=0.0, eigen_handoff_ns=45e3)
    (loop,) = [op for op in _entry_ops(on.module) if op.name == "stablehlo.while"]
    assert loop.attributes["perf.contention_ns"].value == pytest.approx(3 * 45e3)
    assert _kernels_ns(on) - _kernels_ns(off) == pytest.approx(3 * 45e3, rel=1e-9)


def test_no_library_call_no_contention(monkeypatch: pytest.MonkeyPatch) -> None:
    x = jax.ShapeDtypeStruct((8, 128), jnp.float32)
    lowered = jax.jit(lambda x: jnp.sum(jnp.tanh(x), axis=0)).lower(x)
    res = _analyze_with(monkeypatch, lowered, pool_contention=0.5, pool_contention_cap_ns=1e9)
    assert res.report.contention_ns == 0.0
    assert "perf.contention_ns" not in res.annotated_ir


def _row(op: str, shape: str, us: float, call: float) -> list[str]:
    numel = math.prod(int(d) for d in shape.split("x"))
    return [op, "f32", shape, str(numel), f"{us:.4f}", "0.05", f"{call:.4f}", "15.0", "7", "80.0"]


def _calibration(path: Path, rows: list[list[str]], contention: dict[str, float]) -> Path:
    calibrate.write_calibration(rows, path, calibrate.header("host"), pool_contention=contention)
    return path


def test_header_carries_the_contention_through_refit_and_merge(tmp_path: Path) -> None:
    a = _calibration(
        tmp_path / "a.csv",
        [_row("add", "4096", 10.0, -0.5), _row("add", "8192", 20.0, 30.0)],
        {"fraction": 0.5, "cap_ns": 10e3, "int8_fraction": 0.1, "loop_fraction": 0.2},
    )
    written = parse_latencies(cf.header_value(a, contention_probes.KEY))
    assert written == {"fraction": 0.5, "cap_ns": 10e3, "int8_fraction": 0.1, "loop_fraction": 0.2}
    calibrate.refit(a)
    assert parse_latencies(cf.header_value(a, contention_probes.KEY)) == written
    b = _calibration(
        tmp_path / "b.csv",
        [_row("add", "4096", 40.0, 1.5)],
        {"fraction": 2.0, "cap_ns": 40e3},
    )
    out = tmp_path / "merged.csv"
    assert calibrate.merge([a, b], out) == 2
    # Geometric means: sqrt(0.5 x 2) = 1, sqrt(10 x 40) = 20 us.
    merged = parse_latencies(cf.header_value(out, contention_probes.KEY))
    assert merged == {
        "fraction": pytest.approx(1.0),
        "cap_ns": pytest.approx(20e3),
        "int8_fraction": pytest.approx(0.1),  # b measured none: a's alone
        "loop_fraction": pytest.approx(0.2),
    }
    # A call time of -0.5 us beside 1.5 has no geometric mean: the arithmetic one (0.5), and
    # the row survives a later read (a nan there dropped it).
    row = calibrate.read_partial(out)["add,f32,4096"]
    assert float(row[4]) == pytest.approx(20.0) and float(row[6]) == pytest.approx(0.5)
