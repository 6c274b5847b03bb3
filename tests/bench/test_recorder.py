"""`make bench` measures D and A in alternating turns and reports each kind's turns as one
run: the figures must be those of all its requests together, not an average of the turns."""

from bench.recorder import Recorder, summarize


def _turn(latencies_ms: list[float], *, seconds: float, web_cpu: float, errors: int = 0) -> dict:
    rec = Recorder()
    for ms in latencies_ms:
        rec.ok("POST /bench/floor", ms / 1000, 201)
    for _ in range(errors):
        rec.error("POST /bench/floor", "HTTP 500", 500)
    return {
        "rec": rec,
        "elapsed": seconds,
        "created": [],
        "posted_at": {},
        "window": (0.0, seconds),
        "cpu_seconds": {"web": web_cpu},
        "loadavg": (1.0, 2.0),
    }


def test_turns_summarized_as_one_run():
    fast = _turn([10.0] * 90, seconds=1.0, web_cpu=0.3)
    slow = _turn([40.0] * 9, seconds=1.0, web_cpu=0.06, errors=1)

    summary = summarize("D", [fast, slow])

    assert summary["requests"] == 100
    assert summary["throughput_rps"] == 50.0  # 100 requests in 2 s, not the turns' mean rate
    assert summary["p50_ms"] == 10.0
    assert summary["p99_ms"] == 40.0  # over every latency: the slow turn's tail shows
    assert summary["errors"] == 1
    assert summary["statuses"] == {"201": 99, "500": 1}
    assert summary["turns"] == 2
    assert summary["cpu_ms_per_request"] == {"web": 3.6}  # 0.36 s of CPU over 100 requests


def test_one_run_is_summarized_as_before():
    summary = summarize("D", [_turn([5.0, 15.0], seconds=0.5, web_cpu=0.01)])

    assert summary["throughput_rps"] == 4.0
    assert summary["p99_ms"] == 15.0
    assert "turns" not in summary
