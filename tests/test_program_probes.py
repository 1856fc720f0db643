"""Multi-kernel probe programs: the fit by hand, and one live pass."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from stablehlo_perf.runtime import program_probes as pp


def test_fit_recovers_the_per_call_terms() -> None:
    """Programs built as a 3 us call + 40 us once for >= 2 kernels + 7 us per kernel + steps x
    loop time; the 3 us comes from the sweep's single-op programs, as in calibrate."""
    probes = [
        pp.Probe("a", k, 2 * k, 3e3 + 40e3 + 7e3 * 2 * k + k * 5e3, 5e3) for k in (1, 2, 4, 8)
    ] + [pp.Probe("b", 3, 3, 3e3 + 40e3 + 21e3 + 6e3, 2e3)]
    fit = pp.fit_probes(probes, base_ns=3e3)
    assert fit.multi_kernel_ns == pytest.approx(40e3, rel=1e-6)
    assert fit.kernel_dispatch_ns == pytest.approx(7e3, rel=1e-6)
    assert fit.base_ns == 3e3


def test_the_fit_leaves_the_long_call_ramp_to_the_sweep() -> None:
    """Programs of steps of 30 us each also paying the sweep's long-call ramp of their steps'
    in-loop time (0.5 ns per ns beyond 20 us), one of three 2 us steps none: given the ramp,
    the fit finds the same terms; without it, a per-kernel cost that takes the ramp in."""

    def ramp(loop_ns: float) -> float:
        return 0.5 * max(loop_ns - 20e3, 0.0)

    probes = [
        pp.Probe("a", k, 2 * k, 3e3 + 40e3 + 7e3 * 2 * k + k * 30e3 + ramp(k * 30e3), 30e3)
        for k in (1, 2, 4, 8)
    ] + [pp.Probe("b", 3, 3, 3e3 + 40e3 + 21e3 + 6e3, 2e3)]
    fit = pp.fit_probes(probes, base_ns=3e3, long_call=ramp)
    assert fit.multi_kernel_ns == pytest.approx(40e3, rel=1e-6)
    assert fit.kernel_dispatch_ns == pytest.approx(7e3, rel=1e-6)
    # Without it, the ramp left in the a probes, 0.5 x (30k - 20) = 15k - 10 us over their
    # 2k kernels, is 7.5 us a kernel less 10 once: they fit exactly at 7 + 7.5 a kernel and
    # 40 - 10 once (b, off that line, is outvoted by the four).
    unramped = pp.fit_probes(probes, base_ns=3e3)
    assert unramped.kernel_dispatch_ns == pytest.approx(14.5e3, rel=1e-6)
    assert unramped.multi_kernel_ns == pytest.approx(30e3, rel=1e-6)


def test_split_probes_set_the_rewake_cost() -> None:
    """Probes whose steps each run a split kernel that finds the pool asleep (`SPLIT_KINDS`)
    pay 25 us a step after the first (whose wake-up is the call's own) on top of 1 us per
    kernel: the fit finds both; without such probes the
    rewake cost stays unknown (NaN)."""
    plain = [pp.Probe("dense", k, 2 * k, 20e3 + 1e3 * 2 * k + k * 4e3, 4e3) for k in (1, 4, 16)]
    split = [
        pp.Probe("gelu", k, 5 * k, 20e3 + 5e3 * k + 25e3 * (k - 1) + k * 9e3, 9e3)
        for k in (1, 2, 8)
    ]
    fit = pp.fit_probes(plain + split)
    assert fit.rewake_ns == pytest.approx(25e3, rel=1e-6)
    assert fit.kernel_dispatch_ns == pytest.approx(1e3, rel=1e-6)
    assert math.isnan(pp.fit_probes(plain).rewake_ns)
    # A split chain of more wake-ups than `FITTED_WAKES` pays 2 us a step beyond the
    # long-call ramp (here from 100 us): left out of the fit, where it would pull the rewake
    # cost down, whether or not the ramp reaches it.
    for start in (100e3, 5e3):

        def ramp(ns: float, start: float = start) -> float:
            return 50e3 if ns > start else 0.0

        probes = [
            replace(p, program_ns=p.program_ns + ramp(p.steps * p.step_loop_ns))
            for p in plain + split
        ] + [
            pp.Probe("gelu", k, 5 * k, 20e3 + 5e3 * k + 2e3 * (k - 1) + 50e3 + k * 9e3, 9e3)
            for k in (16, 32, 64, 128)
        ]
        fit = pp.fit_probes(probes, long_call=ramp)
        assert fit.rewake_ns == pytest.approx(25e3, rel=1e-6)


def test_a_split_kinds_own_offset_stays_out_of_the_rewake_cost() -> None:
    """Every gelu probe also pays 60 us that no term models (its steps' YNN mean): the fit
    puts it in the kind's offset, and the rewake cost is what each step after the first adds
    (25 us); a fit without the offset would spread the 60 us over the few steps."""
    plain = [pp.Probe("dense", k, 2 * k, 20e3 + 1e3 * 2 * k + k * 4e3, 4e3) for k in (1, 4, 16)]
    split = [
        pp.Probe("gelu", k, 5 * k, 20e3 + 60e3 + 5e3 * k + 25e3 * (k - 1) + k * 9e3, 9e3)
        for k in (1, 2, 4)
    ]
    fit = pp.fit_probes(plain + split)
    assert fit.rewake_ns == pytest.approx(25e3, rel=1e-6)
    assert fit.multi_kernel_ns == pytest.approx(20e3, rel=1e-6)
    assert fit.kernel_dispatch_ns == pytest.approx(1e3, rel=1e-6)


def test_reduce_probes_set_the_second_reduce_cost() -> None:
    """Chains of k sums (`REDUCE_KINDS`) pay their first sum's wake (60 us, the kind's offset),
    the multi-kernel term and 1 us a kernel like the dense chains, and 12 us once from the
    second sum on: the fit finds 12 us. Chains of more than `FITTED_WAKES` + 1 steps, which
    pay 50 us a step more (XLA's executor running them concurrently), are left out; without
    sums probes the cost stays unknown (NaN)."""
    plain = [pp.Probe("dense", k, 2 * k, 20e3 + 1e3 * 2 * k + k * 4e3, 4e3) for k in (1, 4, 16)]

    def sums(k: int, per_step: float = 0.0) -> pp.Probe:
        kernels = 2 * k - 1
        extra = (20e3 + 12e3 + per_step * k) if k >= 2 else 0.0
        return pp.Probe("sums", k, kernels, 60e3 + 1e3 * kernels + extra + k * 5e3, 5e3)

    fit = pp.fit_probes(plain + [sums(k) for k in (1, 2, 4)] + [sums(k, 50e3) for k in (8, 16)])
    assert fit.reduce_rewake_ns == pytest.approx(12e3, rel=1e-6)
    assert fit.multi_kernel_ns == pytest.approx(20e3, rel=1e-6)
    assert fit.kernel_dispatch_ns == pytest.approx(1e3, rel=1e-6)
    assert math.isnan(pp.fit_probes(plain).reduce_rewake_ns)
    assert [sums(k).reduce_rewakes for k in (1, 2, 4)] == [0, 1, 1]


def test_the_pipeline_charges_a_sum_chain_the_second_reduce_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A sums probe of k steps runs k reduces XLA hands to YNNPACK (its compiled HLO's
    `__ynn_fusion`s), each of 256 KiB, and the critical-path pass charges the second-reduce
    cost once from two on: the probe's `reduce_rewakes` (on a target charging 1 us for it,
    against one charging a negligible 1e-9 ns)."""
    from dataclasses import replace

    import jax
    import jax.numpy as jnp
    import stablehlo_perf as sp
    from stablehlo_perf.analysis.targets import load_target
    from stablehlo_perf.passes import critical_path

    step, build, (m, d) = pp.STEPS["sums"]
    x, w = jnp.ones((m, d)) * 0.1, jnp.eye(4)
    host = replace(load_target("host"), reduce_wake_bytes=131072.0)
    for k in (1, 2, 3):
        lowered = jax.jit(build(step, k)).lower(x, w)
        assert lowered.compile().as_text().count('"kind":"__ynn_fusion"') == k
        calls = []
        for cost in (1e-9, 1000.0):
            charged = replace(host, reduce_rewake_ns=cost)
            monkeypatch.setattr(critical_path, "load_target", lambda name, t=charged: t)
            calls.append(sp.analyze(lowered, target="host").report.call_overhead_ns)
        paid = (calls[1] - calls[0]) / 1000.0
        assert paid == pytest.approx(pp.Probe("sums", k, 1, 1.0, 1.0).reduce_rewakes)
        assert paid == pytest.approx(int(k >= 2))


def test_the_pipeline_counts_the_gelu_probes_wakes_as_xla_splits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A gelu probe of k steps runs k kernels XLA splits over threads (its compiled HLO's
    `outer_dimension_partitions`), and the critical-path pass charges the rewake for all but
    the first: k - 1, the probe's `pool_wakes` (on a target charging 1 us per rewake after
    any gap, against one charging a negligible 1e-9 ns)."""
    import re
    from dataclasses import replace

    import jax
    import jax.numpy as jnp
    import stablehlo_perf as sp
    from stablehlo_perf.analysis.targets import load_target
    from stablehlo_perf.passes import critical_path

    step, build, (m, d) = pp.STEPS["gelu"]
    x, w = jnp.ones((m, d)) * 0.1, jnp.eye(d)
    host = load_target("host")
    for k in (1, 2, 3):
        lowered = jax.jit(build(step, k)).lower(x, w)
        hlo = lowered.compile().as_text()
        assert len(re.findall(r'outer_dimension_partitions":\["[2-9]', hlo)) == k
        calls = []
        for rewake in (1e-9, 1000.0):
            charged = replace(host, rewake_ns=rewake, rewake_gap_ns=1.0)
            monkeypatch.setattr(critical_path, "load_target", lambda name, t=charged: t)
            calls.append(sp.analyze(lowered, target="host").report.call_overhead_ns)
        wakes = (calls[1] - calls[0]) / 1000.0
        assert wakes == pytest.approx(pp.Probe("gelu", k, 1, 1.0, 1.0).pool_wakes) == k - 1


def test_fit_is_not_pulled_by_one_costly_kind() -> None:
    """Four probe kinds pay 1 us per kernel, one pays 9: the absolute-error fit keeps 1 us
    (a squared-error fit of the same probes lands well above it)."""
    probes = [
        pp.Probe(kind, k, 2 * k, 20e3 + 1e3 * 2 * k + k * 4e3, 4e3)
        for kind in "abcd"
        for k in (1, 4, 16, 64)
    ] + [pp.Probe("e", k, 2 * k, 20e3 + 9e3 * 2 * k + k * 4e3, 4e3) for k in (1, 4, 16, 64)]
    fit = pp.fit_probes(probes)
    assert fit.kernel_dispatch_ns == pytest.approx(1e3, rel=1e-6)
    assert fit.multi_kernel_ns == pytest.approx(20e3, rel=1e-6)


def test_centring_probes_are_measured_but_not_fitted() -> None:
    """Dense and branch chains pay 0.2 us a kernel, centring chains (a YNNPACK mean a step)
    3.6 us, as on the Zen 5 VM: outnumbering the others, they would set the LAD fit's term
    (3.6 us); they are left out, and it stays 0.2 us."""
    probes = [
        pp.Probe(kind, k, 2 * k, 30e3 + per * 2 * k + k * 2e3, 2e3)
        for kind, per in (
            ("dense", 0.2e3),
            ("branches", 0.2e3),
            ("center", 3.6e3),
            ("center", 3.6e3),
            ("center", 3.6e3),
        )
        for k in (1, 4, 16, 64)
    ]
    assert "center" in pp.UNFITTED_KINDS
    fit = pp.fit_probes(probes)
    assert fit.kernel_dispatch_ns == pytest.approx(0.2e3, rel=1e-6)
    assert fit.multi_kernel_ns == pytest.approx(30e3, rel=1e-6)


def test_one_live_pass_counts_kernels_like_the_pipeline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pp, "CHAIN_LENGTHS", (1, 2))
    monkeypatch.setattr(pp, "BRANCH_COUNTS", (1, 2))
    probes = pp.measure_probes(repeats=3, passes=1)
    assert [(p.kind, p.steps) for p in probes] == [
        ("dense", 1), ("dense", 2), ("center", 1), ("center", 2), ("branches", 1), ("branches", 2),
        ("gelu", 1), ("gelu", 2), ("sums", 1), ("sums", 2),
    ]  # fmt: skip
    for one, two in zip(probes[:4:2], probes[1:4:2], strict=True):
        # Twice the steps, twice the kernels the fusion plan counts (one chain, no sharing).
        assert two.kernels == 2 * one.kernels >= 2
    # A second branch adds its own dot and tanh (the sum joins the last fusion).
    assert probes[5].kernels > probes[4].kernels >= 2
    # A second sum adds itself and the tanh of the first's 64 sums that scales it.
    assert (probes[8].kernels, probes[9].kernels) == (1, 3)
    assert all(p.step_loop_ns > 0 for p in probes)


def test_probe_lines_round_trip_and_pool_the_last_dates() -> None:
    """A calibration keeps its probe measurements as header lines; a resumed run fits the
    new ones together with those of the last seven earlier dates."""
    p = pp.Probe("branches", 8, 17, 123456.7, 2345.6, "2026-11-30T10:00Z")
    assert pp.Probe.parse(p.line()) == p
    assert pp.Probe.parse("# probe: 2026-11-30T10:00Z dense 4") is None
    assert pp.Probe.parse("# note: x") is None
    earlier = [pp.Probe("dense", 1, 1, 1.0, 1.0, f"2026-11-{d:02d}T00:00Z") for d in range(1, 11)]
    new = [pp.Probe("dense", 1, 1, 2.0, 1.0, "2026-11-30T00:00Z")]
    got = pp.pooled(earlier, new)
    assert [q.measured[:10] for q in got] == [f"2026-11-{d:02d}" for d in range(4, 11)] + [
        "2026-11-30"
    ]
    assert pp.pooled(earlier, new, keep=1) == new


def test_probe_times_are_put_at_the_calibrations_speed() -> None:
    """Probes timed while the sentinel ops took 200 us, read for a calibration whose rows'
    median sentinel is 150 us: every time scaled by 0.75; probes or files without sentinels
    are left as measured."""
    p = pp.Probe("dense", 4, 8, 100e3, 10e3, "2026-12-01T00:00Z", 200.0)
    assert pp.Probe.parse(p.line()) == p
    fast = p.at_speed(150.0)
    assert (fast.program_ns, fast.step_loop_ns) == pytest.approx((75e3, 7.5e3))
    assert (fast.kind, fast.steps, fast.kernels) == ("dense", 4, 8)
    old = pp.Probe("dense", 4, 8, 100e3, 10e3, "2026-11-30T00:00Z")
    assert old.at_speed(150.0) is old and p.at_speed(math.nan) is p
    assert pp.Probe.parse(p.line() + " 1.0") is None


def test_overhead_ratio_is_the_median_over_the_latest_fitted_probes() -> None:
    """Probes re-timed now against a calibration's, read at its speed (sentinels 200 us then,
    read at 100: halved): dense overheads 40 -> 30 us (x0.75), branches 50 -> 45 (x0.9), gelu
    20 -> 10 (x0.5); the median 0.75 of three. Centring probes (not fitted), an earlier
    date's and probes timed only now do not vote; none in common: NaN."""
    when, old = "2026-12-05T00:00Z", "2026-12-01T00:00Z"
    then = [
        pp.Probe("dense", 2, 4, 100e3, 10e3, when, 200.0),  # overhead 80 us, 40 at speed
        pp.Probe("branches", 4, 9, 140e3, 10e3, when, 200.0),  # 100 -> 50
        pp.Probe("gelu", 1, 8, 80e3, 40e3, when, 200.0),  # 40 -> 20
        pp.Probe("center", 2, 4, 100e3, 10e3, when, 200.0),
        pp.Probe("dense", 4, 8, 100e3, 10e3, old, 200.0),
    ]
    now = [
        pp.Probe("dense", 2, 4, 40e3, 5e3),
        pp.Probe("branches", 4, 9, 65e3, 5e3),
        pp.Probe("gelu", 1, 8, 30e3, 20e3),
        pp.Probe("center", 2, 4, 10e3, 5e3),
        pp.Probe("dense", 4, 8, 10e3, 1e3),
        pp.Probe("dense", 64, 128, 1e3, 1.0),
    ]
    ratio, probes = pp.overhead_ratio(then, now, 100.0)
    assert (ratio, probes) == (pytest.approx(0.75), 3)
    assert math.isnan(pp.overhead_ratio(then, now[3:], 100.0)[0])
    assert pp.overhead_ratio([], now, 100.0)[1] == 0
