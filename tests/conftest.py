"""Shared fixtures: a fresh MLIR context per test and the JAX-lowered corpus."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "test_ir" / "corpus"


def _load(name: str, path: Path) -> ModuleType:
    """The Python file at `path` imported as module `name` (registered in sys.modules)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def corpus_programs() -> ModuleType:
    """test_ir/corpus/programs.py, imported by path (it is not part of the package)."""
    return _load("corpus_programs", CORPUS / "programs.py")


def benchmark_module(name: str) -> ModuleType:
    """benchmarks/<name>.py, imported by path and registered as `name` (benchmarks import
    their siblings, e.g. `_corpus`, so the folder goes on sys.path too)."""
    if str(ROOT / "benchmarks") not in sys.path:
        sys.path.insert(0, str(ROOT / "benchmarks"))
    return _load(name, ROOT / "benchmarks" / f"{name}.py")


def op_infos(module_text: str) -> list:
    """The OpInfo of every op of a StableHLO module's text (a lowered JAX function's
    `as_text()`), calls inlined as the pipeline's view does."""
    from stablehlo_perf.passes.extract import view_module
    from stablehlo_perf.passes.ir import make_context, parse_module

    with make_context() as ctx:
        module = parse_module(module_text, "<jax>", ctx)
        return [r.info for r in view_module(module.operation, "<jax>").records]


def corpus_files() -> list[Path]:
    return sorted(CORPUS.glob("*.mlir")) + sorted((CORPUS / "handwritten").glob("*.mlir"))


@pytest.fixture
def ctx():
    from stablehlo_perf.passes.ir import make_context

    return make_context()


@pytest.fixture
def amd_reference_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Target `host` as on the machine of the shipped AMD reference calibration
    (`analysis/data/host_reference.csv`), whichever machine runs the tests: for expected
    values read off that reference. No user calibration; the CC4CS caches start empty."""
    from stablehlo_perf.analysis import calibration_files as cf
    from stablehlo_perf.analysis import cc4cs

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    ref = cf.shipped_file("host_reference.csv")
    monkeypatch.setattr(cf, "machine_fingerprint", lambda: cf.header_value(ref, "machine"))
    cc4cs.load_characterisation.cache_clear()
    cc4cs.load_module_lasso.cache_clear()
    yield ref
    cc4cs.load_characterisation.cache_clear()
    cc4cs.load_module_lasso.cache_clear()
