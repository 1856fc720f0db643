"""XLA:CPU's thunk executor: which blocks it runs as a dataflow graph, checked against XLA's
own decision, and what that changes in the critical-path pass's contention."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import replace

import jax
import jax.numpy as jnp
import pytest
import stablehlo_perf as sp
from stablehlo_perf.analysis.targets import load_target
from stablehlo_perf.analysis.thunk_executor import runs_concurrently, thunk_deps
from stablehlo_perf.passes import critical_path


def test_thunk_deps_pass_through_nodes_that_are_no_thunk() -> None:
    # Nodes: a kernel, a bitcast of it, a kernel on the bitcast, a kernel on the first, a
    # bitcast of the bitcast and a kernel on both bitcasts and the third node.
    deps = [[], [0], [1], [0], [1], [4, 2, 3]]
    thunk = [True, False, True, True, False, True]
    assert thunk_deps(deps, thunk) == [[], [0], [0], [0, 1, 2]]


def test_the_executor_runs_long_non_chains_of_large_buffers_as_graphs() -> None:
    chain = [[]] + [[k - 1] for k in range(1, 9)]  # 9 thunks, each on the one before
    assert not runs_concurrently(chain, 4096)
    fan = [[]] + [[0] for _ in range(8)]  # 9 thunks on the first
    assert runs_concurrently(fan, 4096)
    assert not runs_concurrently(fan[:8], 4096)  # 8 thunks: inline
    assert not runs_concurrently(fan, 512)  # every buffer small: inline
    # A thunk on the one before and on an earlier one still continues the chain.
    assert not runs_concurrently(chain[:8] + [[7, 0]], 4096)


def _chain(x: jax.Array, w: jax.Array) -> jax.Array:
    """16 steps of a small dot and a tanh, each on the one before."""
    for _ in range(16):
        x = jnp.tanh(x @ w)
    return x


def _branches(x: jax.Array, w: jax.Array) -> jax.Array:
    """8 independent small dots with a cumulative sum each, added up."""
    return sum((jnp.cumsum((x + i) @ w, axis=0) for i in range(8)), start=x)


def _one_dot(x: jax.Array, w: jax.Array) -> jax.Array:
    """A small dot and a cumulative sum of its rows: two thunks."""
    return jnp.cumsum(x @ w, axis=0)


PROGRAMS = {"chain": _chain, "branches": _branches, "one_dot": _one_dot}
ARGS = (jax.ShapeDtypeStruct((16, 64), jnp.float32), jax.ShapeDtypeStruct((64, 64), jnp.float32))

_XLA_LOG = """
import os, sys, jax
sys.path.insert(0, {here!r})
from test_thunk_executor import ARGS, PROGRAMS
for name, fn in PROGRAMS.items():
    sys.stderr.flush()
    os.write(2, f"@@ {{name}}\\n".encode())
    jax.jit(fn).lower(*ARGS).compile()
"""


def _xla_modes() -> dict[str, tuple[int, bool]]:
    """Each program's entry thunks and whether XLA:CPU runs them in sequence, from its log."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="0", TF_CPP_VMODULE="thunk_executor=2")
    script = _XLA_LOG.format(here=os.path.dirname(__file__))
    log = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
    ).stderr
    modes, name = {}, None
    for line in log.splitlines():
        if line.startswith("@@ "):
            name = line[3:]
        found = re.search(r"with (\d+) thunks.*is_sequential=(\w+)", line)
        if found and name:
            modes[name] = (int(found[1]), found[2] == "true")
    return modes


def test_xla_runs_the_branches_as_a_graph_and_the_chain_in_sequence() -> None:
    """XLA:CPU's own decision (jax 0.10.2's log): 16 dots and tanhs each on the one before
    are 32 thunks run in sequence (a chain); 8 independent dots with their sums are more
    than 8 thunks, not a chain: a graph; a dot and its sum, 2 thunks, in sequence."""
    modes = _xla_modes()
    assert modes["chain"] == (32, True)
    assert modes["branches"][0] > 8 and not modes["branches"][1]
    assert modes["one_dot"] == (2, True)


def _contention(monkeypatch: pytest.MonkeyPatch, fn: object) -> float:
    host = replace(load_target("host"), pool_contention=0.5, pool_contention_cap_ns=1e9)
    monkeypatch.setattr(critical_path, "load_target", lambda name, t=host: t)
    return sp.analyze(jax.jit(fn).lower(*ARGS), target="host").report.contention_ns


def test_small_dots_leave_pollers_only_in_a_graph(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 16x64x64 dot (65,536 multiply-adds, far under `ONE_THREAD_MACS`) runs on one thread:
    the cumulative sum after it pays no contention where the executor runs the two in
    sequence, and the sums after the 8 branches' dots pay where it runs them as a graph
    (the pass's mode is XLA's: `test_xla_runs_the_branches_as_a_graph_and_the_chain_in_sequence`)."""
    assert 16 * 64 * 64 < critical_path.ONE_THREAD_MACS
    assert _contention(monkeypatch, _one_dot) == 0.0
    assert _contention(monkeypatch, _chain) == 0.0
    assert _contention(monkeypatch, _branches) > 0.0
