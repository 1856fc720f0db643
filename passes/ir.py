"""The one place that knows how to build an MLIR context for JAX's dialects and parse modules.

Parsing errors come back as `InputError` carrying `file:line:col`, so every
front end reports bad input the same way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from jaxlib.mlir import ir

__all__ = ["KNOWN_DIALECTS", "InputError", "make_context", "op_location", "parse_module"]

# Dialects whose ops JAX emits and the analysis understands; anything else is an error.
KNOWN_DIALECTS = frozenset({"builtin", "func", "stablehlo", "chlo", "mhlo", "sdy", "shape"})
_FILE_LOC = re.compile(r'"((?:[^"\\]|\\.)*)":(\d+):(\d+)')


@dataclass
class InputError(Exception):
    """Bad input, reported as `file:line:col: error: message`."""

    file: str
    line: int
    col: int
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}: error: {self.message}"


def make_context() -> ir.Context:
    """A fresh context with every dialect JAX emits (func, stablehlo, chlo, mhlo, sdy, ...).

    Built from jaxlib's bindings the way JAX builds its own, without importing
    jax itself (which would add seconds to every CLI start).
    """
    from jaxlib.mlir._mlir_libs import _jax_mlir_ext
    from jaxlib.mlir.dialects import chlo, mhlo, sdy, stablehlo

    registry = ir.DialectRegistry()
    _jax_mlir_ext.register_dialects(registry)
    ctx = ir.Context()
    ctx.append_dialect_registry(registry)
    ctx.load_all_available_dialects()
    stablehlo.register_dialect(ctx)
    chlo.register_dialect(ctx)
    mhlo.register_mhlo_dialect(ctx)
    sdy.register_dialect(ctx)
    ctx.allow_unregistered_dialects = False
    return ctx


def parse_module(text: str, filename: str, context: ir.Context) -> ir.Module:
    """Parse textual StableHLO; raise InputError at the offending location."""
    if not text.strip():
        raise InputError(filename, 1, 1, "empty input: expected a StableHLO module")
    try:
        module = ir.Module.parse(text, context=context)
    except ir.MLIRError as e:
        raise _diagnostic_error(e, filename) from None
    if not _has_functions(module):
        raise InputError(filename, 1, 1, "input has no func.func to analyse")
    for op in _walk(module.operation):
        dialect = op.name.split(".", 1)[0]
        if dialect not in KNOWN_DIALECTS:
            file, line, col = op_location(op, filename)
            raise InputError(file, line, col, f"unknown op '{op.name}' (dialect '{dialect}')")
    return module


def op_location(
    op: ir.Operation, default_file: str, memo: dict | None = None
) -> tuple[str, int, int]:
    """The innermost `file:line:col` in an op's location (JAX nests them in name/callsite locs).

    Printing a location is slow and JAX reuses a few per module, so `memo`
    (keyed by the uniqued location attribute) saves most of the work.
    """
    if memo is None:
        return _parse_location(str(op.location), default_file)
    key = op.location.attr
    found = memo.get(key)
    if found is None:
        found = memo[key] = _parse_location(str(key), default_file)
    return found


def _parse_location(text: str, default_file: str) -> tuple[str, int, int]:
    m = _FILE_LOC.search(text)
    if not m:
        return default_file, 0, 0
    file = m.group(1)
    if file == "-":
        file = default_file
    return file, int(m.group(2)), int(m.group(3))


def _diagnostic_error(e: ir.MLIRError, filename: str) -> InputError:
    for diag in e.error_diagnostics:
        m = _FILE_LOC.search(str(diag.location))
        if m:
            return InputError(filename, int(m.group(2)), int(m.group(3)), diag.message.strip())
    msg = str(e).split("error:", 1)[-1].strip() or "cannot parse module"
    return InputError(filename, 1, 1, msg)


def _has_functions(module: ir.Module) -> bool:
    return any(op.operation.name == "func.func" for op in module.body.operations)


def _walk(op: ir.Operation):
    for region in op.regions:
        for block in region.blocks:
            for child in block.operations:
                yield child.operation
                yield from _walk(child.operation)
