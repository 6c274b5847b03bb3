# ruff: noqa: S603, S607 - a developer harness: fixed argv it builds itself
"""`make bench-cpu` (`BENCH_BASELINE=<commit>` to compare): the CPU and the SQL statements each
operation costs in-process, the steady figure a shared box allows where throughput is noise.

Each tree runs bench/cpu_probe.py in its own process on its own database (the baseline from a
temporary git worktree of the commit, with this venv), seeded as `make bench` seeds it, with
the webhook receiver over a real socket; this driver asks both, step by step, for one payment
at a time (quote, payin, read, the worker's submit and deliver, a refund, a payout), the two
trees in turns (which goes first alternates every round), and prints the medians per step.
A whole payment is quote + payin + submit + deliver. `BENCH_CPU_ROUNDS` (300) rounds after
`BENCH_CPU_WARMUP` (30); writes var/bench/cpu.json."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psycopg
import redis

from bench.stack import (
    OUT,
    PG_ADMIN_DSN,
    PY,
    REDIS_BROKER_URL,
    REDIS_CACHE_URL,
    ROOT,
    free_port,
    install_signal_handlers,
    log,
)

ROUNDS = int(os.environ.get("BENCH_CPU_ROUNDS", "300"))
WARMUP = int(os.environ.get("BENCH_CPU_WARMUP", "30"))
DB_NAME = os.environ.get("BENCH_CPU_DB", "cowry_bench_cpu")  # and <name>_baseline
STEPS = (
    "quote",
    "payin",
    "read",
    "submit",
    "deliver",
    "answer",
    "refund",
    "payout_quote",
    "payout",
)
LABELS = {
    "quote": "POST /quotes/payin",
    "payin": "POST /payins",
    "read": "GET /payins/{id}",
    "submit": "worker: submit + answer",
    "deliver": "worker: webhook delivery",
    "answer": "a pending payin's completion",
    "refund": "POST /payins/{id}/refunds",
    "payout_quote": "POST /quotes/payout",
    "payout": "POST /payouts",
}
PAYMENT = ("quote", "payin", "submit", "deliver")
WORKER = ("submit", "deliver")


class Probe:
    """One tree's probe process on its own freshly made database."""

    def __init__(self, app_root: Path, database: str, receiver_url: str) -> None:
        with psycopg.connect(PG_ADMIN_DSN, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{database}"')
        self.app_root = app_root
        self.env = {
            **os.environ,
            "DATABASE_URL": f"postgres://postgres@127.0.0.1:5432/{database}",
            "REDIS_URL": REDIS_CACHE_URL,
            "CELERY_BROKER_URL": REDIS_BROKER_URL,
            "DEBUG": "false",
            "SECRET_KEY": "bench-cpu-" + "x" * 50,
            "ALLOWED_HOSTS": "127.0.0.1,localhost,testserver",
            "PROVIDER_SIMULATION_DELAY_SECONDS": "0",
            "WEBHOOK_ALLOW_HTTP": "true",
            "ALLOW_PRIVATE_NETWORK_URLS": "true",
            "WEBHOOK_TIMEOUT_SECONDS": "5",
            "RATE_LIMIT_PER_MINUTE": "10000000",
            "LOG_LEVEL": "WARNING",
            "CELERY_TASK_ALWAYS_EAGER": "false",
            "PYTHONPATH": str(app_root),
        }
        self.manage("migrate", "--no-input")
        merchant = self.manage("create_merchant", "Bench", "--all-operators", "--with-key")
        self.manage("set_webhook", merchant["merchant_id"], receiver_url)
        for currency in ("XOF", "XAF"):
            self.manage("credit_wallet", merchant["merchant_id"], currency, "1000000000",
                        "--reason", "bench float")  # fmt: skip
        self.proc = subprocess.Popen(
            [PY, str(ROOT / "bench" / "cpu_probe.py"), merchant["api_key"], merchant["api_secret"]],
            cwd=app_root,
            env=self.env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def manage(self, *args: str) -> dict:
        proc = subprocess.run(
            [PY, "manage.py", *args, *(["--json"] if args[0] != "migrate" else [])],
            cwd=self.app_root,
            env=self.env,
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"manage.py {args[0]} failed:\n{proc.stdout}\n{proc.stderr}")
        lines = proc.stdout.strip().splitlines()
        return json.loads(lines[-1]) if args[0] != "migrate" else {}

    def step(self, name: str) -> dict:
        self.proc.stdin.write(name + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the probe in {self.app_root} exited")
        return json.loads(line)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=30)


def run(probes: dict[str, Probe]) -> dict[str, dict[str, dict]]:
    """Every step of ROUNDS payments on each probe, in turns; medians per tree and step."""
    samples = {tree: {step: [] for step in STEPS} for tree in probes}
    names = list(probes)
    for round_ in range(WARMUP + ROUNDS):
        order = names if round_ % 2 == 0 else names[::-1]
        for step in STEPS:
            for tree in order:
                result = probes[tree].step(step)
                if result["status"] >= 300:
                    raise RuntimeError(f"{tree} {step}: HTTP {result['status']}")
                if round_ >= WARMUP:
                    samples[tree][step].append(result)
        if round_ % 50 == 0:
            log(f"round {round_} of {WARMUP + ROUNDS}")
    out: dict[str, dict[str, dict]] = {}
    for tree, steps in samples.items():
        out[tree] = {
            step: {
                "cpu_ms": round(statistics.median(r["ms"] for r in rs), 3),
                "statements": statistics.median(r["statements"] for r in rs),
            }
            for step, rs in steps.items()
        }
        for label, parts in (("whole payment", PAYMENT), ("worker per payin", WORKER)):
            out[tree][label] = {
                "cpu_ms": round(sum(out[tree][p]["cpu_ms"] for p in parts), 3),
                "statements": sum(out[tree][p]["statements"] for p in parts),
            }
    return out


def table(results: dict[str, dict[str, dict]]) -> str:
    trees = list(results)
    rows = [*STEPS, "worker per payin", "whole payment"]
    head = "| operation | " + " | ".join(f"{t} CPU ms | {t} stmts" for t in trees)
    head += " | CPU new/old |" if len(trees) == 2 else " |"
    lines = [head, "|---" * (1 + 2 * len(trees) + (len(trees) == 2)) + "|"]
    for row in rows:
        cells = []
        for tree in trees:
            r = results[tree][row]
            cells += [f"{r['cpu_ms']:.2f}", f"{r['statements']:g}"]
        if len(trees) == 2:
            old, new = (results[t][row]["cpu_ms"] for t in trees)
            cells.append(f"{new / old:.2f}" if old else "")
        lines.append(f"| {LABELS.get(row, row)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> int:
    install_signal_handlers()
    for url in (REDIS_CACHE_URL, REDIS_BROKER_URL):
        redis.Redis.from_url(url).flushdb()
    port = free_port()
    receiver = subprocess.Popen(
        [PY, str(ROOT / "bench" / "receiver.py"), str(port)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    receiver_url = f"http://127.0.0.1:{port}/hook"
    baseline = os.environ.get("BENCH_BASELINE")
    probes: dict[str, Probe] = {}
    with tempfile.TemporaryDirectory(prefix="cowry-baseline-") as temporary:
        tree = Path(temporary) / "tree"
        try:
            time.sleep(1)  # the receiver's socket
            if baseline:
                subprocess.run(
                    ["git", "worktree", "add", "--detach", str(tree), baseline],
                    cwd=ROOT,
                    check=True,
                    capture_output=True,
                )
                log(f"baseline {baseline}: probe on {DB_NAME}_baseline")
                probes[baseline] = Probe(tree, f"{DB_NAME}_baseline", receiver_url)
            head = subprocess.run(
                ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
            ).stdout.strip()
            label = f"{head}+" if subprocess.run(
                ["git", "diff", "--quiet", "HEAD"], cwd=ROOT
            ).returncode else head  # fmt: skip
            log(f"this tree ({label}): probe on {DB_NAME}")
            probes[label] = Probe(ROOT, DB_NAME, receiver_url)
            log(f"{WARMUP} warm-up rounds, then {ROUNDS} measured, the trees in turns")
            results = run(probes)
        finally:
            for probe in probes.values():
                probe.close()
            receiver.terminate()
            receiver.wait(timeout=10)
            redis.Redis.from_url(REDIS_BROKER_URL).flushdb()  # the tasks nobody consumed
            if baseline:
                subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT)
    print(table(results))
    meta = {"rounds": ROUNDS, "warmup": WARMUP, "loadavg_1m": os.getloadavg()[0]}
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "cpu.json").write_text(json.dumps({"meta": meta, "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
