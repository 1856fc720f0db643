"""Fusion grouping (analysis/fusion.py) on hand-built blocks, and against XLA:CPU live.

Hand-built blocks use `OpInfo.build` with f32[4,8] tensors (128 bytes) unless
a case needs other shapes; operand sources use -1, -2, ... for the block's
arguments.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import benchmark_module, corpus_files, corpus_programs, op_infos
from stablehlo_perf.analysis.fusion import (
    KINDS,
    FusionPlan,
    GroupTraffic,
    cpu_reduce_mode,
    fuse_block,
    group_deps,
    group_traffic,
    plan_fusion,
    while_init_copies,
)
from stablehlo_perf.analysis.opinfo import OpInfo, TensorType
from stablehlo_perf.analysis.targets import Target

ROOT = Path(__file__).resolve().parents[1]
T = TensorType((4, 8), "f32")
SCALAR = TensorType((), "f32")
ROW = TensorType((4,), "f32")


class Block:
    """Builds one block: each `op` call appends an op and returns its index."""

    def __init__(self) -> None:
        self.ops: list[OpInfo] = []
        self.sources: list[list[int | None]] = []

    def op(
        self,
        name: str,
        srcs: Sequence[int],
        operands: Sequence[TensorType] | None = None,
        result: TensorType = T,
        **attrs,
    ) -> int:
        operands = list(operands) if operands is not None else [T] * len(srcs)
        i = len(self.ops)
        self.ops.append(OpInfo.build(i, f"stablehlo.{name}", operands, [result], attrs))
        self.sources.append(list(srcs))
        return i

    @property
    def deps(self) -> list[list[int]]:
        return [sorted({s for s in src if s is not None and s >= 0}) for src in self.sources]

    def plan(self, kind: str, live_out: Sequence[int] = ()):
        return plan_fusion(self.ops, self.deps, kind, self.sources, live_out)

    def groups(self, kind: str) -> list[int]:
        return fuse_block(self.ops, self.deps, kind, self.sources)


def chain(t: TensorType = T) -> Block:
    """add(x, y) -> multiply(., z) -> exponential -> subtract(., x) on tensors of type `t`:
    one loop fusion."""
    b = Block()
    a = b.op("add", [-1, -2], [t, t], t)
    m = b.op("multiply", [a, -3], [t, t], t)
    e = b.op("exponential", [m], [t], t)
    b.op("subtract", [e, -1], [t, t], t)
    return b


def dense_relu() -> Block:
    """dot(x, w) + broadcast(bias), then max(., broadcast(0)): bias and ReLU epilogue."""
    b = Block()
    d = b.op("dot_general", [-1, -2], lhs_contracting_dims=(1,), rhs_contracting_dims=(0,))
    bias = b.op("broadcast_in_dim", [-3], [TensorType((8,), "f32")])
    add = b.op("add", [d, bias])
    zero = b.op("constant", [], [], SCALAR)
    zeros = b.op("broadcast_in_dim", [zero], [SCALAR])
    b.op("maximum", [add, zeros])
    return b


@pytest.mark.parametrize("kind", KINDS)
def test_elementwise_chain_is_one_loop_fusion(kind: str) -> None:
    plan = chain().plan(kind)
    assert plan.groups == [0, 0, 0, 0]
    assert plan.kinds == ["loop"]
    assert plan.num_kernels == 1


@pytest.mark.parametrize("kind", KINDS)
def test_reduce_roots_an_input_fusion_with_its_producers(kind: str) -> None:
    b = Block()
    init = b.op("constant", [], [], SCALAR)
    sq = b.op("multiply", [-1, -1])
    b.op("reduce", [sq, init], [T, SCALAR], ROW, dimensions=(1,), body_flops=1)
    plan = b.plan(kind)
    assert plan.groups == [0, 0, 0]
    assert plan.kinds == ["input"]
    assert plan.num_kernels == 1


def test_cpu_reduce_modes_follow_xla_cpu() -> None:
    """Measured on XLA:CPU: f32 rows of 64 split into reduce-window + reduce (two kernels,
    the multiply apart); a 64x64 reduce is a YNNPACK fusion taking its producer."""
    b = Block()
    x = TensorType((16, 64), "f32")
    init = b.op("constant", [], [], SCALAR)
    sq = b.op("multiply", [-1, -1], [x, x], x)
    red = b.op("reduce", [sq, init], [x, SCALAR], TensorType((16,), "f32"), dimensions=(1,))
    assert cpu_reduce_mode(b.ops[red]) == "tree"
    plan = b.plan("cpu")
    assert plan.groups == [0, 1, 0]
    assert plan.launches == [2, 1]
    assert plan.num_kernels == 3
    assert b.plan("gpu").num_kernels == 1

    big = TensorType((64, 64), "f32")
    b = Block()
    init = b.op("constant", [], [], SCALAR)
    sq = b.op("multiply", [-1, -1], [big, big], big)
    red = b.op("reduce", [sq, init], [big, SCALAR], TensorType((64,), "f32"), dimensions=(1,))
    b.op("sqrt", [red], [TensorType((64,), "f32")], TensorType((64,), "f32"))
    assert cpu_reduce_mode(b.ops[red]) == "ynn"
    assert b.groups("cpu") == [0, 0, 0, 1]
    assert b.groups("gpu") == [0, 0, 0, 0]


@pytest.mark.parametrize(("kind", "groups"), [("gpu", [0] * 6), ("tpu", [0] * 6), ("cpu", [0, 1, 1, 1, 1, 1])])  # fmt: skip
def test_dot_epilogue_fuses_on_gpu_and_tpu_not_cpu(kind: str, groups: list[int]) -> None:
    plan = dense_relu().plan(kind)
    assert plan.groups == groups
    assert plan.kinds == (["output"] if kind != "cpu" else ["opaque", "loop"])


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("control", ["while", "call", "case"])
def test_control_op_is_its_own_group_and_breaks_chains(kind: str, control: str) -> None:
    b = Block()
    a = b.op("add", [-1, -2])
    c = b.op(control, [a])
    b.op("multiply", [c, c])
    plan = b.plan(kind)
    assert plan.groups == [0, 1, 2]
    assert plan.kinds == ["loop", "opaque", "loop"]


def test_cheap_producer_with_two_consumer_groups_is_duplicated() -> None:
    """add(x, y) feeds two module outputs: XLA recomputes it in both fusions."""
    b = Block()
    p = b.op("add", [-1, -2])
    b.op("negate", [p])
    b.op("abs", [p])
    plan = b.plan("cpu")
    assert plan.groups == [0, 0, 1]
    assert plan.copies == {0: (1,)}
    assert plan.members() == [[0, 1], [0, 2]]
    assert plan.num_kernels == 2


def test_a_producer_only_ynnpack_refuses_keeps_a_kernel_and_is_copied_into_the_loops() -> None:
    """softmax(x / 8) of f16: the scaling feeds the max, a YNNPACK fusion that takes no value
    read elsewhere, and the exp's loop. XLA:CPU keeps it a kernel feeding the max and
    recomputes it in the exp's fusion, as the plan now does (it had the exp read it)."""
    xk = benchmark_module("_xla_kernels")
    lowered = jax.jit(lambda x: jax.nn.softmax(x / 8.0, -1)).lower(
        jax.ShapeDtypeStruct((256, 256), jnp.float16)
    )
    hlo = lowered.compile().as_text()
    exp_fusion = next(k for k in xk.xla_kernels(hlo).kernels if "exponential" in k.name)
    scaling = [ln for ln in hlo.splitlines() if " multiply(" in ln and "constant" not in ln]
    assert exp_fusion.kind == "kLoop" and len(scaling) >= 2  # its own kernel and the exp's copy
    ours = xk.our_kernels(xk.flat_blocks(lowered.as_text()))
    assert ours.kernels == len(xk.xla_kernels(hlo).kernels)
    names = [names for _, names in ours.groups]
    assert ["constant", "broadcast_in_dim", "divide"] in names
    exp_kernel = next(n for n in names if "exponential" in n)
    assert {"divide", "subtract", "exponential"} <= set(exp_kernel)


def test_a_bf16_input_summed_and_centred_has_its_convert_apart() -> None:
    """A bf16 layer norm of 128 rows: XLA:CPU converts x to f32 once for its sum and for the
    centring (computed in f32), so the convert has readers outside the sum's YNNPACK fusion
    and is a kernel of its own (`wrapped_convert` of the parameter); past 4096 rows the one
    fusion takes it (`test_ynn_fusions_take_a_reduce_of_4096_results_and_its_neighbours`)."""
    xk = benchmark_module("_xla_kernels")
    lowered = jax.jit(_layer_norm).lower(jax.ShapeDtypeStruct((128, 256), jnp.bfloat16))
    hlo = lowered.compile().as_text()
    entry = hlo[hlo.index("ENTRY") :]
    assert any("wrapped_convert" in ln and "fusion(%x" in ln for ln in entry.splitlines()), (
        "XLA converts the parameter in a kernel of its own"
    )
    groups = [names for _, names in xk.our_kernels(xk.flat_blocks(lowered.as_text())).groups]
    assert ["convert"] in groups
    assert not any("convert" in g and "reduce" in g and g.index("convert") == 0 for g in groups)


def test_expensive_producer_with_two_consumer_groups_keeps_its_kernel() -> None:
    b = Block()
    p = b.op("exponential", [-1])
    b.op("negate", [p])
    b.op("abs", [p])
    plan = b.plan("cpu")
    assert plan.groups == [0, 1, 2]
    assert plan.copies == {}


def test_expensive_producer_is_not_fused_into_a_broadcast() -> None:
    """rsqrt of a row, broadcast over columns (layer norm): XLA keeps add_rsqrt_fusion apart;
    a divide by a constant counts as a cheap multiply and is fused."""
    b = Block()
    r = b.op("rsqrt", [-1], [ROW], ROW)
    br = b.op("broadcast_in_dim", [r], [ROW])
    b.op("multiply", [-2, br])
    assert b.groups("cpu") == [0, 1, 1]

    b = Block()
    c = b.op("constant", [], [], SCALAR)
    cb = b.op("broadcast_in_dim", [c], [SCALAR], ROW)
    d = b.op("divide", [-1, cb], [ROW, ROW], ROW)
    br = b.op("broadcast_in_dim", [d], [ROW])
    b.op("multiply", [-2, br])
    assert b.groups("cpu") == [0, 0, 0, 0, 0]


def test_broadcast_feeding_a_library_dot_is_copied_into_fusible_consumers() -> None:
    """A broadcast reads fewer bytes than it writes: XLA fuses it where it can and keeps
    one kernel for the consumer that cannot take it (the dot on cpu)."""
    b = Block()
    br = b.op("broadcast_in_dim", [-1], [ROW])
    b.op("dot_general", [br, -2], lhs_contracting_dims=(1,), rhs_contracting_dims=(0,))
    b.op("add", [br, -3])
    plan = b.plan("cpu")
    assert plan.groups == [0, 1, 2]
    assert plan.copies == {0: (2,)}


@pytest.mark.parametrize("kind", KINDS)
def test_transpose_read_only_by_dots_is_folded(kind: str) -> None:
    """q @ k.T: XLA folds the transpose into the dot's dimension numbers (no kernel); a
    transpose that moves a batch dim (attention's head split) stays a kernel."""
    b = Block()
    t = b.op("transpose", [-1], permutation=(1, 0))
    b.op("dot_general", [-2, t], lhs_contracting_dims=(1,), rhs_contracting_dims=(0,))
    plan = b.plan(kind)
    assert plan.num_kernels == 1

    b = Block()
    x = TensorType((4, 2, 8), "f32")
    t = b.op("transpose", [-1], [x], TensorType((2, 4, 8), "f32"), permutation=(1, 0, 2))
    b.op(
        "dot_general",
        [t, t],
        [TensorType((2, 4, 8), "f32")] * 2,
        TensorType((2, 4, 4), "f32"),
        lhs_batch_dims=(0,),
        rhs_batch_dims=(0,),
    )
    assert b.plan("cpu").num_kernels == 2


def test_transpose_of_a_matrix_product_is_folded() -> None:
    b = Block()
    d = b.op("dot_general", [-1, -2], lhs_contracting_dims=(1,), rhs_contracting_dims=(0,))
    b.op("transpose", [d], permutation=(1, 0))
    assert b.plan("cpu").num_kernels == 1


def test_broadcast_adding_unit_dims_lets_a_reduce_fuse_into_its_consumer() -> None:
    """var = sum(.) / n as f32[16] -> f32[16,1] (layer norm): no element is read twice, so
    XLA:CPU fuses the reduce into the add/rsqrt consumer (add_rsqrt_fusion)."""
    b = Block()
    x, row, col = TensorType((16, 8), "f32"), TensorType((16,), "f32"), TensorType((16, 1), "f32")
    init = b.op("constant", [], [], SCALAR)
    red = b.op("reduce", [-1, init], [x, SCALAR], row, dimensions=(1,))
    r2 = b.op("broadcast_in_dim", [red], [row], col)
    b.op("rsqrt", [r2], [col], col)
    assert b.plan("cpu").groups == [0, 0, 0, 0]

    b = Block()
    init = b.op("constant", [], [], SCALAR)
    red = b.op("reduce", [-1, init], [x, SCALAR], row, dimensions=(1,))
    wide = b.op("broadcast_in_dim", [red], [row], x)
    b.op("subtract", [-1, wide], [x, x], x)
    assert b.plan("cpu").groups == [0, 0, 1, 1]


def test_live_out_producer_is_not_fused() -> None:
    b = chain()
    plan = b.plan("cpu", live_out=[1])
    assert plan.groups == [0, 0, 1, 1]


def test_identical_ops_are_merged_like_xla_cse() -> None:
    b = Block()
    s1 = b.op("subtract", [-1, -2])
    s2 = b.op("subtract", [-1, -2])
    b.op("multiply", [s1, s2])
    plan = b.plan("cpu")
    assert plan.same_as == {1: 0}
    assert plan.groups == [0, 0, 0]
    (traffic,) = group_traffic(b.ops, b.deps, plan, b.sources)
    assert traffic.flops == 2 * 32


def test_identical_reduces_are_merged_like_xla_cse() -> None:
    """`x.mean(0)` beside `x.var(0)` sums x twice in StableHLO, each sum with its own zero
    constant; XLA sums once (a batch norm: 2 YNNPACK kernels, not 3). Another init value or
    another dimension is another reduce."""
    b = Block()
    inits = [
        b.op("constant", [], [], SCALAR, scalar=v)
        for v in (
            "dense<0.0> : tensor<f32>",
            "dense<0.0> : tensor<f32>",
            "dense<1.0> : tensor<f32>",
        )
    ]
    sums = [
        b.op("reduce", [-1, init], [T, SCALAR], ROW, dimensions=dims, reducer="add")
        for init, dims in ((inits[0], (1,)), (inits[1], (1,)), (inits[2], (1,)), (inits[0], (0,)))
    ]
    plan = b.plan("cpu")
    assert plan.same_as == {sums[1]: sums[0]}
    assert plan.groups[sums[1]] == plan.groups[sums[0]]
    assert len({plan.groups[i] for i in sums}) == 3


def test_traffic_of_a_fused_chain_reads_inputs_once_and_writes_output_once() -> None:
    b = chain()
    plan = b.plan("cpu")
    (traffic,) = group_traffic(b.ops, b.deps, plan, b.sources)
    # x (read by add and subtract, counted once), y, z in; the subtract's result out.
    assert traffic.input_bytes == 3 * 128
    assert traffic.output_bytes == 128
    # add, multiply, subtract: 32 flops each; exponential is a transcendental (0 flops).
    assert traffic.flops == 3 * 32
    unfused = sum(op.bytes for op in b.ops)
    assert unfused == 11 * 128


def test_traffic_of_unfused_dot_and_epilogue_on_cpu() -> None:
    b = dense_relu()
    plan = b.plan("cpu")
    dot, epilogue = group_traffic(b.ops, b.deps, plan, b.sources)
    assert (dot.input_bytes, dot.output_bytes) == (2 * 128, 128)
    # dot result + bias (32 bytes) in; the scalar zero constant is free.
    assert (epilogue.input_bytes, epilogue.output_bytes) == (128 + 32, 128)
    fused = group_traffic(b.ops, b.deps, b.plan("gpu"), b.sources)
    assert [(t.input_bytes, t.output_bytes) for t in fused] == [(2 * 128 + 32, 128)]


def test_traffic_without_operand_sources_matches_deps_to_operands() -> None:
    b = chain()
    groups = fuse_block(b.ops, b.deps, "cpu")
    assert groups == [0, 0, 0, 0]
    (traffic,) = group_traffic(b.ops, b.deps, groups)
    # Without sources outside values cannot be told apart: x counts twice.
    assert (traffic.input_bytes, traffic.output_bytes) == (4 * 128, 128)


def test_100k_op_chain_groups_in_one_pass() -> None:
    """100,000 alternating add/multiply ops in a chain: one loop fusion (records are shared,
    fusion reads no ids)."""
    add = OpInfo.build(0, "stablehlo.add", [T, T], [T])
    mul = OpInfo.build(1, "stablehlo.multiply", [T, T], [T])
    n = 100_000
    ops = [mul if k % 2 else add for k in range(n)]
    sources: list[list[int | None]] = [[k - 1 if k else -2, -1 - k % 3] for k in range(n)]
    deps = [[k - 1] if k else [] for k in range(n)]
    plan = plan_fusion(ops, deps, "cpu", sources)
    assert plan.num_groups == 1
    assert plan.num_kernels == 1
    assert set(plan.groups) == {0}


def test_while_copies_of_read_only_inputs() -> None:
    b = Block()
    c = b.op("constant", [], [], SCALAR)
    b.op("while", [c, -1, -2], [SCALAR, T, T])
    assert while_init_copies(b.ops, b.sources, 1, [True, True, False]) == [0, 1]
    assert while_init_copies(b.ops, b.sources, 1, [False, False, False]) == []


def test_unknown_kind_is_an_error() -> None:
    with pytest.raises(ValueError, match="unknown target kind"):
        fuse_block(chain().ops, chain().deps, "npu")


def test_fusion_module_imports_neither_jax_nor_mlir() -> None:
    code = (
        "import sys, stablehlo_perf.analysis.fusion; "
        "print(sorted(m for m in sys.modules if m.startswith(('jax', 'jaxlib', 'mlir'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_traffic_of_a_group_that_recomputes_a_copy() -> None:
    """p = add(x, y) copied into both consumers: each group reads x and y, not p."""
    b = Block()
    p = b.op("add", [-1, -2])
    b.op("negate", [p])
    b.op("abs", [p])
    first, second = group_traffic(b.ops, b.deps, b.plan("cpu"), b.sources)
    assert (first.input_bytes, first.output_bytes, first.flops) == (2 * 128, 128, 2 * 32)
    assert (second.input_bytes, second.output_bytes, second.flops) == (2 * 128, 128, 2 * 32)


def test_group_deps_skip_values_a_group_recomputes() -> None:
    """broadcast -> dot (library call on cpu) and broadcast -> add(dot, .): the add's group
    recomputes the broadcast, so it depends on the dot only."""
    b = Block()
    br = b.op("broadcast_in_dim", [-1], [ROW])
    d = b.op("dot_general", [br, -2], lhs_contracting_dims=(1,), rhs_contracting_dims=(0,))
    b.op("add", [d, br])
    plan = b.plan("cpu")
    assert plan.groups == [0, 1, 2]
    assert plan.copies == {0: (2,)}
    assert group_deps(plan, b.deps) == [[], [0], [1]]


def _acyclic(edges: list[list[int]]) -> bool:
    indegree = [0] * len(edges)
    consumers: list[list[int]] = [[] for _ in edges]
    for g, producers in enumerate(edges):
        for p in producers:
            indegree[g] += 1
            consumers[p].append(g)
    ready = [g for g, d in enumerate(indegree) if d == 0]
    seen = 0
    while ready:
        g = ready.pop()
        seen += 1
        for c in consumers[g]:
            indegree[c] -= 1
            if indegree[c] == 0:
                ready.append(c)
    return seen == len(edges)


@pytest.mark.parametrize("kind", KINDS)
def test_every_corpus_block_gets_ordered_acyclic_groups(kind: str) -> None:
    """All corpus files (handwritten ones too), every block: ids 0..G-1 by first op,
    an acyclic group graph, and traffic for every group."""
    xk = benchmark_module("_xla_kernels")
    blocks = 0
    for path in corpus_files():
        for block in xk.flat_blocks(path.read_text(), entry=_entry(path)):
            plan = block.plan(kind)
            first_seen = list(dict.fromkeys(plan.groups))
            assert first_seen == list(range(plan.num_groups))
            assert _acyclic(group_deps(plan, block.deps))
            traffic = group_traffic(block.ops, block.deps, plan, block.sources, block.live_out)
            assert len(traffic) == plan.num_groups
            blocks += 1
    assert blocks > 20


def _entry(path: Path) -> str:
    text = path.read_text()
    return "main" if "@main(" in text else text.split("func.func", 1)[1].split("@")[1].split("(")[0]


@pytest.mark.parametrize(
    ("name", "kernels"),
    # XLA:CPU's own counts (jax 0.10.2), read from compiled.as_text():
    # mlp: 3 ynn dots + 3 bias/ReLU loops; layer_norm: 2 YNN reduces + 3 loops;
    # while_dynamic: 2 init copies + body (add, multiply) + cond (multiply, reduce-window,
    # reduce+compare); scan: 2 init copies + a copy of the counter in the body (read by the
    # dynamic slice after i + 1 is written) + 8 kernels.
    [("mlp", 6), ("layer_norm", 5), ("while_dynamic", 7), ("scan", 11)],
)
def test_corpus_kernel_count_equals_xla_cpu(name: str, kernels: int) -> None:
    xk = benchmark_module("_xla_kernels")
    fn, args = corpus_programs().PROGRAMS[name]()
    lowered = jax.jit(fn).lower(*args)
    xla = xk.xla_kernels(lowered.compile().as_text())
    ours = xk.our_kernels(xk.flat_blocks(lowered.as_text()), "cpu")
    assert len(xla.kernels) == kernels
    assert ours.kernels == len(xla.kernels)
    assert ours.control == xla.control


def _softmax_head(s: jax.Array) -> jax.Array:
    return jax.numpy.exp(s - s.max(-1, keepdims=True))


def _attention_scores(q: jax.Array) -> jax.Array:
    return jax.numpy.einsum("hqd,hkd->hqk", q, 2.0 * q) * 0.17


def _gelu(x: jax.Array) -> jax.Array:
    return 0.5 * x * (1.0 + jax.numpy.tanh(0.79788456 * (x + 0.044715 * x * x * x)))


def _centred_gelu(x: jax.Array) -> jax.Array:
    h = _gelu(x)
    return _gelu(h - h.sum(-1, keepdims=True))


def _sum_dot(x: jax.Array) -> jax.Array:
    """x summed over its middle axis, times a constant 128x64 matrix (a YNNPACK dot)."""
    return x.sum(1) @ np.linspace(-1.0, 1.0, 128 * 64, dtype=np.float32).reshape(128, 64)


@pytest.mark.parametrize(
    ("name", "fn", "shape", "kernels"),
    # XLA:CPU's own counts (jax 0.10.2), read from compiled.as_text(): a YNN reduce takes
    # op(x, broadcast(reduce(x))) and the single-use elementwise ops after it, and the dot
    # producing x; a divide by a broadcast reduce becomes a reciprocal kernel and a multiply.
    [
        ("x - max(x)", lambda x: x - x.max(1, keepdims=True), (256, 1000), 1),
        ("exp(x - max(x))", _softmax_head, (256, 1000), 1),
        ("x * sum(x)", lambda x: x * x.sum(1, keepdims=True), (256, 1000), 1),
        ("x / sum(x)", lambda x: x / x.sum(1, keepdims=True), (256, 1000), 3),
        ("softmax", lambda x: jax.nn.softmax(x, axis=-1), (256, 1000), 4),
        ("attention head", lambda q: _softmax_head(_attention_scores(q)), (4, 64, 32), 1),
        ("small head", lambda q: _softmax_head(_attention_scores(q)), (4, 16, 32), 4),
        (
            "softmax(qk) @ v",
            lambda q: jax.nn.softmax(_attention_scores(q), axis=-1) @ q,
            (4, 64, 32),
            5,
        ),
        ("gelu(h - sum(h))", _centred_gelu, (16, 256), 2),
        # x @ x.T contracts x over its last dimension (a YNNPACK dot, taken into the sum's
        # fusion); x.T @ x over its first once XLA folds the transpose: an Eigen dot, a
        # kernel of its own.
        ("sum(x @ x.T)", lambda x: (x @ x.T).sum(1), (64, 128), 1),
        ("sum(x.T @ x)", lambda x: (x.T @ x).sum(1), (64, 128), 2),
        # YNNPACK takes some elementwise ops only: a select, a sine or a clamp (also the one
        # XLA makes of a maximum and a minimum with constant bounds) ends the fusion and is a
        # loop kernel of its own with what it reads.
        ("sum(exp(x))", lambda x: jax.numpy.exp(x).sum(0), (1024, 512), 1),
        ("sum(x^2)", lambda x: jax.numpy.square(x).sum(0), (1024, 512), 1),
        ("sum(relu(x))", lambda x: jax.nn.relu(x).sum(0), (1024, 512), 1),
        ("sum(sin(x))", lambda x: jax.numpy.sin(x).sum(0), (1024, 512), 2),
        ("sum(exp(sin(x)))", lambda x: jax.numpy.exp(jax.numpy.sin(x)).sum(1), (1024, 512), 2),
        ("sum(where)", lambda x: jax.numpy.where(x > 0, 2 * x, 1 - x).sum(0), (1024, 512), 2),
        ("sum(clip(x))", lambda x: jax.numpy.clip(x, -1.0, 1.0).sum(1), (1024, 512), 2),
        ("sin(x - max(x))", lambda x: jax.numpy.sin(x - x.max(1, keepdims=True)), (256, 1000), 2),
        # A YNNPACK dot reading a YNN reduce's result joins it, with the elementwise ops after
        # the dot that YNNPACK takes (the embedding bag's sum, dot and tanh: one kernel).
        ("sum(x) @ w", _sum_dot, (128, 8, 128), 1),
        ("tanh(sum(x) @ w)", lambda x: jax.numpy.tanh(_sum_dot(x)), (128, 8, 128), 1),
        ("sum(x) @ w + 1", lambda x: _sum_dot(x) + 1.0, (128, 8, 128), 1),
        ("sin(sum(x) @ w)", lambda x: jax.numpy.sin(_sum_dot(x)), (128, 8, 128), 2),
        # Ops on a reduce's result join it where they are ops YNNPACK takes on 4096+ elements
        # (a row norm of 4096 rows; of 2048 its square root is XLA's own loop).
        ("sqrt(sum(x^2)) of 4096", lambda x: jax.numpy.sqrt((x * x).sum(1)), (4096, 256), 1),
        ("sqrt(sum(x^2)) of 2048", lambda x: jax.numpy.sqrt((x * x).sum(1)), (2048, 256), 2),
        ("sum(x) * 2", lambda x: x.sum(1) * 2.0, (4096, 64), 1),
        ("sin(sum(x))", lambda x: jax.numpy.sin(x.sum(1)), (4096, 64), 2),
        # A variadic reduce is one loop kernel with its iota: no YNNPACK, no tree rewrite.
        ("argmax rows", lambda x: jax.numpy.argmax(x, -1), (512, 1000), 1),
        ("argmax cols", lambda x: jax.numpy.argmax(x, 0), (1000, 512), 1),
    ],
)
def test_ynn_fusions_take_what_xla_cpu_fuses_into_a_reduce(
    name: str, fn: object, shape: tuple[int, ...], kernels: int
) -> None:
    """The small head's scores (4x16x16) stay under YNNPACK's 4096 elements: the key's scaling,
    the dot, the max and the exp each a kernel, where the larger head's are one. XLA's
    constant broadcasts (`wrapped_broadcast`) are not counted."""
    assert _cpu_kernel_counts(fn, [shape]) == (kernels, kernels), name


def _layer_norm(x: jax.Array) -> jax.Array:
    m = x.mean(-1, keepdims=True)
    return (x - m) * jax.lax.rsqrt(((x - m) ** 2).mean(-1, keepdims=True) + 1e-5)


def _cross_entropy(x: jax.Array, y: jax.Array) -> jax.Array:
    return -(jax.nn.log_softmax(x, -1) * y).sum(-1).mean()


def _sigmoid_xent(z: jax.Array, y: jax.Array) -> jax.Array:
    return (jnp.maximum(z, 0) - z * y + jnp.log1p(jnp.exp(-jnp.abs(z)))).mean()


def _attention(q: jax.Array, k: jax.Array, v: jax.Array, causal: bool = False) -> jax.Array:
    s = jax.numpy.einsum("...qd,...kd->...qk", q, k) / 8.0
    if causal:
        n = s.shape[-1]
        s = jax.numpy.where(jax.numpy.tril(jax.numpy.ones((n, n), bool)), s, -1e9)
    return jax.numpy.einsum("...qk,...kd->...qd", jax.nn.softmax(s, axis=-1), v)


@pytest.mark.parametrize(
    ("name", "fn", "shapes", "dtype", "kernels"),
    # XLA:CPU's own counts (jax 0.10.2): once a reduce has 4096+ results, the ops on them
    # are ones YNNPACK takes, and its fusion grows through them to the ops after them and to
    # the producers all of whose readers it then holds: a softmax, a layer norm (the residual
    # dot and add before it, the dot after it), a whole attention of 8192 query rows is one
    # kernel; of 2048 rows, four, five and five. A select (the causal mask) ends the fusion.
    [
        ("softmax of 4096", lambda x: jax.nn.softmax(x, -1), [(4096, 256)], "f32", 1),
        ("softmax of 2048", lambda x: jax.nn.softmax(x, -1), [(2048, 256)], "f32", 4),
        ("softmax of columns", lambda x: jax.nn.softmax(x, 0), [(256, 4096)], "f32", 1),
        ("x / sum(x) of 4096", lambda x: x / x.sum(1, keepdims=True), [(4096, 256)], "f32", 1),
        ("layer norm of 4096", _layer_norm, [(4096, 256)], "f32", 1),
        ("layer norm of 2048", _layer_norm, [(2048, 256)], "f32", 5),
        ("layer norm of 4096 bf16", _layer_norm, [(4096, 256)], "bf16", 1),
        (
            "norm(x + x @ w)",
            lambda x, w: _layer_norm(x + x @ w),
            [(4096, 256), (256, 256)],
            "f32",
            1,
        ),
        ("norm(x) @ w", lambda x, w: _layer_norm(x) @ w, [(4096, 256), (256, 256)], "f32", 1),
        ("y * sum(x) of 16", lambda x, y: y * x.sum(1, keepdims=True), [(16, 256)] * 2, "f32", 1),
        ("attention of 8192", _attention, [(4, 8, 256, 64)] * 3, "f32", 1),
        ("attention of 8192 bf16", _attention, [(4, 8, 256, 64)] * 3, "bf16", 1),
        ("attention of 4096 x 128", _attention, [(4096, 64), (128, 64), (128, 64)], "f32", 1),
        ("attention of 1024", _attention, [(2, 4, 128, 64)] * 3, "f32", 5),
        (
            "causal attention",
            lambda q, k, v: _attention(q, k, v, True),
            [(4, 8, 256, 64)] * 3,
            "f32",
            3,
        ),
        # XLA's simplifier makes a reduce of a reduce (the mean of the rows' losses) one reduce.
        ("cross-entropy of 4096", _cross_entropy, [(4096, 256)] * 2, "f32", 2),
        ("cross-entropy of 2048", _cross_entropy, [(2048, 256)] * 2, "f32", 5),
        # YNNPACK takes no f16 elementwise op: the terms of an f16 sum and their convert to f32
        # are a loop kernel of their own, and a softmax's divide by its sum rounded to f16
        # gets the reciprocal kernel as an f32 one does.
        ("sigmoid cross-entropy f16", _sigmoid_xent, [(1024, 256)] * 2, "f16", 3),
        ("layer norm f16", _layer_norm, [(1024, 512)], "f16", 6),
        ("softmax f16", lambda x: jax.nn.softmax(x, -1), [(256, 256)], "f16", 6),
        ("softmax of 4096 f16", lambda x: jax.nn.softmax(x, -1), [(4096, 256)], "f16", 6),
    ],
)
def test_ynn_fusions_take_a_reduce_of_4096_results_and_its_neighbours(
    name: str, fn: object, shapes: list[tuple[int, ...]], dtype: str, kernels: int
) -> None:
    assert _cpu_kernel_counts(fn, shapes, dtype) == (kernels, kernels), name


def _cpu_kernel_counts(
    fn: object, shapes: list[tuple[int, ...]], dtype: str = "f32"
) -> tuple[int, int]:
    """(XLA:CPU's kernels, ours) for `fn` of arguments of these shapes (f32, bf16 or f16); XLA's
    constant broadcasts (`wrapped_broadcast`), which we count as free, left out."""
    xk = benchmark_module("_xla_kernels")
    element = {"f32": jnp.float32, "bf16": jnp.bfloat16, "f16": jnp.float16}[dtype]
    lowered = jax.jit(fn).lower(*(jax.ShapeDtypeStruct(s, element) for s in shapes))
    xla = [
        k
        for k in xk.xla_kernels(lowered.compile().as_text()).kernels
        if not k.name.startswith("wrapped_broadcast")
    ]
    return len(xla), xk.our_kernels(xk.flat_blocks(lowered.as_text()), "cpu").kernels


def _pool(x: jax.Array, window: int = 2, stride: int = 2) -> jax.Array:
    return jax.lax.reduce_window(
        x, -jax.numpy.inf, jax.lax.max, (1, window, window, 1), (1, stride, stride, 1), "SAME"
    )


def _conv(x: jax.Array, k: jax.Array, stride: int = 1, padding: str = "SAME") -> jax.Array:
    return jax.lax.conv_general_dilated(
        x, k, (stride, stride), padding, dimension_numbers=("NHWC", "HWIO", "NHWC")
    )


def _pad(x: jax.Array, width: int) -> jax.Array:
    """x padded by `width` zeros on both sides of its spatial dimensions (jnp.pad)."""
    return jax.numpy.pad(x, ((0, 0), (width, width), (width, width), (0, 0)))


_IMAGE, _SMALL_IMAGE = (1, 32, 32, 32), (1, 16, 16, 32)
_K32, _K3 = (3, 3, 32, 32), (3, 3, 3, 16)


def test_a_bounds_checked_take_is_one_kernel() -> None:
    """jnp.take's bounds check ANDs each index's in-range flags over a unit dimension: no
    expensive reduce once XLA has made it a bitcast, so the check, the gather and the fill
    are one loop kernel (XLA:CPU's `broadcast_select_fusion`, jax 0.10.2), as ours."""
    xk = benchmark_module("_xla_kernels")
    lowered = jax.jit(lambda t, i: jax.numpy.take(t, i, axis=0)).lower(
        jax.ShapeDtypeStruct((20000, 256), jax.numpy.float32),
        jax.ShapeDtypeStruct((4096,), jax.numpy.int32),
    )
    assert len(xk.xla_kernels(lowered.compile().as_text()).kernels) == 1
    assert xk.our_kernels(xk.flat_blocks(lowered.as_text()), "cpu").kernels == 1


@pytest.mark.parametrize("batch", [32, 64])
def test_a_reduce_over_a_unit_dimension_is_no_kernel(batch: int) -> None:
    """The gradient of a broadcast bias: jax sums the batch, reshapes the sum to 1 x width
    and sums that over its unit dimension, which XLA's simplifier makes a bitcast: with
    the tanh's gradient and the batch sum, one kernel of XLA:CPU's (jax 0.10.2), as ours."""
    grad = jax.grad(lambda b, x: jax.numpy.sum(jax.numpy.tanh(x + b)))
    assert _cpu_kernel_counts(grad, [(256,), (batch, 256)]) == (1, 1)


@pytest.mark.parametrize(
    ("name", "fn", "kernels"),
    # XLA:CPU (jax 0.10.2): its simplifier drops an op with its identity splat, so the
    # lone one before a dot is no kernel; `x * 0` stays (NaN * 0 is NaN), `0 - x` negates.
    [
        ("sum([x]) @ w", lambda x, w: sum([x]) @ w, 1),
        ("(x - 0) * 1 / 1 @ w", lambda x, w: ((x - 0.0) * 1.0 / 1.0) @ w, 1),
        ("1 * x @ w", lambda x, w: (1.0 * x) @ w, 1),
        ("x * 0 @ w", lambda x, w: (x * 0.0) @ w, 2),
        ("(0 - x) @ w", lambda x, w: (0.0 - x) @ w, 2),
        ("x / 2 @ w", lambda x, w: (x / 2.0) @ w, 2),
    ],
)
def test_an_op_with_its_identity_is_no_kernel(name: str, fn: object, kernels: int) -> None:
    assert _cpu_kernel_counts(fn, [(256, 256), (256, 256)]) == (kernels, kernels)


@pytest.mark.parametrize(
    ("name", "fn", "shape", "kernels"),
    # XLA:CPU's ReduceWindowRewriter (jax 0.10.2) splits a scan longer than 16 into levels
    # of 16: a reduce-window and a slice of the blocks' totals per level, a last
    # reduce-window, a kernel combining them (which takes an elementwise consumer) and,
    # padding to a multiple of 16 or moving the axis last, a first one (which takes an
    # elementwise producer); a scan of 16 or fewer stays one kernel that fuses nothing.
    [
        ("cumprod 1024", lambda x: jnp.cumprod(x, axis=-1), (128, 1024), 6),
        ("cumsum 1000", lambda x: jnp.cumsum(x, axis=-1), (8, 1000), 7),
        ("cumsum axis 0", lambda x: jnp.cumsum(x, axis=0), (1024, 8), 7),
        ("cumsum 65536", lambda x: jnp.cumsum(x), (65536,), 8),
        ("3 * cumsum(sin x) 1000", lambda x: 3 * jnp.cumsum(jnp.sin(x), axis=-1), (8, 1000), 7),
        ("cumsum(sin x) 1024", lambda x: jnp.cumsum(jnp.sin(x), axis=-1), (8, 1024), 7),
        ("twice, two readers", lambda x: (jnp.cumsum(x, 1) * 3, jnp.exp(jnp.cumsum(x, 1))),
         (8, 1024), 8),
        ("cummax 16", lambda x: jax.lax.cummax(x, axis=1), (8, 16), 1),
        ("cumsum(2x) + 1 over 12", lambda x: jnp.cumsum(x * 2, axis=1) + 1, (8, 12), 3),
    ],
)  # fmt: skip
def test_a_long_scan_is_the_kernels_of_its_levels(
    name: str, fn: object, shape: tuple[int, ...], kernels: int
) -> None:
    assert _cpu_kernel_counts(fn, [shape]) == (kernels, kernels)


def test_a_scans_kernels_are_priced_by_its_own_time() -> None:
    """A lone cumsum costs its model's time (measured whole, its levels' launches in it):
    the six kernels it counts add launches to the call, not to it."""
    from stablehlo_perf.analysis.service import default_registry
    from stablehlo_perf.analysis.targets import load_target
    from stablehlo_perf.passes.api import analyze

    text = (
        jax.jit(lambda x: jnp.cumsum(x, axis=-1))
        .lower(jax.ShapeDtypeStruct((64, 1024), jnp.float32))
        .as_text()
    )
    scan = next(op for op in op_infos(text) if op.short_name == "reduce_window")
    own = default_registry().price([scan], load_target("host"))[0]
    (group,) = [g for g in json.loads(analyze(text, target="host").to_json())["fusion_groups"]
                if g["kind"] != "free"]  # fmt: skip
    assert group["kernels"] == 6
    assert group["latency_ns"] == pytest.approx(own.latency_ns, rel=1e-9)


def _two_counters(
    x: jax.Array, start: int = 0, step: int = 1, kind: object = jnp.int32
) -> jax.Array:
    def body(c: tuple) -> tuple:
        i, j, y = c
        return i + 1, j + kind(step), y * 2 + j.astype(jnp.float32)

    return jax.lax.while_loop(lambda c: c[0] < 10, body, (0, kind(start), x))[2]


@pytest.mark.parametrize(
    ("name", "fn", "kernels"),
    # XLA:CPU (jax 0.10.2): the second i32 counter is computed from the first where read,
    # leaving the body its multiply and one scalar add, the condition its compare, and
    # copies of x and of one counter's constant 0 before the loop: 6; a u32 counter
    # stays (no other of its type): 8, as jax.random's threefry loop keeps its own
    # counter beside the fori_loop's unless both are i32 (they are: 26 with the copies).
    [
        ("j = 0, 1, 2, ...", _two_counters, 6),
        ("j = 5, 8, 11, ...", lambda x: _two_counters(x, 5, 3), 6),
        ("j of u32", lambda x: _two_counters(x, kind=jnp.uint32), 8),
    ],
)
def test_induction_variables_fold_into_the_trip_counter(
    name: str, fn: object, kernels: int
) -> None:
    assert _cpu_kernel_counts(fn, [(64, 64)]) == (kernels, kernels)


def test_jax_randoms_counters_are_one() -> None:
    """jax.random.uniform's threefry loop: the fori_loop's counter and the body's own, one
    kernel and one copy before the loop (26 kernels and copies of XLA:CPU's, jax 0.10.2)."""
    xk = benchmark_module("_xla_kernels")
    lowered = jax.jit(lambda k: jax.random.uniform(k, (64, 64))).lower(jax.random.key(0))
    xla = xk.xla_kernels(lowered.compile().as_text()).kernels
    ours = xk.our_kernels(xk.flat_blocks(lowered.as_text()), "cpu")
    assert (len(xla), ours.kernels) == (26, 26)


def _halves(a: jax.Array, b: jax.Array, axis: int = -1) -> jax.Array:
    return jnp.concatenate([a + b, a * b], axis)


@pytest.mark.parametrize(
    ("name", "fn", "shapes", "kernels"),
    # XLA:CPU (jax 0.10.2) fuses no concatenate along the minor dimension whose result's
    # rows hold 128 elements or more, nor one of more than eight inputs: it is a kernel of
    # its own, as is each of its producers.
    [
        ("rows of 128", _halves, [(64, 64), (64, 64)], 3),
        ("rows of 126", _halves, [(64, 63), (64, 63)], 1),
        ("one row of 128", _halves, [(1, 64), (1, 64)], 3),
        ("along the leading axis", lambda a, b: _halves(a, b, 0), [(64, 64), (64, 64)], 1),
        ("vectors", _halves, [(4096,), (4096,)], 1),
        ("nine inputs", lambda *xs: jnp.concatenate([x + 1 for x in xs], -1), [(64, 4)] * 9, 10),
        ("sin and cos", lambda a, b: jnp.concatenate([jnp.sin(a * b), jnp.cos(a * b)], -1),
         [(1024, 128), (1024, 128)], 3),
    ],
)  # fmt: skip
def test_a_long_rowed_concatenate_fuses_nothing(
    name: str, fn: object, shapes: list[tuple[int, ...]], kernels: int
) -> None:
    assert _cpu_kernel_counts(fn, shapes) == (kernels, kernels)


def _q_or_q_less_one(q: jax.Array) -> jax.Array:
    return jnp.where(q > 0, q - 1, q)


@pytest.mark.parametrize(
    ("name", "fn", "dtype", "kernels"),
    # XLA:CPU (jax 0.10.2): a divide or remainder by an array that two ops read is a kernel
    # of its own though one kernel holds both; by a constant or a broadcast scalar, or read
    # once, it fuses, as an exponential read twice does.
    [
        ("a / b read twice", lambda a, b: _q_or_q_less_one(a / b), "f32", 2),
        ("exp(a) read twice", lambda a, b: _q_or_q_less_one(jnp.exp(a) + b), "f32", 1),
        ("a / b read once", lambda a, b: a / b + 1, "f32", 1),
        ("a % b of i32 read twice", lambda a, b: _q_or_q_less_one(jax.lax.rem(a, b)), "i32", 2),
        ("a // b of i32", lambda a, b: a // b, "i32", 2),
        ("a // 7 of i32", lambda a, b: a // 7 + b, "i32", 1),
        ("(31 a + 7) % b[0] of i32", lambda a, b: (a * 31 + 7) % b[0], "i32", 1),
    ],
)
def test_a_divide_two_ops_read_is_a_kernel_of_its_own(
    name: str, fn: object, dtype: str, kernels: int
) -> None:
    xk = benchmark_module("_xla_kernels")
    element = {"f32": jnp.float32, "i32": jnp.int32}[dtype]
    lowered = jax.jit(fn).lower(*[jax.ShapeDtypeStruct((4096,), element)] * 2)
    xla = xk.xla_kernels(lowered.compile().as_text()).kernels
    ours = xk.our_kernels(xk.flat_blocks(lowered.as_text()), "cpu").kernels
    assert (len(xla), ours) == (kernels, kernels)


def test_a_loop_nothing_reads_is_no_kernel() -> None:
    """slogdet's LU also computes the row permutation, a while loop over the pivots whose
    results nothing reads: XLA removes it (8 kernels, jax 0.10.2), and so do we (11 with
    the loop's body, condition and copies)."""
    assert _cpu_kernel_counts(lambda x: jax.numpy.linalg.slogdet(x)[1], [(64, 64)]) == (8, 8)


def test_scalar_math_on_constants_is_folded_at_compile_time() -> None:
    """erf(1 / sqrt(2)) and nextafter(0, 1) of constants, as jax.random.truncated_normal's
    bounds: XLA's constant folding computes them, leaving the one kernel that scales and
    shifts x (jax 0.10.2); each was a scalar kernel of ours."""

    def fn(x: jax.Array) -> jax.Array:
        scale = jax.lax.erf(jnp.float32(1.0) / jnp.sqrt(jnp.float32(2.0)))
        return x * scale + jnp.nextafter(jnp.float32(0.0), jnp.float32(1.0))

    assert _cpu_kernel_counts(fn, [(256, 256)]) == (1, 1)


_DEAD_AND_LIVE = """
func.func @main(%x: tensor<8xf32>, %i: tensor<i32>) -> tensor<8xf32> {
  %unread = stablehlo.exponential %x : tensor<8xf32>
  %effect = stablehlo.custom_call @log_it(%x) {has_side_effect = true} : (tensor<8xf32>) -> tensor<8xf32>
  %captured = stablehlo.negate %x : tensor<8xf32>
  %r = "stablehlo.case"(%i) ({
    %in_branch = stablehlo.abs %x : tensor<8xf32>
    stablehlo.return %captured : tensor<8xf32>
  }) : (tensor<i32>) -> tensor<8xf32>
  return %r : tensor<8xf32>
}
"""


def test_dead_ops_are_those_nothing_reads_and_without_effects() -> None:
    """An op nothing reads is dead, but not a custom call that says it has side effects, nor
    an op a branch reads from outside (no operand of the case's own)."""
    dead = {op.name: op.dead for op in op_infos(_DEAD_AND_LIVE)}
    assert dead == {
        "stablehlo.exponential": True,
        "stablehlo.custom_call": False,
        "stablehlo.negate": False,
        "stablehlo.case": False,
        "stablehlo.abs": True,
    }


@pytest.mark.parametrize(
    ("name", "fn", "shapes", "kernels"),
    # XLA:CPU's own counts (jax 0.10.2): a max or sum pool whose windows do not overlap, on
    # 4096+ elements, is YNNPACK's and heads a fusion like a YNN reduce's, up through the
    # elementwise ops YNNPACK takes and a YNNPACK convolution, down through reshapes, big
    # enough elementwise ops, a YNNPACK dot or convolution and another pool. A convolution
    # with at most 16 input and output features runs on Eigen and joins nothing.
    [
        ("pool(conv(x))", lambda x, k: _pool(_conv(x, k)), (_IMAGE, _K32), 1),
        ("pool(relu(x))", lambda x: _pool(jax.nn.relu(x)), (_IMAGE,), 1),
        (
            "relu(pool(relu(conv(x))))",
            lambda x, k: jax.nn.relu(_pool(jax.nn.relu(_conv(x, k)))),
            (_IMAGE, _K32),
            1,
        ),
        ("relu(pool(x)) of 2048", lambda x: jax.nn.relu(_pool(x)), (_SMALL_IMAGE,), 2),
        ("sin(pool(x))", lambda x: jax.numpy.sin(_pool(x)), (_IMAGE,), 2),
        ("pool(x) @ w", lambda x, w: _pool(x).reshape(2, -1) @ w, (_IMAGE, (4096, 10)), 1),
        ("conv(pool(x))", lambda x, k: _conv(_pool(x), k), (_IMAGE, _K32), 1),
        ("pool(pool(x))", lambda x: _pool(_pool(x)), (_IMAGE,), 1),
        (
            "mean pool",
            lambda x: (
                jax.lax.reduce_window(x, 0.0, jax.lax.add, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
                * 0.25
            ),
            (_IMAGE,),
            1,
        ),
        ("3x3/2 pool(relu(x))", lambda x: _pool(jax.nn.relu(x), 3, 2), (_IMAGE,), 2),
        ("pool(relu(x)) of 2048", lambda x: _pool(jax.nn.relu(x)), ((1, 16, 16, 8),), 2),
        (
            "pool(relu(eigen conv))",
            lambda x, k: _pool(jax.nn.relu(_conv(x, k))),
            ((2, 32, 32, 3), _K3),
            2,
        ),
        # A pad by zeros of the spatial dimensions of a convolution's input is folded into the
        # convolution's padding (no kernel); of its features, not. XLA also makes the SAME
        # convolution of a padded input, whose output outgrows the unpadded input, Eigen's.
        ("conv(pad(x))", lambda x, k: _conv(_pad(x, 1), k), (_IMAGE, _K32), 1),
        (
            "valid conv(pad(x))",
            lambda x, k: _conv(_pad(x, 2), k, padding="VALID"),
            ((4, 32, 32, 16), (5, 5, 16, 32)),
            1,
        ),
        (
            "conv(feature pad)",
            lambda x, k: _conv(jax.numpy.pad(x, ((0, 0), (0, 0), (0, 0), (0, 16))), k),
            ((1, 32, 32, 16), _K32),
            2,
        ),
    ],
)
def test_ynn_fusions_grow_from_a_pool_as_xla_cpu_fuses(
    name: str, fn: object, shapes: tuple[tuple[int, ...], ...], kernels: int
) -> None:
    assert _cpu_kernel_counts(fn, list(shapes)) == (kernels, kernels), name


# One launch (100 ns) plus, on a CPU, the group's memory time and every member's compute:
# its cost less its launch and less moving its own bytes (400 + 400 + 500 + 400 ns, less
# ~450 ns: 11 tensors of 1,025 f32 at 100 B/ns); elsewhere the slowest member less its
# launch (the exponential's 500).
@pytest.mark.parametrize("kind", ["cpu", "gpu"])
def test_fused_chain_on_cpu_pays_every_members_compute_elsewhere_the_slowest(kind: str) -> None:
    """A CPU loop fusion evaluates every member per element, so its members' compute adds
    up while the tensors move once; a GPU-style kernel hides all but the slowest."""
    from dataclasses import replace

    from stablehlo_perf.analysis.fusion_cost import price_groups
    from stablehlo_perf.analysis.service import OpCost
    from stablehlo_perf.analysis.targets import load_target

    b = chain(TensorType((1025,), "f32"))  # above the elements of a member with no compute
    plan = b.plan(kind)
    assert plan.num_groups == 1
    traffic = group_traffic(b.ops, b.deps, plan, b.sources)
    base = load_target(str(ROOT / "test_ir" / "Inputs" / f"unit_{kind}.toml"))
    target = replace(base, launch_overhead_ns=100.0)
    # Learned costs, launch included: 500, 500, 600 (the exponential), 500 ns.
    costs = [OpCost(0, t, 128, "hgb-x") for t in (500.0, 500.0, 600.0, 500.0)]
    groups, share, _ = price_groups(b.ops, plan, traffic, costs, target)
    if kind == "cpu":
        bytes_per_ns = target.memory_bandwidth_gbps  # GB/s == B/ns
        own = sum(op.bytes for op in b.ops) / bytes_per_ns  # 4 ops' operands and results
        once = (traffic[0].input_bytes + traffic[0].output_bytes) / bytes_per_ns
        assert 0 < own < 500 and 0 < once < own
        want_ns = 100 + 1700 - own + once
    else:
        want_ns = 100 + 500
    assert groups[0].latency_ns == pytest.approx(want_ns)
    assert sum(share) == pytest.approx(groups[0].latency_ns)


def test_cpu_kernel_is_not_floored_by_a_members_own_traffic() -> None:
    """`x - broadcast(mean)` over f32[512,512], as in a layer norm: the subtract was measured
    reading two full tensors (3 MiB moved), the fused kernel reads x and 2 KiB (2 MiB). On a
    CPU the group costs its memory time plus the subtract's compute beyond its own traffic,
    below the subtract's own time; elsewhere the subtract's time stays the floor."""
    from dataclasses import replace

    from stablehlo_perf.analysis.fusion_cost import price_groups
    from stablehlo_perf.analysis.service import OpCost
    from stablehlo_perf.analysis.targets import load_target

    big, col = TensorType((512, 512), "f32"), TensorType((512,), "f32")
    b = Block()
    bc = b.op("broadcast_in_dim", [-2], [col], big)
    b.op("subtract", [-1, bc], [big, big], big)
    for kind in ("cpu", "gpu"):
        plan = b.plan(kind)
        assert plan.num_groups == 1
        traffic = group_traffic(b.ops, b.deps, plan, b.sources)
        base = load_target(str(ROOT / "test_ir" / "Inputs" / f"unit_{kind}.toml"))
        target = replace(base, launch_overhead_ns=100.0)
        bw = target.memory_bandwidth_gbps  # B/ns
        own_ns = 3 * big.nbytes / bw
        sub_ns = 100.0 + own_ns + 50.0  # launch, its own traffic, 50 ns of compute
        costs = [OpCost(0, 0.0, 0, "roofline"), OpCost(0, sub_ns, 0, "hgb-x")]
        (group,), _, _ = price_groups(b.ops, plan, traffic, costs, target)
        once_ns = (traffic[0].input_bytes + traffic[0].output_bytes) / bw
        assert traffic[0].input_bytes == big.nbytes + col.nbytes
        if kind == "cpu":
            assert group.latency_ns == pytest.approx(100.0 + 50.0 + once_ns)
            assert group.latency_ns < sub_ns - 0.3 * own_ns
        else:
            assert group.latency_ns == pytest.approx(sub_ns)


@pytest.mark.parametrize(
    ("onchip", "axis", "own_rate"),
    [
        ({"l2": 2.0}, 1, True),
        ({"l2": 0.5}, 1, False),
        ({"l2": 0.5, "llc": 4.0}, 1, True),
        ({"l2": 0.5, "llc": 4.0}, 0, False),
        ({"l2": 2.0, "llc": 4.0}, 0, True),
    ],
)
def test_cpu_library_reduce_in_cache_moves_its_group_at_its_own_rate(
    onchip: dict[str, float], axis: int, own_rate: bool
) -> None:
    """sum(x * x, axis) over f32[512,512] (1 MiB), a reduction XLA:CPU hands to YNNPACK,
    measured 3x faster than the target's (loop) bandwidth moves its input: with x in a
    core's L2, or a row sum's x in the last-level cache, the fused group moves its bytes at
    the reduce's own rate; a column sum larger than L2, or any larger than the last-level
    cache, moves at the target's bandwidth."""
    from dataclasses import replace

    from stablehlo_perf.analysis.fusion_cost import price_groups
    from stablehlo_perf.analysis.service import OpCost
    from stablehlo_perf.analysis.targets import load_target

    big, col = TensorType((512, 512), "f32"), TensorType((512,), "f32")
    b = Block()
    sq = b.op("multiply", [-1, -1], [big, big], big)
    init = b.op("constant", [], [], SCALAR)
    red = b.op("reduce", [sq, init], [big, SCALAR], col, dimensions=(axis,))
    plan = b.plan("cpu")
    assert plan.num_groups == 1 and plan.kinds == ["input"]
    traffic = group_traffic(b.ops, b.deps, plan, b.sources)
    base = load_target(str(ROOT / "test_ir" / "Inputs" / "unit_cpu.toml"))
    target = replace(base, launch_overhead_ns=100.0, onchip_mib=onchip)
    bw = target.memory_bandwidth_gbps  # B/ns
    red_bytes = b.ops[red].bytes
    red_ns = 100.0 + red_bytes / (3 * bw)
    costs = [
        OpCost(0, 100.0, 0, "roofline"),
        OpCost(0, 0.0, 0, "free"),
        OpCost(0, red_ns, 0, "hgb-x"),
    ]
    groups, _, _ = price_groups(b.ops, plan, traffic, costs, target)
    t = traffic[plan.groups[red]]
    moved = t.input_bytes + t.output_bytes
    assert t.input_bytes == big.nbytes
    rate = 3 * bw if own_rate else bw
    assert groups[plan.groups[red]].latency_ns == pytest.approx(100.0 + moved / rate)


def test_a_row_norms_group_moves_at_its_reduces_own_rate() -> None:
    """sqrt(sum(x * x, 1)) over f32[4096,64] (1 MiB, in a 2 MiB L2): the square root of 4096
    row sums joins the YNNPACK reduce's kernel and ends it (`fusion._ynn_chain`), and the
    group still moves its bytes at the reduce's own rate, 3x the target's bandwidth."""
    from dataclasses import replace

    from stablehlo_perf.analysis.fusion_cost import price_groups
    from stablehlo_perf.analysis.service import OpCost
    from stablehlo_perf.analysis.targets import load_target

    big, col = TensorType((4096, 64), "f32"), TensorType((4096,), "f32")
    b = Block()
    sq = b.op("multiply", [-1, -1], [big, big], big)
    init = b.op("constant", [], [], SCALAR)
    red = b.op("reduce", [sq, init], [big, SCALAR], col, dimensions=(1,))
    root = b.op("sqrt", [red], [col], col)
    plan = b.plan("cpu")
    assert plan.num_groups == 1 and plan.kinds == ["input"]
    assert plan.roots[0] == root
    traffic = group_traffic(b.ops, b.deps, plan, b.sources)
    base = load_target(str(ROOT / "test_ir" / "Inputs" / "unit_cpu.toml"))
    target = replace(base, launch_overhead_ns=100.0, onchip_mib={"l2": 2.0})
    bw = target.memory_bandwidth_gbps  # B/ns
    costs = [
        OpCost(0, 100.0, 0, "roofline"),
        OpCost(0, 0.0, 0, "free"),
        OpCost(0, 100.0 + b.ops[red].bytes / (3 * bw), 0, "hgb-x"),
        OpCost(0, 100.0, 0, "roofline"),
    ]
    groups, _, _ = price_groups(b.ops, plan, traffic, costs, target)
    t = traffic[0]
    assert groups[0].latency_ns == pytest.approx(
        100.0 + (t.input_bytes + t.output_bytes) / (3 * bw)
    )


@pytest.mark.parametrize("dtype", ["bf16", "f32"])
def test_cpu_bf16_loop_pays_each_members_rounding(dtype: str) -> None:
    """XLA:CPU widens and rounds per op in a fused bf16 loop: each bf16 member computes at
    least `bf16_fused_ns_per_element` per element, though its standalone time was all
    memory traffic; an f32 loop of the same members pays only the traffic."""
    from dataclasses import replace

    from stablehlo_perf.analysis.fusion_cost import price_groups
    from stablehlo_perf.analysis.service import OpCost
    from stablehlo_perf.analysis.targets import load_target

    big = TensorType((1024, 1024), dtype)
    b = Block()
    m = b.op("multiply", [-1, -2], [big, big], big)
    b.op("add", [m, -1], [big, big], big)
    plan = b.plan("cpu")
    assert plan.num_groups == 1
    traffic = group_traffic(b.ops, b.deps, plan, b.sources)
    target = replace(
        load_target(str(ROOT / "test_ir" / "Inputs" / "unit_cpu.toml")),
        launch_overhead_ns=100.0,
        bf16_fused_ns_per_element=0.25,
    )
    bw = target.memory_bandwidth_gbps  # B/ns
    costs = [OpCost(0, 100.0 + 3 * big.nbytes / bw, 0, "hgb-x") for _ in range(2)]
    (group,), _, _ = price_groups(b.ops, plan, traffic, costs, target)
    once_ns = (traffic[0].input_bytes + traffic[0].output_bytes) / bw
    rounding = 2 * 0.25 * 1024 * 1024 if dtype == "bf16" else 0.0
    assert group.latency_ns == pytest.approx(100.0 + once_ns + rounding)


def _one_cpu_kernel(b: Block) -> tuple[FusionPlan, list[GroupTraffic], Target, float]:
    """`b` planned for a CPU as one group: its plan, traffic, unit-cpu with a 100 ns launch,
    and that target's bandwidth in B/ns."""
    from dataclasses import replace

    from stablehlo_perf.analysis.targets import load_target

    plan = b.plan("cpu")
    assert plan.num_groups == 1
    traffic = group_traffic(b.ops, b.deps, plan, b.sources)
    target = replace(
        load_target(str(ROOT / "test_ir" / "Inputs" / "unit_cpu.toml")), launch_overhead_ns=100.0
    )
    return plan, traffic, target, target.memory_bandwidth_gbps


@pytest.mark.parametrize("move", ["broadcast_in_dim", "transpose"])
def test_cpu_kernel_pays_no_compute_for_a_broadcast_but_does_for_a_transpose(move: str) -> None:
    """`clip(x) * 127` broadcasts scalars over f32[2048,1024]: priced alone by the copy data
    a broadcast costs a tensor's read and write, but the fused loop only computes an index.
    A fused transpose reads across rows (one element per cache line), which it pays."""

    from stablehlo_perf.analysis.fusion_cost import price_groups
    from stablehlo_perf.analysis.service import OpCost

    big = TensorType((1024, 1024), "f32")
    src = TensorType((), "f32") if move == "broadcast_in_dim" else big
    attrs = {"permutation": (1, 0)} if move == "transpose" else {}
    b = Block()
    mv = b.op(move, [-2], [src], big, **attrs)
    b.op("multiply", [-1, mv], [big, big], big)
    plan, traffic, target, bw = _one_cpu_kernel(b)
    move_ns = 100.0 + 2 * big.nbytes / bw + 7_000.0  # launch, a copy's traffic, 7 us more
    mul_ns = 100.0 + 3 * big.nbytes / bw + 50.0
    costs = [OpCost(0, move_ns, 0, "hgb-x"), OpCost(0, mul_ns, 0, "hgb-x")]
    (group,), _, _ = price_groups(b.ops, plan, traffic, costs, target)
    once_ns = (traffic[0].input_bytes + traffic[0].output_bytes) / bw
    move_compute = move_ns - 100.0 - b.ops[0].bytes / bw
    want = 100.0 + 50.0 + once_ns + (move_compute if move == "transpose" else 0.0)
    assert group.latency_ns == pytest.approx(want)


def test_cpu_scan_kernel_roofline_counts_the_blocked_scan() -> None:
    """A cumprod over rows of 4096 f32 (8 rows) with its init constant in its kernel, as
    jnp.cumprod lowers: its HLO counts 4095 products an element (134M flops, 1.34 ms on
    unit-cpu's 100 flop/ns), XLA:CPU's blocked rewrite 559,096 (blocks of 16: 8 x 256 x 256 +
    8 x 16 x 256 + a last window of 16 over 17, 8 x 17 x 15), 5.59 us; above the 2.62 us its
    256 KiB move, so the kernel costs that and its launch."""
    from stablehlo_perf.analysis.fusion_cost import price_groups
    from stablehlo_perf.analysis.service import OpCost

    rows = TensorType((8, 4096), "f32")
    b = Block()
    one = b.op("constant", [], [], SCALAR)
    b.op("reduce_window", [-1, one], [rows, SCALAR], rows,
         window_dimensions=(1, 4096), body_flops=1)  # fmt: skip
    plan, traffic, target, _ = _one_cpu_kernel(b)
    assert b.ops[1].flops == 8 * 4096 * 4095
    costs = [OpCost(0, 0.0, 0, "free"), OpCost(0, 3000.0, 0, "hgb-x")]
    (group,), _, _ = price_groups(b.ops, plan, traffic, costs, target)
    assert group.latency_ns == pytest.approx(100.0 + 559_096 / 100.0)
    assert group.model == "fused-opaque:roofline"


@pytest.mark.parametrize(
    ("arithmetic", "model"),
    [(False, "hgb-x"), (True, "hgb-x"), (False, "roofline(hgb-x: no movement data)")],
)
def test_cpu_movement_kernel_streams_at_its_measured_rate(arithmetic: bool, model: str) -> None:
    """A fill of f32[1024,1024] from a constant (jnp.zeros: the constant and its broadcast
    are one kernel), the broadcast measured at 10 us beyond its launch (420 GB/s): a kernel
    of data movement alone moves its 4 MiB at that rate, not unit-cpu's 100 B/ns (41.9 us),
    while it fits the last-level cache; a kernel that also computes keeps the target's
    bandwidth, and so does one whose broadcast was priced by the roofline fallback (a rate
    from work alone, not a measurement)."""
    from dataclasses import replace

    from stablehlo_perf.analysis.fusion_cost import price_groups
    from stablehlo_perf.analysis.service import OpCost

    big = TensorType((1024, 1024), "f32")
    b = Block()
    zero = b.op("constant", [], [], SCALAR)
    fill = b.op("broadcast_in_dim", [zero], [SCALAR], big)
    if arithmetic:
        b.op("multiply", [fill, -2], [big, big], big)
    plan, traffic, target, bw = _one_cpu_kernel(b)
    target = replace(target, onchip_mib={"llc": 32.0})
    costs = [OpCost(0, 0.0, 0, "free"), OpCost(0, 100.0 + 10_000.0, 0, model)]
    costs += [OpCost(0, 100.0, 0, "hgb-x")] * arithmetic
    (group,), _, _ = price_groups(b.ops, plan, traffic, costs, target)
    if arithmetic or model != "hgb-x":
        once_ns = (traffic[0].input_bytes + traffic[0].output_bytes) / bw
        assert group.latency_ns == pytest.approx(100.0 + once_ns)  # the fill's time < its bytes'
    else:
        assert group.latency_ns == pytest.approx(100.0 + 10_000.0)


def test_a_tiny_member_adds_no_compute_unless_transcendental() -> None:
    """On 512 elements a multiply's measured time is the kernel floor, not work; a cosine's
    (2.8 us on 544 f32 in the Xeon reference) is work the fused loop still does."""
    from stablehlo_perf.analysis.fusion_cost import price_groups
    from stablehlo_perf.analysis.service import OpCost

    t = TensorType((512,), "f32")
    b = Block()
    cos = b.op("cosine", [-1], [t], t)
    b.op("multiply", [cos, -1], [t, t], t)
    plan, traffic, target, bw = _one_cpu_kernel(b)
    cos_ns = 100.0 + b.ops[0].bytes / bw + 2_500.0  # launch, its traffic, 2.5 us of work
    mul_ns = 100.0 + b.ops[1].bytes / bw + 300.0
    costs = [OpCost(0, cos_ns, 0, "hgb-x"), OpCost(0, mul_ns, 0, "hgb-x")]
    (group,), _, _ = price_groups(b.ops, plan, traffic, costs, target)
    once_ns = (traffic[0].input_bytes + traffic[0].output_bytes) / bw
    assert group.latency_ns == pytest.approx(100.0 + once_ns + 2_500.0)


def test_own_traffic_of_slices_and_gathers_is_what_they_return() -> None:
    """A member's own traffic (what its measured time moved): a dynamic slice's bytes already
    count only the slice; a gather's count its whole table, of which it read the rows."""
    from stablehlo_perf.analysis.fusion_cost import _memory_ns
    from stablehlo_perf.analysis.targets import load_target

    target = load_target(str(ROOT / "test_ir" / "Inputs" / "unit_cpu.toml"))
    table, rows, idx = TensorType((1024, 512), "f32"), TensorType((16, 512), "f32"), SCALAR
    ds = OpInfo.build(0, "stablehlo.dynamic_slice", [table, idx, idx], [rows], {})
    gidx = TensorType((16, 1), "i32")
    g = OpInfo.build(1, "stablehlo.gather", [table, gidx], [rows], {})
    bw = target.memory_bandwidth_gbps  # B/ns
    assert _memory_ns(ds, target) == pytest.approx((2 * rows.nbytes + 2 * 4) / bw)
    assert _memory_ns(g, target) == pytest.approx((2 * rows.nbytes + gidx.nbytes) / bw)


@pytest.mark.parametrize("speedup", [4.0, 0.5])
def test_a_cpu_gathers_group_moves_its_bytes_at_the_gathers_own_rate(speedup: float) -> None:
    """An embedding lookup of 512 rows of 128 f32 from a 5000-row table, squared in the
    same loop kernel: where the gather's own measured time moved its rows 4x faster than
    the target's bandwidth, the group moves its bytes at that rate; where 2x slower, at the
    target's, the gather's time beyond moving its own bytes so being compute."""
    from stablehlo_perf.analysis.fusion_cost import price_groups
    from stablehlo_perf.analysis.service import OpCost

    table, idx = TensorType((5000, 128), "f32"), TensorType((512, 1), "i32")
    rows = TensorType((512, 128), "f32")
    b = Block()
    g = b.op("gather", [-1, -2], [table, idx], rows)
    b.op("multiply", [g, g], [rows, rows], rows)
    plan, traffic, target, bw = _one_cpu_kernel(b)
    assert plan.kinds == ["loop"]
    # The gather alone reads its 512 rows and the indices and writes the rows; the kernel
    # reads the same and writes the squares: 256 KiB + 2 KiB + 256 KiB either way.
    own = moved = 2 * 512 * 128 * 4 + 512 * 4
    assert traffic[0].input_bytes + traffic[0].output_bytes == moved
    gather_ns = 100.0 + own / (speedup * bw)
    costs = [OpCost(0, gather_ns, 0, "hgb-x"), OpCost(0, 0.0, 0, "roofline")]
    (group,), _, _ = price_groups(b.ops, plan, traffic, costs, target)
    if speedup > 1:
        assert group.latency_ns == pytest.approx(100.0 + moved / (speedup * bw), rel=1e-6)
    else:
        compute = own / bw  # 2x its own bytes' time at bw, less them
        assert group.latency_ns == pytest.approx(100.0 + compute + moved / bw, rel=1e-6)


def _log_softmax_gather(extra_use: bool = False) -> tuple[Block, dict[str, int]]:
    """logp = x - broadcast(lse) over f32[128,1000], then take_along_axis's gather of 128."""
    big, col = TensorType((128, 1000), "f32"), TensorType((128,), "f32")
    idx, picked = TensorType((128, 1), "i32"), TensorType((128, 1), "f32")
    b = Block()
    ids = {"bcast": b.op("broadcast_in_dim", [-2], [col], big)}
    ids["logp"] = b.op("subtract", [-1, ids["bcast"]], [big, big], big)
    if extra_use:
        ids["exp"] = b.op("exponential", [ids["logp"]], [big], big)
    ids["gather"] = b.op("gather", [ids["logp"], -3], [big, idx], picked)
    return b, ids


def test_producers_fused_into_a_gather_are_priced_at_the_gathered_elements() -> None:
    from stablehlo_perf.analysis.fusion import gathered_scales

    b, ids = _log_softmax_gather()
    members = list(range(len(b.ops)))
    share = 128 / (128 * 1000)
    assert gathered_scales(b.ops, members, b.sources) == {
        ids["bcast"]: share,
        ids["logp"]: share,
    }
    # Returned by the block, logp is computed in full; so is its broadcast, which logp reads.
    assert gathered_scales(b.ops, members, b.sources, live_out=[ids["logp"]]) == {}
    # Read by another op of the group too, likewise.
    b2, _ = _log_softmax_gather(extra_use=True)
    assert gathered_scales(b2.ops, list(range(len(b2.ops))), b2.sources) == {}


def test_a_fused_gather_reads_only_the_gathered_part_of_its_producers_inputs() -> None:
    """The group evaluates logp at the 128 gathered positions, so it reads 128 of x's
    128,000 elements (and of the broadcast's 128) plus the indices, not all of x: priced by
    roofline, its memory time is that read and the 512 B it writes."""

    from stablehlo_perf.analysis.fusion_cost import price_groups
    from stablehlo_perf.analysis.service import OpCost

    b, ids = _log_softmax_gather()
    plan, traffic, target, bw = _one_cpu_kernel(b)
    costs = [OpCost(0, 0.0, 0, "roofline")] * len(b.ops)
    x_read, col_read, idx_bytes, out_bytes = 128 * 4, 128 * 128 * 4 / 128_000, 512, 512
    (group,), _, _ = price_groups(b.ops, plan, traffic, costs, target)
    assert traffic[0].input_bytes == round(x_read + col_read + idx_bytes)
    assert traffic[0].flops == 128  # logp's subtract at the 128 gathered positions, not 128,000
    assert group.dram_bytes == round(x_read + col_read + idx_bytes + out_bytes)
    assert group.latency_ns == pytest.approx(100.0 + (x_read + col_read + 1024) / bw, rel=1e-3)
    # logp returned: computed and read in full
    live = [ids["logp"]]
    (t_whole,) = group_traffic(b.ops, b.deps, plan, b.sources, live)
    assert t_whole.input_bytes == 128_000 * 4 + 128 * 4 + idx_bytes
    (whole,), _, _ = price_groups(b.ops, plan, [t_whole], costs, target)
    assert whole.dram_bytes == t_whole.input_bytes + t_whole.output_bytes


def test_cpu_kernel_pays_no_compute_for_members_of_a_few_elements() -> None:
    """A member touching at most 1,024 elements adds no compute to a fused CPU kernel: its
    measured time (3.9 us here, as the learned model put a 64-element `and`) is a kernel's
    floor, paid once as the launch. One of 4,096 elements pays what it measured beyond
    moving its own operands."""
    from stablehlo_perf.analysis.fusion_cost import price_groups
    from stablehlo_perf.analysis.service import OpCost

    for n, pays in ((64, False), (4096, True)):
        t = TensorType((n,), "f32")
        b = Block()
        a = b.op("add", [-1, -2], [t, t], t)
        b.op("multiply", [a, -3], [t, t], t)
        plan, traffic, target, bw = _one_cpu_kernel(b)
        costs = [OpCost(0, 100.0 + 3 * t.nbytes / bw + 3_800.0, 0, "hgb-x")] * 2
        (group,), _, _ = price_groups(b.ops, plan, traffic, costs, target)
        once_ns = (traffic[0].input_bytes + traffic[0].output_bytes) / bw
        want = 100.0 + once_ns + (2 * 3_800.0 if pays else 0.0)
        assert group.latency_ns == pytest.approx(want), n


def test_dynamic_update_slice_moves_only_its_update() -> None:
    """A scan's output buffer is updated in place: the group reads the update (and index)
    and writes the update, not the 64 KiB buffer."""
    buf, upd, idx = TensorType((16, 8, 128), "f32"), TensorType((1, 8, 128), "f32"), SCALAR
    b = Block()
    b.op("dynamic_update_slice", [-1, -2, -3, -3, -3], [buf, upd, idx, idx, idx], buf)
    (t,) = group_traffic(b.ops, b.deps, b.plan("cpu"), b.sources)
    # buffer as the update's 4,096 B, the update 4,096 B, the (one, shared) index 4 B.
    assert (t.input_bytes, t.output_bytes) == (4096 + 4096 + 4, 4096)


def test_a_scatter_at_one_index_moves_only_its_update() -> None:
    """XLA rewrites a scatter at one index (`x.at[i].set(row)`) into a dynamic-update-slice
    in place: the group reads the row (and index) and writes the row, not the 2 MiB table.
    At two indices it stays a scatter that copies the table: all 2 MiB in and out."""
    table = TensorType((4096, 128), "f32")
    for n, want in ((1, (512 + 4 + 512, 512)), (2, ((2 << 20) + 8 + 1024, 2 << 20))):
        idx, upd = TensorType((n, 1), "i32"), TensorType((n, 128), "f32")
        b = Block()
        b.op(
            "scatter", [-1, -2, -3], [table, idx, upd], table, index_vector_dim=1,
            update_window_dims=(1,), inserted_window_dims=(0,),
            scatter_dims_to_operand_dims=(0,),
        )  # fmt: skip
        (t,) = group_traffic(b.ops, b.deps, b.plan("cpu"), b.sources)
        assert (t.input_bytes, t.output_bytes) == want, n


def test_a_fused_slice_reads_only_its_part_of_the_input() -> None:
    """sum(dynamic_slice(x, i)) in a loop body reads one step of x, not x (a 64-step
    fori_loop was priced 4.4 ms, 14x its measured 0.32 ms). A 16x512 step's sum is a
    YNNPACK reduce, which takes no slice: XLA:CPU (jax 0.10.2) runs the slice as a loop
    kernel of its own; a 16x64 step's sum fuses it. Read in full by another member, x
    counts in full."""
    idx = SCALAR
    for width, kernels in ((512, 2), (64, 1)):
        x, step = TensorType((1024, width), "f32"), TensorType((16, width), "f32")
        b = Block()
        sl = b.op("dynamic_slice", [-1, -2, -3], [x, idx, idx], step)
        b.op("reduce", [sl, -4], [step, SCALAR], TensorType((width,), "f32"), dimensions=(0,))
        plan = b.plan("cpu")
        assert plan.num_groups == kernels
        traffic = group_traffic(b.ops, b.deps, plan, b.sources)
        init = 4 if kernels == 1 else 0
        assert traffic[plan.groups[sl]].input_bytes == 16 * width * 4 + 2 * 4 + init
    x, step = TensorType((1024, 512), "f32"), TensorType((16, 512), "f32")
    row = TensorType((512,), "f32")
    # Two slices of x: both parts.
    b2 = Block()
    s1 = b2.op("slice", [-1], [x], step, start_indices=(0, 0))
    s2 = b2.op("slice", [-1], [x], step, start_indices=(16, 0))
    b2.op("add", [s1, s2], [step, step], step)
    (t2,) = group_traffic(b2.ops, b2.deps, b2.plan("cpu"), b2.sources)
    assert t2.input_bytes == 2 * 16 * 512 * 4
    # x also read whole (x * 2 next to its slice): x in full.
    b3 = Block()
    s3 = b3.op("slice", [-1], [x], step)
    b3.op("reduce", [s3, -4], [step, SCALAR], row, dimensions=(0,))
    b3.op("multiply", [-1, -1], [x, x], x)
    (t3,) = group_traffic(b3.ops, b3.deps, [0, 0, 0], b3.sources)
    assert t3.input_bytes == 1024 * 512 * 4 + 4


def test_slices_are_priced_by_the_tensor_they_move() -> None:
    from stablehlo_perf.analysis.elementwise import op_tensor

    big, part, idx = TensorType((16, 8, 128), "f32"), TensorType((1, 8, 128), "f32"), SCALAR
    sl = OpInfo.build(0, "stablehlo.dynamic_slice", [big, idx, idx, idx], [part])
    dus = OpInfo.build(1, "stablehlo.dynamic_update_slice", [big, part, idx, idx, idx], [big])
    tr = OpInfo.build(2, "stablehlo.transpose", [big], [TensorType((128, 8, 16), "f32")])
    assert op_tensor(sl) == part and op_tensor(dus) == part
    assert op_tensor(tr).num_elements == big.num_elements  # other movement: the larger side
    assert sl.bytes == 2 * part.nbytes + 3 * 4
    # A scatter (segment_sum of 4096 rows into 64) combines each update into its row in place:
    # its updates set its time, not the 64 rows it writes (priced at 0.65 us where XLA:CPU took
    # 48), nor a table far larger than the updates.
    rows, ids, upd = (
        TensorType((64, 128), "f32"),
        TensorType((4096, 1), "i32"),
        TensorType((4096, 128), "f32"),
    )
    seg = OpInfo.build(3, "stablehlo.scatter", [rows, ids, upd], [rows])
    table = TensorType((50000, 128), "f32")
    into = OpInfo.build(4, "stablehlo.scatter", [table, ids, upd], [table])
    pair = OpInfo.build(5, "stablehlo.scatter", [rows, big, ids, part, upd], [rows, big])
    assert op_tensor(seg) == upd and op_tensor(into) == upd and op_tensor(pair) == upd


def test_one_read_ops_are_the_two_operand_ops_of_a_loop_reading_one_tensor() -> None:
    from stablehlo_perf.analysis.fusion import one_read_ops

    # x * sigmoid(x): one external tensor (x); the splat 1 is a scalar, no read.
    b = Block()
    neg = b.op("negate", [-1])
    exp = b.op("exponential", [neg])
    one = b.op("add", [exp, -2], [T, SCALAR])
    sig = b.op("divide", [-2, one], [SCALAR, T])
    mul = b.op("multiply", [-1, sig])
    assert one_read_ops(b.ops, b.plan("tpu"), b.sources) == {one, sig, mul}
    # x * y reads two tensors.
    b2 = Block()
    b2.op("multiply", [-1, -2])
    assert one_read_ops(b2.ops, b2.plan("tpu"), b2.sources) == set()


def _xla_body_copies(compiled_text: str) -> list[int]:
    """Copies in each while body of XLA's optimised HLO."""
    import re

    out = []
    for m in re.finditer(r"while\([^)]*\), condition=%?[\w.\-]+, body=%?([\w.\-]+)", compiled_text):
        start = compiled_text.find(f"%{m.group(1)} ")
        body = compiled_text[start : compiled_text.find("\n}\n", start)]
        out.append(sum(bool(re.search(r"= \S+ copy\(", line)) for line in body.splitlines()))
    return out


def test_loop_state_copies_are_the_ones_xla_inserts() -> None:
    """Our count of the copies a while body makes each trip against XLA's compiled HLO:
    none where each value is updated in place, one per value the other update still reads,
    two per value of a permutation; jax.random's threefry loop."""
    import re

    import jax
    import jax.numpy as jnp
    import stablehlo_perf as sp
    from jax import lax

    def loop(step):
        return lambda a, b: lax.fori_loop(0, 5, lambda i, c: step(*c), (a, b))

    cases = {
        "independent": loop(lambda a, b: (a * 2, b * 3)),
        "cross": loop(lambda a, b: (a + b, a - b)),
        "permuted": loop(lambda a, b: (b * 2, a * 3)),
        "read_first": loop(lambda a, b: (a * 0.5 + jnp.tanh(b @ a), b)),
        "cross_dot": loop(lambda a, b: (jnp.tanh(a @ b), jnp.tanh(b) + a)),
        "uniform": lambda a, b: jax.random.uniform(jax.random.key(0), (64, 64)) + a,
    }
    x = jnp.ones((64, 64))
    for name, fn in cases.items():
        lowered = jax.jit(fn).lower(x, x)
        (xla,) = _xla_body_copies(lowered.compile().as_text())
        (loop_op,) = [
            o for o in sp.analyze(lowered, target="host").report.ops if o.name == "stablehlo.while"
        ]
        m = re.search(r"copies: (\d+) a trip", loop_op.model)
        assert (int(m.group(1)) if m else 0) == xla, (name, loop_op.model, xla)


@pytest.mark.parametrize(
    ("name", "step", "copies"),
    # XLA:CPU (jax 0.10.2): the counter, which the update's index reads, copied each trip;
    # x once more where a kernel may read it after an update of it in place, and once
    # again where an update in place then returns it.
    [
        ("x.at[i].set(x[j])", lambda i, x: x.at[i].set(x[i + 1]), 1),
        ("x.at[i].set(1).at[j].set(2)", lambda i, x: x.at[i].set(1).at[i + 1].set(2), 1),
        ("x.at[i].set(1) + x[3]", lambda i, x: x.at[i].set(1) + x[3], 2),
        ("swap x[i] and x[j]", lambda i, x: x.at[i].set(x[i + 1]).at[i + 1].set(x[i]), 3),
    ],
)
def test_an_update_in_place_a_later_read_would_see_copies_the_state(
    name: str, step: object, copies: int
) -> None:
    """XLA hoists the first two loops into one kernel (their updates in place and the
    counter's copy move a few bytes a trip; `xla_cpu_small_call`), and runs the others
    thunk by thunk: the add reads and writes all of x, the swap's two copies copy it. The
    analysis says which, and counts a thunked loop's copies as XLA makes them."""
    import re

    import stablehlo_perf as sp

    lowered = jax.jit(lambda x: jax.lax.fori_loop(0, 50, step, x)).lower(
        jax.ShapeDtypeStruct((200,), jnp.int32)
    )
    text = lowered.compile().as_text()
    assert _xla_body_copies(text) == [copies]
    (loop_op,) = [
        o for o in sp.analyze(lowered, target="host").report.ops if o.name == "stablehlo.while"
    ]
    if "xla_cpu_small_call" in text:
        assert loop_op.model == "while(x50, one kernel)"
    else:
        assert re.search(r"copies: (\d+) a trip", loop_op.model).group(1) == str(copies)
    assert ("xla_cpu_small_call" in text) == (copies == 1)


def test_loop_copies_are_priced_as_copy_kernels() -> None:
    """`(a + b, a - b)` on 1024 f32 for 5 trips on unit-cpu (100 B/ns, 100 ns a kernel):
    both values copied each trip and, being entry parameters, once before, with the
    counter's initial constant; each copy a kernel moving its bytes twice."""
    import jax
    import jax.numpy as jnp
    import stablehlo_perf as sp
    from jax import lax

    def f(a, b):
        return lax.fori_loop(0, 5, lambda i, c: (c[0] + c[1], c[0] - c[1]), (a, b))

    unit = str(ROOT / "test_ir" / "Inputs" / "unit_cpu.toml")
    res = sp.analyze(jax.jit(f).lower(jnp.ones(1024), jnp.ones(1024)), target=unit)
    (loop_op,) = [o for o in res.report.ops if o.name == "stablehlo.while"]
    assert loop_op.model == "while(x5, copies: 2 a trip, 3 before)"
    launch, bw = 100.0, 100.0
    vector_op = launch + 3 * 4096 / bw  # the add and the subtract: two reads, one write
    counter = launch + 8 / bw  # i + 1
    test = launch + 5 / bw  # i < 5
    copy = launch + 2 * 4096 / bw
    scalar_copy = launch + 2 * 4 / bw
    expected = 5 * (2 * vector_op + counter) + 6 * test + (10 + 2) * copy + scalar_copy
    assert loop_op.latency_ns == pytest.approx(expected)


def test_f16_exps_and_logs_vectorised_are_those_of_kernels_that_broadcast() -> None:
    """XLA:CPU vectorises an f16 exp or log where its loop kernel broadcasts a scalar or a
    vector (exp(x) + 1, exp(x) * x[:, :1], log(x + 1), a sigmoid's 1 / (1 + exp(-x))), not
    in a kernel of its own, beside elementwise ops only (exp(x) * x, exp(-x)), in bf16 (which
    it widens itself), or in a softmax, whose max XLA broadcasts inside its YNNPACK reduce."""
    from stablehlo_perf.analysis.fusion import f16_vectorised_ops, plan_fusion
    from stablehlo_perf.passes.extract import view_module
    from stablehlo_perf.passes.ir import make_context, parse_module

    def found(fn: object, dtype: object = jnp.float16) -> list[str]:
        text = jax.jit(fn).lower(jax.ShapeDtypeStruct((256, 256), dtype)).as_text()
        with make_context() as ctx:
            module = parse_module(text, "<jax>", ctx)  # kept alive while its ops are read
            view = view_module(module.operation, "<jax>")
            (ids,) = [b for b in view.blocks() if b]
            ops = [view.records[i].info for i in ids]
            sources = view.block_sources(ids)
            plan = plan_fusion(ops, view.block_deps(ids), "cpu", sources, view.block_live_out(ids))
            return [ops[i].short_name for i in sorted(f16_vectorised_ops(ops, plan, sources))]

    assert found(lambda x: jnp.exp(x) + 1) == ["exponential"]
    assert found(lambda x: jnp.exp(x) * x[:, :1]) == ["exponential"]
    assert found(lambda x: jnp.log(x + 1)) == ["log"]
    assert found(jax.nn.sigmoid) == ["exponential"]
    assert found(jnp.exp) == found(lambda x: jnp.exp(x) * x) == found(lambda x: jnp.exp(-x)) == []
    assert found(lambda x: jnp.exp(x) + 1, jnp.bfloat16) == []
    assert found(lambda x: jax.nn.softmax(x, -1)) == []
    # logsumexp: the exp's kernel broadcasts the max after a select (XLA's own kernel),
    # not the max as its YNNPACK reduce broadcasts it: vectorised (1024x256 f16, Xeon VM,
    # three runs: 250-255 us a call, priced 699 with a scalar exp, 274 vectorised).
    assert "exponential" in found(lambda x: jax.nn.logsumexp(x, -1))
