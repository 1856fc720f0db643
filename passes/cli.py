"""`stablehlo-perf-opt`: an mlir-opt style driver for the perf passes."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

__all__ = ["main"]

PROG = "stablehlo-perf-opt"


class CliError(Exception):
    """A one-line error for stderr; the message is already formatted."""


def _parser() -> argparse.ArgumentParser:
    from stablehlo_perf.analysis.targets import DEFAULT_TARGET

    p = argparse.ArgumentParser(
        prog=PROG,
        description="Annotate a StableHLO module with predicted cycles, latency and memory "
        "traffic, and report its critical path.",
    )
    p.add_argument("input", nargs="?", help="input .mlir file, or - for stdin")
    p.add_argument(
        "-o", dest="output", default="-", help="annotated module output (default stdout)"
    )
    p.add_argument(
        "--target",
        default=DEFAULT_TARGET,
        help=f"target name or description file (default {DEFAULT_TARGET})",
    )
    p.add_argument(
        "--pass-pipeline",
        help="e.g. 'builtin.module(perf-op-info,perf-annotate-cycles{target=tpu-v5e})'",
    )
    p.add_argument("--report", help="write the report: .json or .md")
    p.add_argument(
        "--trace", help="write the predicted timeline as a Chrome/Perfetto trace (.json)"
    )
    p.add_argument("--plot", help="write a roofline plot and latency breakdown (.png)")
    p.add_argument("--summary", action="store_true", help="print a summary table to stderr")
    p.add_argument("--list-targets", action="store_true", help="list the built-in targets")
    p.add_argument("--list-passes", action="store_true", help="list passes with their options")
    p.add_argument("--mlir-timing", action="store_true", help="print MLIR's pass timing report")
    return p


def _write_atomic(path: str, text: str) -> None:
    """Write via a temp file and rename, so an error never leaves a partial file."""
    target = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(
            dir=target.parent if str(target.parent) else ".", prefix=f".{target.name}."
        )
    except OSError as e:
        raise CliError(f"{PROG}: error: cannot write '{path}': {e.strerror}") from None
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; outputs get the usual mode
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, target)
    except OSError as e:
        os.unlink(tmp)
        raise CliError(f"{PROG}: error: cannot write '{path}': {e.strerror}") from None


def _read_input(path: str) -> tuple[str, str]:
    if path == "-":
        return sys.stdin.read(), "<stdin>"
    try:
        return Path(path).read_text(), path
    except (OSError, UnicodeDecodeError) as e:
        reason = getattr(e, "strerror", None) or str(e)
        raise CliError(f"{path}:1:1: error: cannot read input: {reason}") from None


def _check_writable(path: str | None) -> None:
    if path and path != "-":
        parent = Path(path).resolve().parent
        if not parent.is_dir() or not os.access(parent, os.W_OK) or Path(path).is_dir():
            raise CliError(f"{PROG}: error: cannot write '{path}': not a writable location")


def run(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    from stablehlo_perf.analysis.targets import TargetError, list_targets, load_target

    if args.list_targets:
        for name in list_targets():
            t = load_target(name)
            print(f"{name:10s} {t.kind:4s} {t.description}")
        return 0
    if args.list_passes:
        from stablehlo_perf.passes.registry import describe_passes

        for d in describe_passes():
            print(f"{d.name}: {d.summary}")
            for name, typ, default in d.options:
                print(f"    {name}={typ} (default: {default})")
        return 0
    if args.input is None:
        raise CliError(f"{PROG}: error: no input file (use - for stdin)")
    for out in (args.output, args.report, args.trace, args.plot):
        _check_writable(out)
    if args.report and not args.report.endswith((".json", ".md")):
        raise CliError(f"{PROG}: error: --report must end in .json or .md: '{args.report}'")

    from stablehlo_perf.passes.api import analyze
    from stablehlo_perf.passes.ir import InputError
    from stablehlo_perf.passes.pipeline import PipelineError

    text, filename = _read_input(args.input)
    try:
        load_target(args.target)
        result = analyze(text, target=args.target, pipeline=args.pass_pipeline, filename=filename,
                         timing=args.mlir_timing)  # fmt: skip
    except InputError as e:
        raise CliError(str(e)) from None
    except (TargetError, PipelineError) as e:
        raise CliError(f"{PROG}: error: {e}") from None
    outputs = [(args.output, result.annotated_ir)]
    if args.report:
        md = args.report.endswith(".md")
        outputs.append((args.report, result.to_markdown() if md else result.to_json()))
    if args.trace:
        outputs.append((args.trace, json.dumps(result.report.to_trace())))
    for path, content in outputs:
        if path == "-":
            sys.stdout.write(content)
        else:
            _write_atomic(path, content)
    if args.plot:
        _plot(result, args.target, args.plot)
    if args.summary:
        from stablehlo_perf.analysis.terminal import print_summary

        print_summary(result.report)
    return 0


def _plot(result, target: str, path: str) -> None:
    """Render the plot to a temp file and rename it, like every other output."""
    from stablehlo_perf.analysis.plots import plot_report
    from stablehlo_perf.analysis.targets import load_target

    out = Path(path)
    tmp = out.with_name(f".{out.name}.tmp.png")
    try:
        plot_report(result.report, load_target(target), tmp)
        os.replace(tmp, out)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise CliError(f"{PROG}: error: cannot write '{path}': {e.strerror}") from None


def main(argv: list[str] | None = None) -> int:
    try:
        return run(sys.argv[1:] if argv is None else argv)
    except CliError as e:
        print(str(e), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except Exception as e:  # noqa: BLE001 (a bug of ours: one line, never a traceback, no output)
        print(f"{PROG}: internal error: {type(e).__name__}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
