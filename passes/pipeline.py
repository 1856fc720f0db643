"""Pass pipelines in MLIR's textual syntax, parsed with a lark grammar.

`builtin.module(perf-op-info,perf-annotate-cycles{target=tpu-v5e},perf-critical-path)`:
an anchor op name with a parenthesised, comma-separated list of passes, each
with optional `{key=value ...}` options (separated by spaces or commas).
"""

from __future__ import annotations

import dataclasses

from lark import Lark, LarkError, Token, Transformer
from stablehlo_perf.passes.base import PerfPass
from stablehlo_perf.passes.registry import PASSES, pass_class

__all__ = ["PipelineError", "default_pipeline", "parse_pipeline"]

_GRAMMAR = r"""
    start: anchor
    anchor: NAME "(" [item ("," item)*] ")"
    ?item: anchor | pass_
    pass_: NAME options?
    options: "{" [option (","? option)*] "}"
    option: NAME "=" VALUE
    NAME: /[a-zA-Z_][\w.\-]*/
    VALUE: /[^\s,{}()=]+/
    %import common.WS
    %ignore WS
"""
_PARSER = Lark(_GRAMMAR, parser="lalr")


class PipelineError(ValueError):
    """A pipeline string that does not parse or names an unknown pass or option."""


class _Build(Transformer):
    def option(self, items: list[Token]) -> tuple[str, str]:
        return str(items[0]), str(items[1])

    def options(self, items: list) -> dict[str, str]:
        return dict(i for i in items if i is not None)

    def pass_(self, items: list) -> list[PerfPass]:
        name = str(items[0])
        opts = items[1] if len(items) > 1 else {}
        return [_instantiate(name, opts)]

    def anchor(self, items: list) -> list[PerfPass]:
        if str(items[0]) not in ("builtin.module", "func.func"):
            raise PipelineError(f"unsupported anchor '{items[0]}'; use builtin.module(...)")
        return [p for group in items[1:] if group is not None for p in group]

    def start(self, items: list) -> list[PerfPass]:
        return items[0]


def _instantiate(name: str, opts: dict[str, str]) -> PerfPass:
    if name not in PASSES:
        raise PipelineError(f"unknown pass '{name}'; known passes: {', '.join(PASSES)}")
    cls = pass_class(name)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    kwargs: dict[str, object] = {}
    for key, raw in opts.items():
        field = fields.get(key.replace("-", "_"))
        if field is None:
            known = ", ".join(f.replace("_", "-") for f in fields) or "none"
            raise PipelineError(f"pass '{name}' has no option '{key}' (options: {known})")
        kwargs[field.name] = _coerce(name, key, raw, field.type)
    try:
        return cls(**kwargs)
    except ValueError as e:  # an option value the pass itself rejects
        raise PipelineError(str(e)) from None


def _coerce(pass_name: str, key: str, raw: str, typ: object) -> object:
    type_name = typ if isinstance(typ, str) else getattr(typ, "__name__", str(typ))
    try:
        if type_name == "int":
            return int(raw)
        if type_name == "float":
            return float(raw)
        if type_name == "bool":
            if raw not in ("true", "false", "1", "0"):
                raise ValueError(raw)
            return raw in ("true", "1")
    except ValueError:
        raise PipelineError(
            f"pass '{pass_name}': option '{key}' expects {type_name}, got '{raw}'"
        ) from None
    return raw


def parse_pipeline(text: str) -> list[PerfPass]:
    """Instantiate the passes named by an MLIR-syntax pipeline string."""
    try:
        tree = _PARSER.parse(text)
        return _Build().transform(tree)
    except PipelineError:
        raise
    except LarkError as e:
        inner = getattr(e, "orig_exc", None)
        if isinstance(inner, PipelineError):
            raise inner from None
        if inner is not None:  # a pass that failed to build (its module's import): not the text
            raise inner
        raise PipelineError(f"malformed pass pipeline '{text}': {str(e).splitlines()[0]}") from None


def default_pipeline(target: str) -> str:
    """Every analysis that applies to `target`, as a pipeline string."""
    from stablehlo_perf.analysis.targets import load_target

    cache = (
        f"perf-annotate-cache-traffic{{target={target}}},"
        if load_target(target).kind == "gpu"
        else ""
    )
    return (
        f"builtin.module(perf-inline-calls,perf-op-info,perf-fusion{{target={target}}},{cache}"
        f"perf-annotate-cycles{{target={target}}},"
        f"perf-critical-path{{target={target}}})"
    )
