# ruff: noqa: S603 - a developer harness: fixed argv it builds itself
"""`make bench-worker`: what the asynchronous side costs per payment, measured alone.

A producer process (its own CPU and its PostgreSQL backend left out) commits payins at a fixed
rate through the services, as POST /payins would; the Celery worker submits them to the
simulated provider (answering at once), applies the answers and delivers the webhooks to a
local receiver. Reported per payment: CPU of the worker (its main process and its pool), of
PostgreSQL, of Redis and of the receiver, and the Celery tasks run. A figure to compare the
worker's changes by, steadier than scenario A, where everything shares the cores. A two-second
warm-up comes first (drained, then analyzed where autovacuum is off) and is not counted.

    WORKER_RATE=75 WORKER_SECONDS=20 make bench-worker

Environment: `WORKER_RATE` (payins per second, 75: about scenario A's rate here),
`WORKER_SECONDS` (20), `BENCH_WORKER_CONCURRENCY` (cores). Writes
`var/bench/worker-cost.json`."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import redis

from bench.stack import (
    OUT,
    PY,
    REDIS_BROKER_URL,
    ROOT,
    WORKER_CONCURRENCY,
    Stack,
    _children,
    _cpu_ticks,
    free_port,
    install_signal_handlers,
    log,
    pg_analyze_unless_autovacuum,
    pg_count,
    seed_merchant,
)

RATE = float(os.environ.get("WORKER_RATE", "75"))
SECONDS = float(os.environ.get("WORKER_SECONDS", "20"))
WARMUP = 2.0  # seconds of payins before the measured run

# Runs in `manage.py shell`: commit payins at RATE for SECONDS, then print what it used.
PRODUCER = """
import json, resource, time
from decimal import Decimal
from django.db import connection, transaction
from django.utils import timezone
from customers.models import Customer
from merchants.models import Merchant
from payments.services.payins import payin_create
from quotes import services as quotes

merchant = Merchant.objects.get(id={merchant_id!r})
customer = Customer.objects.create(
    merchant=merchant, first_name="Awa", last_name="Diallo", phone="+221770001234"
)
with connection.cursor() as cursor:
    cursor.execute("SELECT pg_backend_pid()")
    backend = cursor.fetchone()[0]

def backend_ms():
    fields = open(f"/proc/{{backend}}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / {tick}

def own_ms():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return (usage.ru_utime + usage.ru_stime) * 1000

def payin():
    with transaction.atomic():
        quote = quotes.quote_create_collection(
            merchant=merchant, flow_type="payin", customer_id=customer.id, country_code="SN",
            operator_code="SN_ORANGE_MOMO", rail_type="mobile_money",
            send_amount=Decimal("10000"), send_currency="XOF", now=timezone.now(),
        )
    with transaction.atomic():
        payin_create(
            merchant=merchant, quote_id=quote.id, customer_id=customer.id,
            source={{"phone": "+221770001234"}}, now=timezone.now(),
        )

backend_before, own_before = backend_ms(), own_ms()
started, made = time.monotonic(), 0
while time.monotonic() - started < {seconds}:
    payin()
    made += 1
    time.sleep(max(0.0, started + made / {rate} - time.monotonic()))
print(json.dumps({{"payins": made, "backend_ms": backend_ms() - backend_before,
                  "backend_pid": backend, "producer_ms": own_ms() - own_before}}))
"""


def _wait_gone(pid: int, timeout: float = 10) -> None:
    """Until process `pid` has exited (a backend outlives its client's exit by a moment)."""
    deadline = time.monotonic() + timeout
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)


def _open_work() -> int:
    return pg_count(
        "SELECT count(*) FROM payments_payin WHERE status NOT IN ('completed', 'failed')"
    ) + pg_count("SELECT count(*) FROM webhooks_delivery WHERE status IN ('pending', 'delivering')")


def _wait_drained(*, deadline: float) -> int:
    """Wait until no payment or delivery is open, or the deadline; returns how many are."""
    while _open_work() and time.monotonic() < deadline:
        time.sleep(0.2)
    return _open_work()


def main() -> int:
    install_signal_handlers()
    stack = Stack()
    receiver = None
    tick = os.sysconf("SC_CLK_TCK")
    try:
        log(f"worker cost: {RATE:g} payins/s for {SECONDS:g}s, {WORKER_CONCURRENCY} processes")
        stack.recreate_database()
        stack.manage("migrate", "--no-input")
        port = free_port()
        merchant = seed_merchant(stack, receiver_url=f"http://127.0.0.1:{port}/hook")
        receiver = subprocess.Popen(
            [PY, "bench/receiver.py", str(port), "--secret", merchant["signing_secret"]],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        stack.extra_pids["receiver"] = receiver.pid
        stack.start_worker(
            concurrency=WORKER_CONCURRENCY, loglevel="INFO"
        )  # INFO: tasks are counted
        stack.wait_worker_ready()
        redis_server = redis.Redis.from_url(REDIS_BROKER_URL)

        def redis_ms() -> float:  # the whole server's: cache, rate limits, broker
            cpu = redis_server.info("cpu")
            return (cpu["used_cpu_sys"] + cpu["used_cpu_user"]) * 1000

        # a short run first, drained, then the statistics autovacuum would have by now (off on
        # this box): the measured run is planned as a production database's would be
        stack.shell(
            PRODUCER.format(
                merchant_id=merchant["merchant_id"], rate=RATE, seconds=WARMUP, tick=tick
            )
        )
        _wait_drained(deadline=time.monotonic() + 60)
        pg_analyze_unless_autovacuum()
        worker = stack.procs["worker"].pid
        processes = [worker, *_children(worker)]
        before, redis_before = stack.cpu_ticks(), redis_ms()
        log_start = (OUT / "worker.log").stat().st_size  # the warm-up's tasks are not counted
        per_process = {pid: _cpu_ticks(pid) for pid in processes}
        produced = json.loads(
            stack.shell(
                PRODUCER.format(
                    merchant_id=merchant["merchant_id"], rate=RATE, seconds=SECONDS, tick=tick
                )
            )
            .strip()
            .splitlines()[-1]
        )
        left = _wait_drained(deadline=time.monotonic() + 120)
        _wait_gone(produced["backend_pid"])  # the producer's backend is then in neither reading
        after, redis_after = stack.cpu_ticks(), redis_ms()

        payins = produced["payins"]

        def per_payin(ms: float) -> float:
            return round(ms / payins, 2)

        def spent(part: str) -> float:
            return (after.get(part, 0) - before.get(part, 0)) * 1000 / tick

        tasks = Counter(
            match.group(1)
            for line in (OUT / "worker.log").read_bytes()[log_start:].decode().splitlines()
            if "succeeded in" in line and (match := re.search(r"Task (\S+)\[", line))
        )
        result = {
            "rate": RATE,
            "seconds": SECONDS,
            "payins": payins,
            "left_open": left,
            "cpu_ms_per_payin": {
                "worker": per_payin(spent("worker")),
                "worker main process": per_payin(
                    (_cpu_ticks(worker) - per_process[worker]) * 1000 / tick
                ),
                "postgres": per_payin(spent("postgres (cowry_bench)")),
                "redis": per_payin(redis_after - redis_before),
                "receiver": per_payin(spent("receiver")),
            },
            "tasks_per_payin": {name: round(n / payins, 3) for name, n in tasks.items()},
        }
        cpu = result["cpu_ms_per_payin"]
        result["cpu_ms_per_payin"]["total"] = round(
            cpu["worker"] + cpu["postgres"] + cpu["redis"] + cpu["receiver"], 2
        )
        (OUT / "worker-cost.json").write_text(json.dumps(result, indent=2))
        print(json.dumps(result, indent=2))
        return 1 if left else 0
    finally:
        stack.close()
        if receiver is not None and receiver.poll() is None:
            receiver.terminate()
            receiver.wait(timeout=10)


if __name__ == "__main__":
    sys.exit(main())
