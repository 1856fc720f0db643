"""Cost-model services and the registry that routes ops to them.

A service prices a batch of ops in one call (`predict(ops, target)`), so a
learned or vectorised model runs once per module, never once per op. The
registry picks, for each op, the first registered service that applies to the
target's kind and the op, falling back along the chain to the roofline model,
which answers everything.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from stablehlo_perf.analysis.opinfo import OpInfo
from stablehlo_perf.analysis.targets import Target

__all__ = [
    "DEAD_MODEL",
    "FREE_MODEL",
    "UNKNOWN_SHAPE",
    "CostModel",
    "OpCost",
    "Registry",
    "default_registry",
]

FREE_MODEL = "free"
DEAD_MODEL = "dead-code"
"""What prices an op whose results nothing reads (`OpInfo.dead`): XLA removes it."""
UNKNOWN_SHAPE = "unknown-shape"


@dataclass(frozen=True)
class OpCost:
    """What a service predicts for one op; `model` names the service that answered."""

    cycles: int
    latency_ns: float
    dram_bytes: int
    model: str
    extra: Mapping[str, float | str | bool] = field(default_factory=dict)


class CostModel(Protocol):
    """A batched cost service: `name` is what `perf.model` records."""

    name: str

    def supports(self, op: OpInfo, target: Target) -> bool: ...

    def predict(self, ops: Sequence[OpInfo], target: Target) -> list[OpCost]: ...


# Ops that do no work of their own: they are free, or (control flow, calls)
# their cost is their regions' or callee's, which the critical-path pass adds.
_FREE_OPS = {
    "stablehlo.constant", "stablehlo.return", "func.return", "stablehlo.tuple",
    "stablehlo.get_tuple_element", "stablehlo.optimization_barrier", "stablehlo.while",
    "stablehlo.if", "stablehlo.case", "func.call", "stablehlo.after_all",
    "stablehlo.create_token", "shape.shape_of", "stablehlo.get_dimension_size",
    "sdy.sharding_constraint",
}  # fmt: skip


def _has_data() -> Callable[[Target], bool]:
    """Whether a target has learned-model data, looked up once per target without importing
    the models (and scikit-learn)."""
    from stablehlo_perf.analysis.calibration_files import has_learned_data

    known: dict[str, bool] = {}

    def available(target: Target) -> bool:
        if target.name not in known:
            known[target.name] = has_learned_data(target.name)
        return known[target.name]

    return available


def _unpriced(op: OpInfo) -> str:
    """The model name of an op no service prices: dead, free or of unknown shape."""
    if op.dead:
        return DEAD_MODEL
    return FREE_MODEL if op.name in _FREE_OPS else UNKNOWN_SHAPE


def _zero(model: str) -> OpCost:
    return OpCost(cycles=0, latency_ns=0.0, dram_bytes=0, model=model)


@dataclass
class _Entry:
    model: CostModel
    kinds: frozenset[str]
    applies: Callable[[OpInfo], bool]


class Registry:
    """Routes each op to the first service that applies; roofline (the last entry) answers the rest."""

    def __init__(self, fallback: CostModel) -> None:
        self._entries: list[_Entry] = []
        self.fallback = fallback

    def register(
        self,
        model: CostModel,
        kinds: Sequence[str] = ("tpu", "gpu", "cpu"),
        applies: Callable[[OpInfo], bool] = lambda op: True,
    ) -> None:
        """Add `model` to the chain (earlier registrations win) for targets of `kinds`."""
        self._entries.append(_Entry(model, frozenset(kinds), applies))

    def route(self, op: OpInfo, target: Target) -> CostModel | None:
        """The service that will price `op` on `target` (None: free, dead or unknown shape)."""
        if op.name in _FREE_OPS or not op.is_static or op.dead:
            return None
        for e in self._entries:
            if target.kind in e.kinds and e.applies(op) and e.model.supports(op, target):
                return e.model
        return self.fallback

    def price(self, ops: Sequence[OpInfo], target: Target) -> list[OpCost]:
        """Cost of every op, with one `predict` call per service."""
        out: list[OpCost | None] = [None] * len(ops)
        batches: dict[int, list[int]] = defaultdict(list)
        models: dict[int, CostModel] = {}
        for i, op in enumerate(ops):
            model = self.route(op, target)
            if model is None:
                out[i] = _zero(_unpriced(op))
                continue
            batches[id(model)].append(i)
            models[id(model)] = model
        for key, idx in batches.items():
            costs = models[key].predict([ops[i] for i in idx], target)
            for i, c in zip(idx, costs, strict=True):
                out[i] = c
        return out  # type: ignore[return-value]


def default_registry() -> Registry:
    """The service chain used by `perf-annotate-cycles`: specialised models, then roofline."""
    from stablehlo_perf.analysis.roofline import RooflineModel
    from stablehlo_perf.analysis.systolic_service import SystolicService

    registry = Registry(fallback=RooflineModel())
    registry.register(
        _lazy("stablehlo_perf.analysis.tpu_gemm_latency", "TpuV4GemmLatency",
              available=lambda target: target.name == "tpu-v4"),
        kinds=("tpu",),
        applies=lambda op: op.name == "stablehlo.dot_general",
    )  # fmt: skip
    registry.register(SystolicService(), kinds=("tpu",))
    # LAPACK custom calls (jnp.linalg on a CPU): this machine's measured calls by FLOPs.
    registry.register(
        _lazy("stablehlo_perf.analysis.lapack", "LapackModel"),
        kinds=("cpu",),
        applies=lambda op: op.name == "stablehlo.custom_call",
    )
    # Learned latency models (histogram gradient boosting) where a target has measurements:
    # tpu-v4 elementwise data, the shipped host reference (ops timed inside loops on the
    # project's machine; the report says when this machine is another), and any
    # calibration measured with stablehlo-perf-calibrate, which takes precedence.
    learned = "stablehlo_perf.analysis.elementwise", "LearnedLatencyModel"
    registry.register(_lazy(*learned, available=_has_data()), kinds=("tpu", "gpu", "cpu"))
    # Measured per-class distributions (CC4CS) where a TPU target has them; host
    # characterisations come from standalone single-op programs and overprice fused ops.
    registry.register(_lazy("stablehlo_perf.analysis.cc4cs", "CC4CSModel"), kinds=("tpu",))
    return registry


class _lazy:
    """A service whose module (and its scikit-learn import) loads on first use."""

    def __init__(
        self,
        module: str,
        cls: str,
        available: Callable[[Target], bool] | None = None,
        **options: object,
    ) -> None:
        self._where = (module, cls)
        self._available = available
        self._options = options
        self._model: CostModel | None = None

    def _get(self) -> CostModel:
        if self._model is None:
            import importlib

            module, cls = self._where
            self._model = getattr(importlib.import_module(module), cls)(**self._options)
        return self._model

    @property
    def name(self) -> str:
        return self._get().name

    def supports(self, op: OpInfo, target: Target) -> bool:
        if self._available is not None and not self._available(target):
            return False
        return self._get().supports(op, target)

    def predict(self, ops: Sequence[OpInfo], target: Target) -> list[OpCost]:
        return self._get().predict(ops, target)
