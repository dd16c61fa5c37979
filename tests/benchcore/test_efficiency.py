"""A phase's efficiency from its Work, its median and the roofs (benchcore.report.efficiency):
the rates are the Work over the time, the roof time the slower of the bandwidth and FLOP terms,
and every figure that cannot be known is None with the reason."""

import pytest

from benchcore.measure import roofs as R
from benchcore.measure.work import Work
from benchcore.report.efficiency import Efficiency, of_phase

CACHES = {"L1": 32 * R.KIB, "L2": R.MIB, "LLC": 8 * R.MIB}
#: L1 100 GB/s, L2 50, LLC 20, DRAM 10; float32 peak 200 GFLOP/s, float64 not measured
ROOFS = R.Roofs(framework="torch", device="cpu", threads=1, fingerprint="f", flops_per_s={"float32": 200e9},
                flops_reasons={"float16": "no peak measured for float16: toy"}, gemm_n=64,
                bandwidth=[R.Point(16 * R.KIB, 100e9), R.Point(512 * R.KIB, 50e9), R.Point(4 * R.MIB, 20e9),
                           R.Point(64 * R.MIB, 10e9)],
                cache_bytes=CACHES, taken_at="now", took_s=1.0)


def test_rates_are_the_work_over_the_time_and_the_roof_is_the_slower_term():
    work = Work("forward", bytes=4 * R.MIB, flops=8_000_000)  # an LLC working set, 0.0019 FLOP per byte
    e = of_phase(work, 2.0, "float32", ROOFS)
    assert e.gb_per_s * 1e9 * 2.0e-3 == pytest.approx(work.bytes)
    assert e.gflop_per_s * 1e9 * 2.0e-3 == pytest.approx(work.flops)
    assert e.level == "LLC" and e.bandwidth_gb_per_s == 20 and e.peak_gflop_per_s == 200
    assert e.roof_ms == pytest.approx(max(work.bytes / 20e9, work.flops / 200e9) * 1e3) and e.bound == "memory"
    assert e.attainable_gflop_per_s == pytest.approx(min(200, 20 * work.intensity))
    assert e.percent_of_roof == pytest.approx(100 * e.roof_ms / 2.0) and e.to_win_ms == pytest.approx(2.0 - e.roof_ms)
    assert e.reason is None and Efficiency.from_dict(e.to_dict()) == e


def test_a_compute_bound_phase_reads_against_the_peak():
    e = of_phase(Work("forward", bytes=3 * 4 * 512 * 512, flops=2 * 512 ** 3), 10.0, "float32", ROOFS)
    assert e.bound == "compute" and e.roof_ms == pytest.approx(2 * 512 ** 3 / 200e9 * 1e3)
    assert e.attainable_gflop_per_s == pytest.approx(200)


def test_no_flop_formula_gives_no_gflops_and_a_bandwidth_only_roof_with_the_reason():
    e = of_phase(Work("backward", bytes=1000, flops=None, reason="no FLOP formula for sort"), 0.01, "float32", ROOFS)
    assert e.gflop_per_s is None and e.intensity is None and e.attainable_gflop_per_s is None
    assert e.bound == "memory (no FLOP formula)" and e.roof_ms == pytest.approx(1000 / 100e9 * 1e3)
    assert e.reason == "no FLOP formula for sort"


def test_a_dtype_without_a_peak_has_no_roof_and_says_why():
    e = of_phase(Work("forward", bytes=1000, flops=5000), 0.01, "float16", ROOFS)
    assert e.gb_per_s is not None and e.gflop_per_s is not None
    assert e.percent_of_roof is None and e.roof_ms is None and e.to_win_ms is None
    assert e.reason == "no peak measured for float16: toy"
    assert of_phase(Work("forward", 1000, 5000), 0.01, "bfloat16", ROOFS).reason == "no peak measured for bfloat16"


def test_without_roofs_or_a_time_the_figures_say_why():
    off = of_phase(Work("forward", 1000, 5000), 0.01, "float32", None, "roof probes off (--roofs off)")
    assert off.gb_per_s is not None and off.percent_of_roof is None and off.reason == "roof probes off (--roofs off)"
    untimed = of_phase(Work("forward", 1000, 5000), None, "float32", ROOFS)
    assert untimed.gb_per_s is None and untimed.percent_of_roof is None and untimed.reason == "no per-call median time"
    unknown = of_phase(Work("forward", None, None, "bytes unknown: no element size for dtype x"), 0.01, "float32", ROOFS)
    assert unknown.gb_per_s is None and unknown.level is None and unknown.percent_of_roof is None
    assert unknown.reason == "bytes unknown: no element size for dtype x"


def test_a_working_set_past_where_the_curve_reaches_dram_reads_against_dram_whatever_sysfs_says():
    # sysfs: a 480 MiB LLC; the curve: 40 GB/s at 4 MiB, DRAM's 10 GB/s from 64 MiB on
    roofs = R.Roofs(framework="torch", device="cpu", threads=2, fingerprint="f", flops_per_s={"float32": 200e9},
                    flops_reasons={}, gemm_n=64, bandwidth=[R.Point(4 * R.MIB, 40e9), R.Point(64 * R.MIB, 10e9),
                                                            R.Point(R.GIB, 10e9)],
                    cache_bytes={"L1": 32 * R.KIB, "L2": R.MIB, "LLC": 480 * R.MIB}, taken_at="now", took_s=1.0)
    add = Work("forward", bytes=3 * 100 * R.MIB, flops=100 * R.MIB // 4)  # a 3 x 100 MiB add at 10 GB/s
    e = of_phase(add, add.bytes / 10e9 * 1e3, "float32", roofs)
    assert e.level == "DRAM" and e.bandwidth_gb_per_s == pytest.approx(10)
    assert e.percent_of_roof == pytest.approx(100)  # against sysfs's LLC (40 GB/s) it would read 25%
