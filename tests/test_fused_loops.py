"""The fused-loop model (analysis/fused_loops.py), its chains (runtime/fused_chains.py) and
its place in group pricing (analysis/fusion_cost.py)."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from stablehlo_perf import perf_jit
from stablehlo_perf.analysis import calibration_files as cf
from stablehlo_perf.analysis import fused_loops as fl
from stablehlo_perf.analysis.calibration_files import machine_fingerprint
from stablehlo_perf.analysis.elementwise import CalibrationError
from stablehlo_perf.runtime import calibrate, timing
from stablehlo_perf.runtime import fused_chains as fc

HEADER = "chain,dtype,shape,measured_us_median,spread,sentinel_us"


class Spy:
    """A model that records the compositions it is asked about and answers 1 us."""

    def __init__(self) -> None:
        self.seen: list[tuple[tuple[int, ...], fl.Composition]] = []
        self.sums: list[tuple[tuple[int, ...], fl.Composition, int]] = []

    def predict_us(self, kernels):
        self.seen.extend((tuple(shape), comp) for shape, comp in kernels)
        return [1.0] * len(kernels)

    def predict_reduce_us(self, kernels):
        self.sums.extend((tuple(shape), comp, kind) for shape, comp, kind in kernels)
        return [1.0] * len(kernels)


def test_chain_composition_is_what_the_pipeline_finds_in_the_lowered_chain(monkeypatch) -> None:
    """The features the model trains on (from step names) and those it is asked about (from
    the fusion group's StableHLO members) agree, on flat arrays, (n, 1) and wide shapes."""
    spy = Spy()
    monkeypatch.setattr(fl, "model_for_host", lambda: spy)
    shapes = [(4096,), (4096, 1), (256, 16), (16, 256), (1, 1024)]
    for chain in fc.draw(shapes, 4, seed=11):
        spy.seen.clear()
        fn, args = fc.build(chain)
        perf_jit(fn, target="host").analyze(*args)
        comp = fl.chain_composition(chain.ops, chain.shape, chain.dtype)
        sine_of_bf16 = chain.dtype == "bf16" and "sin" in chain.ops  # left to its members
        assert spy.seen == ([] if sine_of_bf16 else [(chain.shape, comp)]), chain


def test_sum_chain_features_are_what_the_pipeline_finds_in_the_lowered_chain(monkeypatch) -> None:
    """A chain that ends in a sum is asked about as the sum's input shape, the composition of
    the steps before it and the sum's kind, as the reduce model trains on it; no loop is
    asked about (the steps fuse into the sum's kernel)."""
    spy = Spy()
    monkeypatch.setattr(fl, "model_for_host", lambda: spy)
    shapes = [(4096,), (256, 16), (64, 64), (16, 256), (4096, 2)]
    chains = fc.draw_reduces(shapes, 2, seed=11)
    assert {c.ops[-1] for c in chains} == {"sum_rows", "sum_lead"}
    for chain in chains:
        spy.seen.clear()
        spy.sums.clear()
        fn, args = fc.build(chain)
        perf_jit(fn, target="host").analyze(*args)
        steps, kind = fl.split_reduce(chain.ops)
        assert spy.sums == [(chain.shape, fl.chain_composition(steps, chain.shape), kind)], chain
        assert spy.seen == [], chain


def test_summed_shape_and_rows_shape_by_hand(monkeypatch) -> None:
    """Sums over the last dimension are 1, over all the others 2, over a middle one 0 (no
    chain ran it), on the input as XLA collapses it: one over the last three dimensions is a
    sum of 8 rows of 8192, one over the first two a sum of the leading dimension of 128x512,
    one of all of it the 1-D sum of its elements; a 4-D tensor's sum over its leading three
    reads what its (rows, last) matrix's does."""
    spy = Spy()
    monkeypatch.setattr(fl, "model_for_host", lambda: spy)
    x = jnp.ones((8, 16, 16, 32))
    cases = [
        ((3,), (2048, 32), 1),
        ((0, 1, 2), (2048, 32), 2),
        ((0, 1, 2, 3), (65536,), 1),
        ((1, 2, 3), (8, 8192), 1),
        ((0, 1), (128, 512), 2),
        ((1,), None, 0),
        ((1, 2), None, 0),
    ]
    for axes, shape, kind in cases:
        spy.sums.clear()
        perf_jit(lambda x, a=axes: jnp.sum(x * 2.0, axis=a), target="host").analyze(x)
        assert [(s, k) for s, _, k in spy.sums] == ([(shape, kind)] if kind else []), axes
    assert fl.rows_shape((8, 16, 16, 32)) == (2048, 32)
    assert fl.rows_shape((4096,)) == (1, 4096)
    # A square or a negate feeding the sum is no step of its kernel; one before it is.
    assert fl.split_reduce(("sq", "sum_lead")) == ((), 2)
    assert fl.split_reduce(("neg", "tanh", "sum_rows")) == (("neg", "tanh"), 1)
    assert fl.split_reduce(("tanh", "neg", "sum_lead")) == (("tanh",), 2)
    assert fl.split_reduce(("sq", "tanh")) == (("sq", "tanh"), 0)
    # A plain sum has no steps before it: the reduction model prices it, not this one.
    spy.sums.clear()
    perf_jit(lambda x: jnp.sum(x, axis=-1), target="host").analyze(x)
    assert spy.sums == []
    # A sum over the leading axis keeping more than YNNPACK's column tile (16384) is no
    # sum chain's: it runs the library's slow path, which the chains never reached.
    for cols, want in ((16384, [((8, 16384), 2)]), (16385, [])):
        spy.sums.clear()
        perf_jit(lambda v: jnp.sum(v * v, axis=0), target="host").analyze(jnp.ones((8, cols)))
        assert [(s, k) for s, _, k in spy.sums] == want, cols


def test_a_square_or_negate_feeding_a_sum_is_no_step_of_its_kernel(monkeypatch) -> None:
    """YNNPACK sums squares itself and XLA moves a negate past a sum (`sum_absorbs`): in a
    loop, 1024x1024 f32, `(x * x).sum(-1)` ran as `x.sum(-1)` (35 us), `(x * 0.5).sum()` 112.
    A product of two different tensors, or a square before another step, is a step."""
    spy = Spy()
    monkeypatch.setattr(fl, "model_for_host", lambda: spy)
    x = jnp.ones((256, 64))
    none = fl.Composition(0, 0, 0, 0, 0, 1, 0)
    cases = [
        (lambda x, y: (x * x).sum(-1), none),
        (lambda x, y: jnp.square(x).sum(-1), none),
        (lambda x, y: (-jnp.exp(x)).sum(-1), fl.Composition(1, 1, 0, 0, 0, 1, 0)),
        (lambda x, y: (x * y).sum(-1), fl.Composition(1, 0, 0, 0, 0, 2, 0)),
        (lambda x, y: jnp.abs(x * x).sum(-1), fl.Composition(2, 0, 0, 0, 0, 1, 0)),
        (lambda x, y: ((x - y) ** 2).sum(), fl.Composition(1, 0, 0, 0, 0, 2, 0)),
    ]
    for k, (fn, comp) in enumerate(cases):
        spy.sums.clear()
        perf_jit(fn, target="host").analyze(x, x + 1.0)
        assert [c for _, c, _ in spy.sums] == [comp], k
    # A max is no sum: the square before it is a step.
    spy.sums.clear()
    perf_jit(lambda x: (x * x).max(-1), target="host").analyze(x)
    assert [c.ops for _, c, _ in spy.sums] == [1]


def test_int_and_long_chain_features_are_what_the_pipeline_finds(monkeypatch) -> None:
    """uint32 chains (a random generator's rounds: shifts, xors, ors, adds), chains of 17-48
    steps, of cheap steps, of up to four full-size inputs and of bf16 are asked about as the
    model trains on them; a bitcast to f32 is free."""
    spy = Spy()
    monkeypatch.setattr(fl, "model_for_host", lambda: spy)
    shapes = [(4096,), (4096, 1), (256, 16), (16, 256)]
    chains = fc.draw_ints(shapes, 3, seed=11) + fc.draw_long(shapes, 1, seed=11)
    chains += fc.draw_cheap(shapes, 1, seed=11) + fc.draw_inputs(shapes, 2, seed=11)
    chains += fc.draw_bf16(shapes, 2, seed=11) + fc.draw_bf16(shapes, 1, 11, fc.CHEAP_STEPS)
    assert {c.dtype for c in chains} == {"u32", "f32", "bf16"}
    for chain in chains:
        spy.seen.clear()
        fn, args = fc.build(chain)
        perf_jit(fn, target="host").analyze(*args)
        comp = fl.chain_composition(chain.ops, chain.shape, chain.dtype)
        sine_of_bf16 = chain.dtype == "bf16" and "sin" in chain.ops  # left to its members
        assert spy.seen == ([] if sine_of_bf16 else [(chain.shape, comp)]), chain
    spy.seen.clear()
    u = fc.build(fc.Chain(("rotl",), (256, 16), "u32"))[1][0]
    perf_jit(lambda u: lax.bitcast_convert_type(u >> 9 | 0x3F800000, jnp.float32) - 1.0,
             target="host").analyze(u)  # fmt: skip
    assert spy.seen == [((256, 16), fl.Composition(3, 0, 0, 0, 0, 1, 0, integer=2))]


def test_int32_masks_and_index_arithmetic_are_loops_the_chains_price(monkeypatch) -> None:
    """A causal mask (iotas compared, a select of f32) is the f32 chains' two selects; int32
    adds, multiplies and shifts are the uint32 chains' integer steps, and a mask's `and` one
    too; an integer divide by a tensor (a scalar loop) is not theirs. Each had been priced
    by its bytes at DRAM bandwidth, 2.0-3.6x its time in a loop."""
    spy = Spy()
    monkeypatch.setattr(fl, "model_for_host", lambda: spy)
    x, a = jnp.ones((512, 512)), jnp.ones((4096,), jnp.int32)

    def causal(x):
        return jnp.where(jnp.arange(512)[:, None] >= jnp.arange(512)[None, :], x, -1e9)

    perf_jit(causal, target="host").analyze(x)
    assert spy.seen == [((512, 512), fl.Composition(2, 0, 0, 0, 2, 1, 2, integer=0))]
    for fn, comp in (
        (lambda a, b: (a + b) * 3 - (a >> 2), fl.Composition(4, 0, 0, 0, 0, 2, 0, integer=4)),
        (lambda a, b: jnp.where((a > 0) & (b < 10), a, 0), fl.Composition(4, 0, 0, 0, 3, 2, 0, 1)),
        (lambda a, b: a // b, None),
    ):
        spy.seen.clear()
        perf_jit(fn, target="host").analyze(a, a)
        assert spy.seen == ([((4096,), comp)] if comp else [])


def _zen4_chains() -> tuple[Path, list[str], list[list[str]], float]:
    """The shipped Zen 4 chain file: its path, lines, rows (split) and the speed its rows are
    read at (the loop chains' median sentinel time)."""
    path = cf.shipped_file("host_fused_zen4.csv")
    lines = path.read_text().splitlines()
    rows = [ln.split(",") for ln in lines if ln and ln[0] != "#"][1:]
    return path, lines, rows, cf.median_sentinel([float(r[5]) for r in rows if "sum_" not in r[0]])


def _price_by_zen4_chains(monkeypatch: pytest.MonkeyPatch) -> fl.FusedLoopModel:
    """Have the host's pipeline price loop kernels by a model fitted on the shipped Zen 4
    chains, whatever machine runs the test (the Xeon VM's own chains would answer there);
    returns that model."""
    path = _zen4_chains()[0]
    short = fl.FusedLoopRegressor().fit(*fl.load_chains(path))
    wide = fl.FusedLoopRegressor().fit(*fl.load_chains(path, extended=True))
    model = fl.FusedLoopModel(short, path.name, wide_regressor=wide)
    monkeypatch.setattr(fl, "model_for_host", lambda: model)
    return model


def _pipeline_error_factor(rows: list[list[str]], speed: float) -> float:
    """The error factor of chain CSV rows priced through the pipeline (each one kernel, the
    fused-loop model's) against their times at `speed` (by their sentinels)."""
    errs = []
    for chain, dtype, shape, us, _, sentinel in rows:
        c = fc.Chain(tuple(chain.split(".")), tuple(map(int, shape.split("x"))), dtype)
        fn, args = fc.build(c)
        result = perf_jit(fn, target="host").analyze(*args).result.report
        [group] = [g for g in result.fusion_groups if g["latency_ns"] > 0]
        assert group["model"] == "fused-loop:hgb-host-fused", chain
        errs.append(
            abs(math.log(group["latency_ns"] / 1e3 / (float(us) * speed / float(sentinel))))
        )
    return math.exp(float(np.mean(errs)))


def _long_or_int(chain: str, dtype: str) -> bool:
    return dtype == "u32" or chain.count(".") >= 16


def _long_and_cheap(chain: str, dtype: str) -> bool:
    steps = chain.split(".")
    return dtype == "f32" and len(steps) > fl.SHORT_STEPS and set(steps) <= set(fc.CHEAP_STEPS)


def _bf16(chain: str, dtype: str) -> bool:
    steps = chain.split(".")  # one step is one op's kernel, priced by its own model
    return dtype == "bf16" and len(steps) > 1 and "sin" not in steps


@pytest.mark.parametrize(
    ("picks", "every", "beyond_short"),
    [(_long_or_int, 8, True), (_long_and_cheap, 2, False), (_bf16, 8, True)],
    ids=["int-and-long", "cheap", "bf16"],
)
def test_the_zen4_chains_beyond_the_short_ones_are_priced_by_the_model(
    monkeypatch, picks, every, beyond_short
) -> None:
    """The shipped Zen 4 chains the short chains' regressor does not cover (uint32 rounds,
    17-48 steps, 9-32 cheap steps, bf16), priced through the pipeline by the wide one, come
    within an error factor of 1.3 of their rows at the file's speed (in sample; 85 held-out
    chains of each, seed 99, scored 1.55 for uint32 and 1.25 for long ones where the member
    rule had scored 3.69 and 3.10, it prices the steps by their bytes; 1.45 for cheap ones of
    9-32 steps where the model without the cheap chains had scored 1.93; 1.30 and 1.27 for
    bf16 ones and cheap bf16 ones, 1.52 and 2.23 by the member rule and its bf16 floor)."""
    _, _, rows, speed = _zen4_chains()
    model = _price_by_zen4_chains(monkeypatch)
    picked = [r for r in rows if picks(r[0], r[1])][::every]
    assert len(picked) >= 40
    assert _pipeline_error_factor(picked, speed) < 1.3
    # The short chains' regressor alone answers for none of the uint32, 17-48 step and bf16
    # ones (cheap steps of one op each may add up to no more ops than a short chain's).
    shapes = [tuple(map(int, r[2].split("x"))) for r in picked]
    kernels = [(s, fl.chain_composition(r[0].split("."), s, r[1])) for s, r in zip(shapes, picked)]
    short_only = dataclasses.replace(model, wide_regressor=None)
    answered = [us is not None for us in short_only.predict_us(kernels)]
    assert not any(answered) if beyond_short else not all(answered)


def _more_inputs(chain: str, dtype: str) -> bool:
    return dtype == "f32" and bool(set(chain.split(".")) & set(fc.MORE_INPUT_STEPS))


def test_the_zen4_chains_of_more_inputs_are_priced_by_the_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The shipped Zen 4 chains on a third and fourth full-size input, priced through the
    pipeline, come within an error factor of 1.3 of their rows at the file's speed (in
    sample; 85 held-out chains, seed 99, scored 1.41, and 1.51 before they were measured,
    when a kernel of four inputs was left to its members' rule: 1.88 on those); fitted
    without them, neither regressor answers for a kernel of four inputs."""
    _, lines, rows, speed = _zen4_chains()
    _price_by_zen4_chains(monkeypatch)
    picked = [r for r in rows if _more_inputs(r[0], r[1])][::2]
    assert len(picked) >= 40
    assert _pipeline_error_factor(picked, speed) < 1.3
    shapes = [tuple(map(int, r[2].split("x"))) for r in picked]
    kernels = [(s, fl.chain_composition(r[0].split("."), s)) for s, r in zip(shapes, picked)]
    fours = [k for k in kernels if k[1].full_inputs == 4]
    assert fours
    fewer = tmp_path / "fewer_inputs.csv"
    fewer.write_text(
        "\n".join(ln for ln in lines if ln[:1] == "#" or not _more_inputs(*ln.split(",")[:2]))
        + "\n"
    )
    short = fl.FusedLoopRegressor().fit(*fl.load_chains(fewer))
    wide = fl.FusedLoopRegressor().fit(*fl.load_chains(fewer, extended=True))
    model = fl.FusedLoopModel(short, fewer.name, wide_regressor=wide)
    assert model.predict_us(fours) == [None] * len(fours)


def test_inputs_chains_are_drawn_from_their_steps() -> None:
    """`draw_inputs`: the same chains for a seed, of 2-12 steps from `INPUTS_STEPS`; the
    other draws never read a third or fourth input (their seeds' chains are unchanged)."""
    shapes = [(4096,), (256, 16)]
    chains = fc.draw_inputs(shapes, 4, seed=5)
    assert chains == fc.draw_inputs(shapes, 4, seed=5)
    assert all(2 <= len(c.ops) <= 12 and set(c.ops) <= set(fc.INPUTS_STEPS) for c in chains)
    assert any(set(c.ops) & set(fc.MORE_INPUT_STEPS) for c in chains)
    assert not set(fc.MORE_INPUT_STEPS) & set(fc.LOOP_STEPS + fc.LONG_STEPS + fc.CHEAP_STEPS)
    fn, args = fc.build(fc.Chain(("add_z", "mul_w", "add_y"), (64, 16)))
    assert len(args) == 6 and fn(*args).shape == (64, 16)
    assert len(fc.build(fc.Chain(("add_y",), (64, 16)))[1]) == 4


def test_cheap_chains_are_drawn_from_cheap_steps_only() -> None:
    """`draw_cheap`: the same chains for a seed, of 2-32 steps from `CHEAP_STEPS` (no
    transcendental, no divide), one per shape asked."""
    shapes = [(4096,), (256, 16)]
    chains = fc.draw_cheap(shapes, 3, seed=5)
    assert chains == fc.draw_cheap(shapes, 3, seed=5) != fc.draw_cheap(shapes, 3, seed=6)
    assert [c.shape for c in chains] == [(4096,)] * 3 + [(256, 16)] * 3
    assert all(2 <= len(c.ops) <= 32 and set(c.ops) <= set(fc.CHEAP_STEPS) for c in chains)
    assert not set(fc.CHEAP_STEPS) & {"tanh", "exp", "log", "rsqrt", "sigmoid", "sin", "div_y"}


def test_a_chain_drawn_twice_is_measured_once_per_element_type() -> None:
    """The calibration's two bf16 draws (all steps, cheap steps) share short chains at seed 0
    (`mul_c` on 32x2048 is drawn by both), and the timing harness needs distinct keys:
    `measure` records each (dtype, chain) once, an f32 chain beside its bf16 twin included
    (the timing crashed on the repeat at the end of a 40-minute calibration, 2026-12-05)."""
    shapes = fc.TRAINING_SHAPES
    both = fc.draw_bf16(shapes, 1, seed=0) + fc.draw_bf16(shapes, 1, seed=0, steps=fc.CHEAP_STEPS)
    assert len({c.key for c in both}) < len(both)
    bf, f32 = fc.Chain(("mul_c",), (64, 64), "bf16"), fc.Chain(("mul_c",), (64, 64))
    rows = fc.measure([bf, f32, bf], repeats=1)
    assert [(r["dtype"], r["chain"]) for r in rows] == [("bf16", "mul_c"), ("f32", "mul_c")]
    assert all(r["measured_us_median"] > 0 for r in rows)


def test_composition_by_hand() -> None:
    ops = ("mul_row", "tanh", "div_y", "sub_col", "mul_row", "sigmoid", "where_col", "sin")
    assert fl.chain_composition(ops, (64, 32)) == fl.Composition(
        ops=5 + 4 + 2 + 1,
        transcendental=2,
        trigonometric=1,
        divides=2,
        selects=2,
        full_inputs=2,
        broadcasts=4,
    )
    # On (n, 1) the column vector is a second full-size input; on (n,) the row vector is,
    # and a one-element column's compare is no op.
    assert fl.chain_composition(("sub_col",), (64, 1)).full_inputs == 2
    assert fl.chain_composition(("mul_row",), (64,)) == fl.Composition(1, 0, 0, 0, 0, 2, 0)
    assert fl.chain_composition(("where_col",), (64,)).ops == 1
    # A rotation is three uint32 ops; a row vector read once and broadcast.
    assert fl.chain_composition(("rotl", "ixor_y", "ixor_row"), (64, 32)) == fl.Composition(
        ops=5, transcendental=0, trigonometric=0, divides=0, selects=0, full_inputs=2,
        broadcasts=1, integer=5,
    )  # fmt: skip
    with pytest.raises(CalibrationError, match="unknown chain step 'cos'"):
        fl.chain_composition(("cos",), (8,))


def test_a_group_with_an_op_the_chains_never_ran_is_left_to_the_member_rule(monkeypatch) -> None:
    spy = Spy()
    monkeypatch.setattr(fl, "model_for_host", lambda: spy)
    res = perf_jit(lambda x: jnp.cos(x) * 2.0, target="host").analyze(jnp.ones((512, 256)))
    assert spy.seen == []
    assert "hgb-host-fused" not in res.result.report.fusion_groups[0]["model"]


def test_a_convert_of_words_or_narrow_integers_counts_as_one_op_of_the_loop(monkeypatch) -> None:
    """An int32 product scaled to f32 (a quantised matmul's epilogue) is a two-op loop, and so
    is an int8 one (`fl._NARROW_INTS`: uint8 image pixels); a YNNPACK sum of converted int8
    is not one the sums' chains stand for (they read f32 only), while the same sum of f32
    is."""
    spy = Spy()
    monkeypatch.setattr(fl, "model_for_host", lambda: spy)
    q = jnp.ones((64, 128), jnp.int32)
    perf_jit(lambda q: q.astype(jnp.float32) * 0.01, target="host").analyze(q)
    assert spy.seen == [((64, 128), fl.Composition(2, 0, 0, 0, 0, 1, 0))]
    spy.seen.clear()
    perf_jit(lambda q: q.astype(jnp.float32) * 0.01, target="host").analyze(q.astype(jnp.int8))
    assert spy.seen == [((64, 128), fl.Composition(2, 0, 0, 0, 0, 1, 0))]

    def channel_sums(x):
        return (x.astype(jnp.float32) * 2.0).sum(axis=(0, 1))

    x = jnp.ones((64, 512, 3), jnp.float32)
    perf_jit(channel_sums, target="host").analyze(x)
    assert len(spy.sums) == 1
    spy.sums.clear()
    perf_jit(channel_sums, target="host").analyze(x.astype(jnp.uint8))
    assert spy.sums == []


def test_a_reversed_operand_is_index_arithmetic_of_the_loop(monkeypatch) -> None:
    """`x[:, ::-1] + 1` is the one-op loop `x + 1` is (a reverse fused into a loop reads the
    elements in the other order, no work of its own); a reverse alone is no loop the chains
    ran."""
    spy = Spy()
    monkeypatch.setattr(fl, "model_for_host", lambda: spy)
    x = jnp.ones((256, 512))
    perf_jit(lambda x: x[:, ::-1] + 1.0, target="host").analyze(x)
    reversed_ = list(spy.seen)
    spy.seen.clear()
    perf_jit(lambda x: x + 1.0, target="host").analyze(x)
    assert reversed_ == spy.seen == [((256, 512), fl.Composition(1, 0, 0, 0, 0, 1, 0))]
    spy.seen.clear()
    perf_jit(lambda x: x[:, ::-1], target="host").analyze(x)
    assert spy.seen == []


def test_slices_of_one_input_are_the_loop_of_two(monkeypatch) -> None:
    """`z[:n] + z[n:]` reads two full-size parts of z: the loop of `x + y`, two inputs."""
    spy = Spy()
    monkeypatch.setattr(fl, "model_for_host", lambda: spy)
    n = 256 * 512
    perf_jit(lambda z: z[:n] + z[n:], target="host").analyze(jnp.ones((2 * n,)))
    halves = list(spy.seen)
    spy.seen.clear()
    perf_jit(lambda x, y: x + y, target="host").analyze(jnp.ones((n,)), jnp.ones((n,)))
    assert halves == spy.seen == [((n,), fl.Composition(1, 0, 0, 0, 0, 2, 0))]


def _synthetic_rows() -> tuple[np.ndarray, np.ndarray, list[tuple]]:
    """Chains on a grid whose time is exactly 0.5 us + 1 ns per element and op."""
    rows = []
    for shape in [(n // d, d) for n in (1024, 8192, 65536) for d in (8, 64, 512)]:
        for ops in [("add_c",), ("tanh", "mul_y"), ("exp", "mul_row", "div_y", "add_c")]:
            comp = fl.chain_composition(ops, shape)
            rows.append((shape, comp, 0.5 + 1e-3 * math.prod(shape) * comp.ops))
    X = np.array([fl.features(s, c) for s, c, _ in rows])
    return X, np.array([t for *_, t in rows]), rows


def test_regressor_fits_a_line_in_work_and_says_what_it_covers() -> None:
    X, y, rows = _synthetic_rows()
    reg = fl.FusedLoopRegressor().fit(X, y)
    np.testing.assert_allclose(reg.predict(X), y, rtol=0.02)
    assert reg.covers(X).all()
    shape, comp, _ = rows[-1]
    more_ops = dataclasses.replace(comp, ops=comp.ops + 1)
    bigger = (131072, 8)
    assert not reg.covers(np.array([fl.features(shape, more_ops)]))[0]
    assert not reg.covers(np.array([fl.features(bigger, comp)]))[0]


def _write(path: Path, lines: list[str], machine: str | None = None) -> Path:
    head = [f"# machine: {machine or machine_fingerprint()}", HEADER]
    path.write_text("\n".join(head + lines) + "\n")
    return path


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("tanh,f32,64x8,-1.0,0.1,150", "row 3: time -1.0 is not a positive number"),
        ("tanh,f32,64x8,nan,0.1,150", "row 3: time nan is not a positive number"),
        ("tanh,f32,64xeight,1.0,0.1,150", "row 3: malformed"),
        ("cos,f32,64x8,1.0,0.1,150", "unknown chain step 'cos'"),
    ],
)
def test_bad_chain_rows_are_clear_errors(tmp_path: Path, row: str, message: str) -> None:
    path = _write(tmp_path / "chains.csv", ["add_c,f32,64x8,1.0,0.1,150", row])
    with pytest.raises(CalibrationError, match=message):
        fl.load_chains(path)


def test_an_empty_chain_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(CalibrationError, match="no rows"):
        fl.load_chains(_write(tmp_path / "chains.csv", []))


def test_rows_are_put_at_the_files_median_machine_speed(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "chains.csv",
        ["add_c,f32,64x8,1.0,0.1,100", "add_c,f32,64x16,3.0,0.1,150", "tanh,f32,64x8,2.0,0.1,200"],
    )
    _, y = fl.load_chains(path)
    np.testing.assert_allclose(y, [1.5, 3.0, 1.5])


def test_loop_and_sum_chains_load_apart_at_the_whole_files_speed(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "chains.csv",
        [
            "add_c,f32,64x8,1.0,0.1,100",
            "tanh.sum_rows,f32,64x64,3.0,0.1,300",
            "tanh,f32,64x8,2.0,0.1,200",
        ],
    )
    # Both at the loop rows' median sentinel (150), not all three rows' (200).
    X, y = fl.load_chains(path)
    np.testing.assert_allclose(y, [1.5, 1.5])
    Xr, yr = fl.load_chains(path, reduces=True)
    np.testing.assert_allclose(yr, [1.5])
    assert X.shape == (2, Xr.shape[1] - 1)  # the loops' features lack the sum's kind
    comp = fl.Composition(1, 1, 0, 0, 0, 1, 0)
    assert Xr.tolist() == [fl.reduce_features((64, 64), comp, 1)]
    assert Xr[0, -1] == 64 * 64 * 2 and Xr[0, -2] == 1  # work counts the sum; its kind
    with pytest.raises(CalibrationError, match="no sum chain rows"):
        fl.load_chains(_write(tmp_path / "loops.csv", ["add_c,f32,64x8,1.0,0.1,100"]), True)


def test_the_model_answers_only_on_the_machine_its_chains_were_measured_on(tmp_path: Path) -> None:
    lines = [
        f"{'.'.join(ops)},f32,{'x'.join(map(str, s))},{t},0.1,150"
        for s, ops, t in [
            (s, o, 0.5 + 1e-3 * math.prod(s) * len(o))
            for s in [(128, 8), (1024, 64), (128, 512)]
            for o in [("add_c",), ("tanh", "mul_y"), ("exp", "mul_row", "div_y", "add_c")]
        ]
    ]
    here = fl.model_for_host(_write(tmp_path / "here.csv", lines))
    assert here is not None and here.source == "here.csv"
    elsewhere = _write(tmp_path / "other.csv", lines, machine="Some Other CPU, 2 cores, riscv64")
    assert fl.model_for_host(elsewhere) is None
    assert fl.model_for_host(tmp_path / "missing.csv") is None
    broken = _write(tmp_path / "broken.csv", [*lines, "tanh,f32,64x8,-1,0.1,150"])
    with pytest.warns(UserWarning, match=r"broken.csv: row \d+: time -1.0 is not a positive"):
        assert fl.model_for_host(broken) is None


def test_a_covered_host_loop_is_priced_by_the_model(monkeypatch) -> None:
    X, y, _ = _synthetic_rows()
    model = fl.FusedLoopModel(fl.FusedLoopRegressor().fit(X, y), "synthetic")
    monkeypatch.setattr(fl, "model_for_host", lambda: model)
    chain = fc.Chain(("tanh", "mul_y"), (128, 64))
    fn, args = fc.build(chain)
    group = perf_jit(fn, target="host").analyze(*args).result.report.fusion_groups[0]
    [want] = model.predict_us([(chain.shape, fl.chain_composition(chain.ops, chain.shape))])
    assert group["model"] == "fused-loop:hgb-host-fused"
    assert group["latency_ns"] == pytest.approx(want * 1e3)
    # By hand: the synthetic chains take 0.5 us + 1 ns per element and op, 8192 x 2 here.
    assert group["latency_ns"] == pytest.approx(500 + 8192 * 2, rel=0.02)
    # Other targets keep their own rules.
    tpu = perf_jit(fn, target="tpu-v5e").analyze(*args).result.report.fusion_groups[0]
    assert "hgb-host-fused" not in tpu["model"]


def _synthetic_sum_model() -> fl.FusedLoopModel:
    """Loop chains of `_synthetic_rows`, and sum chains taking 2 us + 2 ns per element and
    op (the sum one of them)."""
    X, y, _ = _synthetic_rows()
    sums = []
    for shape in [(n // d, d) for n in (4096, 32768, 262144) for d in (8, 64, 512)]:
        for ops in [("sq",), ("sub_col", "sq"), ("exp", "mul_row", "add_c")]:
            for kind in (1, 2):
                comp = fl.chain_composition(ops, shape)
                t = 2.0 + 2e-3 * math.prod(shape) * (comp.ops + 1)
                sums.append((fl.reduce_features(shape, comp, kind), t))
    Xr, yr = np.array([f for f, _ in sums]), np.array([t for _, t in sums])
    return fl.FusedLoopModel(
        fl.FusedLoopRegressor().fit(X, y), "synthetic", fl.FusedLoopRegressor().fit(Xr, yr)
    )


def test_a_covered_host_sum_is_priced_by_the_reduce_model(monkeypatch) -> None:
    """A layer norm's variance, `sum((x - mean)^2)` over rows: one YNNPACK kernel priced by
    the sum chains' model; a model without sum chains leaves it to the member rule."""
    model = _synthetic_sum_model()
    monkeypatch.setattr(fl, "model_for_host", lambda: model)
    chain = fc.Chain(("sub_col", "sq", "sum_rows"), (512, 64))
    fn, args = fc.build(chain)
    group = perf_jit(fn, target="host").analyze(*args).result.report.fusion_groups[0]
    comp = fl.chain_composition(("sub_col",), chain.shape)
    [want] = model.predict_reduce_us([(chain.shape, comp, 1)])
    assert group["model"] == "fused-input:hgb-host-fused-reduce"
    assert group["latency_ns"] == pytest.approx(want * 1e3)
    # By hand: 2 us + 2 ns per element and op, 32768 x 2 here (the subtract and the sum:
    # YNNPACK sums the squares itself).
    assert group["latency_ns"] == pytest.approx(2000 + 32768 * 2 * 2, rel=0.03)
    loops_only = dataclasses.replace(model, reduce_regressor=None)
    monkeypatch.setattr(fl, "model_for_host", lambda: loops_only)
    group = perf_jit(fn, target="host").analyze(*args).result.report.fusion_groups[0]
    assert "hgb-host-fused" not in group["model"]


def test_a_sum_past_the_largest_chain_is_priced_at_that_chains_time_an_element() -> None:
    """The synthetic sums reach 262144 elements: a sum of 1M is four of the largest; one
    row longer than the largest chain is not covered."""
    model = _synthetic_sum_model()
    comp = fl.chain_composition(("sub_col",), (16384, 64))
    big, small, long_row = model.predict_reduce_us(
        [((16384, 64), comp, 1), ((4096, 64), comp, 1), ((2, 300000), comp, 1)]
    )
    assert big == pytest.approx(4 * small)
    # By hand: 2 us + 2 ns per element and op (the subtract and the sum), 1M x 2 here.
    assert big == pytest.approx(2 + 2e-3 * 16384 * 64 * 2, rel=0.03)
    assert long_row is None


def test_the_xeon_sums_price_squared_distances_past_their_sizes(monkeypatch) -> None:
    """The shipped Xeon chains reach 4M summed elements (`fc.LARGE_SHAPES`, 2026-12-07):
    the squared distances of 1000 x 64 to 500 x 64 rows (32M elements) took 2.66-2.82 ms
    in a loop there (three runs), priced 0.43 ms from their members before (0.15x) and
    4.0 ms from the sums past their sizes."""
    path = cf.shipped_file(fl.SHIPPED[0])
    X, y = fl.load_chains(path, reduces=True)
    assert X[:, 0].max() == max(math.prod(s) for s in fc.LARGE_SHAPES)
    model = fl.FusedLoopModel(
        fl.FusedLoopRegressor().fit(*fl.load_chains(path)), path.name,
        fl.FusedLoopRegressor().fit(X, y),
    )  # fmt: skip
    monkeypatch.setattr(fl, "model_for_host", lambda: model)
    a, b = jnp.zeros((1000, 64)), jnp.zeros((500, 64))
    fn = perf_jit(lambda a, b: ((a[:, None] - b[None]) ** 2).sum(-1), target="host")
    [group] = fn.analyze(a, b).result.report.fusion_groups
    assert group["model"] == "fused-input:hgb-host-fused-reduce"
    assert 0.6 < group["latency_ns"] / 2.74e6 < 1.8


def test_a_sum_with_ops_after_it_in_its_kernel_is_priced_by_the_sums(monkeypatch) -> None:
    """A row norm, `sqrt(sum(x * x))`: XLA:CPU takes the square root into the sum's YNNPACK
    kernel, which the sums' model prices by the sum (the root's work is on the rows)."""
    spy = Spy()
    monkeypatch.setattr(fl, "model_for_host", lambda: spy)
    fn = perf_jit(lambda x: jnp.sqrt((x * x).sum(-1)), target="host")
    [group] = fn.analyze(jnp.zeros((4096, 64))).result.report.fusion_groups
    assert group["model"] == "fused-input:hgb-host-fused-reduce"
    assert [(shape, kind) for shape, _, kind in spy.sums] == [((4096, 64), 1)]


def test_draw_reduces_ends_every_chain_in_a_sum_its_kernel_takes() -> None:
    chains = fc.draw_reduces(fc.TRAINING_SHAPES, 1, seed=5)
    assert chains == fc.draw_reduces(fc.TRAINING_SHAPES, 1, seed=5)
    assert all(math.prod(c.shape) >= fc.YNN_REDUCE_MIN_ELEMENTS for c in chains)
    assert all(c.ops[-1] in fc.REDUCES and set(c.ops[:-1]) <= set(fc.REDUCE_STEPS) for c in chains)
    assert not any(c.ops[-1] == "sum_rows" and c.shape[-1] == 1 for c in chains)
    assert not any(c.ops[-1] == "sum_lead" and len(c.shape) == 1 for c in chains)
    fn, (x, y, row, col) = fc.build(fc.Chain(("sub_col", "sq", "sum_lead"), (3, 4)))
    np.testing.assert_allclose(fn(x, y, row, col), ((x - col) ** 2).sum(axis=0), rtol=1e-5)


def test_draw_is_deterministic_and_build_computes_the_chain() -> None:
    assert fc.draw(fc.TRAINING_SHAPES[:5], 2, seed=3) == fc.draw(fc.TRAINING_SHAPES[:5], 2, seed=3)
    steps = ("mul_row", "sub_col", "div_y", "tanh", "where_col", "clip", "sigmoid")
    fn, (x, y, row, col) = fc.build(fc.Chain(steps, (3, 4)))
    v = np.clip(np.where(col > 0, np.tanh((x * row - col) / y), 0.0), -1.0, 1.0)
    np.testing.assert_allclose(fn(x, y, row, col), 1 / (1 + np.exp(-v)), rtol=1e-5)


def test_shipped_chains_load_and_the_fit_reproduces_them() -> None:
    """The shipped Xeon chains (the 365 short f32 loop chains of its --quick calibration):
    in-sample median relative error of the fit under 15% (a broken feature or a shuffled
    column would not get there)."""
    X, y = fl.load_chains(cf.shipped_file(fl.SHIPPED[0]))
    assert len(y) >= 350
    reg = fl.FusedLoopRegressor().fit(X, y)
    assert float(np.median(np.abs(reg.predict(X) / y - 1))) < 0.15


def test_shipped_zen5_chains_price_large_loops_at_sizes_they_did_not_see() -> None:
    """The shipped Zen 5 chains reach `fc.LARGE_SHAPES` (1.5M-4M f32 elements, 144 chains,
    where kernels leave the last-level cache), which the 1M-element training shapes did not:
    fitted without one interior size, the model prices that size's chains at a geometric
    mean error factor of 1.42 / 1.44 (2M / 3M elements; the member rule scored 2.2 on
    held-out chains of these sizes). A model fitted without the large rows covers none."""
    X, y = fl.load_chains(cf.shipped_file(fl.SHIPPED[1]))
    large = X[:, 0] > max(math.prod(s) for s in fc.TRAINING_SHAPES)
    assert large.sum() >= 144
    assert sorted({math.prod(s) for s in fc.LARGE_SHAPES}) == sorted(set(X[large, 0].astype(int)))
    assert not fl.FusedLoopRegressor().fit(X[~large], y[~large]).covers(X[large]).any()
    for n in (2097152, 3145728):
        out = (X[:, 0] == n) | (X[:, 0] == n // 1000 * 1000)
        reg = fl.FusedLoopRegressor().fit(X[~out], y[~out])
        factor = float(np.exp(np.mean(np.abs(np.log(reg.predict(X[out]) / y[out])))))
        assert factor < 1.6, (n, factor)


def test_a_chain_timed_below_the_resolution_is_recorded_at_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In-loop times are differences of two programs' times: jitter made one of a tiny chain
    -0.83 us, which the file then refused to load. It is recorded at the resolution floor."""
    chains = fc.draw(((64, 16),), 2, seed=0)

    def fake_time_in_loop(looped, repeats):
        per = dict(zip((k for k, _ in looped), (-0.83, 2.5, 100.0, 100.0, 100.0), strict=True))
        out = {}
        for k, v in per.items():
            t = timing.Timing(k, v, 0.1, v, (v,) * repeats, 1)
            out[k] = (t, t)
        return out, {}, None

    monkeypatch.setattr(timing, "time_in_loop", fake_time_in_loop)
    rows = fc.measure(chains, repeats=3)
    assert [r["measured_us_median"] for r in rows] == [calibrate.RESOLUTION_US, 2.5]
    path = tmp_path / "chains.csv"
    fc.write_csv(rows, path)
    _, y = fl.load_chains(path)
    np.testing.assert_allclose(y, [calibrate.RESOLUTION_US, 2.5])
