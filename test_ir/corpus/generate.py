"""Regenerate ``test_ir/corpus/<name>.mlir`` for every program in ``programs.py``.

Each module is ``jax.jit(fn).lower(*args).as_text(debug_info=True)``, so ops
carry ``loc(...)`` file:line:col locations. Source paths are made relative to
the repository root (``test_ir/corpus/programs.py``) so the text does not depend
on where the checkout lives.

Usage: ``python test_ir/corpus/generate.py [NAME ...]`` (default: all programs).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import jax
from jax._src import source_info_util

CORPUS_DIR = Path(__file__).resolve().parent

# Keep this driver's own frames out of the recorded call-site locations.
source_info_util.register_exclusion(__file__)


def load_programs() -> ModuleType:
    """Import ``programs.py`` from this folder by path."""
    spec = importlib.util.spec_from_file_location("corpus_programs", CORPUS_DIR / "programs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def lower_text(fn: object, args: tuple[object, ...]) -> str:
    """StableHLO text of ``jax.jit(fn)`` lowered at ``args``, with locations."""
    saved = jax.config.jax_hlo_source_file_canonicalization_regex
    jax.config.update("jax_hlo_source_file_canonicalization_regex", r"^.*/(?=test_ir/corpus/)")
    try:
        return jax.jit(fn).lower(*args).as_text(debug_info=True)
    finally:
        jax.config.update("jax_hlo_source_file_canonicalization_regex", saved)


def main(argv: list[str]) -> int:
    """Write one ``.mlir`` file per requested program; return the exit status."""
    programs = load_programs().PROGRAMS
    names = argv or list(programs)
    unknown = [n for n in names if n not in programs]
    if unknown:
        print(f"unknown program(s): {', '.join(unknown)}", file=sys.stderr)
        return 2
    for name in names:
        fn, args = programs[name]()
        path = CORPUS_DIR / f"{name}.mlir"
        path.write_text(lower_text(fn, args))
        print(path.relative_to(CORPUS_DIR.parent.parent))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
