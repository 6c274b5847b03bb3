"""`make bench`'s verdicts check the figures as measured, not as printed."""

from bench.verdicts import TARGETS, ratios, verdicts


def _results(*, b_rps: float, d_rps: float) -> dict:
    scenario = {"throughput_rps": 100.0, "p99_ms": 50.0, "errors": 0}
    return {
        "A": {**scenario, "throughput_rps": 0.1 * d_rps},
        "B": {**scenario, "throughput_rps": b_rps},
        "D": {**scenario, "throughput_rps": d_rps},
        "C": {
            **scenario,
            "e2e": {"p50_ms": 100.0, "missing": 0},
            "burst": {"per_s": 500.0},
        },
        "E": {
            "A": {**scenario, "throughput_rps": 0.1 * d_rps},
            "B": {**scenario, "throughput_rps": b_rps},
            "expire_quotes": {"seconds": 0.5},
        },
        "peak_rss_kib": {"web child 1": 90 * 1024},
    }


def test_a_ratio_just_short_of_its_target_fails_though_it_prints_as_the_target():
    short = verdicts(_results(b_rps=228.17, d_rps=326.0))["B/D throughput"]  # 0.69991

    assert short["verdict"] == "FAIL"
    assert short["value"] == 0.7


def test_a_ratio_at_its_target_passes():
    assert verdicts(_results(b_rps=228.2, d_rps=326.0))["B/D throughput"]["verdict"] == "PASS"


def test_a_over_d_is_no_target_any_more():
    """A at a tenth of the floor: every verdict still passes, and none is about A/D."""
    found = verdicts(_results(b_rps=300.0, d_rps=326.0))

    assert all(v["verdict"] == "PASS" for v in found.values()), found
    assert not any("A/D" in name for name in [*TARGETS, *found])


def test_a_comparison_gives_new_over_old_and_which_way_each_figure_moved():
    old = _results(b_rps=300.0, d_rps=400.0)
    old["C"] |= {"flows_per_s": 20.0}
    new = {**old, "A": {**old["A"], "throughput_rps": 60.0, "p99_ms": 75.0}}

    found = ratios(old, new)

    assert found["A req/s"] == {"old": 40.0, "new": 60.0, "new/old": 1.5, "better": True}
    assert found["A p99 ms"] == {"old": 50.0, "new": 75.0, "new/old": 1.5, "better": False}
    assert found["D req/s"]["new/old"] == 1.0 and found["D req/s"]["better"] is None
    assert found["C payments/s"]["new/old"] == 1.0
