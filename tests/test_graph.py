"""Critical path, trip counts and control-flow aggregation, against hand-worked graphs."""

from __future__ import annotations

import numpy as np
import pytest
from stablehlo_perf.analysis.aggregate import ControlNode, aggregate
from stablehlo_perf.analysis.critical_path import longest_path, static_trip_count


def test_diamond():
    # 0 -> {1, 2} -> 3 with latencies 2, 5, 1, 3: path 0,1,3 = 10; node 2 has 4 slack.
    s = longest_path([2, 5, 1, 3], [[], [0], [0], [1, 2]])
    assert s.span_ns == 10 and s.work_ns == 11
    assert s.path == [0, 1, 3]
    assert s.start_ns == [0, 2, 2, 7]
    assert s.slack_ns == [0, 0, 4, 0]


def test_independent_chains_and_empty():
    s = longest_path([1, 1, 5], [[], [0], []])
    assert s.path == [2] and s.slack_ns == [3, 3, 0]
    empty = longest_path([], [])
    assert (empty.span_ns, empty.path) == (0.0, [])


@pytest.mark.parametrize(
    "init,bound,step,direction,trips",
    [(0, 10, 1, "LT", 10), (0, 10, 3, "LT", 4), (2, 10, 1, "LE", 9), (10, 0, -1, "GT", 10),
     (10, 0, -2, "GE", 6), (0, 8, 2, "NE", 4), (5, 0, 1, "LT", 0), (0, 7, 2, "NE", None),
     (0, 10, -1, "LT", None), (0, 10, 0, "LT", None)],
)  # fmt: skip
def test_static_trip_count(init, bound, step, direction, trips):
    assert static_trip_count(init, bound, step, direction) == trips


def test_aggregate_while_case_and_calls():
    # ops: 0 while{cond: [1], body: [2, 3]} x4; 4 case{[5], [6]}; 7 call @f; f = [8, 9].
    own = np.array([[0], [1], [10], [5], [0], [3], [8], [0], [2], [2]], dtype=float)
    controls = {
        0: ControlNode("while", regions=[[1], [2, 3]], trips=4),
        4: ControlNode("case", regions=[[5], [6]]),
        7: ControlNode("call", callee="f"),
    }
    agg = aggregate(own, controls, {"main": [0, 4, 7], "f": [8, 9]})
    assert agg.total[0, 0] == 4 * 15 + 5 * 1
    assert agg.total[4, 0] == 8 and agg.branch_costs[4] == [3, 8]
    assert agg.total[7, 0] == 4
    assert agg.caveats == []


def test_aggregate_branch_weights_and_policy():
    # 0 case{[1] 3 ns | [2, 3] 8 ns}, nested in nothing; costs are (latency, bytes).
    own = np.array([[0, 0], [3, 30], [5, 50], [3, 30]], dtype=float)
    regions = [[1], [2, 3]]
    weighted = aggregate(own, {0: ControlNode("case", regions=regions, weights=(3.0, 1.0))}, {})
    assert weighted.total[0].tolist() == [0.75 * 3 + 0.25 * 8, 0.75 * 30 + 0.25 * 80]
    taken = aggregate(own, {0: ControlNode("case", regions=regions, weights=(1.0, 0.0))}, {})
    assert taken.total[0, 0] == 3 and taken.branch_costs[0] == [3, 8]
    mean = aggregate(own, {0: ControlNode("case", regions=regions)}, {}, policy="mean")
    assert mean.total[0, 0] == 5.5
    # Weights that do not weigh the branches fall back to the policy, and say so.
    bad = aggregate(own, {0: ControlNode("case", regions=regions, weights=(1.0, -1.0))}, {})
    assert bad.total[0, 0] == 8 and "do not weigh its 2 branches" in bad.caveats[0]
    with pytest.raises(ValueError, match="policy must be one of max, mean"):
        aggregate(own, {}, {}, policy="min")


def test_aggregate_unknown_trips_and_recursion_are_caveats():
    own = np.array([[0], [1], [0]], dtype=float)
    controls = {
        0: ControlNode("while", regions=[[], [1]], trips=None),
        2: ControlNode("call", callee="main"),
    }
    agg = aggregate(own, controls, {"main": [0, 2]})
    assert agg.total[0, 0] == 1
    assert any("trip count not static" in c for c in agg.caveats)
    assert any("recursive call to @main" in c for c in agg.caveats)


def test_list_schedule_overlaps_units_on_tpu_only():
    from stablehlo_perf.analysis.schedule import list_schedule, unit_of

    assert (unit_of("matmul", "tpu"), unit_of("binary", "tpu"), unit_of("movement", "tpu")) == (
        "mxu", "vpu", "dma")  # fmt: skip
    assert unit_of("matmul", "cpu") == unit_of("binary", "cpu") == "core"
    # A 10 ns dot and an independent 4 ns -> 3 ns elementwise chain.
    lat, deps, classes = [10, 4, 3], [[], [], [1]], ["matmul", "binary", "binary"]
    tpu = list_schedule(lat, deps, classes, "tpu")
    assert tpu.makespan_ns == 10 and tpu.schedule.slack_ns == [0, 3, 3]
    cpu = list_schedule(lat, deps, classes, "cpu")
    assert cpu.makespan_ns == 17 and cpu.schedule.start_ns == [0, 10, 14]
    assert cpu.dataflow.span_ns == 10, "the dataflow bound ignores units"
    gpu = list_schedule(
        [5, 2, 0, 1], [[], [], [], [1]], ["binary", "movement", "constant", "binary"], "gpu"
    )
    assert gpu.schedule.start_ns == [0, 0, 0, 5], "copy engine overlaps; free ops take no unit"


def test_topological_order_keeps_program_order_and_detects_cycles():
    from stablehlo_perf.analysis.critical_path import topological_order

    assert topological_order([[], [2], [0]]) == [0, 2, 1]
    assert topological_order([[], [0], [0]]) == [0, 1, 2]
    assert topological_order([[1], [0]]) is None
    with pytest.raises(ValueError, match="topological order"):
        longest_path([1, 1], [[1], []])


def test_level_order_runs_each_node_after_its_deepest_dep() -> None:
    """A chain 0 -> 1 -> 3 with a node 2 on no deps (a slice of a parameter) used last and 4
    on 0: level 0 holds 0 and 2, level 1 holds 1 and 4, level 2 holds 3; ties keep the given
    order."""
    from stablehlo_perf.analysis.critical_path import level_order, topological_order

    deps = [[], [0], [], [1, 2], [0]]
    order = topological_order(deps)
    assert order == [0, 1, 2, 3, 4]
    assert level_order(deps, order) == [0, 2, 1, 4, 3]
    assert level_order(deps, [2, 0, 4, 1, 3]) == [2, 0, 4, 1, 3]


def test_block_dataflow_survives_the_passes_attribute_writes() -> None:
    """An MLIR op's hash covers its attributes (jaxlib 0.10), so a table of ops built before
    a pass writes `perf.*` attributes no longer finds them: the block's dataflow (deps,
    sources, live-out, what a loop body returns) must still be read after the writes."""
    import jax
    import jax.numpy as jnp
    from jax import lax
    from stablehlo_perf.passes.base import AnalysisCache
    from stablehlo_perf.passes.ir import make_context, parse_module

    def f(a):
        return lax.fori_loop(0, 3, lambda i, v: jnp.tanh(v) * 2.0, a)

    text = jax.jit(f).lower(jnp.ones(512)).as_text()
    with make_context() as ctx:
        module = parse_module(text, "f.mlir", ctx)
        cache = AnalysisCache("f.mlir")
        view = cache.view(module.operation)
        (loop,) = [r.info.id for r in view.records if r.info.name == "stablehlo.while"]
        body = view.regions[loop][1]
        before = (view.block_deps(body), view.block_sources(body), view.block_live_out(body))
        for rec in view.records:
            cache.write(rec, "perf.latency_ns", 1.0)
        after = (view.block_deps(body), view.block_sources(body), view.block_live_out(body))
        assert after == before and any(before[0]) and before[2]
        _, returns = view.block_arguments(body)
        assert [kind for kind, _ in returns] == ["op", "op"]  # i + 1 and tanh(v) * 2
