"""`make bench`'s verdicts check the figures as measured, not as printed."""

from bench.verdicts import verdicts


def _results(*, a_rps: float, d_rps: float) -> dict:
    scenario = {"throughput_rps": 100.0, "p99_ms": 50.0, "errors": 0}
    return {
        "A": {**scenario, "throughput_rps": a_rps},
        "B": {**scenario, "throughput_rps": 0.9 * d_rps},
        "D": {**scenario, "throughput_rps": d_rps},
        "C": {
            **scenario,
            "e2e": {"p50_ms": 100.0, "missing": 0},
            "burst": {"per_s": 500.0},
        },
        "E": {
            "A": {**scenario, "throughput_rps": a_rps},
            "B": {**scenario, "throughput_rps": 0.9 * d_rps},
            "expire_quotes": {"seconds": 0.5},
        },
        "peak_rss_kib": {"web child 1": 90 * 1024},
    }


def test_a_ratio_just_short_of_its_target_fails_though_it_prints_as_the_target():
    short = verdicts(_results(a_rps=130.1, d_rps=326.0))["A/D throughput"]  # 0.3991

    assert short["verdict"] == "FAIL"
    assert short["value"] == 0.399


def test_a_ratio_at_its_target_passes():
    assert verdicts(_results(a_rps=130.4, d_rps=326.0))["A/D throughput"]["verdict"] == "PASS"
