"""The pass's thunk-executor mode against XLA:CPU's own, program by program.

XLA:CPU runs each compiled computation (the entry, every while body and condition) with a
thunk executor that either runs its thunks in sequence or as a dataflow graph
(`analysis/thunk_executor.py`); with `TF_CPP_VMODULE=thunk_executor=2` it logs, for each
executor it builds, its thunk count and `is_sequential`. This script compiles every program
of benchmarks/end_to_end.py's zoo (scales 1, 2, 4) and of benchmarks/unseen_programs.py's
sets in a child process with that log on, and analyses each with the pipeline (target host),
recording the mode the critical-path pass gives each block (`critical_path._concurrent`).
A program agrees when both run some block as a graph or neither does; the table lists
the programs that do not, with both sides' executors (thunks, mode).

    python benchmarks/executor_mode.py [--sets zoo unseen ...]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

Programs = dict[str, tuple[Callable[..., Any], tuple[Any, ...]]]
_MARK = "@@program "


def programs(sets: list[str]) -> dict[str, Programs]:
    """The programs of each named set: "zoo" (end_to_end.ZOO at scales 1, 2, 4) or a set of
    unseen_programs.SETS."""
    import end_to_end
    import unseen_programs

    out: dict[str, Programs] = {}
    for name in sets:
        if name == "zoo":
            out[name] = {
                f"{family}:{s}": build(s)
                for family, build in end_to_end.ZOO.items()
                for s in (1, 2, 4)
            }
        else:
            out[name] = unseen_programs.SETS[name]()
    return out


def _compile_all(sets: list[str]) -> None:
    """Child: compile every program, each after a marker line on stderr."""
    import jax

    for set_name, progs in programs(sets).items():
        for name, (fn, args) in progs.items():
            sys.stderr.flush()
            os.write(2, f"{_MARK}{set_name} {name}\n".encode())
            jax.jit(fn).lower(*args).compile()


def xla_modes(sets: list[str]) -> dict[tuple[str, str], list[tuple[int, bool]]]:
    """Each program's executors as XLA:CPU logs them: (thunks, runs as a graph)."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="0", TF_CPP_VMODULE="thunk_executor=2")
    log = subprocess.run(
        [sys.executable, __file__, "--child", "--sets", *sets],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stderr
    modes: dict[tuple[str, str], list[tuple[int, bool]]] = {}
    key = None
    for line in log.splitlines():
        if line.startswith(_MARK):
            set_name, name = line[len(_MARK) :].split(" ", 1)
            key = (set_name, name)
            modes[key] = []
        found = re.search(r"with (\d+) thunks.*is_sequential=(\w+)", line)
        if found and key is not None:
            modes[key].append((int(found[1]), found[2] != "true"))
    return modes


def pass_modes(fn: Callable[..., Any], args: tuple[Any, ...]) -> list[tuple[int, bool]]:
    """The blocks' modes the critical-path pass gives one program: (thunks, as a graph)."""
    import jax
    import stablehlo_perf as sp
    from stablehlo_perf.passes import critical_path

    seen: list[tuple[int, bool]] = []
    original = critical_path._concurrent

    def recording(view: Any, nodes: Any, deps: Any, is_thunk: Any) -> bool:
        graph = original(view, nodes, deps, is_thunk)
        seen.append((sum(is_thunk), graph))
        return graph

    critical_path._concurrent = recording
    try:
        sp.analyze(jax.jit(fn).lower(*args), target="host")
    finally:
        critical_path._concurrent = original
    return seen


def main(argv: list[str] | None = None) -> int:
    import unseen_programs

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sets", nargs="+", default=["zoo", *unseen_programs.SETS])
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.child:
        _compile_all(a.sets)
        return 0
    xla = xla_modes(a.sets)
    agree = graphs = total = 0
    print("| set | program | XLA: thunks, graph | pass: thunks, graph |")
    print("|---|---|---|---|")
    for set_name, progs in programs(a.sets).items():
        for name, (fn, args) in progs.items():
            theirs, ours = xla[(set_name, name)], pass_modes(fn, args)
            same = any(g for _, g in theirs) == any(g for _, g in ours)
            total += 1
            agree += same
            graphs += any(g for _, g in theirs)
            if not same:
                print(f"| {set_name} | {name} | {theirs} | {ours} |")
    print(f"\n{total} programs, {graphs} with a block XLA runs as a graph; the pass's mode "
          f"agrees on {agree} ({agree / total:.0%})")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
