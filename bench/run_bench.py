# ruff: noqa: S603, S310 - a developer harness: fixed argv and loopback URLs it builds itself
"""`make bench`: scenarios A-E of issue 9 against a production-like stack; writes
bench/results.json and prints the table. BENCH_SECONDS (default 30), BENCH_CONCURRENCY
(default 16) and BENCH_ROWS (default 1,000,000) shorten it for a smoke run."""

from __future__ import annotations

import asyncio
import json
import os
import random
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import bulkload, loadgen, recorder
from bench.stack import (
    BENCH_DB,
    OUT,
    PG_DSN,
    PY,
    REDIS_BROKER_URL,
    REDIS_CACHE_URL,
    ROOT,
    WORKER_CONCURRENCY,
    Stack,
    cores,
    free_port,
    install_signal_handlers,
    log,
    pg_analyze_unless_autovacuum,
    pg_count,
    seed_merchant,
)
from bench.verdicts import verdicts

SECONDS = float(os.environ.get("BENCH_SECONDS", "30"))
CONCURRENCY = int(os.environ.get("BENCH_CONCURRENCY", "16"))
ROWS = int(os.environ.get("BENCH_ROWS", "1000000"))
# D and A are measured in turns (in_turns): BENCH_TURNS runs of SECONDS/BENCH_TURNS each;
# compare.py measures every scenario so, the two trees in turns.
TURNS = max(1, int(os.environ.get("BENCH_TURNS", "3")))
# A subset (e.g. "DAB") is a quick loop while optimizing: no verdicts, no results.json.
SCENARIOS = os.environ.get("BENCH_SCENARIOS", "ABCDE").upper()
# BENCH_WORKER=0 (with a subset): the API alone, no Celery worker competing for the CPU.
WITH_WORKER = os.environ.get("BENCH_WORKER", "1") != "0" or set(SCENARIOS) == set("ABCDE")
RESULTS = ROOT / "bench" / "results.json"

PROJECT_PACKAGES = {
    "config",
    "merchants",
    "customers",
    "kyc",
    "quotes",
    "payments",
    "transfers",
    "webhooks",
    "bench",
}


def drain(timeout: float = 180) -> float:
    """Wait until no payin is in flight and no delivery is pending; returns the seconds waited."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        open_payins = pg_count(
            "SELECT count(*) FROM payments_payin WHERE status IN ('created', 'pending') "
            "AND source->>'phone' NOT LIKE '%%999'"
        )
        open_deliveries = pg_count(
            "SELECT count(*) FROM webhooks_delivery WHERE status IN ('pending', 'delivering')"
        )
        if open_payins == 0 and open_deliveries == 0:
            return round(time.monotonic() - start, 1)
        time.sleep(0.5)
    log(f"drain timed out after {timeout}s")
    return round(time.monotonic() - start, 1)


def receiver_arrivals(url: str, since: int = 0) -> dict:
    with urllib.request.urlopen(f"{url}/arrivals?since={since}", timeout=30) as resp:
        return json.loads(resp.read())


async def _scenario(
    stack: Stack,
    merchant: dict,
    customer_id: str,
    kind: str,
    ids=None,
    receiver_url: str = "",
    *,
    seconds: float,
) -> dict:
    """One measured run of `kind` after its warm-up: what it recorded, not yet summarized."""
    rec = recorder.Recorder()
    created: list[str] = []
    posted_at: dict[str, float] = {}
    async with loadgen.new_session(CONCURRENCY) as session:
        api = loadgen.Api(session, stack.base_url, merchant["api_key"], merchant["api_secret"])

        async def op(_i: int) -> None:
            if kind in ("A", "C"):
                stamp = {}

                def mark() -> None:
                    stamp["t0"] = time.time()

                payin = await loadgen.create_payin(api, rec, customer_id=customer_id, on_post=mark)
                if payin is not None:
                    created.append(payin["id"])
                    posted_at[payin["id"]] = stamp["t0"]
                    if kind == "C":  # the client's flow ends when its webhook has arrived
                        await loadgen.await_webhook(
                            session, rec, receiver_url, "payin.completed", payin["id"]
                        )
            elif kind == "B":
                await loadgen.read_payin(api, rec, ids)
            elif kind == "D":
                await loadgen.floor(api, rec)

        rec.enabled = False
        await loadgen.closed_loop(concurrency=CONCURRENCY, seconds=warmup(seconds), op=op)
        pg_analyze_unless_autovacuum()  # statistics of the warmed-up tables, as in production
        rec.enabled = True
        cpu_before = stack.cpu_ticks()
        created.clear()
        posted_at.clear()
        window_start = time.time()
        elapsed = await loadgen.closed_loop(concurrency=CONCURRENCY, seconds=seconds, op=op)
        window_end = time.time()
    return {
        "rec": rec,
        "elapsed": elapsed,
        "cpu_before": cpu_before,
        "created": created,
        "posted_at": posted_at,
        "window": (window_start, window_end),
    }


def warmup(seconds: float) -> float:
    return min(3.0, seconds / 3)


def scenario(
    stack, merchant, customer_id, kind, ids=None, receiver_url: str = "", seconds=None
) -> dict:
    """`kind` for `seconds` (BENCH_SECONDS) at CONCURRENCY clients, summarized."""
    seconds = SECONDS if seconds is None else seconds
    _announce(kind, seconds)
    result = recorder.summarize(
        kind, [_measured(stack, merchant, customer_id, kind, ids, receiver_url, seconds)]
    )
    _log_figures(result)
    return result


def _measured(stack, merchant, customer_id, kind, ids, receiver_url, seconds) -> dict:
    """One run of `_scenario`, with the CPU each part of the stack used while it was measured."""
    load_before = os.getloadavg()[0]
    part = asyncio.run(
        _scenario(stack, merchant, customer_id, kind, ids, receiver_url, seconds=seconds)
    )
    after, before = stack.cpu_ticks(), part["cpu_before"]
    tick = os.sysconf("SC_CLK_TCK")
    part["cpu_seconds"] = {k: (after[k] - before.get(k, 0)) / tick for k in after}
    part["loadavg"] = (load_before, os.getloadavg()[0])
    return part


def _announce(what: str, seconds: float) -> None:
    log(f"scenario {what}: {CONCURRENCY} clients, {seconds:g}s (+{warmup(seconds):.1f}s warm-up)")


def _log_figures(result: dict) -> None:
    log(
        f"  {result['throughput_rps']} req/s, p50 {result['p50_ms']} ms, p99 {result['p99_ms']} ms,"
        f" errors {result['errors']}"
    )


def in_turns(stack, merchant, customer_id, kinds: str = "DA", turns: int = TURNS) -> dict:
    """`kinds` measured in turns (D, A, D, A, ...), SECONDS/turns each, every kind's turns
    summarized as one run: a drift of this box's speed over the minutes of a run (seen to move
    D by a third) falls on each kind alike instead of on whichever ran at the slow moment, so
    their ratio is the stack's, not the moment's. After each turn of A the worker drains what
    A left, so the next turn of D does not pay for A's webhooks."""
    seconds = SECONDS / turns
    parts: dict[str, list[dict]] = {kind: [] for kind in kinds}
    drains: list[float] = []
    for turn in range(1, turns + 1):
        for kind in kinds:
            _announce(f"{kind}, turn {turn}/{turns}", seconds)
            part = _measured(stack, merchant, customer_id, kind, None, "", seconds)
            parts[kind].append(part)
            _log_figures(recorder.summarize(kind, [part]))
            if kind == "A" and WITH_WORKER:
                drains.append(drain())
    results = {}
    for kind in kinds:
        results[kind] = recorder.summarize(kind, parts[kind])
        log(f"scenario {kind}, {turns} turns together:")
        _log_figures(results[kind])
    if "A" in results:
        results["A"]["drain_seconds"] = max(drains) if drains else None
    return results


def scenario_c(stack, merchant, customer_id, receiver_url) -> dict:
    mark = receiver_arrivals(receiver_url)["total"]
    result = scenario(stack, merchant, customer_id, "C", receiver_url=receiver_url)
    posted_at = result["_posted_at"]
    latencies, arrivals = webhooks_awaited(receiver_url, mark, posted_at)
    start, end = result["_window"]
    result["e2e"] = end_to_end(
        posted_at, latencies, deliveries_in(arrivals, start, end), seconds=end - start
    )
    log(f"  end to end: {result['e2e']}")
    return result


def webhooks_awaited(
    receiver_url: str, mark: int, posted_at: dict[str, float], timeout: float = 120
) -> tuple[dict[str, float], list]:
    """Wait (up to `timeout` s) for the payin.completed webhook of every payin of `posted_at`
    (id -> when its POST went out) among the receiver's arrivals after `mark`: each one's
    seconds from its POST to its webhook's arrival, and every arrival after `mark`."""
    deadline = time.monotonic() + timeout
    latencies: dict[str, float] = {}
    arrivals: list = []
    while time.monotonic() < deadline:
        arrivals = receiver_arrivals(receiver_url, mark)["arrivals"]
        latencies = {}
        for t, event, data_id, _wid, answer in arrivals:
            if event == "payin.completed" and answer == 200 and data_id in posted_at:
                latencies.setdefault(data_id, t - posted_at[data_id])
        if len(latencies) >= len(posted_at):
            break
        time.sleep(0.5)
    return latencies, arrivals


def deliveries_in(arrivals: list, start: float, end: float) -> int:
    """The webhooks delivered (answered 200) between `start` and `end`."""
    return sum(1 for a in arrivals if start <= a[0] <= end and a[4] == 200)


def end_to_end(
    posted_at: dict[str, float], latencies: dict[str, float], deliveries: int, seconds: float
) -> dict:
    """Scenario C's end-to-end figures: payins posted, their webhooks received and missing,
    POST-to-webhook percentiles, and the webhooks delivered per second while it ran
    (`deliveries` over the `seconds` measured)."""
    values = list(latencies.values())
    ms = lambda v: None if v is None else round(v * 1000, 1)  # noqa: E731
    return {
        "payins": len(posted_at),
        "webhooks_received": len(values),
        "missing": len(posted_at) - len(values),
        "p50_ms": ms(recorder.percentile(values, 50)),
        "p95_ms": ms(recorder.percentile(values, 95)),
        "p99_ms": ms(recorder.percentile(values, 99)),
        "deliveries_per_s_during_load": round(deliveries / seconds, 1),
    }


def delivery_burst(stack: Stack, receiver_url: str, n: int) -> dict:
    """The webhook pipeline's capacity: with the worker stopped, re-send n delivered events
    (each becomes a new delivery queued on `webhooks`), start the worker and time the drain
    from the first arrival to the last."""
    log(f"webhook burst: {n} deliveries queued while the worker is stopped")
    stack.stop("worker")
    mark = receiver_arrivals(receiver_url)["total"]
    stack.shell(
        "from django.utils import timezone\n"
        "from webhooks.services.resend import event_resend\n"
        "from webhooks.models import Event\n"
        "events = Event.objects.filter(event_type='payin.completed')\n"
        f"ids = list(events.values_list('id', flat=True)[:{n}])\n"
        "for event_id in ids:\n"
        "    event_resend(event_id=event_id, now=timezone.now())\n"
    )
    queued = pg_count(
        "SELECT count(*) FROM webhooks_delivery WHERE status IN ('pending', 'delivering')"
    )
    stack.start_worker(concurrency=WORKER_CONCURRENCY)
    deadline = time.monotonic() + 300
    arrivals: list = []
    while time.monotonic() < deadline:
        arrivals = receiver_arrivals(receiver_url, mark)["arrivals"]
        if len(arrivals) >= queued:
            break
        time.sleep(0.5)
    times = sorted(a[0] for a in arrivals)
    span = (times[-1] - times[0]) if len(times) > 1 else 0
    rate = round((len(times) - 1) / span, 1) if span else 0
    out = {"queued": queued, "received": len(times), "seconds": round(span, 2), "per_s": rate}
    log(f"  {out}")
    return out


def expire_quotes_timing(stack: Stack) -> dict:
    code = (
        "import io, json, time\n"
        "from django.core.management import call_command\n"
        "buf = io.StringIO()\n"
        "t = time.perf_counter()\n"
        "call_command('expire_quotes', '--json', stdout=buf)\n"
        "print(json.dumps({'seconds': round(time.perf_counter() - t, 3),"
        " 'output': json.loads(buf.getvalue())}))\n"
    )
    wall = time.perf_counter()
    out = json.loads(stack.shell(code).strip().splitlines()[-1])
    out["process_wall_seconds"] = round(time.perf_counter() - wall, 2)
    log(f"expire_quotes: {out}")
    return out


def _top_functions(raw: Path) -> dict:
    """Top functions of this project by inclusive share of py-spy's raw samples."""
    inclusive: Counter[str] = Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack_part, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        total += int(count)
        seen = set()
        for frame in stack_part.split(";"):
            where = frame.rsplit(" (", 1)[-1]
            if where.split("/", 1)[0] in PROJECT_PACKAGES:
                key = frame.rsplit(":", 1)[0] + ")"
                if key not in seen:
                    seen.add(key)
                    inclusive[key] += int(count)
    top = [
        {"function": f, "share": round(c / max(1, total), 3)} for f, c in inclusive.most_common(25)
    ]
    return {"samples": total, "top_inclusive": top}


def profile(stack: Stack, merchant, customer_id, kind: str, ids=None, seconds: float = 10) -> dict:
    """py-spy on every web worker (and, for A, every Celery pool process) while scenario
    `kind` runs: a flamegraph per process group and the top functions of this project by
    inclusive samples. Profiling figures are not part of the measured results."""
    groups = ["web", "worker"] if kind == "A" else ["web"]
    groups = [g for g in groups if g in stack.procs]  # BENCH_WORKER=0 runs without a worker
    spies = []
    for group in groups:
        cmd = [str(Path(PY).parent / "py-spy"), "record", "--pid", str(stack.procs[group].pid)]
        cmd += ["--subprocesses", "--duration", str(int(seconds)), "--rate", "200"]
        # --gil: CPU samples only; a wall-clock profile is mostly waits (gunicorn closing a
        # connection gracefully, psycopg waiting on PostgreSQL), not what costs CPU
        cmd += ["--nonblocking", "--gil"]
        for fmt, ext in (("raw", "txt"), ("flamegraph", "svg")):
            path = OUT / f"profile-{kind}-{group}.{ext}"
            spy = subprocess.Popen(
                [*cmd, "--format", fmt, "--output", str(path)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
            spies.append((group, fmt, path, spy))
    scenario(stack, merchant, customer_id, kind, ids, seconds=seconds)
    out: dict = {}
    for group, fmt, path, spy in spies:
        try:
            _, err = spy.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            spy.kill()
            err = b"timeout"
        if spy.returncode != 0:
            out[group] = {"error": (err or b"").decode()[-500:]}
        elif fmt == "raw":
            out[group] = {**out.get(group, {}), **_top_functions(path)}
        else:
            out.setdefault(group, {})["flamegraph"] = str(path)
    return out


def query_counts(stack: Stack, merchant: dict, customer_id: str) -> dict:
    code = (
        "import json\n"
        "exec(open('bench/queries.py').read())\n"
        f"print(json.dumps(measure({merchant['api_key']!r}, {merchant['api_secret']!r},"
        f" {customer_id!r})))\n"
    )
    return json.loads(stack.shell(code).strip().splitlines()[-1])


def strip(result: dict) -> dict:
    return {k: v for k, v in result.items() if not k.startswith("_")}


def rss_line(peaks: dict[str, int]) -> str:
    """Web master, max/min over web workers, worker master, max over its pool processes."""
    groups: dict[str, list[int]] = {}
    for label, kib in peaks.items():
        name = label.split(" child")[0] + " workers" if " child" in label else label
        groups.setdefault(name, []).append(kib)
    return ", ".join(
        f"{name} {round(max(v) / 1024)}" + (f" (x{len(v)})" if len(v) > 1 else "")
        for name, v in groups.items()
    )


def table(r: dict) -> str:
    lines = [
        f"Cowry bench — {r['meta']['cores']} cores, {r['meta']['web_workers']} gunicorn workers,"
        f" {r['meta']['worker_concurrency']} Celery processes, {r['meta']['concurrency']} clients,"
        f" {r['meta']['seconds']:g}s per scenario (D and A in"
        f" {r['meta'].get('turns_of_d_and_a', 1)} alternating turns),"
        f" E at {r['meta']['rows']:,} rows",
        "",
        f"{'scenario':<34}{'req/s':>9}{'p50 ms':>9}{'p95 ms':>9}{'p99 ms':>9}{'errors':>8}"
        "   CPU ms/request: web / worker / postgres / loadgen",
    ]

    def row(label: str, s: dict) -> None:
        cpu = s.get("cpu_ms_per_request", {})
        parts = ("web", "worker", "postgres (cowry_bench)", "load generator")
        lines.append(
            f"{label:<34}{s['throughput_rps']:>9}{s['p50_ms']!s:>9}{s['p95_ms']!s:>9}"
            f"{s['p99_ms']!s:>9}{s['errors']:>8}   "
            + " / ".join(f"{cpu.get(p, 0):.1f}" for p in parts)
        )

    row("A  create (quote + payin)", r["A"])
    row("B  read GET /payins/{id}", r["B"])
    row("C  create, webhook awaited", r["C"])
    row("D  floor (auth + 1 INSERT)", r["D"])
    row(f"E  A at {r['meta']['rows']:,} rows", r["E"]["A"])
    row(f"E  B at {r['meta']['rows']:,} rows", r["E"]["B"])
    e2e = r["C"]["e2e"]
    lines += [
        "",
        f"A flows (quote+payin)/s: {r['A']['flows_per_s']}   "
        f"A/D {round(r['A']['throughput_rps'] / r['D']['throughput_rps'], 3)}   "
        f"B/D {round(r['B']['throughput_rps'] / r['D']['throughput_rps'], 3)}",
        f"C POST /payins -> payin.completed webhook: p50 {e2e['p50_ms']} ms, p95 {e2e['p95_ms']}"
        f" ms, p99 {e2e['p99_ms']} ms; {e2e['webhooks_received']}/{e2e['payins']} received;"
        f" {e2e['deliveries_per_s_during_load']}/s during load",
        f"C webhook burst: {r['C']['burst']['received']} deliveries in"
        f" {r['C']['burst']['seconds']}s = {r['C']['burst']['per_s']}/s",
        f"E expire_quotes ({r['E']['expire_quotes']['output'].get('expired')} due):"
        f" {r['E']['expire_quotes']['seconds']} s; bulk load {r['E']['load']['seconds']} s",
        "",
        "peak RSS (VmHWM) MiB: " + rss_line(r["peak_rss_kib"]),
        "",
        f"{'target':<26}{'wanted':>12}{'value':>10}  verdict",
    ]
    for name, v in r["verdicts"].items():
        lines.append(f"{name:<26}{v['target']:>12}{v['value']!s:>10}  {v['verdict']}")
    return "\n".join(lines)


def partial_run(stack, merchant, customer_id, results: dict, receiver_url: str) -> int:
    """D, A and B always; C and P (a py-spy profile of A) when asked; no verdicts and no
    results.json."""
    if "C" in SCENARIOS:
        results["C"] = scenario_c(stack, merchant, customer_id, receiver_url)
        results["C"]["drain_seconds"] = drain()
        results["C"]["burst"] = delivery_burst(stack, receiver_url, n=max(500, int(SECONDS * 100)))
    if "P" in SCENARIOS:  # py-spy on A: the top functions of web and worker
        results["profile"] = {"A": profile(stack, merchant, customer_id, "A", seconds=SECONDS)}
        for group, found in results["profile"]["A"].items():
            print(f"\n{group}: {found.get('samples')} samples")
            for row in found.get("top_inclusive", [])[:25]:
                print(f"  {row['share']:>6.1%}  {row['function']}")
    for key in ("A", "B", "C", "D"):
        if key in results:
            results[key] = strip(results[key])
    (OUT / "partial.json").write_text(json.dumps(results, indent=2, default=str))
    floor_rps = results["D"]["throughput_rps"]
    a_ratio = results["A"]["throughput_rps"] / floor_rps
    print(f"\nA/D {a_ratio:.3f}  B/D {results['B']['throughput_rps'] / floor_rps:.3f}")
    for key in ("D", "A", "B", "C"):
        if key in results:
            r = results[key]
            print(
                f"{key}: {r['throughput_rps']} req/s p50 {r['p50_ms']} p99 {r['p99_ms']}"
                f" errors {r['errors']} cpu ms/req {r['cpu_ms_per_request']}"
            )
    if "C" in results:
        print(f"C e2e: {results['C']['e2e']}; burst: {results['C']['burst']}")
    print(
        f"A drain after the run: {results['A']['drain_seconds']} s; details in {OUT}/partial.json"
    )
    return 0


def start(stack: Stack) -> tuple[dict, str, subprocess.Popen, str]:
    """A fresh cowry_bench database migrated by the stack's app, the seeded merchant, the
    webhook receiver, web and worker up, one customer: (merchant, customer id, receiver
    process, receiver URL); the caller stops the receiver."""
    log(f"recreating database {BENCH_DB}, {REDIS_CACHE_URL} and {REDIS_BROKER_URL}")
    log(f"logs in {stack.out}")
    stack.recreate_database()
    stack.manage("migrate", "--no-input")
    stack.create_floor_table()
    receiver_port = free_port()
    receiver_url = f"http://127.0.0.1:{receiver_port}"
    merchant = seed_merchant(stack, receiver_url=f"{receiver_url}/hook")
    receiver = subprocess.Popen(
        [PY, "bench/receiver.py", str(receiver_port), "--secret", merchant["signing_secret"]],
        cwd=ROOT,
        stdout=open(stack.out / "receiver.log", "ab"),  # noqa: SIM115
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    stack.extra_pids["receiver"] = receiver.pid
    stack.start_web()
    if WITH_WORKER:
        stack.start_worker(concurrency=WORKER_CONCURRENCY)
    stack.wait_healthy()
    if WITH_WORKER:
        stack.wait_worker_ready()
    customer = json.loads(
        stack.shell(
            "import json\n"
            "from customers.models import Customer\n"
            f"c = Customer.objects.create(merchant_id={merchant['merchant_id']!r},"
            " first_name='Awa', last_name='Diallo', phone='+221770001234')\n"
            "print(json.dumps({'id': str(c.id)}))\n"
        ).splitlines()[-1]
    )
    return merchant, customer["id"], receiver, receiver_url


def main() -> int:
    install_signal_handlers()
    stack = Stack()
    receiver = None
    results: dict = {
        "meta": {
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "cores": cores(),
            "web_workers": stack.web_workers,
            "worker_concurrency": WORKER_CONCURRENCY,
            "concurrency": CONCURRENCY,
            "seconds": SECONDS,
            "turns_of_d_and_a": TURNS,
            "rows": ROWS,
            "loadavg_at_start": os.getloadavg(),
            "note": "load generator, receiver, PostgreSQL and Redis share the same machine",
        }
    }
    try:
        merchant, customer_id, receiver, receiver_url = start(stack)
        results.update(in_turns(stack, merchant, customer_id, "DA"))
        a_ids = results["A"]["_created"]
        results["B"] = scenario(stack, merchant, customer_id, "B", ids=a_ids)
        if set(SCENARIOS) != set("ABCDE"):
            return partial_run(stack, merchant, customer_id, results, receiver_url)
        stack.sample_rss()
        results["C"] = scenario_c(stack, merchant, customer_id, receiver_url)
        results["C"]["drain_seconds"] = drain()
        results["C"]["burst"] = delivery_burst(stack, receiver_url, n=max(500, int(SECONDS * 100)))
        stack.wait_worker_ready()
        drain()
        stack.sample_rss()

        log(f"scenario E: bulk loading {ROWS:,} quotes + payins with COPY")
        template = a_ids[0]
        load = bulkload.load(dsn=PG_DSN, template_payin_id=template, rows=ROWS)
        sample = load.pop("payin_ids_sample")
        log(f"  loaded in {load['seconds']}s")
        results["E"] = {"load": load}
        results["E"]["A"] = scenario(stack, merchant, customer_id, "A")
        drain()
        mixed = sample + a_ids
        random.shuffle(mixed)
        results["E"]["B"] = scenario(stack, merchant, customer_id, "B", ids=mixed)
        results["E"]["expire_quotes"] = expire_quotes_timing(stack)
        stack.sample_rss()

        log("profiling A and B with py-spy (not part of the measured figures)")
        results["profile"] = {
            "A": profile(stack, merchant, customer_id, "A", seconds=min(10, SECONDS)),
            "B": profile(stack, merchant, customer_id, "B", ids=mixed, seconds=min(10, SECONDS)),
        }
        results["queries"] = query_counts(stack, merchant, customer_id)
        stack.sample_rss()
        results["peak_rss_kib"] = dict(stack.peak_kib)
        results["meta"]["loadavg_at_end"] = os.getloadavg()
        for key in ("A", "B", "C", "D"):
            results[key] = strip(results[key])
        for key in ("A", "B"):
            results["E"][key] = strip(results["E"][key])
        results["verdicts"] = verdicts(results)
        RESULTS.write_text(json.dumps(results, indent=2, default=str))
        print()
        print(table(results))
        print(f"\nwritten: {RESULTS}; profiles and logs in {OUT}")
        return 0
    finally:
        log("stopping the stack")
        stack.close()
        if receiver is not None and receiver.poll() is None:
            receiver.terminate()
            receiver.wait(timeout=10)


if __name__ == "__main__":
    sys.exit(main())
