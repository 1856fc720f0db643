"""The corpus programs (test_ir/corpus/programs.py) for the benchmark scripts, imported by path."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def corpus_programs() -> ModuleType:
    """test_ir/corpus/programs.py: `PROGRAMS` and the `deep_transformer` factory."""
    spec = importlib.util.spec_from_file_location(
        "corpus_programs", ROOT / "test_ir/corpus/programs.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
