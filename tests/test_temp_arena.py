"""A call's temporary arena (`analysis.temp_arena`) against XLA's own memory analysis, and
what a call pays where the allocator maps it afresh (`Target.fresh_page_ns_per_mib`)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest
import stablehlo_perf as sp
from jax import lax
from stablehlo_perf.analysis import calibration_files as cf
from stablehlo_perf.analysis.small_loops import parse_latencies
from stablehlo_perf.analysis.targets import load_target
from stablehlo_perf.analysis.temp_arena import MMAP_THRESHOLD_BYTES
from stablehlo_perf.passes import api, critical_path
from stablehlo_perf.passes.ir import make_context, parse_module
from stablehlo_perf.passes.pipeline import default_pipeline, parse_pipeline
from stablehlo_perf.runtime import calibrate, page_probes

F32 = jnp.float32


def _arena(lowered: jax.stages.Lowered) -> float:
    """The host pipeline's estimate of the entry's arena."""
    with make_context() as ctx:
        parsed = parse_module(lowered.as_text(debug_info=True), "<test>", ctx)
        cache = api.run_passes(parsed, parse_pipeline(default_pipeline("host")), "<test>")
        view = cache.view(parsed.operation)
        return critical_path._arena(view, cache, view.entry().top)


def _pool_vjp(x: jax.Array, g: jax.Array) -> jax.Array:
    pool = lambda v: lax.reduce_window(v, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "SAME")
    return jax.vjp(pool, x)[1](g)[0]


def _conv(x: jax.Array, w: jax.Array) -> jax.Array:
    return lax.conv_general_dilated(
        x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")
    )


@pytest.mark.parametrize("images", [6, 8])
def test_a_max_pools_gradient_holds_its_iotas_window_results_and_updates(images: int) -> None:
    """A 2x2 max pool's gradient of images x 56x56x64 f32, by hand: 4 s32 iotas of the
    operand, then the window's value and 4 indices and the source's copy for each of the
    images x 28x28x64 source elements. XLA's memory analysis says that and 40 bytes of
    tuple: 8 images pass glibc's 32 MiB mmap threshold (35.3 MB), 6 do not (26.5 MB). The
    pool's no-op pad and slice around it share its buffers."""
    x = jax.ShapeDtypeStruct((images, 56, 56, 64), F32)
    g = jax.ShapeDtypeStruct((images, 28, 28, 64), F32)
    lowered = jax.jit(_pool_vjp).lower(x, g)
    by_hand = 4 * (images * 56 * 56 * 64) * 4 + (images * 28 * 28 * 64) * (4 + 4 + 4 * 4)
    assert _arena(lowered) == by_hand
    xla = lowered.compile().memory_analysis().temp_size_in_bytes
    assert xla - 64 <= by_hand <= xla
    assert (by_hand >= MMAP_THRESHOLD_BYTES) == (images == 8)


def test_a_cnn_steps_pool_gradients_hold_their_iotas_from_the_start() -> None:
    """XLA runs a select_and_scatter's reduce_window as soon as its operand is ready (in the
    forward pass) and every iota before any other kernel, so both pools' iotas of a small
    CNN's SGD step on 32 images are live at once: XLA's memory analysis 35,625,064 bytes,
    past the 32 MiB threshold, which one span at each scatter would have put at 26.9 MiB."""

    def pool(x: jax.Array) -> jax.Array:
        return lax.reduce_window(x, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")

    def loss(p: tuple[jax.Array, ...], x: jax.Array, y: jax.Array) -> jax.Array:
        h = pool(jax.nn.relu(_conv(pool(jax.nn.relu(_conv(x, p[0]))), p[1])))
        return -(jax.nn.log_softmax(h.reshape(32, -1) @ p[2]) * y).sum(-1).mean()

    def step(p: tuple[jax.Array, ...], x: jax.Array, y: jax.Array) -> tuple[jax.Array, ...]:
        return tuple(a - 0.01 * b for a, b in zip(p, jax.grad(loss)(p, x, y), strict=True))

    shapes = ((3, 3, 3, 32), (3, 3, 32, 64), (7 * 7 * 64, 10))
    params = tuple(jax.ShapeDtypeStruct(s, F32) for s in shapes)
    batch = (jax.ShapeDtypeStruct((32, 28, 28, 3), F32), jax.ShapeDtypeStruct((32, 10), F32))
    lowered = jax.jit(step).lower(params, *batch)
    xla = lowered.compile().memory_analysis().temp_size_in_bytes
    assert xla == pytest.approx(35_625_064, rel=0.01)
    assert MMAP_THRESHOLD_BYTES <= _arena(lowered) == pytest.approx(xla, rel=0.1)


def test_backward_convolutions_hold_their_transposed_copies() -> None:
    """A weight gradient is a convolution in another layout (the activations' batch as its
    features): XLA:CPU transposes its input and output around it, 4.59 MiB here, as XLA's
    memory analysis says; an input gradient keeps NHWC and needs only its own result."""
    x = jax.ShapeDtypeStruct((8, 28, 28, 64), F32)
    w = jax.ShapeDtypeStruct((3, 3, 64, 64), F32)
    weight = jax.jit(jax.grad(lambda w, x: (_conv(x, w) ** 2).sum())).lower(w, x)
    assert _arena(weight) == weight.compile().memory_analysis().temp_size_in_bytes
    depthwise = jax.jit(
        jax.grad(
            lambda w, x: jnp.tanh(
                lax.conv_general_dilated(
                    x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"),
                    feature_group_count=128,
                )
            ).sum()
        )
    ).lower(jax.ShapeDtypeStruct((3, 3, 1, 128), F32), jax.ShapeDtypeStruct((4, 32, 32, 128), F32))  # fmt: skip
    assert _arena(depthwise) == depthwise.compile().memory_analysis().temp_size_in_bytes


def test_only_an_arena_past_the_threshold_pays_its_pages_each_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The gradient of 8 images pays the fresh pages of its 33.7 MB arena (at 400 us a MiB
    here, 12.9 ms); the one of 6 images (25.3 MB, reused from the heap) nothing."""
    host = replace(
        load_target("host"), fresh_page_ns_per_mib=400e3, fresh_map_bytes=MMAP_THRESHOLD_BYTES
    )
    monkeypatch.setattr(critical_path, "load_target", lambda name, t=host: t)
    off = replace(host, fresh_page_ns_per_mib=0.0)
    charged = []
    for images in (6, 8):
        x = jax.ShapeDtypeStruct((images, 56, 56, 64), F32)
        g = jax.ShapeDtypeStruct((images, 28, 28, 64), F32)
        lowered = jax.jit(_pool_vjp).lower(x, g)
        on = sp.analyze(lowered, target="host").report.call_overhead_ns
        monkeypatch.setattr(critical_path, "load_target", lambda name, t=off: t)
        without = sp.analyze(lowered, target="host").report.call_overhead_ns
        monkeypatch.setattr(critical_path, "load_target", lambda name, t=host: t)
        charged.append(on - without)
    assert charged[0] == 0.0
    assert charged[1] == pytest.approx(400e3 * 35_323_904 / 2**20)


def test_an_output_past_the_threshold_pays_its_pages_each_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each output is an allocation of its own: 10M f32 (38.1 MiB) is mapped afresh each
    call (Zen 4 VM, 2026-12-07: 9,766 minor faults a call, 11.7 ms a call against 1.7 ms in a
    loop; priced 11.6), 4M (15.3 MiB) is not charged (the heap's, once glibc's threshold has
    grown past it)."""
    host = replace(
        load_target("host"), fresh_page_ns_per_mib=400e3, fresh_map_bytes=MMAP_THRESHOLD_BYTES
    )
    off = replace(host, fresh_page_ns_per_mib=0.0)
    charged = []
    for n in (4_000_000, 10_000_000):
        lowered = jax.jit(lambda x: x * 2.0 + 1.0).lower(jax.ShapeDtypeStruct((n,), F32))
        calls = []
        for t in (host, off):
            monkeypatch.setattr(critical_path, "load_target", lambda name, t=t: t)
            calls.append(sp.analyze(lowered, target="host").report.call_overhead_ns)
        charged.append(calls[0] - calls[1])
    assert charged == [0.0, pytest.approx(400e3 * 40e6 / 2**20)]


def test_pads_of_nothing_and_slices_of_everything_are_free() -> None:
    """XLA's simplifier returns the operand of a pad of nothing and of a full slice; a pad
    that shifts (low -1, high 1) keeps its shape but is no copy."""

    def priced(fn):
        report = sp.analyze(jax.jit(fn).lower(jax.ShapeDtypeStruct((64, 64), F32)), target="host")
        return {o["name"]: o["latency_ns"] for o in report.report.to_dict()["ops"]}

    assert priced(lambda x: lax.pad(x, 0.0, ((0, 0, 0), (0, 0, 0))))["stablehlo.pad"] == 0.0
    assert priced(lambda x: lax.pad(x, 0.0, ((-1, 1, 0), (0, 0, 0))))["stablehlo.pad"] > 0.0
    assert priced(lambda x: lax.slice(x, (0, 0), (64, 64)))["stablehlo.slice"] == 0.0


def test_header_carries_the_fresh_pages_through_refit_and_merge(tmp_path: Path) -> None:
    """The probe's line (`runtime.page_probes.KEY`) is written, kept by a refit, merged as
    the geometric mean, and read into the host target's parameters."""
    row = ["add", "f32", "4096", "4096", "10.0000", "0.05", "20.0000", "15.0", "7", "80.0"]
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    head = calibrate.header("host")
    calibrate.write_calibration(
        [row], a, head, fresh_pages={"ns_per_mib": 1e5, "faults_per_mib": 256}
    )
    calibrate.write_calibration(
        [row], b, head, fresh_pages={"ns_per_mib": 4e5, "faults_per_mib": 256}
    )
    assert parse_latencies(cf.header_value(a, page_probes.KEY)) == {
        "ns_per_mib": 1e5, "faults_per_mib": 256.0,
    }  # fmt: skip
    calibrate.refit(a)
    assert parse_latencies(cf.header_value(a, page_probes.KEY))["ns_per_mib"] == 1e5
    out = tmp_path / "merged.csv"
    calibrate.merge([a, b], out)
    assert parse_latencies(cf.header_value(out, page_probes.KEY))["ns_per_mib"] == pytest.approx(
        2e5
    )


def test_the_host_target_reads_the_fresh_pages_of_this_machines_calibration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A calibration of this machine with the probe's line sets the target's cost per MiB
    and glibc's threshold; one without leaves the charge off (0 per MiB)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(cf, "_SHIPPED", {})
    monkeypatch.setattr(cf, "shipped_file", lambda name: tmp_path / "none" / name)
    path = cf.calibration_path("host")
    path.parent.mkdir(parents=True, exist_ok=True)
    row = ["add", "f32", "4096", "4096", "10.0000", "0.05", "20.0000", "15.0", "7", "80.0"]
    head = [f"# machine: {cf.machine_fingerprint()}", "# date: 2026-12-07T09:00Z"]
    calibrate.write_calibration([row], path, head)
    assert load_target("host").fresh_page_ns_per_mib == 0.0
    calibrate.write_calibration([row], path, head, fresh_pages={"ns_per_mib": 3.5e5})
    host = load_target("host")
    assert host.fresh_page_ns_per_mib == 3.5e5 and host.fresh_map_bytes == 32 * 2**20
