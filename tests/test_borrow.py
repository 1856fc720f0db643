"""runtime/borrow.py: a shipped host reference scaled class by class to a machine it was not
measured on, and `stablehlo-perf-calibrate --borrow`'s refusals."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest
import stablehlo_perf as sp
from stablehlo_perf.analysis import calibration_files as cf
from stablehlo_perf.analysis import elementwise as ew
from stablehlo_perf.analysis import fused_loops
from stablehlo_perf.analysis.host_params import HOST_PARAMS_KEY, HostParams
from stablehlo_perf.analysis.small_loops import LATENCY_KEY, THUNKED_KEY, parse_latencies
from stablehlo_perf.analysis.targets import load_target
from stablehlo_perf.runtime import borrow, calibrate, fused_probes

SOURCE = "host_reference_zen4.csv"


def _rows(path: Path) -> dict[str, dict[str, str]]:
    with path.open() as f:
        reader = csv.DictReader(ln for ln in f if not ln.startswith("#"))
        return {",".join((r["op"], r["dtype"], r["shape"])): r for r in reader}


XEON = "host_reference_xeon.csv"


def _stub_check(
    monkeypatch: pytest.MonkeyPatch, kernel: float, program: float, overhead: float = math.nan
) -> list[Path]:
    """`calibration_check.check` stubbed: binary rows at 2x in a loop and as programs, all
    rows at `kernel` and `program`, the program probes' overheads at `overhead` (20 of them;
    NaN: none answered); the list of the paths it was asked to check."""
    from stablehlo_perf.runtime import calibration_check

    checked: list[Path] = []

    def check(path: Path, **_: object) -> calibration_check.DriftReport:
        checked.append(path)
        drift = calibration_check.ClassDrift("binary", 6, 50.0, 2.0, 2.0)
        lo, hi = 0.8 * kernel, 1.2 * kernel
        probes = 0 if math.isnan(overhead) else 20
        return calibration_check.DriftReport(
            path, [drift], kernel, (lo, hi), program, 1.0, overhead, probes
        )

    monkeypatch.setattr(calibration_check, "check", check)
    return checked


def test_nearest_by_speed_is_nearest_by_ratio() -> None:
    """60 us is nearer 100 (x1.67) than 30 (x2) by ratio, though nearer 30 in us."""
    refs = [(Path("slow.csv"), 100.0), (Path("fast.csv"), 30.0)]
    assert borrow.nearest_by_speed(60.0, refs)[0].name == "slow.csv"
    assert borrow.nearest_by_speed(40.0, refs)[0].name == "fast.csv"
    with pytest.raises(ValueError, match="no shipped host reference"):
        borrow.nearest_by_speed(60.0, [])
    speeds = {p.name: s for p, s in borrow.reference_speeds()}
    assert SOURCE in speeds and 50.0 < speeds[SOURCE] < 500.0


def test_borrowed_calibration_scales_each_class_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Binary rows at 2x in a loop and 3x as programs, a class not sampled (matmul) and the
    header measurements and fused chains at the overall 1.5x (GB/s divided by it); the file
    names this machine, passes its checksum, is what the host target reads, and the report
    says it is borrowed."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    source = cf.shipped_file(SOURCE)
    done = borrow.Borrowed(source, {"binary": 2.0}, {"binary": 3.0}, 1.5)
    out = cf.calibration_path("host")
    borrow.borrow(out, done)

    theirs, mine = _rows(source), _rows(out)
    assert mine.keys() == theirs.keys()
    add, dot = "add,f32,1024x1024", next(k for k in theirs if k.startswith("dot_general,f32,"))
    for key, kernel, program in ((add, 2.0, 3.0), (dot, 1.5, 1.5)):
        for col, f in (("measured_us_median", kernel), ("call_us_median", program)):
            assert float(mine[key][col]) == pytest.approx(float(theirs[key][col]) * f, abs=1e-4)
        assert float(mine[key]["sentinel_us"]) == pytest.approx(
            float(theirs[key]["sentinel_us"]) * 1.5, abs=1e-4
        )
    # As the models read them (each row at its file's median sentinel speed): still 2x / 1.5x.
    read, was = (
        {(m.op, m.shape): m.latency_us for m in ew.load_measurements(p)} for p in (out, source)
    )
    assert read[("add", (1024, 1024))] == pytest.approx(was[("add", (1024, 1024))] * 2.0, rel=1e-3)
    some_dot = next(k for k in was if k[0] == "dot_general")
    assert read[some_dot] == pytest.approx(was[some_dot] * 1.5, rel=1e-3)
    assert cf.checksum_ok(out)
    assert cf.header_value(out, "machine") == cf.machine_fingerprint()
    assert cf.header_value(out, cf.BORROWED_KEY).startswith(f"{SOURCE} x1.5 ")
    assert cf.training_files("host") == (out, True)
    bf16 = float(cf.header_value(out, fused_probes.KEY))
    assert bf16 == pytest.approx(float(cf.header_value(source, fused_probes.KEY)) * 1.5, 1e-5)
    loops, was = (parse_latencies(cf.header_value(p, LATENCY_KEY)) for p in (out, source))
    assert loops["base"] == pytest.approx(was["base"] * 1.5, rel=1e-5)
    thunked, was = (parse_latencies(cf.header_value(p, THUNKED_KEY)) for p in (out, source))
    assert thunked["l1_gbps"] == pytest.approx(was["l1_gbps"] / 1.5, rel=1e-5)
    params = HostParams.parse(cf.header_value(out, HOST_PARAMS_KEY))
    assert params is not None and math.isfinite(params.threadpool_wake_ns)

    chains, was_chains = (_rows_chains(p) for p in (fused_loops.chains_path(out), _chains(source)))
    first = next(iter(was_chains))
    assert float(chains[first]) == pytest.approx(float(was_chains[first]) * 1.5, abs=1e-4)

    host = load_target("host")
    assert host.calibrated and host.borrowed_from.startswith(SOURCE)
    assert host.calibration_note.startswith("borrowed from a reference of another machine")
    rep = sp.perf_jit(lambda x: x + 1, target="host").analyze(
        jax.ShapeDtypeStruct((256,), jnp.float32)
    )
    assert any("borrowed" in c for c in rep.report.caveats)


def _chains(source: Path) -> Path:
    machine = cf.header_value(source, "machine")
    return next(
        p
        for p in map(cf.shipped_file, fused_loops.SHIPPED)
        if p.is_file() and cf.header_value(p, "machine") == machine
    )


def _rows_chains(path: Path) -> dict[str, str]:
    with path.open() as f:
        reader = csv.DictReader(ln for ln in f if not ln.startswith("#"))
        return {
            ",".join((r["chain"], r["dtype"], r["shape"])): r["measured_us_median"] for r in reader
        }


def _refuses_other_targets_and_keeps_a_measured_one(
    flag: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`flag` (--borrow, --relevel) exits 2 for a target other than the host, and over a
    calibration measured here without --fresh, which it leaves as it was."""
    assert calibrate.main(["--target", "tpu-v4", flag]) == 2
    assert f"{flag} is for --target host" in capsys.readouterr().err
    measured = tmp_path / "mine.csv"
    measured.write_text("# machine: here\nop,dtype\n")
    assert calibrate.main(["--target", "host", flag, "--out", str(measured)]) == 2
    assert "measured on this machine; --fresh" in capsys.readouterr().err
    assert measured.read_text() == "# machine: here\nop,dtype\n"


def test_borrow_refuses_other_targets_and_a_measured_calibration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Nothing is measured or written: --borrow is for the host, a calibration measured here
    is kept unless --fresh, and a machine with a shipped reference of its own has nothing to
    borrow."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    _refuses_other_targets_and_keeps_a_measured_one("--borrow", tmp_path, capsys)
    if cf.nearest_shipped(cf.shipped_names("host"))[1]:  # a shipped reference of this machine
        out = tmp_path / "borrowed.csv"
        assert calibrate.main(["--target", "host", "--borrow", "--out", str(out)]) == 0
        assert "nothing to borrow" in capsys.readouterr().out and not out.exists()


def test_borrow_cli_picks_the_nearest_reference_and_scales_by_its_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """On a machine no reference describes, `--borrow` takes the reference nearest the
    sentinel time measured here and scales it by the drift check of that reference: here the
    sentinels (stubbed) read the Zen 4 reference's own median, and the check (stubbed)
    says binary rows run 2x and everything else 1.25x."""

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(
        cf, "machine_fingerprint", lambda: "Some CPU (family 1 model 1), 4 cores, x86_64"
    )
    speeds = dict(borrow.reference_speeds())
    zen4 = cf.shipped_file(SOURCE)
    monkeypatch.setattr(calibrate, "sentinel_us", lambda repeats=7: speeds[zen4])
    checked = _stub_check(monkeypatch, kernel=1.25, program=1.3)
    assert calibrate.main(["--target", "host", "--borrow", "--no-progress"]) == 0
    assert checked == [zen4]
    out = cf.calibration_path("host")
    assert f"borrowed {SOURCE}" in capsys.readouterr().out
    read, was = (
        {(m.op, m.shape): m.latency_us for m in ew.load_measurements(p)} for p in (out, zen4)
    )
    assert read[("add", (1024, 1024))] == pytest.approx(was[("add", (1024, 1024))] * 2.0, rel=1e-3)
    some_dot = next(k for k in was if k[0] == "dot_general")
    assert read[some_dot] == pytest.approx(was[some_dot] * 1.25, rel=1e-3)
    # Run again: a borrowed calibration is replaced without --fresh.
    assert calibrate.main(["--target", "host", "--borrow", "--no-progress"]) == 0


def _on_the_xeon(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Make this the machine the Xeon reference was measured on, with an empty cache; the
    reference's path."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    xeon = cf.shipped_file(XEON)
    machine = cf.header_value(xeon, "machine")
    monkeypatch.setattr(cf, "machine_fingerprint", lambda: machine)
    assert cf.training_files("host") == (xeon, True)
    return xeon


def test_relevel_scales_this_machines_reference_by_one_program_ratio(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--relevel` re-times rows of the reference measured on this machine (the check,
    stubbed: programs 0.8x, in a loop 0.9x, binary rows 2x, no program probe answering) and
    stores it with every time x0.8, the class's ratio ignored: the models read 0.8x, the
    target and the report say it is re-levelled, and a program is predicted at 0.8x what the
    reference says."""

    xeon = _on_the_xeon(monkeypatch, tmp_path)
    spec = jax.ShapeDtypeStruct((256, 256), jnp.float32)

    def program(x: jax.Array, w: jax.Array) -> jax.Array:
        return jnp.tanh(x @ w).sum(axis=0) + jnp.exp(x).max()

    before = sp.perf_jit(program, target="host").analyze(spec, spec).predicted_ns
    checked = _stub_check(monkeypatch, kernel=0.9, program=0.8)
    assert calibrate.main(["--target", "host", "--relevel", "--no-progress"]) == 0
    assert checked == [xeon]
    assert "every time x0.800" in capsys.readouterr().out
    out = cf.calibration_path("host")
    assert cf.training_files("host") == (out, True) and cf.checksum_ok(out)
    assert cf.header_value(out, cf.RELEVELLED_KEY).startswith(f"{XEON} x0.8, ")
    assert not cf.header_value(out, cf.BORROWED_KEY)
    theirs, mine = _rows(xeon), _rows(out)
    add = next(k for k in theirs if k.startswith("add,f32,"))
    for col in ("measured_us_median", "call_us_median"):
        assert float(mine[add][col]) == pytest.approx(float(theirs[add][col]) * 0.8, abs=1e-4)
    read, was = (
        {(m.op, m.dtype, m.shape): m.latency_us for m in ew.load_measurements(p)}
        for p in (out, xeon)
    )
    for key in (next(k for k in was if k[0] == op) for op in ("add", "dot_general", "tanh")):
        assert read[key] == pytest.approx(was[key] * 0.8, rel=1e-3)

    host = load_target("host")
    assert host.relevelled.startswith(f"{XEON} x0.8") and not host.borrowed_from
    assert "re-levelled" in host.calibration_note
    rep = sp.perf_jit(program, target="host").analyze(spec, spec)
    # The models fit the reference's own rows and scale their times (`cf.relevel_of`): no
    # refit of rows scaled by 0.8, which moves boosted trees by more than 0.8.
    assert cf.relevel_of(out) == (xeon, 0.8, 0.8)
    stale = tmp_path / "stale.csv"  # a reference changed since: its rows are not the label's
    stale.write_text(out.read_text().replace("sha256 ", "sha256 0", 1))
    assert cf.relevel_of(stale) is None
    assert rep.predicted_ns == pytest.approx(0.8 * before, rel=1e-3)
    assert any("re-levelled" in c and "0.0 h ago" in c for c in rep.report.caveats)
    # Again: a re-levelled calibration is replaced without --fresh, from the reference.
    assert calibrate.main(["--target", "host", "--relevel", "--no-progress"]) == 0
    assert checked == [xeon, xeon]
    assert float(_rows(out)[add]["call_us_median"]) == pytest.approx(
        float(theirs[add]["call_us_median"]) * 0.8, abs=1e-4
    )


def test_relevel_scales_kernels_by_the_rows_and_overhead_by_the_probes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """With the program probes re-timed (the check, stubbed: rows in a loop 0.9x, the probes'
    overheads 0.6x) `--relevel` scales kernel times by the rows' in-loop ratio and a program's
    time beyond its in-loop one by the probes': a row's program time is 0.9 of its
    in-loop time plus 0.6 of the rest, the per-call terms fitted again from them are 0.6x the
    reference's, and a program is predicted at 0.9x its kernels plus 0.6x its overhead."""

    xeon = _on_the_xeon(monkeypatch, tmp_path)
    spec = jax.ShapeDtypeStruct((64, 64), jnp.float32)

    def program(x: jax.Array, w: jax.Array) -> jax.Array:
        return jnp.tanh(x @ w).sum(axis=0) + jnp.exp(x).max()

    before = sp.perf_jit(program, target="host").analyze(spec, spec).report
    assert before.call_overhead_ns > 50e3  # the pool's wake-up and the multi-kernel step
    _stub_check(monkeypatch, kernel=0.9, program=0.8, overhead=0.6)
    assert calibrate.main(["--target", "host", "--relevel", "--no-progress"]) == 0
    assert "kernel times x0.900" in (said := capsys.readouterr().out)
    assert "per-call overhead x0.600 (20 program probes, median" in said
    out = cf.calibration_path("host")
    assert cf.header_value(out, cf.RELEVELLED_KEY).startswith(f"{XEON} x0.9, overhead x0.6, ")
    assert cf.relevel_of(out) == (xeon, 0.9, 0.6)
    theirs, mine = _rows(xeon), _rows(out)
    add = next(k for k in theirs if k.startswith("add,f32,"))
    k, c = (float(theirs[add][col]) for col in ("measured_us_median", "call_us_median"))
    assert float(mine[add]["measured_us_median"]) == pytest.approx(0.9 * k, abs=1e-4)
    assert float(mine[add]["call_us_median"]) == pytest.approx(0.9 * k + 0.6 * (c - k), abs=1e-4)
    was, now = (HostParams.parse(cf.header_value(p, HOST_PARAMS_KEY)) for p in (xeon, out))
    for term in ("program_overhead_ns", "threadpool_wake_ns", "multi_kernel_ns", "rewake_ns"):
        assert getattr(now, term) == pytest.approx(0.6 * getattr(was, term), rel=0.01), term
    after = sp.perf_jit(program, target="host").analyze(spec, spec).report
    assert after.call_overhead_ns == pytest.approx(0.6 * before.call_overhead_ns, rel=0.01)
    kernels = [r.total_latency_ns - r.call_overhead_ns for r in (before, after)]
    assert kernels[1] == pytest.approx(0.9 * kernels[0], rel=0.01)


def test_relevel_refuses_without_a_reference_of_this_machine_or_over_a_measured_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Nothing is measured or written: --relevel is for the host, needs a shipped reference
    measured on this machine (else it points to --borrow), and keeps a calibration measured
    here unless --fresh."""
    from stablehlo_perf.runtime import calibration_check

    def no_check(*_: object, **__: object) -> None:
        raise AssertionError("measured")

    monkeypatch.setattr(calibration_check, "check", no_check)
    _on_the_xeon(monkeypatch, tmp_path)
    _refuses_other_targets_and_keeps_a_measured_one("--relevel", tmp_path, capsys)
    monkeypatch.setattr(
        cf, "machine_fingerprint", lambda: "Some CPU (family 1 model 1), 4 cores, x86_64"
    )
    out = tmp_path / "relevelled.csv"
    assert calibrate.main(["--target", "host", "--relevel", "--out", str(out)]) == 2
    assert "--borrow scales the nearest one" in capsys.readouterr().err and not out.exists()
