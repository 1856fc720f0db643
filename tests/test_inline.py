"""perf-inline-calls: calls are inlined as XLA's CallInliner does, so callee ops fuse with callers."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
import stablehlo_perf as sp
from conftest import ROOT
from jaxlib.mlir import ir
from stablehlo_perf.passes.inline import inline_calls
from stablehlo_perf.passes.ir import make_context, parse_module
from stablehlo_perf.passes.pipeline import default_pipeline

NESTED = (ROOT / "test_ir/corpus/nested_call.mlir").read_text()


def _funcs(module: ir.Module) -> list[str]:
    return [
        ir.StringAttr(op.operation.attributes["sym_name"]).value
        for op in module.body.operations
        if op.operation.name == "func.func"
    ]


def test_nested_calls_inlined_and_private_callees_erased():
    with make_context() as ctx:
        module = parse_module(NESTED, "nested_call.mlir", ctx)
        # relu into _inner_dense, then _inner_dense twice and _inner_head once into main.
        assert inline_calls(module.operation) == 4
        module.operation.verify()
        assert _funcs(module) == ["main"]
        text = str(module)
        assert "call @" not in text
        assert text.count("stablehlo.dot_general") == 3
        assert text.count("stablehlo.maximum") == 2


def test_inlining_keeps_flops_and_bytes_of_every_call_site():
    without = sp.analyze(
        NESTED,
        target="tpu-v5e",
        pipeline=default_pipeline("tpu-v5e").replace("perf-inline-calls,", ""),
    )
    inlined = sp.analyze(NESTED, target="tpu-v5e")

    def executed_flops(report) -> int:
        # Without inlining a callee's ops appear once however often they are called.
        counts = {"_inner_dense": 2, "relu": 2, "_inner_head": 1}
        total = 0
        for o in report.ops:
            if o.name != "func.call":
                total += o.flops * counts.get(o.func, 1)
        return total

    dots = [o for o in inlined.report.ops if o.name == "stablehlo.dot_general"]
    assert sum(o.flops for o in dots) == 2 * (2 * 8 * 32 * 32) + 2 * 8 * 4 * 32
    assert sum(o.flops for o in inlined.report.ops) == executed_flops(without.report)
    assert all(o.func == "main" for o in inlined.report.ops)


def test_inlined_op_keeps_call_site_location():
    def f(x):
        return jax.nn.relu(x) * 2.0

    lowered = jax.jit(f).lower(jax.ShapeDtypeStruct((64,), jnp.float32))
    res = sp.analyze(lowered, target="tpu-v4")
    maximum = next(o for o in res.report.ops if o.name == "stablehlo.maximum")
    # relu's own ops carry only a name location; the call's file:line is the user's.
    assert maximum.loc.endswith(f"test_inline.py:{f.__code__.co_firstlineno + 1}:15")


def _xla_entry_kernels(fn, *specs) -> int:
    """Instructions launching work in XLA:CPU's optimised entry computation."""
    hlo = jax.jit(fn).lower(*specs).compile().as_text()
    entry = hlo[hlo.index("ENTRY") :]
    body = entry[: entry.index("\n}")].splitlines()[1:]
    skip = ("parameter(", "constant(", "tuple(", "get-tuple-element(", "bitcast(")
    return sum(1 for line in body if " = " in line and not any(s in line for s in skip))


@pytest.mark.parametrize("act", [jax.nn.elu, jax.nn.leaky_relu, jax.nn.selu, jax.nn.hard_swish])
def test_activation_with_helper_calls_is_one_kernel(act):
    spec = jax.ShapeDtypeStruct((16, 16, 32), jnp.float16)
    res = sp.analyze(jax.jit(act).lower(spec), target="tpu-v4")
    kernels = [g for g in res.report.fusion_groups if g["latency_ns"] > 0]
    assert len(kernels) == _xla_entry_kernels(act, spec) == 1
    relu = sp.analyze(jax.jit(jax.nn.relu).lower(spec), target="tpu-v4").report.total_latency_ns
    # One fused elementwise kernel: within the spread of tpu-v4's measured elementwise ops.
    assert res.report.total_latency_ns == pytest.approx(relu, rel=0.25)


_RECURSIVE = """
func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = func.call @rec(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
func.func private @rec(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = func.call @rec(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
"""
_DECLARATION = """
func.func private @ext(%a: tensor<4xf32>) -> tensor<4xf32>
func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = func.call @ext(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
"""


@pytest.mark.parametrize(
    ("text", "funcs"), [(_RECURSIVE, ["main", "rec"]), (_DECLARATION, ["ext", "main"])]
)
def test_recursive_or_bodiless_callee_stays_a_call(text: str, funcs: list[str]):
    with make_context() as ctx:
        module = parse_module(text, "calls.mlir", ctx)
        assert inline_calls(module.operation) == 0
        assert _funcs(module) == funcs
    res = sp.analyze(text, target="tpu-v5e")  # the default pipeline still annotates it
    assert [o.name for o in res.report.ops if o.top_level] == ["func.call"]


@pytest.mark.parametrize(
    "act", [jax.nn.sigmoid, jax.nn.elu, jax.nn.selu, jax.nn.relu6, jax.nn.silu, jax.nn.gelu]
)
def test_one_tensor_activations_cost_what_relu_costs_on_tpu_v4(act):
    """Each is one fused kernel that reads x once and writes once, like the measured ReLU
    kernel: constants (1 + e^-x, x > 0, the clip bounds) are splats, and silu's x * sigmoid(x)
    or gelu's products multiply values computed from x inside the kernel."""
    spec = jax.ShapeDtypeStruct((16, 16, 32), jnp.float16)
    relu = sp.analyze(jax.jit(jax.nn.relu).lower(spec), target="tpu-v4").report.total_latency_ns
    res = sp.analyze(jax.jit(act).lower(spec), target="tpu-v4")
    assert res.report.total_latency_ns == pytest.approx(relu, rel=1e-3)
    assert relu / 1e3 == pytest.approx(1.297, rel=0.03)  # measured ReLU at this shape


def test_two_tensor_loop_keeps_the_two_read_price_on_tpu_v4():
    """x * sigmoid(y) reads two tensors: priced by the measured two-input add/multiply data."""
    spec = jax.ShapeDtypeStruct((16, 16, 32), jnp.float16)
    res = sp.analyze(jax.jit(lambda x, y: x * jax.nn.sigmoid(y)).lower(spec, spec), "tpu-v4")
    mul = next(o for o in res.report.ops if o.name == "stablehlo.multiply")
    assert mul.model == "fused-loop:hgb-tpu-v4-binary"
    # The measured two-input add at this shape is 1.506 us, the one-input ReLU 1.297 us.
    assert res.report.total_latency_ns / 1e3 == pytest.approx(1.506, rel=0.05)
