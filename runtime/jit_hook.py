"""`perf_jit`: a drop-in `jax.jit` that can also analyse (and time) the program it lowers.

Calling the decorated function is exactly calling `jax.jit(fun, **jit_kwargs)`:
the analysis machinery is never on that path, so it cannot break the user's
program. `.analyze(*args, **kwargs)` lowers (never executes) through the same
jitted object and annotates a *clone* of the lowered module (from
`lowered.as_text()`, so JAX's own module object is never touched); results are
cached per input signature, as jit caches compilations. Errors raised while
tracing the user's function propagate unchanged; errors inside the analysis
become a partial result that says why (STYLE.md, "optional information
degrades softly").
"""

from __future__ import annotations

import functools
import inspect
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from stablehlo_perf.analysis.aggregate import BRANCH_POLICIES

__all__ = [
    "BoundPerfJitted",
    "Measurement",
    "PerfAnalysis",
    "PerfJitted",
    "concrete_inputs",
    "measure_callable",
    "measure_program",
    "perf_jit",
    "run_stablehlo",
]


@dataclass(frozen=True)
class Measurement:
    """Latency of one jitted program on the local backend (ns).

    With the runtime timing harness (`runtime/timing.py`) `median_ns` is the
    program's time net of the per-call dispatch floor (median over interleaved
    rounds, p10/p90 over the rounds) and `call_ns`/`dispatch_ns` are the whole
    call and the floor; without it, every field is whole-call wall clock.
    """

    median_ns: float
    p10_ns: float
    p90_ns: float
    repeats: int
    backend: str
    samples_ns: tuple[float, ...] = ()
    call_ns: float | None = None
    dispatch_ns: float | None = None
    method: str = "wall clock per call (block_until_ready), median of the calls"

    @property
    def spread(self) -> float:
        """(p90 - p10) / median: the repeat-to-repeat variation of this measurement."""
        return (self.p90_ns - self.p10_ns) / self.median_ns if self.median_ns else 0.0

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("samples_ns")
        d["spread"] = self.spread
        return d


@dataclass(frozen=True)
class PerfAnalysis:
    """What `.analyze` returns: the analysis (or why it is partial) and, with measure=True, timing.

    `result` is the `AnalysisResult` of `sp.analyze` (annotated clone + report);
    it is None when the analysis failed, and `reason` says why. `stablehlo` is
    the un-annotated text JAX lowered, always present.
    """

    target: str
    stablehlo: str
    result: Any | None = None
    reason: str | None = None
    measured: Measurement | None = None
    measure_reason: str | None = None
    extras: dict[str, Any] = field(default_factory=dict)
    # With measure=True: XLA's kernels by traced time per call (runtime/profile.py).
    kernels: tuple[Any, ...] = ()

    @property
    def partial(self) -> bool:
        return self.result is None

    @property
    def report(self) -> Any | None:
        return None if self.result is None else self.result.report

    @property
    def annotated_ir(self) -> str:
        """The annotated module; the plain lowering when the analysis failed."""
        return self.stablehlo if self.result is None else self.result.annotated_ir

    @property
    def predicted_ns(self) -> float | None:
        return None if self.result is None else self.result.report.total_latency_ns

    def to_dict(self) -> dict[str, Any]:
        """The report's JSON contract, plus `partial`, `reason`, `measured` and any extras."""
        d: dict[str, Any] = (
            self.result.report.to_dict() if self.result is not None else {"target": self.target}
        )
        d["partial"] = self.partial
        d["reason"] = self.reason
        d["measured"] = None if self.measured is None else self.measured.to_dict()
        if self.kernels:
            d["measured_kernels"] = [asdict(k) for k in self.kernels]
        if self.measure_reason:
            d["measure_reason"] = self.measure_reason
        d.update(self.extras)
        return d

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    def to_markdown(self) -> str:
        return str(self)

    def __str__(self) -> str:
        head = ["| target | predicted | measured (median) | measured / predicted | status |",
                "|---|---:|---:|---:|---|"]  # fmt: skip
        pred = self.predicted_ns
        meas = self.measured.median_ns if self.measured else None
        ratio = f"{meas / pred:.2f}" if pred and meas else "–"
        status = f"partial: {self.reason}" if self.partial else "ok"
        if self.measure_reason:
            status += f"; not measured: {self.measure_reason}"
        head.append(f"| {self.target} | {_ns(pred)} | {_ns(meas)} | {ratio} | {status} |")
        est = self.extras.get("module_estimate")
        if est:
            cv = est["cv_metrics"]
            head.append(
                f"\nCC4CS LASSO cross-check: {_ns(est['estimate_ns'])} "
                f"(held-out MAPE {cv['mape']:.0f}% on {est['trained_on']})"
            )
        branches = self.extras.get("branches") or {}
        if branches.get("taken"):
            taken = ", ".join(
                f"{t['loc']} took branch {t['branch']}"
                if "branch" in t
                else f"{t['loc']} ran its branches {'/'.join(map(str, t['runs']))} times"
                for t in branches["taken"]
            )
            head.append(f"\nBranches observed on the inputs: {taken}")
        elif branches.get("reason"):
            head.append(f"\n{branches['reason']}; if/case priced by their costliest branch")
        if self.kernels:
            head += [
                "",
                (
                    "Measured kernels (jax.profiler trace, time per call; tracing slows "
                    "multi-threaded kernels):"
                ),
                "",
                "| XLA kernel | traced time | launches per call |",
                "|---|---:|---:|",
                *(f"| {k.name} | {_ns(k.median_ns)} | {k.per_call:g} |" for k in self.kernels[:10]),
            ]
        body = "" if self.result is None else "\n" + self.result.to_markdown()
        return "\n".join(head) + "\n" + body


def _ns(x: float | None) -> str:
    if x is None:
        return "–"
    return f"{x / 1e3:.2f} µs" if x >= 1e3 else f"{x:.1f} ns"


def measure_callable(
    fn: Callable[..., Any],
    args: Sequence[Any],
    kwargs: dict[str, Any] | None = None,
    repeats: int = 30,
    warmup: int = 3,
    min_time_s: float = 0.05,
    max_repeats: int = 2000,
) -> Measurement:
    """Time `fn(*args, **kwargs)` to completion (`block_until_ready`); median and p10/p90.

    Warm-up calls absorb compilation; then at least `repeats` calls and at
    least `min_time_s` of them are timed, one sample per call.
    """
    kwargs = kwargs or {}
    for _ in range(warmup):
        jax.block_until_ready(fn(*args, **kwargs))
    samples: list[float] = []
    start = time.perf_counter()
    while len(samples) < max_repeats and (
        len(samples) < repeats or time.perf_counter() - start < min_time_s
    ):
        t0 = time.perf_counter_ns()
        jax.block_until_ready(fn(*args, **kwargs))
        samples.append(float(time.perf_counter_ns() - t0))
    arr = np.asarray(samples)
    return Measurement(
        median_ns=float(np.median(arr)),
        p10_ns=float(np.percentile(arr, 10)),
        p90_ns=float(np.percentile(arr, 90)),
        repeats=len(samples),
        backend=jax.default_backend(),
        samples_ns=tuple(samples),
    )


@dataclass(frozen=True)
class BoundPerfJitted:
    """A `perf_jit` method bound to its instance: the instance is the first argument."""

    owner: PerfJitted
    obj: Any

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.owner(self.obj, *args, **kwargs)

    def analyze(
        self, *args: Any, measure: bool = False, branches: str | None = None, **kwargs: Any
    ) -> PerfAnalysis:
        """`PerfJitted.analyze` with the instance as the first argument."""
        return self.owner.analyze(self.obj, *args, measure=measure, branches=branches, **kwargs)


def measure_program(
    fn: Callable[..., Any], args: Sequence[Any], kwargs: dict[str, Any] | None = None
) -> Measurement:
    """Time `fn` with the runtime timing harness (net of dispatch, interleaved with the
    dispatch floor), or with `measure_callable` where the harness is not installed."""
    try:
        from stablehlo_perf.runtime.timing import METHOD, Case, time_cases
    except ImportError:
        return measure_callable(fn, args, kwargs)
    kw = kwargs or {}
    timings, dispatch = time_cases([Case("program", lambda *a: fn(*a, **kw), tuple(args))])
    t = timings["program"]
    rounds = np.asarray(t.rounds_us) * 1e3
    return Measurement(
        median_ns=t.median_us * 1e3,
        p10_ns=float(np.percentile(rounds, 10)),
        p90_ns=float(np.percentile(rounds, 90)),
        repeats=len(rounds) * t.iters,
        backend=jax.default_backend(),
        samples_ns=tuple(float(r) for r in rounds),
        call_ns=t.call_us * 1e3,
        dispatch_ns=dispatch.median_us * 1e3,
        method=METHOD,
    )


# How `.analyze` prices data-dependent if/case ops (see PerfJitted.analyze): a static
# policy of perf-annotate-cycles, or what the program does on the inputs.
BRANCH_CHOICES = (*BRANCH_POLICIES, "observed")
# Positional and keyword arguments with synthetic data where only shapes were given.
_Inputs = tuple[tuple[Any, ...], dict[str, Any]]


def _as_tuple(x: int | str | Sequence[Any] | None) -> tuple[Any, ...]:
    if x is None:
        return ()
    if isinstance(x, (int, str)):
        return (x,)
    return tuple(x)


def _static_sets(
    fun: Callable[..., Any], argnums: tuple[int, ...], argnames: tuple[str, ...]
) -> tuple[tuple[int, ...], frozenset[str]]:
    """Static positions and names, each inferred from the other as `jax.jit` does."""
    try:
        params = list(inspect.signature(fun).parameters.values())
    except (TypeError, ValueError):
        return argnums, frozenset(argnames)
    positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    nums, names = list(argnums), set(argnames)
    if argnums and not argnames:
        names |= {positional[i] for i in argnums if -len(positional) <= i < len(positional)}
    elif argnames and not argnums:
        nums += [i for i, n in enumerate(positional) if n in argnames]
    return tuple(nums), frozenset(n for n in names)


def _leaf_key(leaf: Any) -> Any:
    """Abstract value of an array-like leaf (shape, dtype, weak type); the value for others."""
    try:
        return ("aval", jax.typeof(leaf))
    except TypeError:
        return ("value", type(leaf), leaf)


def _tree_key(tree: Any) -> Any:
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    return (treedef, tuple(_leaf_key(x) for x in leaves))


class PerfJitted:
    """`jax.jit(fun)` plus `.analyze`; every other attribute is the jitted function's."""

    def __init__(
        self,
        fun: Callable[..., Any],
        target: str | None,
        pipeline: str | None,
        jit_kwargs: dict[str, Any],
    ) -> None:
        self._fun = fun
        self._target = target
        self._pipeline = pipeline
        self._jit_kwargs = dict(jit_kwargs)
        self._jitted = jax.jit(fun, **jit_kwargs)
        self._static_nums, self._static_names = _static_sets(
            fun,
            _as_tuple(jit_kwargs.get("static_argnums")),
            _as_tuple(jit_kwargs.get("static_argnames")),
        )
        self._cache: dict[Any, PerfAnalysis] = {}
        functools.update_wrapper(self, fun)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run exactly as `jax.jit(fun)` would."""
        return self._jitted(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._jitted, name)

    def __get__(self, obj: Any, objtype: type | None = None) -> Any:
        """On a method, bind the instance (as jit does) and keep `.analyze`."""
        return self if obj is None else BoundPerfJitted(self, obj)

    @property
    def target(self) -> str:
        from stablehlo_perf.analysis.targets import DEFAULT_TARGET

        return self._target or DEFAULT_TARGET

    def lower(self, *args: Any, **kwargs: Any) -> Any:
        """JAX's own `Lowered` for these arguments (`jax.jit(fun).lower`)."""
        return self._jitted.lower(*args, **kwargs)

    def _static_positions(self, n: int) -> set[int]:
        """Which of `n` positional arguments are static (negative numbers count from the end,
        as jax.jit reads them)."""
        return {i % n for i in self._static_nums if -n <= i < n}

    @property
    def _undonated_jit_kwargs(self) -> dict[str, Any]:
        """The jit keywords without donation: runs beside the user's (timing, observing
        branches) never invalidate the caller's buffers."""
        return {k: v for k, v in self._jit_kwargs.items() if "donate" not in k}

    def signature_key(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """What `.analyze` caches on: static arguments by value, the rest by abstract value."""
        static_pos = self._static_positions(len(args))
        parts = [
            ("static", a) if i in static_pos else ("dyn", _tree_key(a)) for i, a in enumerate(args)
        ]
        for k in sorted(kwargs):
            v = kwargs[k]
            parts.append((k, "static", v) if k in self._static_names else (k, "dyn", _tree_key(v)))
        return tuple(parts)

    def analyze(
        self, *args: Any, measure: bool = False, branches: str | None = None, **kwargs: Any
    ) -> PerfAnalysis:
        """Lower for these arguments (arrays or `jax.ShapeDtypeStruct`s) and analyse.

        With `measure=True` the program is also timed on the local backend
        (with synthetic data where only shapes were given) and the measurement
        is put beside the prediction. `branches` says how data-dependent
        if/case ops are priced: `max` (the costliest branch, an upper bound),
        `mean` (branches equally likely) or `observed` (the branch each
        top-level if/case takes on these inputs, and how many runs took each branch
        of one at the top of a loop's body or of loops nested there, found by running
        a copy of the program once that also returns them; synthetic data where only shapes
        were given, the data `measure=True` times). Default: `observed`
        with `measure=True`, else `max`, so that nothing runs unless asked.
        """
        policy = branches or ("observed" if measure else "max")
        if policy not in BRANCH_CHOICES:
            raise ValueError(f"branches must be one of {', '.join(BRANCH_CHOICES)}, not {policy!r}")
        static = "max" if policy == "observed" else policy
        try:
            key = (self.signature_key(args, kwargs), static)
            hash(key)
        except TypeError:
            key = None
        res = self._cache.get(key) if key is not None else None
        if res is None:
            lowered = self._jitted.lower(*args, **kwargs)
            res = self._analyse_lowered(lowered.as_text(debug_info=True), static)
            if key is not None:
                self._cache[key] = res
        # The data both the branch probe and the timing run on, made once (and only if asked).
        inputs = functools.cache(lambda: self._concrete_inputs(args, kwargs))
        if policy == "observed":
            res = self._with_observed_branches(res, inputs, key)
        if measure:
            res = self._with_measurement(res, inputs)
        return res

    def _analyse_lowered(self, text: str, branches: str = "max") -> PerfAnalysis:
        try:
            from stablehlo_perf.passes.api import analyze

            result = analyze(
                text,
                target=self.target,
                pipeline=self._pipeline,
                filename=self._filename(),
                branches=branches,
            )
        except Exception as e:  # noqa: BLE001 - any analysis failure degrades to a partial result
            return PerfAnalysis(target=self.target, stablehlo=text, reason=_reason(e))
        return PerfAnalysis(
            target=self.target, stablehlo=text, result=result, extras=_module_estimate(result)
        )

    def _with_observed_branches(
        self, res: PerfAnalysis, inputs: Callable[[], _Inputs], key: Any
    ) -> PerfAnalysis:
        """`res` re-analysed with its if/case ops weighed by what they do on these inputs
        (`passes.branches`); `res` itself, with the reason, where that cannot be observed."""
        from stablehlo_perf.passes.branches import weigh_branches
        from stablehlo_perf.passes.extract import BRANCH_OPS

        if res.partial or not any(o.name in BRANCH_OPS for o in res.report.ops):
            return res
        try:
            selectors = self._branch_selectors(*inputs())
            if not selectors:
                info = {"policy": "observed", "taken": []}
                return replace(res, extras={**res.extras, "branches": info})
            weighted, runs = weigh_branches(res.stablehlo, selectors)
            taken_key = None if key is None else (key, tuple(tuple(c) for _, c in runs))
            out = self._cache.get(taken_key) if taken_key is not None else None
            if out is None:
                out = self._analyse_lowered(weighted)
                if out.partial:
                    raise RuntimeError(out.reason)
                info = {"policy": "observed", "taken": [_observed_runs(loc, c) for loc, c in runs]}
                out = replace(out, stablehlo=res.stablehlo, extras={**out.extras, "branches": info})
                if taken_key is not None:
                    self._cache[taken_key] = out
        except Exception as e:  # noqa: BLE001 - observing branches is optional information
            info = {"policy": "max", "reason": f"branches not observed: {_reason(e)}"}
            return replace(res, extras={**res.extras, "branches": info})
        return out

    def _branch_selectors(self, cargs: tuple[Any, ...], ckwargs: dict[str, Any]) -> list[Any]:
        """What `expose_selectors` adds to the program (selectors, branch counts of loops), run
        once on these inputs."""
        from stablehlo_perf.passes.branches import expose_selectors

        # keep_unused: every dynamic input a parameter of the lowered program, in order.
        jit_kwargs = {**self._undonated_jit_kwargs, "keep_unused": True}
        lowered = jax.jit(self._fun, **jit_kwargs).lower(*cargs, **ckwargs)
        probe, n = expose_selectors(lowered.as_text())
        if n == 0:
            return []
        static_pos = self._static_positions(len(cargs))
        dyn = (
            tuple(a for i, a in enumerate(cargs) if i not in static_pos),
            {k: v for k, v in ckwargs.items() if k not in self._static_names},
        )
        leaves, tree = jax.tree_util.tree_flatten(dyn)
        if tree != lowered.in_tree:
            raise ValueError("cannot match the inputs to the lowered program's parameters")
        return run_stablehlo(probe, leaves)[-n:]

    def _filename(self) -> str:
        return f"<perf_jit {getattr(self._fun, '__qualname__', 'fun')}>"

    def _with_measurement(self, res: PerfAnalysis, inputs: Callable[[], _Inputs]) -> PerfAnalysis:
        try:
            cargs, ckwargs = inputs()
            fn = jax.jit(self._fun, **self._undonated_jit_kwargs)
            m = measure_program(fn, cargs, ckwargs)
        except Exception as e:  # noqa: BLE001 - timing is optional information
            return replace(res, measured=None, measure_reason=_reason(e))
        try:
            from stablehlo_perf.runtime.profile import kernel_times

            kernels = tuple(kernel_times(fn, cargs, ckwargs))
        except Exception:  # noqa: BLE001 - the per-kernel trace is optional on top of timing
            kernels = ()
        return replace(res, measured=m, measure_reason=None, kernels=kernels)

    def _concrete_inputs(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> _Inputs:
        static_pos = self._static_positions(len(args))
        cargs = tuple(a if i in static_pos else concrete_inputs(a) for i, a in enumerate(args))
        ckwargs = {
            k: v if k in self._static_names else concrete_inputs(v) for k, v in kwargs.items()
        }
        return cargs, ckwargs


def run_stablehlo(text: str, inputs: Sequence[Any]) -> list[np.ndarray]:
    """Compile StableHLO text for one device of the local backend and run it once on `inputs`
    (one array per parameter of its entry function, gathered onto that device, however it
    was sharded); its results as numpy arrays."""
    from jax.extend import backend as jex_backend

    backend = jex_backend.get_backend()
    exe = backend.compile_and_load(
        text, backend.devices()[:1], jex_backend.get_compile_options(1, 1)
    )
    device = backend.devices()[0]
    outs = exe.execute([jax.device_put(np.asarray(jnp.asarray(x)), device) for x in inputs])
    return [np.asarray(o) for o in outs]


def concrete_inputs(tree: Any, seed: int = 0) -> Any:
    """`tree` with every `ShapeDtypeStruct` replaced by deterministic device data
    (standard normal floats, zero integers and booleans, so indices stay in range)."""
    rng = np.random.default_rng(seed)

    def concrete(leaf: Any) -> Any:
        if not isinstance(leaf, jax.ShapeDtypeStruct):
            return leaf
        if not all(isinstance(d, int) for d in leaf.shape):
            raise ValueError(f"symbolic shape {leaf.shape} cannot run: give concrete sizes")
        dtype = np.dtype(leaf.dtype)
        if jnp.issubdtype(dtype, jnp.inexact):
            data = rng.standard_normal(leaf.shape).astype(dtype)
        else:
            data = np.zeros(leaf.shape, dtype)
        return jax.device_put(data)

    return jax.tree_util.tree_map(concrete, tree)


def _observed_runs(loc: str, runs: list[int]) -> dict[str, Any]:
    """An observed if/case for the report: the branch it took (run once) or its runs per
    branch (in a loop)."""
    if sum(runs) == 1:
        return {"loc": loc, "branch": runs.index(1)}
    return {"loc": loc, "runs": runs}


def _module_estimate(result: Any) -> dict[str, Any]:
    """The CC4CS module-level LASSO beside the op-level sum, where the target has one trained."""
    try:
        from stablehlo_perf.runtime.cc4cs_host import module_estimate

        est = module_estimate(result, result.report.target)
    except Exception as e:  # noqa: BLE001 - the cross-check is optional information
        return {"module_estimate": None, "module_estimate_reason": _reason(e)}
    return {"module_estimate": None if est is None else est.to_dict()}


def _reason(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}".strip()


def perf_jit(
    fun: Callable[..., Any] | None = None,
    *,
    target: str | None = None,
    pipeline: str | None = None,
    **jit_kwargs: Any,
) -> Any:
    """`jax.jit` with `.analyze`: use as `@perf_jit` or `@perf_jit(target=..., static_argnums=...)`.

    Every keyword but `target` and `pipeline` goes to `jax.jit` unchanged.
    """
    if fun is None:
        return lambda f: PerfJitted(f, target, pipeline, jit_kwargs)
    return PerfJitted(fun, target, pipeline, jit_kwargs)
