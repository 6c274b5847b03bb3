# ruff: noqa: S603, S310 - a developer harness: fixed argv and loopback URLs it builds itself
"""`make soak`: SOAK_SECONDS (default 600) of mixed traffic against the production-like stack
(gunicorn, Celery worker, beat) with a flaky webhook receiver (~30% answered 500), some
provider declines (phones ending 000), refunds (bench/soak_refunds.py) and operator
predictions (bench/soak_predictions.py), then drain and check:

- zero 5xx answers;
- `check_ledger` clean;
- every terminal payin/payout/refund (and transfer, when the transfers API exists) has its
  terminal event, and every event of a terminal resource has been delivered (2xx from the
  receiver);
- no payin refunded beyond its amount, refunds and predictions answered as expected.

Webhook retries run on WEBHOOK_RETRY_SCHEDULE=1,1,1,1,1,1 so they finish within the drain; the
drain also runs `manage.py deliver_webhooks` itself. SOAK_CONCURRENCY (default 8) clients."""

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

from bench import loadgen, recorder, soak_predictions, soak_refunds
from bench.stack import (
    BENCH_DB,
    OUT,
    PG_DSN,
    PY,
    ROOT,
    Stack,
    free_port,
    install_signal_handlers,
    log,
    seed_merchant,
)

SECONDS = float(os.environ.get("SOAK_SECONDS", "600"))
CONCURRENCY = int(os.environ.get("SOAK_CONCURRENCY", "8"))
FAIL_RATE = float(os.environ.get("SOAK_WEBHOOK_FAIL_RATE", "0.3"))
DECLINE_SHARE = 0.15
PAYS_IN_ONLY_SHARE = 0.1  # payins from a payer whose refunds the sandbox declines

OK_PHONE = "+221770001234"
DECLINED_PHONE = "+221770001000"


def q(sql: str, params: list | None = None) -> list[tuple]:
    import psycopg

    with psycopg.connect(PG_DSN) as conn:
        return conn.execute(sql, params or []).fetchall()


def table_exists(name: str) -> bool:
    return bool(q("SELECT to_regclass(%s) IS NOT NULL", [name])[0][0])


class Traffic:
    def __init__(self, api: loadgen.Api, paths: set[str], receiver_url: str) -> None:
        self.api = api
        self.rec = recorder.Recorder()
        self.paths = paths
        self.receiver_url = receiver_url
        self.flows: Counter[str] = Counter()
        self.customers: list[dict] = []
        self.created: dict[str, list[str]] = {"payin": [], "payout": [], "transfer": []}
        self.replays_ok = 0
        self.replays_bad: list[str] = []
        self.refunds = soak_refunds.Refunds(api, self.rec)
        self.predictions = soak_predictions.Predictions(api, self.rec)

    def phone(self) -> str:
        return DECLINED_PHONE if random.random() < DECLINE_SHARE else OK_PHONE

    async def customer(self) -> dict | None:
        body = {
            "first_name": "Awa",
            "last_name": "Diallo",
            "phone": OK_PHONE,
            "country_code": "SN",
            "external_ref": f"soak-{random.getrandbits(64):x}",
            "address_line1": "1 Rue Carnot",
            "city": "Dakar",
            "occupation": "trader",
            "source_of_funds": "salary",
        }
        status, data = await self.api.call(self.rec, "POST /customers", "POST", "/customers", body)
        if status == 201:
            self.customers.append(data)
            await self.api.call(self.rec, "GET /customers/{id}", "GET", f"/customers/{data['id']}")
            return data
        return None

    def some_customer(self) -> dict | None:
        return random.choice(self.customers) if self.customers else None

    async def quote(self, flow: str, customer_id: str) -> dict | None:
        status, data = await self.api.call(
            self.rec,
            f"POST /quotes/{flow}",
            "POST",
            f"/quotes/{flow}",
            {**loadgen.PAYIN_QUOTE, "customer_id": customer_id},
        )
        return data if status == 201 else None

    async def payin(self) -> None:
        c = self.some_customer() or await self.customer()
        quote = c and await self.quote("payin", c["id"])
        if not quote:
            return
        pays_in_only = random.random() < PAYS_IN_ONLY_SHARE
        phone = soak_refunds.PAYS_IN_ONLY_PHONE if pays_in_only else self.phone()
        body = {"quote_id": quote["id"], "customer_id": c["id"], "source": {"phone": phone}}
        status, data = await self.api.call(self.rec, "POST /payins", "POST", "/payins", body)
        if status == 201:
            self.created["payin"].append(data["id"])
            self.refunds.add_payin(data, pays_in_only=pays_in_only)
            await self.api.call(self.rec, "GET /payins/{id}", "GET", f"/payins/{data['id']}")

    async def payout(self) -> None:
        c = self.some_customer() or await self.customer()
        quote = c and await self.quote("payout", c["id"])
        if not quote:
            return
        body = {
            "quote_id": quote["id"],
            "customer_id": c["id"],
            "payment_reason_code": "SALARY",
            "recipient": {
                "recipient_type": "individual",
                "first_name": "Moussa",
                "last_name": "Ndiaye",
                "phone": self.phone(),
            },
        }
        status, data = await self.api.call(self.rec, "POST /payouts", "POST", "/payouts", body)
        if status == 201:
            self.created["payout"].append(data["id"])
            await self.api.call(self.rec, "GET /payouts/{id}", "GET", f"/payouts/{data['id']}")

    async def transfer(self) -> None:
        c = self.some_customer() or await self.customer()
        if not c:
            return
        status, quote = await self.api.call(
            self.rec,
            "POST /quotes/transfer",
            "POST",
            "/quotes/transfer",
            {
                "customer_id": c["id"],
                "corridor_code": "SN-SN-XOF-XOF",
                "payer_operator_code": "SN_ORANGE_MOMO",
                "recipient_operator_code": "SN_WAVE_MOMO",
                "payin_amount": "10000",
                "payin_currency": "XOF",
                "payout_currency": "XOF",
            },
        )
        if status != 201:
            return
        body = {
            "quote_id": quote["id"],
            "customer_id": c["id"],
            "payment_reason_code": "FAMILY",
            "payer": {
                "country_code": "SN",
                "rail_type": "mobile_money",
                "phone": self.phone(),
                "operator_code": "SN_ORANGE_MOMO",
            },
            "recipient": {
                "country_code": "SN",
                "rail_type": "mobile_money",
                "recipient_type": "individual",
                "phone": self.phone(),
                "operator_code": "SN_WAVE_MOMO",
                "first_name": "Moussa",
                "last_name": "Ndiaye",
            },
        }
        status, data = await self.api.call(self.rec, "POST /transfers", "POST", "/transfers", body)
        if status == 201:
            self.created["transfer"].append(data["id"])
            await self.api.call(self.rec, "GET /transfers/{id}", "GET", f"/transfers/{data['id']}")

    async def kyc(self) -> None:
        c = await self.customer()
        if not c:
            return
        await self.api.call(
            self.rec,
            "POST /customers/{id}/kyc",
            "POST",
            f"/customers/{c['id']}/kyc",
            {
                "documents": [
                    {
                        "document_type": "national_id",
                        "document_number": "SN123456",
                        "front_file_url": f"{self.receiver_url}/files/doc.png",
                    }
                ]
            },
        )
        await self.api.call(self.rec, "GET /customers/{id}/kyc", "GET", f"/customers/{c['id']}/kyc")

    async def replay(self) -> None:
        """The same Idempotency-Key twice: one customer, the second answer replayed."""
        key = f"soak-replay-{random.getrandbits(64):x}"
        body = {"first_name": "Replay", "last_name": "Twice"}
        headers = {**self.api.headers, "Idempotency-Key": key}
        bodies = []
        for _ in range(2):
            started = time.perf_counter()
            async with self.api.session.post(
                self.api.base_url + "/customers", json=body, headers=headers
            ) as resp:
                payload = await resp.json()
            if resp.status == 201:
                self.rec.ok("POST /customers (replay)", time.perf_counter() - started, 201)
            else:
                self.rec.error("POST /customers (replay)", f"HTTP {resp.status}", resp.status)
            bodies.append((resp.status, payload))
        (s1, b1), (s2, b2) = bodies
        if s1 == s2 == 201 and b1["id"] == b2["id"] and b2["_meta"]["idempotency_replayed"]:
            self.replays_ok += 1
        else:
            self.replays_bad.append(f"{s1} {s2}")

    async def refund(self) -> None:
        await self.refunds.refund()

    async def over_refund(self) -> None:
        await self.refunds.over_refund()

    async def predict(self) -> None:
        await self.predictions.predict()

    def weighted(self) -> list[tuple[str, int]]:
        flows = [("customer", 2), ("payin", 6), ("payout", 4), ("replay", 1)]
        if "/payins/{payin_id}/refunds" in self.paths:
            flows += [("refund", 3), ("over_refund", 1)]
        if "/operators/predict" in self.paths:
            flows.append(("predict", 2))
        if "/transfers" in self.paths:
            flows.append(("transfer", 3))
        if "/customers/{customer_id}/kyc" in self.paths:
            flows.append(("kyc", 1))
        return flows

    async def run(self, seconds: float) -> float:
        flows = self.weighted()
        names = [f for f, _ in flows]
        weights = [w for _, w in flows]

        async def op(_i: int) -> None:
            name = random.choices(names, weights)[0]
            self.flows[name] += 1
            await getattr(self, name)()

        return await loadgen.closed_loop(concurrency=CONCURRENCY, seconds=seconds, op=op)


def schema_paths(base_url: str) -> set[str]:
    with urllib.request.urlopen(f"{base_url}/schema?format=json", timeout=30) as resp:
        return set(json.loads(resp.read())["paths"])


async def _traffic(stack: Stack, merchant: dict, paths: set[str], receiver_url: str):
    async with loadgen.new_session(CONCURRENCY) as session:
        api = loadgen.Api(session, stack.base_url, merchant["api_key"], merchant["api_secret"])
        traffic = Traffic(api, paths, receiver_url)
        deadline = time.monotonic() + SECONDS
        elapsed = 0.0
        while time.monotonic() < deadline:  # in slices, to print progress
            slice_s = min(60.0, deadline - time.monotonic())
            elapsed += await traffic.run(slice_s)
            log(
                f"  {elapsed:.0f}s: {traffic.rec.requests} requests,"
                f" {sum(traffic.rec.errors.values())} unexpected answers,"
                f" statuses {dict(traffic.rec.statuses)}"
            )
        return traffic, elapsed


TERMINAL = {
    "payments_payin": ("payin", ("completed", "failed")),
    "payments_payout": ("payout", ("completed", "failed")),
    "transfers_transfer": ("transfer", ("completed", "failed")),
    "payments_refund": ("refund", ("completed", "failed")),
}


def open_counts() -> dict[str, int]:
    out = {}
    for table, (kind, terminal) in TERMINAL.items():
        if table_exists(table):
            out[kind] = q(
                f"SELECT count(*) FROM {table} WHERE status <> ALL(%s)",  # noqa: S608
                [list(terminal)],
            )[0][0]
    out["deliveries"] = q(
        "SELECT count(*) FROM webhooks_delivery WHERE status IN ('pending', 'delivering')"
    )[0][0]
    return out


def drain(stack: Stack, timeout: float = 300, stuck_after: float = 60) -> tuple[float, dict]:
    """Until nothing is in flight; gives up after `timeout`, or when nothing has moved for
    `stuck_after` seconds (a leg whose provider answer was lost waits for the 1 h sweep)."""
    start = time.monotonic()
    counts = open_counts()
    last_change, last = start, counts
    while time.monotonic() - start < timeout:
        counts = open_counts()
        if not any(counts.values()):
            break
        if counts != last:
            last_change, last = time.monotonic(), counts
        elif time.monotonic() - last_change > stuck_after:
            log(f"  nothing moved for {stuck_after:g}s; still open: {counts}")
            break
        if counts["deliveries"]:
            stack.manage("deliver_webhooks", "--limit", "1000", "--json")
        time.sleep(1)
    return round(time.monotonic() - start, 1), counts


def event_checks() -> dict:
    """Per terminal resource: its terminal event exists, and all its events were delivered."""
    report = {}
    for table, (kind, terminal) in TERMINAL.items():
        if not table_exists(table):
            continue
        rows = q(
            f"""
            SELECT r.id, r.status,
                   count(e.id) AS events,
                   count(e.id) FILTER (WHERE e.event_type = %s || '.' || r.status) AS terminal,
                   count(e.id) FILTER (WHERE NOT EXISTS (
                       SELECT 1 FROM webhooks_delivery d
                       WHERE d.event_id = e.id AND d.status = 'succeeded')) AS undelivered
            FROM {table} r LEFT JOIN webhooks_event e ON e.data_id = r.id
            WHERE r.status = ANY(%s)
            GROUP BY r.id, r.status
            """,  # noqa: S608
            [kind, list(terminal)],
        )
        by_status = Counter(r[1] for r in rows)
        report[kind] = {
            "terminal": len(rows),
            "by_status": dict(by_status),
            "events": sum(r[2] for r in rows),
            "missing_terminal_event": sum(1 for r in rows if r[3] == 0),
            "undelivered_events": sum(r[4] for r in rows),
        }
    return report


def start_receiver(port: int, secret: str) -> subprocess.Popen:
    """The flaky webhook receiver: checks signatures, answers 500 to some deliveries."""
    argv = [PY, "bench/receiver.py", str(port), "--secret", secret]
    argv += ["--fail-rate", str(FAIL_RATE), "--max-failures-per-id", "3"]
    return subprocess.Popen(
        argv,
        cwd=ROOT,
        stdout=open(OUT / "soak-receiver.log", "ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def ledger_check(stack: Stack) -> dict:
    """`check_ledger --json`'s report; ok is False when it failed or said nothing readable."""
    ledger = subprocess.run(
        [PY, "manage.py", "check_ledger", "--json"],
        cwd=ROOT,
        env=stack.env,
        capture_output=True,
        text=True,
    )
    try:
        report = json.loads(ledger.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"ok": False, "error": (ledger.stderr or ledger.stdout)[-500:]}
    return {**report, "ok": ledger.returncode == 0 and report.get("ok") is True}


def after_traffic(stack: Stack, traffic: Traffic, elapsed: float, receiver_url: str) -> dict:
    """Drain, then everything the checks read: the ledger, events, deliveries, refunds."""
    log("traffic stopped; draining payments and webhook deliveries")
    drain_seconds, still_open = drain(stack)
    with urllib.request.urlopen(f"{receiver_url}/arrivals", timeout=30) as resp:
        arrivals = json.loads(resp.read())
    answers = Counter(a[4] for a in arrivals["arrivals"])
    failed = q("SELECT count(*) FROM webhooks_delivery WHERE status = 'failed'")[0][0]
    stack.sample_rss()
    latencies = traffic.rec.all_latencies()
    return {
        "seconds": round(elapsed, 1),
        "concurrency": CONCURRENCY,
        "flows": dict(traffic.flows),
        "requests": traffic.rec.requests,
        "statuses": {str(k): v for k, v in sorted(traffic.rec.statuses.items())},
        "unexpected_answers": dict(traffic.rec.errors),
        "unexpected_samples": traffic.rec.error_samples,
        "p50_ms": recorder.percentile(latencies, 50),
        "p99_ms": recorder.percentile(latencies, 99),
        "created": {k: len(v) for k, v in traffic.created.items()},
        "drain_seconds": drain_seconds,
        "still_open": still_open,
        "ledger": ledger_check(stack),
        "events": event_checks(),
        "receiver_answers": {str(k): v for k, v in answers.items()},
        "bad_signatures": arrivals["bad"],
        "failed_deliveries": failed,
        "replays_ok": traffic.replays_ok,
        "replays_bad": traffic.replays_bad,
        "refunds": {**traffic.refunds.summary(), "db": soak_refunds.db_checks(q)},
        "predictions": traffic.predictions.summary(),
        "peak_rss_kib": stack.peak_kib,
    }


def checks(s: dict) -> dict[str, bool]:
    statuses = {int(k): v for k, v in s["statuses"].items()}
    events, refunds, refunds_db = s["events"], s["refunds"], s["refunds"]["db"]
    predictions = s["predictions"]["answers"]
    return {
        "zero 5xx": sum(v for k, v in statuses.items() if k >= 500) == 0,
        "no transport errors": statuses.get(0, 0) == 0,
        "check_ledger clean": s["ledger"]["ok"],
        "payments drained": not any(s["still_open"].values()),
        "every terminal payment and refund has its terminal event": all(
            v["missing_terminal_event"] == 0 for k, v in events.items() if k != "transfer"
        ),
        "every event of a terminal resource delivered": all(
            v["undelivered_events"] == 0 for v in events.values()
        ),
        "no delivery marked failed": s["failed_deliveries"] == 0,
        "signatures verified by the receiver": s["bad_signatures"] == 0,
        "idempotent replays": not s["replays_bad"],
        "no payin refunded beyond its amount": refunds_db["payins_over_refunded"] == 0,
        "refunds only of completed payins": refunds_db["refunds_of_payins_not_completed"] == 0,
        "refunds end as the sandbox says (998 declined)": (
            refunds_db["outcomes_not_the_sandboxs"] == 0
        ),
        "refunds and over-refund races answered as expected": refunds["unexpected_count"] == 0,
        "predictions answered 200/400 as expected": (
            s["predictions"]["unexpected_count"] == 0
            and all(key.endswith((" 200", " 400")) for key in predictions)
        ),
    }


def main() -> int:
    install_signal_handlers()
    stack = Stack(extra_env={"WEBHOOK_RETRY_SCHEDULE": "1,1,1,1,1,1"})
    receiver = None
    try:
        log(f"soak: {SECONDS:g}s, {CONCURRENCY} clients; database {BENCH_DB}; logs in {OUT}")
        stack.recreate_database()
        stack.manage("migrate", "--no-input")
        receiver_port = free_port()
        receiver_url = f"http://127.0.0.1:{receiver_port}"
        merchant = seed_merchant(stack, receiver_url=f"{receiver_url}/hook", name="Soak Merchant")
        receiver = start_receiver(receiver_port, merchant["signing_secret"])
        stack.start_web()
        stack.start_worker(concurrency=4)
        stack.start_beat()
        stack.wait_healthy()
        stack.wait_worker_ready()
        paths = schema_paths(stack.base_url)
        log("traffic: " + ", ".join(sorted(p for p in paths if not p.startswith("/bench"))))
        traffic, elapsed = asyncio.run(_traffic(stack, merchant, paths, receiver_url))
        summary = after_traffic(stack, traffic, elapsed, receiver_url)
        summary["checks"] = checks(summary)
        (OUT / "soak-results.json").write_text(json.dumps(summary, indent=2, default=str))
        print_summary(summary)
        return 0 if all(summary["checks"].values()) else 1
    finally:
        log("stopping the stack")
        stack.close()
        if receiver is not None and receiver.poll() is None:
            receiver.terminate()
            receiver.wait(timeout=10)


def print_summary(s: dict) -> None:
    ms = lambda v: "-" if v is None else f"{v * 1000:.0f} ms"  # noqa: E731
    print()
    print(f"Cowry soak — {s['seconds']:g}s, {s['concurrency']} clients")
    print(f"flows      {s['flows']}")
    print(
        f"requests   {s['requests']} (p50 {ms(s['p50_ms'])}, p99 {ms(s['p99_ms'])});"
        f" statuses {s['statuses']}"
    )
    if s["unexpected_answers"]:
        print(f"unexpected {s['unexpected_answers']}")
        for line in s["unexpected_samples"][:5]:
            print(f"           {line}")
    print(f"created    {s['created']}; drained in {s['drain_seconds']}s; open {s['still_open']}")
    for kind, v in s["events"].items():
        print(
            f"{kind:<10} {v['terminal']} terminal {v['by_status']}, {v['events']} events,"
            f" {v['missing_terminal_event']} without terminal event"
            # a transfer whose payout leg failed gets transfer.payout.failed: it may be relaunched
            + (" (payout failed, relaunchable; not checked)," if kind == "transfer" else ",")
            + f" {v['undelivered_events']} undelivered"
        )
    print(
        f"webhooks   receiver answered {s['receiver_answers']};"
        f" deliveries failed: {s['failed_deliveries']}"
    )
    refunds, db = s["refunds"], s["refunds"]["db"]
    print(
        f"refunds    {refunds['kinds']}; {refunds['created']} created"
        f" ({refunds['of_pays_in_only_payers']} to payers ending 998), by status"
        f" {db['by_status']}; races {refunds['races']}; payins over-refunded"
        f" {db['payins_over_refunded']}; unexpected {refunds['unexpected_count']}"
    )
    for line in refunds["unexpected"][:5]:
        print(f"           {line}")
    predictions = s["predictions"]
    print(f"predict    {predictions['answers']}; unexpected {predictions['unexpected_count']}")
    for line in predictions["unexpected"][:5]:
        print(f"           {line}")
    ledger = s["ledger"]
    print(
        f"ledger     ok={ledger.get('ok')} journals={ledger.get('journals')}"
        f" breaches={len(ledger.get('breaches', []))}"
    )
    print()
    for name, ok in s["checks"].items():
        print(f"  {'PASS' if ok else 'FAIL'}  {name}")


if __name__ == "__main__":
    sys.exit(main())
