"""What the load generator records, and its summaries (standard library only, so the test
environment, which has no aiohttp, can check them)."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any


def percentile(values: list[float], p: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1))))
    return ordered[k]


class Recorder:
    def __init__(self) -> None:
        self.latencies: dict[str, list[float]] = defaultdict(list)
        self.errors: Counter[str] = Counter()
        self.error_samples: list[str] = []
        self.statuses: Counter[int] = Counter()
        self.enabled = True

    def ok(self, label: str, seconds: float, status: int) -> None:
        if self.enabled:
            self.latencies[label].append(seconds)
            self.statuses[status] += 1

    def error(self, label: str, detail: str, status: int = 0) -> None:
        if self.enabled:
            self.errors[label] += 1
            self.statuses[status] += 1
            if len(self.error_samples) < 20:
                self.error_samples.append(f"{label}: {detail}"[:400])

    @classmethod
    def combined(cls, recorders: list[Recorder]) -> Recorder:
        """One recorder holding what each of `recorders` recorded."""
        out = cls()
        for recorder in recorders:
            for label, latencies in recorder.latencies.items():
                out.latencies[label].extend(latencies)
            out.errors.update(recorder.errors)
            out.statuses.update(recorder.statuses)
            out.error_samples += recorder.error_samples[: 20 - len(out.error_samples)]
        return out

    @property
    def requests(self) -> int:
        return sum(len(v) for v in self.latencies.values()) + sum(self.errors.values())

    def all_latencies(self) -> list[float]:
        return [x for v in self.latencies.values() for x in v]

    def summary(self, elapsed: float) -> dict[str, Any]:
        lat = self.all_latencies()
        ms = lambda v: None if v is None else round(v * 1000, 1)  # noqa: E731
        return {
            "seconds": round(elapsed, 2),
            "requests": self.requests,
            "throughput_rps": round(self.requests / elapsed, 1) if elapsed else 0,
            "p50_ms": ms(percentile(lat, 50)),
            "p95_ms": ms(percentile(lat, 95)),
            "p99_ms": ms(percentile(lat, 99)),
            "max_ms": ms(max(lat) if lat else None),
            "errors": sum(self.errors.values()),
            "error_samples": self.error_samples,
            "statuses": {str(k): v for k, v in sorted(self.statuses.items())},
            "by_request": {
                label: {
                    "count": len(v),
                    "p50_ms": ms(percentile(v, 50)),
                    "p99_ms": ms(percentile(v, 99)),
                }
                for label, v in sorted(self.latencies.items())
            },
        }


def summarize(kind: str, parts: list[dict]) -> dict:
    """The figures of one or more measured runs of `kind`, as if they were one: requests and
    seconds added up, percentiles over every latency, CPU seconds per part of the stack added
    up and divided by the requests."""
    rec = Recorder.combined([part["rec"] for part in parts])
    elapsed = sum(part["elapsed"] for part in parts)
    result = rec.summary(elapsed)
    created = [payin_id for part in parts for payin_id in part["created"]]
    if kind in ("A", "C"):
        result["flows"] = len(created)
        result["flows_per_s"] = round(len(created) / elapsed, 1)
    if len(parts) > 1:
        result["turns"] = len(parts)
    cpu_seconds: Counter[str] = Counter()
    for part in parts:
        cpu_seconds.update(part["cpu_seconds"])
    result["cpu_seconds"] = {k: round(v, 2) for k, v in cpu_seconds.items()}
    requests = max(1, result["requests"])
    result["cpu_ms_per_request"] = {
        k: round(v * 1000 / requests, 2) for k, v in cpu_seconds.items()
    }
    result["loadavg_1m"] = [round(parts[0]["loadavg"][0], 2), round(parts[-1]["loadavg"][1], 2)]
    result["_created"] = created
    result["_posted_at"] = {k: v for part in parts for k, v in part["posted_at"].items()}
    result["_window"] = (parts[0]["window"][0], parts[-1]["window"][1])
    return result
