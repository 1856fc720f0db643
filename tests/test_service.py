"""The service registry: routing by target kind and op, one batched call per model, fallbacks."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from stablehlo_perf.analysis import calibration_files as cf
from stablehlo_perf.analysis.opinfo import OpInfo, TensorType
from stablehlo_perf.analysis.roofline import RooflineModel
from stablehlo_perf.analysis.service import OpCost, Registry, default_registry
from stablehlo_perf.analysis.targets import load_target


def T(*shape, e="f32"):
    return TensorType(tuple(shape), e)


@dataclass
class CountingModel:
    """Answers dot_general only, and counts its calls."""

    name: str = "counting"
    calls: list[int] = field(default_factory=list)

    def supports(self, op, target):
        return op.name == "stablehlo.dot_general"

    def predict(self, ops, target):
        self.calls.append(len(ops))
        return [OpCost(cycles=7, latency_ns=7.0, dram_bytes=0, model=self.name) for _ in ops]


def ops():
    dot = OpInfo.build(0, "stablehlo.dot_general", [T(4, 4), T(4, 4)], [T(4, 4)],
                       {"lhs_contracting_dims": (1,)})  # fmt: skip
    add = OpInfo.build(1, "stablehlo.add", [T(4, 4), T(4, 4)], [T(4, 4)])
    dyn = OpInfo.build(2, "stablehlo.add", [T(None)], [T(None)])
    const = OpInfo.build(3, "stablehlo.constant", [], [T(4)])
    return [dot, add, dyn, const, dot, dot]


def test_routes_and_batches():
    model = CountingModel()
    reg = Registry(fallback=RooflineModel())
    reg.register(model, kinds=("tpu",))
    costs = reg.price(ops(), load_target("tpu-v5e"))
    assert [c.model for c in costs] == [
        "counting", "roofline", "unknown-shape", "free", "counting", "counting"
    ]  # fmt: skip
    assert model.calls == [3], "one predict call for all three dot_generals"


def test_kind_filter_falls_back_to_roofline():
    model = CountingModel()
    reg = Registry(fallback=RooflineModel())
    reg.register(model, kinds=("tpu",))
    costs = reg.price(ops(), load_target("h100"))
    assert costs[0].model == "roofline" and model.calls == []


def test_roofline_numbers_by_hand():
    # tpu-v5e: add of two 4x4 f32 -> 192 B at 819 GB/s = 0.2344 ns, plus 850 ns launch.
    cost = RooflineModel().predict([ops()[1]], load_target("tpu-v5e"))[0]
    assert cost.latency_ns == pytest.approx(850 + 192 / 819, rel=1e-9)
    assert cost.cycles == round((850 + 192 / 819) * 1.5)
    assert cost.dram_bytes == 192


def test_default_registry_prices_everything():
    costs = default_registry().price(ops(), load_target("tpu-v4"))
    assert all(c.latency_ns >= 0 for c in costs)
    assert costs[2].model == "unknown-shape"


def test_learned_models_answer_tpu_v4_elementwise_and_host_where_calibrated(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    add = OpInfo.build(0, "stablehlo.add", [T(64, 128, e="f16")] * 2, [T(64, 128, e="f16")])
    relu = OpInfo.build(
        1, "stablehlo.maximum", [T(64, 128, e="f16")] * 2, [T(64, 128, e="f16")],
        {"splat_operands": 1},
    )  # fmt: skip
    v4 = default_registry().price([add, relu], load_target("tpu-v4"))
    assert [c.model for c in v4] == [
        "hgb-tpu-v4-binary", "hgb-tpu-v4-compare_select(one tensor read)",
    ]  # fmt: skip
    # tpu-v4 add of 8192 f16 elements: the shipped data's 2-D sweep runs ~1 us there.
    assert 0.5e3 < v4[0].latency_ns < 2e3
    host = default_registry().price([add], load_target("host"))
    assert host[0].model == "hgb-host-binary", "the shipped host reference is the default"
    # With no calibration at all (none shipped, none measured) the host falls back to roofline.
    monkeypatch.setattr(cf, "shipped_file", lambda name: tmp_path / "none" / name)
    host = default_registry().price([add], load_target("host"))
    assert host[0].model == "roofline"


@pytest.mark.parametrize(("target", "loads"), [("tpu-v5e", False), ("host", True)])
def test_scikit_learn_is_imported_only_for_targets_with_learned_models(target, loads, tmp_path):
    """The learned models' scikit-learn import (about 1.5 s) is paid only where a learned model
    answers: not for the default target, which prices the transformer block in a fraction of
    that. The pass runs in a fresh interpreter, so modules earlier tests loaded do not count."""
    import subprocess
    import sys
    from pathlib import Path

    src = Path(__file__).parents[1] / "test_ir" / "corpus" / "transformer_block.mlir"
    code = (
        "import sys\n"
        "from stablehlo_perf.passes.cli import main\n"
        f"rc = main([{str(src)!r}, '--target', {target!r}, '-o', {str(tmp_path / 'a.mlir')!r}])\n"
        "print(rc, 'sklearn' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["0", str(loads)]
