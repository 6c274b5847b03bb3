"""`make bench`'s targets (issue 9) and the verdict on a run's results, and the ratios of a
comparison with a baseline (bench/compare.py); no import beyond the standard library, so the
tests can check it without the harness's own dependencies."""

TARGETS = {
    "A p99": "<= 100 ms",
    "B/D throughput": ">= 0.70",
    "C p50": "<= 300 ms",
    "webhook deliveries/s": ">= 200",
    "A at scale / A empty": ">= 0.85",
    "B at scale / B empty": ">= 0.85",
    "expire_quotes": "<= 2 s",
    "web worker peak RSS": "<= 150 MiB",
    "errors": "== 0",
}


def verdicts(r: dict) -> dict:
    def ok(cond) -> str:
        return "PASS" if cond else "FAIL"

    a, b, d = r["A"], r["B"], r["D"]
    ae, be = r["E"]["A"], r["E"]["B"]
    worker_rss = max(
        (v for k, v in r["peak_rss_kib"].items() if k.startswith("web child")), default=0
    )
    errors = sum(r[k]["errors"] for k in "ABCD") + ae["errors"] + be["errors"]
    ratios = {  # checked unrounded: 0.699 is short of 0.70, whatever it prints as
        "B/D throughput": b["throughput_rps"] / d["throughput_rps"],
        "A at scale / A empty": ae["throughput_rps"] / a["throughput_rps"],
        "B at scale / B empty": be["throughput_rps"] / b["throughput_rps"],
    }
    figures = {
        **{name: (round(ratio, 3),) for name, ratio in ratios.items()},
        "A p99": (a["p99_ms"],),
        "C p50": (r["C"]["e2e"]["p50_ms"],),
        "webhook deliveries/s": (r["C"]["burst"]["per_s"],),
        "expire_quotes": (r["E"]["expire_quotes"]["seconds"],),
        "web worker peak RSS": (round(worker_rss / 1024, 1),),
        "errors": (errors + r["C"]["e2e"]["missing"],),
    }
    checks = {
        "A p99": (a["p99_ms"] or 1e9) <= 100,
        "B/D throughput": ratios["B/D throughput"] >= 0.70,
        "C p50": (r["C"]["e2e"]["p50_ms"] or 1e9) <= 300,
        "webhook deliveries/s": r["C"]["burst"]["per_s"] >= 200,
        "A at scale / A empty": ratios["A at scale / A empty"] >= 0.85,
        "B at scale / B empty": ratios["B at scale / B empty"] >= 0.85,
        "expire_quotes": r["E"]["expire_quotes"]["seconds"] <= 2,
        "web worker peak RSS": worker_rss / 1024 <= 150,
        "errors": figures["errors"][0] == 0,
    }
    return {
        name: {"target": TARGETS[name], "value": figures[name][0], "verdict": ok(checks[name])}
        for name in TARGETS
    }


# A comparison's figures: (label, scenario, figure, higher is better).
COMPARED = (
    ("A req/s", "A", "throughput_rps", True),
    ("A p99 ms", "A", "p99_ms", False),
    ("B req/s", "B", "throughput_rps", True),
    ("C payments/s", "C", "flows_per_s", True),
    ("C e2e p50 ms", "C", ("e2e", "p50_ms"), False),
    ("D req/s", "D", "throughput_rps", True),
)


def _figure(results: dict, key: str, figure: str | tuple[str, str]) -> float | None:
    value = results.get(key, {})
    for part in figure if isinstance(figure, tuple) else (figure,):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def ratios(old: dict, new: dict) -> dict[str, dict]:
    """new/old per figure; `better`: whether it moved the right way (None: unchanged, or a
    figure missing)."""
    found = {}
    for label, key, figure, higher_is_better in COMPARED:
        before, after = _figure(old, key, figure), _figure(new, key, figure)
        ratio = after / before if before and after is not None else None
        better = None if ratio is None or ratio == 1 else (ratio > 1) == higher_is_better
        shown = None if ratio is None else round(ratio, 3)
        found[label] = {"old": before, "new": after, "new/old": shown, "better": better}
    return found
