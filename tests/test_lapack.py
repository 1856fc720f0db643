"""LAPACK calls (jnp.linalg on a CPU): what each computes, by hand, and the host model's
interpolation between measured calls."""

from __future__ import annotations

import math
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest
import stablehlo_perf as sp
from conftest import op_infos
from stablehlo_perf.analysis import calibration_files as cf
from stablehlo_perf.analysis.lapack import (
    COLUMNS,
    SHIPPED,
    LapackCall,
    LapackModel,
    lapack_call,
    lapack_flops,
    read_rows,
)
from stablehlo_perf.analysis.opinfo import OpInfo
from stablehlo_perf.analysis.targets import load_target


def _calls(fn, *shapes, dtype=jnp.float32) -> list[LapackCall]:
    args = [jax.ShapeDtypeStruct(s, dtype) for s in shapes]
    return [c for c in map(lapack_call, op_infos(jax.jit(fn).lower(*args).as_text())) if c]


def test_jnp_linalg_calls_are_read_from_the_lowered_custom_calls() -> None:
    """The routine, element type, batch, sizes and vectors option of jax 0.10.2's lowering."""
    solve = _calls(jnp.linalg.solve, (256, 256), (256, 16))
    assert solve == [
        LapackCall("getrf", "f32", 1, 256, 256),
        LapackCall("trsm", "f32", 1, 256, 16, 256),
        LapackCall("trsm", "f32", 1, 256, 16, 256),
    ]
    assert _calls(lambda x: jnp.linalg.eigh(x)[0], (4, 64, 64)) == [
        LapackCall("syevd", "f32", 4, 64, 64)
    ]
    assert _calls(lambda x: jnp.linalg.svd(x, compute_uv=False), (32, 48)) == [
        LapackCall("gesdd", "f32", 1, 32, 48, vectors=False)
    ]
    assert _calls(lambda x: jnp.linalg.qr(x)[0], (512, 128)) == [
        LapackCall("geqrf", "f32", 1, 512, 128),
        LapackCall("orgqr", "f32", 1, 512, 128, 128),
    ]
    assert _calls(jnp.linalg.eigvals, (16, 16)) == [
        LapackCall("geev", "f32", 1, 16, 16, vectors=False)
    ]
    assert _calls(jnp.linalg.cholesky, (3, 8, 8), dtype=jnp.complex64) == [
        LapackCall("potrf", "c64", 3, 8, 8)
    ]


def test_flops_by_hand() -> None:
    """LAWN 41's leading terms (multiplications plus additions); a complex FLOP is four."""
    n = 256.0
    assert lapack_flops(LapackCall("getrf", "f32", 1, 256, 256)) == pytest.approx(4 * n**3 / 3)
    assert lapack_flops(LapackCall("potrf", "f64", 1, 256, 256)) == pytest.approx(n**3 / 3)
    assert lapack_flops(LapackCall("potrf", "c64", 1, 256, 256)) == pytest.approx(4 * n**3 / 3)
    assert lapack_flops(LapackCall("trsm", "f32", 1, 256, 16, 256)) == 256 * 256 * 16
    qr = 2 * 512 * 128**2 - 2 * 128**3 / 3
    assert lapack_flops(LapackCall("geqrf", "f32", 1, 512, 128)) == pytest.approx(qr)
    # Forming Q of 512 x 128 from 128 reflectors: 4mnk - 2(m+n)k^2 + 4k^3/3.
    q = 4 * 512 * 128 * 128 - 2 * 640 * 128**2 + 4 * 128**3 / 3
    assert lapack_flops(LapackCall("orgqr", "f32", 1, 512, 128, 128)) == pytest.approx(q)
    assert lapack_flops(LapackCall("syevd", "f32", 1, 64, 64)) == 9 * 64**3
    assert lapack_flops(LapackCall("gesdd", "f32", 1, 32, 48, vectors=False)) == pytest.approx(
        4 * 48 * 32**2 - 4 * 32**3 / 3
    )
    assert lapack_flops(LapackCall("gbtrf", "f32", 1, 8, 8)) == 0.0


def _rows(path: Path, rows: list[str]) -> Path:
    path.write_text("# machine: test\n" + ",".join(COLUMNS) + "\n" + "\n".join(rows) + "\n")
    return path


def test_model_interpolates_in_log_log_and_scales_past_its_rows(tmp_path: Path) -> None:
    """Two getrf rows, n = 64 (10 us) and 256 (640 us: 64x the FLOPs, 64x the time): n = 128
    (8x the FLOPs of 64) lands at 10 x 8 = 80 us; n = 512, 8x past the largest, at 8 x 640;
    a batch of 4 at 4x; a routine without rows is not this model's."""
    csv = _rows(
        tmp_path / "l.csv", ["getrf,f32,1,64,64,0,1,10,100", "getrf,f32,2,256,256,0,1,1280,100"]
    )
    model = LapackModel(csv)
    assert model.per_matrix_ns(LapackCall("getrf", "f32", 1, 128, 128)) == pytest.approx(80e3)
    assert model.per_matrix_ns(LapackCall("getrf", "f32", 1, 512, 512)) == pytest.approx(5120e3)
    small = model.per_matrix_ns(LapackCall("getrf", "f32", 1, 8, 8))
    assert small == pytest.approx(10e3)
    (op,) = [o for o in op_infos(jax.jit(lambda x: jax.lax.linalg.lu(x)[0]).lower(
        jax.ShapeDtypeStruct((4, 128, 128), jnp.float32)).as_text()) if lapack_call(o)]  # fmt: skip
    host = load_target("host")
    assert model.supports(op, host)
    (cost,) = model.predict([op], host)
    assert cost.latency_ns == pytest.approx(4 * 80e3) and cost.model == "lapack-host"
    assert cost.extra["lapack_flops"] == pytest.approx(4 * 4 * 128**3 / 3)
    (potrf,) = [o for o in op_infos(jax.jit(jnp.linalg.cholesky).lower(
        jax.ShapeDtypeStruct((8, 8), jnp.float32)).as_text()) if lapack_call(o)]  # fmt: skip
    assert not model.supports(potrf, host)


def test_a_complex_call_borrows_the_real_types_calls(tmp_path: Path) -> None:
    """A c64 getrf without rows of its own is priced on the f32 curve at COMPLEX_AS_REAL (2.5)
    times the real call's FLOPs: the rows below put f32 n = 64 at 10 us and 256 at 640 (64x
    the FLOPs, 64x the time), so c64 n = 64 reads the curve at 2.5x: 25 us; a c128 call
    borrows f64's rows, of which there are none here; the model name says it borrowed."""
    csv = _rows(
        tmp_path / "l.csv", ["getrf,f32,1,64,64,0,1,10,100", "getrf,f32,1,256,256,0,1,640,100"]
    )
    model = LapackModel(csv)
    assert model.per_matrix_ns(LapackCall("getrf", "c64", 1, 64, 64)) == pytest.approx(25e3)

    def lu(dtype: object) -> OpInfo:
        spec = jax.ShapeDtypeStruct((64, 64), dtype)
        text = jax.jit(lambda x: jax.lax.linalg.lu(x)[0]).lower(spec).as_text()
        return next(o for o in op_infos(text) if lapack_call(o))

    host = load_target("host")
    c64 = lu(jnp.complex64)
    assert lapack_call(c64).dtype == "c64" and model.supports(c64, host)
    (cost,) = model.predict([c64], host)
    assert cost.latency_ns == pytest.approx(25e3)
    assert cost.model == "lapack-host(complex: the real type's calls at 2.5x FLOPs)"
    with jax.enable_x64(True):
        assert not model.supports(lu(jnp.complex128), host)


def test_a_bad_row_is_a_clear_error(tmp_path: Path) -> None:
    csv = _rows(
        tmp_path / "bad.csv", ["getrf,f32,1,64,64,0,1,10,100", "getrf,f32,one,8,8,0,1,2,100"]
    )
    with pytest.raises(ValueError, match=r"bad\.csv:4: bad LAPACK row"):
        read_rows(csv)
    (tmp_path / "cols.csv").write_text("routine,us\n")
    with pytest.raises(ValueError, match="expected the columns"):
        read_rows(tmp_path / "cols.csv")


def test_the_host_prices_jnp_linalg_by_its_measured_calls() -> None:
    """On the host target every LAPACK call of a solve is priced by the shipped measurements
    (none is left to the roofline fallback): a solve of 512x512 by 16 columns is an LU and two
    triangular solves, sizes every shipped machine's file has, so each call costs its measured
    row (read here from the CSV the model reads), a kernel of its own."""
    a, b = (
        jax.ShapeDtypeStruct((512, 512), jnp.float32),
        jax.ShapeDtypeStruct((512, 16), jnp.float32),
    )
    res = sp.perf_jit(jnp.linalg.solve, target="host").analyze(a, b)
    assert not res.to_dict().get("unmodelled")
    lapack = [o for o in res.report.ops if o.name == "stablehlo.custom_call"]
    assert [o.model.split(":")[-1] for o in lapack] == ["lapack-host"] * 3
    shipped = cf.shipped_file(LapackModel().source).read_text().splitlines()
    row_ns = {
        (r[0], r[3], r[4]): float(r[7]) * 1e3
        for r in (line.split(",") for line in shipped if line[:1].isalpha())
        if r[1] == "f32" and r[2] == "1"
    }
    expected = [row_ns["getrf", "512", "512"]] + [row_ns["trsm", "512", "16"]] * 2
    assert [o.latency_ns for o in lapack] == pytest.approx(expected)
    assert math.isfinite(res.predicted_ns) and res.predicted_ns > sum(expected)


def test_a_program_with_a_complex_constant_is_analysed() -> None:
    """jnp.linalg.eigvals fills failed rows with a complex NaN constant, an attribute the MLIR
    bindings cannot read: the analysis reads around it."""
    x = jax.ShapeDtypeStruct((16, 16), jnp.float32)
    res = sp.perf_jit(jnp.linalg.eigvals, target="host").analyze(x)
    assert not res.partial and res.predicted_ns > 0


def test_a_broken_calibration_of_lapack_calls_is_named_and_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A host calibration's LAPACK file with a bad row: a warning naming it, and the shipped
    measurements answer instead (no traceback in the user's analysis)."""
    from stablehlo_perf.analysis import calibration_files as cf
    from stablehlo_perf.analysis.lapack import lapack_path

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    mine = lapack_path(cf.calibration_path("host"))
    mine.parent.mkdir(parents=True)
    mine.write_text(
        f"# machine: {cf.machine_fingerprint()}\n"
        + ",".join(COLUMNS)
        + "\ngetrf,f32,x,8,8,0,1,2,1\n"
    )
    with pytest.warns(UserWarning, match=r"lapack\.csv:3: bad LAPACK row"):
        model = LapackModel()
    assert model.source == cf.nearest_shipped(SHIPPED)[0].name


def test_a_call_whose_other_ops_are_priced_over_its_time_is_left_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The sweep times a call net of the pipeline's price for its program's other ops; where
    that price passes 90% of the loop's time (a stale model's, say) the call's own time is
    unknown: the case is named and left out, not stored as 0.01 us, and a sweep that keeps
    none writes nothing over the file."""
    from stablehlo_perf.runtime import lapack_sweep

    two = [lapack_sweep.Case("potrf", "f32", 8), lapack_sweep.Case("getrf", "f32", 8)]
    monkeypatch.setattr(lapack_sweep, "cases", lambda sizes: two)
    rest_us = lapack_sweep._rest_us

    def stale(fn, args):  # prices the LU's other ops at a second, the Cholesky's at nothing
        calls, _ = rest_us(fn, args)
        return calls, 1e6 if calls[0].routine == "getrf" else 0.0

    monkeypatch.setattr(lapack_sweep, "_rest_us", stale)
    out = tmp_path / "lapack.csv"
    assert lapack_sweep.write_csv(out, repeats=2) == 1
    rows = read_rows(out)
    assert [(c.routine, c.n) for c, _ in rows] == [("potrf", 8)]
    assert rows[0][1] > 0.01
    assert "getrf,f32,1x8x0: left out" in capsys.readouterr().err
    monkeypatch.setattr(lapack_sweep, "_rest_us", lambda fn, args: (rest_us(fn, args)[0], 1e6))
    assert lapack_sweep.write_csv(out, repeats=2) == 0
    assert read_rows(out) == rows  # the earlier file stands
