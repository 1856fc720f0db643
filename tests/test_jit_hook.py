"""perf_jit: jax.jit compatibility, per-signature caching, clone-not-mutate, soft failure."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import stablehlo_perf as sp


def _mlp(params, batch, *, act="tanh"):
    h = batch["x"] @ params["w1"] + params["b1"]
    h = jnp.tanh(h) if act == "tanh" else jax.nn.relu(h)
    return jnp.mean((h @ params["w2"] - batch["y"]) ** 2)


def _data():
    k = jax.random.split(jax.random.key(0), 4)
    params = {
        "w1": jax.random.normal(k[0], (16, 32)),
        "b1": jnp.zeros(32),
        "w2": jax.random.normal(k[1], (32, 4)),
    }
    batch = {"x": jax.random.normal(k[2], (8, 16)), "y": jax.random.normal(k[3], (8, 4))}
    return params, batch


def test_call_equals_jax_jit_with_pytrees_kwargs_and_static_names():
    params, batch = _data()
    ours = sp.perf_jit(_mlp, target="host", static_argnames="act")
    ref = jax.jit(_mlp, static_argnames="act")
    for act in ("tanh", "relu"):
        np.testing.assert_array_equal(ours(params, batch, act=act), ref(params, batch, act=act))
    g_ours = sp.perf_jit(jax.grad(_mlp))(params, batch)
    g_ref = jax.jit(jax.grad(_mlp))(params, batch)
    jax.tree_util.tree_map(np.testing.assert_array_equal, g_ours, g_ref)


def test_static_argnums_and_donation_match_jax_jit():
    def f(x, n, y):
        return x * n + y

    ours = sp.perf_jit(f, static_argnums=1, donate_argnums=2)
    ref = jax.jit(f, static_argnums=1, donate_argnums=2)
    x = jnp.arange(6.0)
    np.testing.assert_array_equal(ours(x, 3, jnp.ones(6)), ref(x, 3, jnp.ones(6)))
    # static by position given as keyword: jit infers the name, so must we.
    assert ours.analyze(x, n=3, y=jnp.ones(6)) is ours.analyze(x, n=3, y=jnp.ones(6))
    assert ours.analyze(x, n=3, y=jnp.ones(6)) is not ours.analyze(x, n=4, y=jnp.ones(6))


def test_analyze_lowers_without_running_and_caches_per_signature():
    traces, runs = [], []

    def f(x, scale):
        traces.append(1)
        jax.debug.callback(lambda: runs.append(1))
        return jnp.sin(x) * scale

    step = sp.perf_jit(f, target="host")
    x = jnp.ones((4, 8))
    a = step.analyze(x, 2.0)
    b = step.analyze(jnp.zeros((4, 8)), 3.0)  # same shapes, weak-typed scalar: same signature
    assert runs == [] and len(traces) == 1 and a is b
    c = step.analyze(jnp.ones((5, 8)), 2.0)
    assert len(traces) == 2 and c is not a
    assert [o.name for o in a.report.ops if o.name == "stablehlo.sine"] == ["stablehlo.sine"]
    assert a.report.target == "host" and not a.partial


def test_shape_dtype_struct_inputs_give_the_same_report_as_arrays():
    params, batch = _data()
    step = sp.perf_jit(_mlp, target="tpu-v5e")
    abstract = jax.tree_util.tree_map(
        lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), (params, batch)
    )
    concrete = json.loads(step.analyze(params, batch).to_json())
    from_shapes = json.loads(step.analyze(*abstract).to_json())
    assert from_shapes == concrete
    assert concrete["total_latency_ns"] > 0 and concrete["partial"] is False
    direct = sp.analyze(jax.jit(_mlp).lower(params, batch), target="tpu-v5e")
    assert direct.report.total_latency_ns == pytest.approx(concrete["total_latency_ns"])


def test_analysis_annotates_a_clone_never_jaxs_module():
    lowered = jax.jit(lambda a, b: jnp.tanh(a @ b)).lower(jnp.ones((8, 16)), jnp.ones((16, 4)))
    module = lowered.compiler_ir("stablehlo")
    before = str(module)
    res = sp.analyze(lowered, target="h100")
    assert "perf.latency_ns" in res.annotated_ir
    assert lowered.compiler_ir("stablehlo") is module
    assert str(module) == before and "perf." not in before


def test_user_trace_errors_pass_through_unchanged():
    class Mine(Exception):
        pass

    def bad(x):
        raise Mine("user's own error")

    with pytest.raises(Mine, match="user's own error"):
        sp.perf_jit(bad).analyze(jnp.ones(3))

    def mismatch(x, y):
        return x @ y

    with pytest.raises(TypeError) as ref:
        jax.jit(mismatch).lower(jnp.ones((2, 3)), jnp.ones((4, 5)))
    with pytest.raises(TypeError) as ours:
        sp.perf_jit(mismatch).analyze(jnp.ones((2, 3)), jnp.ones((4, 5)))
    assert str(ours.value) == str(ref.value)


def test_analysis_failure_is_partial_and_never_breaks_the_function():
    step = sp.perf_jit(lambda x: x + 1, target="no-such-chip")
    res = step.analyze(jnp.ones(3))
    assert res.partial and "no-such-chip" in res.reason
    assert "stablehlo.add" in res.annotated_ir
    assert json.loads(res.to_json())["partial"] is True
    np.testing.assert_array_equal(step(jnp.ones(3)), jnp.full(3, 2.0))


def test_no_array_inputs_scalars_and_keyword_only_arguments():
    def no_inputs():
        return jnp.arange(16.0).reshape(4, 4) @ jnp.ones((4, 4))

    res = sp.perf_jit(no_inputs, target="host").analyze()
    assert any(o.name == "stablehlo.dot_general" for o in res.report.ops)

    def kw_only(x, *, power, shift=1.0):
        return x**power + shift

    step = sp.perf_jit(kw_only, static_argnames="power")
    out = step(jnp.arange(3.0), power=2, shift=0.5)
    np.testing.assert_array_equal(
        out, jax.jit(kw_only, static_argnames="power")(jnp.arange(3.0), power=2, shift=0.5)
    )
    assert not step.analyze(jnp.arange(3.0), power=2, shift=0.5).partial
    assert not sp.perf_jit(lambda a, b: a * b).analyze(2.0, 3).partial


def test_symbolic_shapes_are_unknown_shape_ops_and_cannot_be_measured():
    (b,) = jax.export.symbolic_shape("b")
    spec = jax.ShapeDtypeStruct((b, 8), jnp.float32)
    res = sp.perf_jit(lambda x: jnp.exp(x) * 2.0, target="host").analyze(spec, measure=True)
    assert not res.partial
    models = {o.name: o.model for o in res.report.ops}
    assert models["stablehlo.exponential"].endswith("unknown-shape")
    assert "stablehlo.exponential" in {u["name"] for u in res.report.unmodelled}
    assert res.measured is None and "symbolic" in res.measure_reason


def test_a_random_keys_sharding_constraint_is_free_and_modelled():
    """jax.random constrains its key's data (`sdy.sharding_constraint`), which moves nothing
    on one device: no kernel of XLA:CPU's (jax 0.10.2), not the fallback's 100 ns."""
    res = sp.perf_jit(lambda k: jax.random.uniform(k, (4096,)), target="host").analyze(
        jax.random.key(1)
    )
    constraints = [o for o in res.report.ops if o.name == "sdy.sharding_constraint"]
    assert constraints
    assert all(o.model.endswith("free") and o.latency_ns == 0 for o in constraints)
    assert not res.report.unmodelled


def test_measure_puts_measured_beside_predicted_and_keeps_donated_inputs():
    def f(x, y):
        return jnp.tanh(x @ y), x.sum()  # a pytree of outputs

    step = sp.perf_jit(f, target="host", donate_argnums=0)
    x, y = jnp.ones((64, 64)), jnp.ones((64, 64))
    res = step.analyze(x, y, measure=True)
    m = res.measured
    assert m.p10_ns <= m.median_ns <= m.p90_ns and m.backend == "cpu"
    assert (m.call_ns or m.median_ns) > 0 and len(m.samples_ns) >= 5
    if m.dispatch_ns is not None:  # the runtime timing harness: net of the dispatch floor
        assert m.dispatch_ns > 0 and "dispatch" in m.method
    d = json.loads(res.to_json())
    assert d["measured"]["median_ns"] == m.median_ns and d["total_latency_ns"] > 0
    assert "measured / predicted" in str(res)
    np.testing.assert_array_equal(x, jnp.ones((64, 64)))  # not donated by the timing runs
    spec = jax.ShapeDtypeStruct((64, 64), jnp.float32)
    assert step.analyze(spec, spec, measure=True).measured is not None


def test_measure_callable_fallback_statistics():
    from stablehlo_perf.runtime.jit_hook import measure_callable

    m = measure_callable(jax.jit(lambda a: a * 2.0), (jnp.ones(8),), repeats=30)
    assert m.repeats >= 30 and len(m.samples_ns) == m.repeats
    assert 0 < m.p10_ns <= m.median_ns <= m.p90_ns
    assert m.median_ns == pytest.approx(float(np.median(m.samples_ns)))
    assert m.spread == pytest.approx((m.p90_ns - m.p10_ns) / m.median_ns)


def test_module_lasso_estimate_sits_beside_the_op_level_sum():
    from stablehlo_perf.analysis.cc4cs import load_module_lasso
    from stablehlo_perf.runtime.cc4cs_host import result_features

    def f(x, w):
        return jnp.tanh(x @ w) + 1.0

    x, w = jnp.ones((16, 32)), jnp.ones((32, 8))
    host = sp.perf_jit(f, target="host").analyze(x, w)
    d = json.loads(host.to_json())
    lasso = load_module_lasso("host")
    assert lasso is not None and d["module_estimate"]["model"] == "cc4cs-lasso"
    feats = result_features(host.result)
    assert feats["n_matmul"] == 1 and feats["w_matmul"] == 2 * 16 * 32 * 8
    expected = sum(c * feats[k] for k, c in zip(lasso.features, lasso.coef, strict=True))
    assert d["module_estimate"]["estimate_ns"] == pytest.approx(expected + lasso.intercept)
    assert d["module_estimate"]["cv_metrics"]["mape"] == lasso.cv_metrics["mape"]
    assert "CC4CS LASSO cross-check" in str(host)
    other = json.loads(sp.perf_jit(f, target="tpu-v5e").analyze(x, w).to_json())
    assert other["module_estimate"] is None and d["total_latency_ns"] > 0


def test_hook_runs_and_analyses_every_corpus_program_like_jax_jit():
    from conftest import corpus_programs
    from stablehlo_perf.runtime.jit_hook import concrete_inputs

    for name, build in corpus_programs().PROGRAMS.items():
        fn, specs = build()
        step = sp.perf_jit(fn, target="host")
        res = step.analyze(*specs)
        assert not res.partial, (name, res.reason)
        assert res.report.total_latency_ns > 0, name
        args = concrete_inputs(specs)
        jax.tree_util.tree_map(np.testing.assert_array_equal, step(*args), jax.jit(fn)(*args))


def test_methods_bind_the_instance_like_jax_jit():
    class Scale:
        def __init__(self, k: float) -> None:
            self.k = k

        def __hash__(self) -> int:
            return hash(self.k)

        def __eq__(self, other: object) -> bool:
            return isinstance(other, Scale) and other.k == self.k

        @sp.perf_jit(target="host", static_argnums=0)
        def apply(self, x):
            return jnp.sin(x) * self.k

    s, x = Scale(3.0), jnp.arange(4.0)
    np.testing.assert_array_equal(s.apply(x), jax.jit(lambda x: jnp.sin(x) * 3.0)(x))
    res = s.apply.analyze(x)
    assert not res.partial and res is Scale(3.0).apply.analyze(x)
    assert res is not Scale(2.0).apply.analyze(x)


def test_kernel_times_name_the_compiled_programs_kernels():
    """Every traced kernel is an instruction of the optimised HLO XLA compiled, and a
    kernel run once per call has one launch per call."""
    from stablehlo_perf.runtime.profile import kernel_times

    def f(x, y):
        return jnp.tanh(x @ y), x.sum()

    x, y = jnp.ones((64, 64)), jnp.ones((64, 64))
    fn = jax.jit(f)
    kernels = kernel_times(fn, (x, y), calls=5)
    assert kernels, "XLA:CPU traces name their kernels (hlo_op)"
    hlo = fn.lower(x, y).compile().as_text()
    for k in kernels:
        assert k.name in hlo and k.median_ns > 0
    assert all(k.per_call == 1.0 for k in kernels)
    assert [k.median_ns for k in kernels] == sorted((k.median_ns for k in kernels), reverse=True)
    res = sp.perf_jit(f, target="host").analyze(x, y, measure=True)
    names = {k.name for k in res.kernels}
    assert names == {k.name for k in kernels}
    assert {d["name"] for d in json.loads(res.to_json())["measured_kernels"]} == names
    assert "Measured kernels" in str(res)


def _branch_latencies(annotated: str) -> list[float]:
    m = re.search(r"perf\.branch_latency_ns = \[([^\]]*)\]", annotated)
    return [float(v.split(":")[0]) for v in m.group(1).split(",")]


def test_observed_branches_price_the_branch_each_input_takes():
    # The cond sits in a jitted helper (a call, inlined first); static and keyword inputs
    # must still line up with the lowered program's parameters.
    @jax.jit
    def helper(t, w):
        return jax.lax.cond(t.sum() > 0, lambda u: u @ w, lambda u: jnp.sin(u) * 2.0, t)

    def f(x, n, w, *, bias):
        return helper(x, w) * n + bias

    step = sp.perf_jit(f, target="host", static_argnums=1)
    w = jnp.ones((64, 64))
    pos, neg = jnp.ones((64, 64)), -jnp.ones((64, 64))
    upper = step.analyze(pos, 3, w, bias=1.0)
    assert upper.extras.get("branches") is None  # nothing runs unless asked
    (case,) = [o for o in upper.report.ops if o.name == "stablehlo.case"]
    assert case.model == "case(max branch)"
    sine, dot = _branch_latencies(upper.annotated_ir)  # lax.cond: branch 1 is the true one
    assert case.latency_ns == pytest.approx(max(sine, dot))
    for x, taken, cost in ((pos, 1, dot), (neg, 0, sine)):
        res = step.analyze(x, 3, w, bias=1.0, branches="observed")
        (case,) = [o for o in res.report.ops if o.name == "stablehlo.case"]
        assert case.model == f"case(branch {taken} taken)"
        assert case.latency_ns == pytest.approx(cost)
        assert [t["branch"] for t in res.extras["branches"]["taken"]] == [taken]
        assert "test_jit_hook.py:" in res.extras["branches"]["taken"][0]["loc"]
        assert step.analyze(x, 3, w, bias=1.0, branches="observed") is res  # cached per branch
    mean = step.analyze(pos, 3, w, bias=1.0, branches="mean")
    (case,) = [o for o in mean.report.ops if o.name == "stablehlo.case"]
    assert case.model == "case(mean of branches)"
    assert case.latency_ns == pytest.approx((sine + dot) / 2)
    with pytest.raises(ValueError, match="branches must be one of max, mean, observed"):
        step.analyze(pos, 3, w, bias=1.0, branches="min")


def test_observed_branches_on_shapes_use_the_data_measure_times():
    def f(x):
        return jax.lax.cond(x.sum() > 0, lambda u: jnp.exp(u), lambda u: u * 2.0, x)

    spec = jax.ShapeDtypeStruct((32, 8), jnp.float32)
    step = sp.perf_jit(f, target="host")
    res = step.analyze(spec, measure=True)  # measuring observes branches by default
    from stablehlo_perf.runtime.jit_hook import concrete_inputs

    expected = int(bool(concrete_inputs(spec).sum() > 0))
    assert res.extras["branches"]["policy"] == "observed"
    assert [t["branch"] for t in res.extras["branches"]["taken"]] == [expected]
    assert f"took branch {expected}" in str(res) and res.measured is not None


def test_observed_if_predicate_through_the_local_backend():
    from stablehlo_perf.passes.branches import branch_taken, expose_selectors, weigh_branches
    from stablehlo_perf.runtime.jit_hook import run_stablehlo

    text = (Path(__file__).parents[1] / "test_ir/corpus/handwritten/cond_if.mlir").read_text()
    probe, n = expose_selectors(text)
    assert n == 1 and "-> (tensor<16x16xf32>, tensor<i1>)" in probe
    w = np.ones((16, 16), np.float32)
    for x, taken in ((np.ones((16, 16), np.float32), 0), (-np.ones((16, 16), np.float32), 1)):
        out = run_stablehlo(probe, [x, w])
        np.testing.assert_allclose(out[0], x @ w if taken == 0 else np.sin(x) * 2.0, rtol=1e-5)
        weighted, ops = weigh_branches(text, out[1:])
        assert [runs for _, runs in ops] == [[int(taken == 0), int(taken == 1)]]
        (op,) = [
            o for o in sp.analyze(weighted, target="host").report.ops if o.name == "stablehlo.if"
        ]
        assert op.model == f"if(branch {taken} taken)"
    # A case index out of range runs the last branch (StableHLO spec, `case`).
    assert [branch_taken(i, 3, False) for i in (0, 2, 3, -1)] == [0, 2, 2, 2]


_CASE_INDEX_OUT_OF_RANGE = """
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %r:2 = stablehlo.while(%i = %c0, %v = %x) : tensor<i32>, tensor<4xf32>
   cond {
     %n = stablehlo.constant dense<6> : tensor<i32>
     %p = stablehlo.compare LT, %i, %n : (tensor<i32>, tensor<i32>) -> tensor<i1>
     stablehlo.return %p : tensor<i1>
   } do {
     %two = stablehlo.constant dense<2> : tensor<i32>
     %k = stablehlo.subtract %i, %two : tensor<i32>
     %y = "stablehlo.case"(%k) ({
        %a = stablehlo.sine %v : tensor<4xf32>
        stablehlo.return %a : tensor<4xf32>
     }, {
        %a = stablehlo.cosine %v : tensor<4xf32>
        stablehlo.return %a : tensor<4xf32>
     }, {
        %a = stablehlo.exponential %v : tensor<4xf32>
        stablehlo.return %a : tensor<4xf32>
     }) : (tensor<i32>) -> tensor<4xf32>
     %one = stablehlo.constant dense<1> : tensor<i32>
     %j = stablehlo.add %i, %one : tensor<i32>
     stablehlo.return %j, %y : tensor<i32>, tensor<4xf32>
   }
  return %r#1 : tensor<4xf32>
}
"""


def test_a_case_index_out_of_range_in_a_loop_counts_for_the_last_branch():
    """Six trips run a three-branch case on i - 2: indices -2, -1 and 3 are out of range and
    run the last branch (StableHLO spec), so the runs are 1/1/4, not 1/1/1."""
    from stablehlo_perf.passes.branches import expose_selectors, weigh_branches
    from stablehlo_perf.runtime.jit_hook import run_stablehlo

    probe, n = expose_selectors(_CASE_INDEX_OUT_OF_RANGE)
    out = run_stablehlo(probe, [np.zeros(4, np.float32)])
    assert n == 1 and out[1].tolist() == [1, 1, 4]
    _, ops = weigh_branches(_CASE_INDEX_OUT_OF_RANGE, out[1:])
    assert [runs for _, runs in ops] == [[1, 1, 4]]
    # what the copy computes is unchanged: exp, exp, sin, cos, exp, exp from 0
    v = 0.0
    for k in range(-2, 4):
        v = np.sin(v) if k == 0 else np.cos(v) if k == 1 else np.exp(v)
    np.testing.assert_allclose(out[0], np.full(4, v), rtol=1e-5)


def test_branches_in_a_loop_are_weighed_by_the_trips_that_took_them():
    """`lax.cond(i % 10 == 0, expensive, cheap)` in a 50-trip loop: observed, the expensive
    branch is priced on 5 trips in 50, not on every trip."""

    def f(x, w):
        def body(i, v):
            return jax.lax.cond(i % 10 == 0, lambda u: jnp.tanh(u @ w), lambda u: u * 0.99, v)

        return jax.lax.fori_loop(0, 50, body, x)

    step = sp.perf_jit(f, target="host")
    x, w = jnp.ones((64, 64)), jnp.eye(64)
    upper = step.analyze(x, w)
    res = step.analyze(x, w, branches="observed")
    (info,) = res.extras["branches"]["taken"]
    assert info["runs"] == [45, 5]  # lax.cond: branch 1 is the true one
    assert "ran its branches 45/5 times" in str(res)
    (case,) = [o for o in res.report.ops if o.name == "stablehlo.case"]
    assert case.model == "case(weighted branches)"
    cheap, dear = _branch_latencies(upper.annotated_ir)
    assert dear > cheap
    assert case.latency_ns == pytest.approx(0.9 * cheap + 0.1 * dear)
    (loop,) = [o for o in res.report.ops if o.name == "stablehlo.while"]
    (loop_max,) = [o for o in upper.report.ops if o.name == "stablehlo.while"]
    assert loop_max.latency_ns - loop.latency_ns == pytest.approx(50 * (dear - case.latency_ns))
    # The program still computes what jax.jit's does (the probe is a copy, run apart).
    np.testing.assert_allclose(step(x, w), jax.jit(f)(x, w))


def test_observed_branches_never_run_a_copy_that_calls_back_into_python():
    """`jax.debug.print` in a branch is a callback JAX registers with its own executable; a
    copy compiled apart would call nothing there and take the process down. The analysis
    keeps the costliest branch and says why; the function runs as jax.jit's."""

    def f(x):
        def loud(u):
            jax.debug.print("sum {}", u.sum())
            return u * 2

        return jax.lax.cond(x.sum() > 0, loud, lambda u: u - 1, x)

    step = sp.perf_jit(f, target="host")
    res = step.analyze(jnp.ones(8), branches="observed")
    assert not res.partial and res.extras["branches"]["policy"] == "max"
    assert (
        "calls back into Python (xla_ffi_python_cpu_callback)" in res.extras["branches"]["reason"]
    )
    (case,) = [o for o in res.report.ops if o.name == "stablehlo.case"]
    assert case.model == "case(max branch)"
    np.testing.assert_array_equal(step(jnp.ones(8)), jnp.full(8, 2.0))


def test_branches_in_nested_loops_are_counted_over_every_trip():
    """An if/case at the top of a loop nested in another is counted over all its runs: the
    outer cond runs 4 times (once true), the inner one 4 x 5 times (4 true)."""

    def f(x, w):
        def outer(i, v):
            v = jax.lax.cond(i == 0, lambda u: u @ w, lambda u: u, v)
            inner = lambda j, u: jax.lax.cond(j == 0, jnp.tanh, lambda t: t * 0.5, u)
            return jax.lax.fori_loop(0, 5, inner, v)

        return jax.lax.fori_loop(0, 4, outer, x)

    step = sp.perf_jit(f, target="host")
    x, w = jnp.ones((32, 32)), jnp.eye(32)
    res = step.analyze(x, w, branches="observed")
    assert [t["runs"] for t in res.extras["branches"]["taken"]] == [[3, 1], [16, 4]]
    models = [o.model for o in res.report.ops if o.name == "stablehlo.case"]
    assert models == ["case(weighted branches)"] * 2
    assert res.predicted_ns < step.analyze(x, w).predicted_ns
    np.testing.assert_allclose(step(x, w), jax.jit(f)(x, w))


def test_observed_branches_of_a_program_sharded_over_two_devices():
    """A program sharded over two (forced host) devices: its copy runs on one device on the
    gathered inputs, and sees the branch the global computation takes."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(
        """
        import jax, jax.numpy as jnp, numpy as np, stablehlo_perf as sp
        from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
        sh = NamedSharding(Mesh(np.array(jax.devices()), ("x",)), P("x"))
        f = lambda x: jax.lax.cond(x.sum() > 0, lambda u: jnp.tanh(u) * 2, lambda u: u - 1, x)
        step = sp.perf_jit(f, target="host", in_shardings=sh, out_shardings=sh)
        for sign in (1.0, -1.0):
            res = step.analyze(jax.device_put(sign * jnp.ones((8, 16)), sh), branches="observed")
            print(len(jax.devices()), res.extras["branches"]["taken"][0]["branch"])
        """
    )
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=2"}
    out = subprocess.run(
        [sys.executable, "-c", script],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["2", "1", "2", "0"]
