"""Target descriptions: every built-in loads with its sources; malformed files are rejected clearly."""

from __future__ import annotations

import os

import pytest
from stablehlo_perf.analysis.targets import TargetError, list_targets, load_target

DESIGN_TARGETS = ["gb10", "h100", "h200", "host", "thor", "tpu-v4", "tpu-v5e", "tpu-v5p", "tpu-v6e"]

MINIMAL = """
name = "mine"
kind = "gpu"
description = "test"
clock_ghz = 1.5
launch_overhead_ns = 100.0
[compute]
cores = 10
[peak_tflops]
bf16 = 100.0
[vector_tflops]
f32 = 10.0
[memory]
capacity_gib = 8.0
bandwidth_gbps = 500.0
[sources]
all = "test"
"""


def test_design_targets_are_built_in():
    assert list_targets() == DESIGN_TARGETS


@pytest.mark.parametrize("name", DESIGN_TARGETS)
def test_builtin_targets_load_with_sources(name):
    t = load_target(name)
    assert t.name == name
    assert t.sources, "every number needs a source"
    assert t.clock_ghz > 0 and t.memory_bandwidth_gbps > 0 and t.cores > 0


def test_datasheet_numbers():
    v5e = load_target("tpu-v5e")
    assert v5e.peak_flops("bf16", matrix=True) == 197e12
    assert v5e.peak_flops("i8", matrix=True) == 394e12
    assert v5e.memory_bandwidth == 819e9
    # Clock derived from the peak: 4 MXUs x 128 x 128 x 2 FLOP/cycle.
    assert v5e.clock_ghz * 1e9 * 4 * 128 * 128 * 2 == pytest.approx(197e12, rel=0.01)
    assert load_target("tpu-v6e").matrix_unit_rows == 256
    assert load_target("h200").memory_bandwidth_gbps == 4800.0


def test_host_describes_this_machine(tmp_path, monkeypatch):
    from stablehlo_perf.analysis import calibration_files as cf

    host = load_target("host")
    assert host.cores == len(os.sched_getaffinity(0))
    # Without a calibration of this machine, bandwidth and overheads are placeholders.
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(cf, "shipped_file", lambda name: tmp_path / "none" / name)
    plain = load_target("host")
    assert "uncalibrated" in plain.calibration_note
    assert not plain.calibrated and plain.call_overhead_ns(1e9) == 0.0


def test_xla_thread_count_is_part_of_the_machine(monkeypatch):
    """XLA:CPU sizes its pools from PJRT_NPROC, else NPROC, else the CPUs the process may
    run on; timings change with it, so the fingerprint and the host's cores follow it."""
    from stablehlo_perf.analysis import calibration_files as cf

    monkeypatch.delenv("PJRT_NPROC", raising=False)
    monkeypatch.delenv("NPROC", raising=False)
    assert cf.xla_cpu_threads() == len(os.sched_getaffinity(0))
    monkeypatch.setenv("NPROC", "3")
    assert cf.xla_cpu_threads() == 3
    monkeypatch.setenv("PJRT_NPROC", "1")
    assert cf.xla_cpu_threads() == 1
    assert ", 1 cores, " in cf.machine_fingerprint()
    assert load_target("host").cores == 1
    monkeypatch.setenv("PJRT_NPROC", "many")  # not a number: XLA reads the next variable
    assert cf.xla_cpu_threads() == 3
    monkeypatch.setenv("PJRT_NPROC", "0")
    assert cf.xla_cpu_threads() == 1


def test_host_cache_sizes_come_from_sysfs(tmp_path):
    """The per-core L2 size is the level-2 data or unified cache's, L1 the level-1 data
    cache's; none without one."""
    from stablehlo_perf.analysis.targets import _cache_mib

    for name, level, kind, size in [
        ("index0", 1, "Data", "48K"),
        ("index1", 1, "Instruction", "32K"),
        ("index2", 2, "Unified", "2048K"),
        ("index3", 3, "Unified", "307200K"),
    ]:
        d = tmp_path / name
        d.mkdir()
        (d / "level").write_text(f"{level}\n")
        (d / "type").write_text(f"{kind}\n")
        (d / "size").write_text(f"{size}\n")
    assert _cache_mib(tmp_path) == 2.0
    assert _cache_mib(tmp_path, level=1) == 48 / 1024  # the data cache, not instructions
    (tmp_path / "index2" / "size").write_text("1M\n")
    assert _cache_mib(tmp_path) == 1.0
    (tmp_path / "index2" / "level").write_text("4\n")
    assert _cache_mib(tmp_path) is None
    assert _cache_mib(tmp_path / "missing") is None


def test_unknown_name_lists_valid_targets():
    with pytest.raises(TargetError) as e:
        load_target("tpu-v9")
    assert "unknown target 'tpu-v9'" in str(e.value)
    assert "tpu-v5e" in str(e.value) and "h100" in str(e.value)


def test_user_file_loads(tmp_path):
    p = tmp_path / "mine.toml"
    p.write_text(MINIMAL)
    t = load_target(str(p))
    assert (t.name, t.kind, t.cores) == ("mine", "gpu", 10)
    assert t.peak_flops("bf16", matrix=True) == 100e12


@pytest.mark.parametrize(
    "edit,message",
    [
        (("clock_ghz = 1.5", "clock_ghz = 1.5\nclock_mhz = 3"), "unknown key 'clock_mhz'"),
        (("clock_ghz = 1.5", ""), "missing required key 'clock_ghz'"),
        (("cores = 10", "cores = 0"), "key 'compute.cores': must be positive, got 0"),
        (("cores = 10", 'cores = "ten"'), "key 'compute.cores': expected int, got 'ten'"),
        (("bf16 = 100.0", "bf16 = -1.0"), "key 'peak_tflops.bf16': must be a positive number"),
        (('kind = "gpu"', 'kind = "fpga"'), "key 'kind': must be one of tpu, gpu, cpu"),
        (("[memory]", "[memory]\nbandwidth = 1"), "unknown key 'memory.bandwidth'"),
        (("clock_ghz = 1.5", "clock_ghz = true"), "key 'clock_ghz': expected a number"),
        (("name = ", "name = = "), "malformed TOML"),
    ],
)
def test_malformed_files_name_the_key(tmp_path, edit, message):
    p = tmp_path / "bad.toml"
    p.write_text(MINIMAL.replace(*edit, 1))
    with pytest.raises(TargetError) as e:
        load_target(str(p))
    assert str(p) in str(e.value)
    assert message in str(e.value)


def test_unreadable_file(tmp_path):
    with pytest.raises(TargetError, match="cannot read target description"):
        load_target(str(tmp_path / "missing.toml"))
