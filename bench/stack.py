# ruff: noqa: S603, S310 - a developer harness: fixed argv and loopback URLs it builds itself
"""The service stack of `make bench` and `make soak`, started the way production starts it:
gunicorn (sync workers, 2 x cores + 1), a Celery worker on every queue, optionally beat,
PostgreSQL database `cowry_bench` (dropped and recreated each run) and Redis DBs 12 (cache,
rate limits) and 13 (broker); BENCH_DB_NAME, BENCH_REDIS_CACHE_DB and BENCH_REDIS_BROKER_DB
override them, BENCH_OUT the logs' directory (var/bench). Every process runs in its own process
group and is stopped by Stack.close(), which the harnesses call from `finally` and on
SIGINT/SIGTERM."""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BIN = ROOT / ".venv" / "bin"
PY = str(BIN / "python")
# Overridable so a second run (a soak beside a bench) shares no database, Redis DB or logs.
OUT = Path(os.environ.get("BENCH_OUT") or ROOT / "var" / "bench")

BENCH_DB = os.environ.get("BENCH_DB_NAME", "cowry_bench")  # the only database it ever drops
PG_ADMIN_DSN = os.environ.get("BENCH_PG_ADMIN_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")
DATABASE_URL = f"postgres://postgres@127.0.0.1:5432/{BENCH_DB}"
PG_DSN = f"postgresql://postgres@127.0.0.1:5432/{BENCH_DB}"
REDIS_CACHE_URL = f"redis://127.0.0.1:6379/{int(os.environ.get('BENCH_REDIS_CACHE_DB', '12'))}"
REDIS_BROKER_URL = f"redis://127.0.0.1:6379/{int(os.environ.get('BENCH_REDIS_BROKER_DB', '13'))}"


def pg_count(sql: str) -> int:
    """The count a `SELECT count(*)` over the bench database returns."""
    import psycopg

    with psycopg.connect(PG_DSN) as conn:
        return conn.execute(sql).fetchone()[0]


def pg_analyze_unless_autovacuum() -> bool:
    """ANALYZE the bench database when the server's autovacuum is off (as it is on the CI box),
    standing in for the analyze autovacuum makes of a production database that is filling up:
    without statistics the planner reads a fresh table's partial indexes badly (the
    submitter's claim took a bitmap scan over every open payin instead of the ordered scan of
    the waiting ones). Returns whether it analyzed."""
    import psycopg

    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        if conn.execute("SHOW autovacuum").fetchone()[0] == "on":
            return False
        conn.execute("ANALYZE")
    return True


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cores() -> int:
    return len(os.sched_getaffinity(0))


# Celery processes for the bench's worker: one per core, as the Procfile runs it
# (WORKER_CONCURRENCY); more only adds processes competing for the same cores with the web.
WORKER_CONCURRENCY = int(os.environ.get("BENCH_WORKER_CONCURRENCY", str(cores())))


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def _children(pid: int) -> list[int]:
    kids: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as fh:
                kids += [int(x) for x in fh.read().split()]
    except OSError:
        pass
    return kids


def _status(pid: int) -> dict[str, int]:
    """VmHWM (peak RSS) and VmRSS of one process, in KiB."""
    out: dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith(("VmHWM:", "VmRSS:")):
                    key, value = line.split(":", 1)
                    out[key] = int(value.split()[0])
    except OSError:
        pass
    return out


def _cpu_ticks(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])  # utime + stime
    except (OSError, IndexError, ValueError):
        return 0


def _pg_backends(database: str) -> list[int]:
    """PostgreSQL backend processes serving `database` (their title names it)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                title = fh.read().decode(errors="replace")
        except OSError:
            continue
        if title.startswith("postgres:") and f" {database} " in title:
            pids.append(int(entry))
    return pids


class Stack:
    def __init__(
        self, *, extra_env: dict[str, str] | None = None, app_root: Path = ROOT, out: Path = OUT
    ) -> None:
        """`app_root`: the checkout whose app runs (`make bench` with BENCH_BASELINE: the
        baseline's worktree), driven by this tree's harness; its logs go to `out`."""
        self.app_root = app_root
        self.out = out
        out.mkdir(parents=True, exist_ok=True)
        for old_log in out.glob("*.log"):  # each run's logs start empty
            old_log.unlink()
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.web_workers = int(os.environ.get("BENCH_WEB_WORKERS", 2 * cores() + 1))
        self.procs: dict[str, subprocess.Popen] = {}
        self.peak_kib: dict[str, int] = {}
        self.extra_pids: dict[str, int] = {}  # label -> pid, e.g. the webhook receiver
        self._pg_ticks = 0  # the database's backends' CPU so far (see cpu_ticks)
        self._pg_seen: dict[int, int] = {}  # backend pid -> its ticks when last looked at
        self.env = {
            **os.environ,
            "DATABASE_URL": DATABASE_URL,
            "REDIS_URL": REDIS_CACHE_URL,
            "CELERY_BROKER_URL": REDIS_BROKER_URL,
            "DEBUG": "false",
            "SECRET_KEY": secrets.token_urlsafe(50),
            "ALLOWED_HOSTS": "127.0.0.1,localhost",
            "BENCH_FLOOR_ENABLED": "true",
            "PROVIDER_SIMULATION_DELAY_SECONDS": "0",
            "KYC_REVIEW_DELAY_SECONDS": "0",
            "WEBHOOK_ALLOW_HTTP": "true",
            "ALLOW_PRIVATE_NETWORK_URLS": "true",
            "WEBHOOK_TIMEOUT_SECONDS": "5",
            "RATE_LIMIT_PER_MINUTE": "10000000",
            "LOG_LEVEL": "WARNING",
            "CELERY_TASK_ALWAYS_EAGER": "false",
            "PYTHONUNBUFFERED": "1",
            # The app's packages from app_root first; this tree's `bench` (the floor endpoint)
            # where app_root has none.
            "PYTHONPATH": os.pathsep.join(dict.fromkeys([str(app_root), str(ROOT)])),
            **(extra_env or {}),
        }

    # --- database and redis ----------------------------------------------------------------
    def recreate_database(self) -> None:
        import psycopg

        with psycopg.connect(PG_ADMIN_DSN, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{BENCH_DB}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{BENCH_DB}"')
        import redis

        for url in (REDIS_CACHE_URL, REDIS_BROKER_URL):
            redis.Redis.from_url(url).flushdb()

    def manage(self, *args: str, check: bool = True, env: dict[str, str] | None = None) -> Any:
        """Run a manage.py command; parse its --json output when asked for."""
        proc = subprocess.run(
            [PY, "manage.py", *args],
            cwd=self.app_root,
            env={**self.env, **(env or {})},
            capture_output=True,
            text=True,
        )
        if check and proc.returncode != 0:
            raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}")
        if "--json" in args:
            return json.loads(proc.stdout.strip().splitlines()[-1])
        return proc

    def shell(self, code: str) -> str:
        proc = subprocess.run(
            [PY, "manage.py", "shell", "-c", code],
            cwd=self.app_root,
            env=self.env,
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"manage.py shell failed:\n{proc.stdout}\n{proc.stderr}")
        return proc.stdout

    def create_floor_table(self) -> None:
        self.shell(
            "from django.db import connection\n"
            "from bench.floor import FLOOR_TABLE_SQL\n"
            "connection.cursor().execute(FLOOR_TABLE_SQL)\n"
        )

    # --- processes -------------------------------------------------------------------------
    def _spawn(self, name: str, argv: list[str]) -> subprocess.Popen:
        logfile = open(self.out / f"{name}.log", "ab")  # noqa: SIM115 - lives as long as the process
        proc = subprocess.Popen(
            argv,
            cwd=self.app_root,
            env=self.env,
            stdout=logfile,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.procs[name] = proc
        return proc

    def start_web(self) -> None:
        self._spawn(
            "web",
            [
                str(BIN / "gunicorn"),
                "config.wsgi:application",
                "--bind",
                f"127.0.0.1:{self.port}",
                "--workers",
                str(self.web_workers),
                "--worker-class",
                "config.gunicorn_worker.JsonErrorSyncWorker",
                "--no-control-socket",
                "--backlog",
                "2048",
                "--timeout",
                "60",
            ],
        )

    def start_worker(
        self, *, concurrency: int = 4, name: str = "worker", loglevel: str = "WARNING"
    ) -> None:
        self._spawn(
            name,
            [
                str(BIN / "celery"),
                "-A",
                "config",
                "worker",
                f"--loglevel={loglevel}",
                "--concurrency",
                str(concurrency),
                "-Q",
                "default,provider,webhooks,kyc",
                "--without-gossip",
                "--without-mingle",
                "-n",
                f"bench-{name}@%h",
            ],
        )

    def start_beat(self) -> None:
        self._spawn(
            "beat",
            [
                str(BIN / "celery"),
                "-A",
                "config",
                "beat",
                "--loglevel=WARNING",
                "--schedule",
                str(self.out / "celerybeat-schedule"),
            ],
        )

    def wait_healthy(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    raise RuntimeError(
                        f"{name} exited with {proc.returncode}; see {self.out}/{name}.log"
                    )
            # /health/live; a baseline from before it has only /health
            for path in ("/health/live", "/health"):
                try:
                    with urllib.request.urlopen(f"{self.base_url}{path}", timeout=2) as resp:
                        if resp.status == 200:
                            return
                except OSError:
                    continue
            time.sleep(0.3)
        raise RuntimeError(f"the service did not become healthy; see {self.out}/web.log")

    def wait_worker_ready(self, name: str = "worker", timeout: float = 60) -> None:
        """Poll `celery inspect ping` until this worker answers."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            proc = subprocess.run(
                [str(BIN / "celery"), "-A", "config", "inspect", "ping", "-t", "2"],
                cwd=self.app_root,
                env=self.env,
                capture_output=True,
                text=True,
            )
            if f"bench-{name}@" in proc.stdout:
                return
            time.sleep(0.5)
        raise RuntimeError(f"the Celery worker did not answer ping; see {self.out}/{name}.log")

    def sample_rss(self) -> dict[str, dict[str, int]]:
        """Peak RSS (VmHWM, KiB) of every process of the stack: masters and their children."""
        report: dict[str, dict[str, int]] = {}
        for name, proc in self.procs.items():
            if proc.poll() is not None:
                continue
            master = proc.pid
            report[f"{name} master"] = _status(master)
            for i, kid in enumerate(sorted(_children(master))):
                report[f"{name} child {i + 1} (pid {kid})"] = _status(kid)
        for label, st in report.items():
            if "VmHWM" in st:
                self.peak_kib[label] = max(self.peak_kib.get(label, 0), st["VmHWM"])
        return report

    def cpu_ticks(self) -> dict[str, int]:
        """CPU ticks used so far by each part of the stack (and this process, the load
        generator); the difference over a scenario says where its CPU went. PostgreSQL
        backends are counted while they live (connections are persistent: CONN_MAX_AGE): what
        one uses after the last look before it exits is not seen."""
        out: dict[str, int] = {}
        for name, proc in self.procs.items():
            if proc.poll() is None:
                pids = [proc.pid, *_children(proc.pid)]
                out[name] = sum(_cpu_ticks(p) for p in pids)
        # Added up per backend since it was last looked at, so a backend that exited in between
        # (a harness's own short connection) takes nothing away from the count; the label stays
        # as results.json has always keyed it, whatever the database.
        seen = {pid: _cpu_ticks(pid) for pid in _pg_backends(BENCH_DB)}
        self._pg_ticks += sum(ticks - self._pg_seen.get(pid, 0) for pid, ticks in seen.items())
        self._pg_seen = seen
        out["postgres (cowry_bench)"] = self._pg_ticks
        out["load generator"] = _cpu_ticks(os.getpid())
        for label, pid in self.extra_pids.items():
            out[label] = _cpu_ticks(pid)
        return out

    def web_worker_pids(self) -> list[int]:
        proc = self.procs.get("web")
        return sorted(_children(proc.pid)) if proc else []

    def stop(self, name: str, timeout: float = 15) -> None:
        proc = self.procs.pop(name, None)
        if proc is None or proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)
        except ProcessLookupError:
            pass

    def close(self) -> None:
        for name in list(self.procs):
            self.stop(name)


def install_signal_handlers() -> None:
    """SIGTERM/SIGINT/SIGHUP unwind through `finally`, which stops every process."""

    def _raise(signum, _frame):
        raise SystemExit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _raise)


def seed_merchant(stack: Stack, *, receiver_url: str, name: str = "Bench Merchant") -> dict:
    """create_merchant --all-operators --with-key, a webhook to the local receiver, a float."""
    merchant = stack.manage("create_merchant", name, "--all-operators", "--with-key", "--json")
    hook = stack.manage("set_webhook", merchant["merchant_id"], receiver_url, "--json")
    for currency in ("XOF", "XAF"):
        stack.manage(
            "credit_wallet",
            merchant["merchant_id"],
            currency,
            "1000000000",
            "--reason",
            "bench float",
            "--json",
        )
    return {**merchant, "signing_secret": hook["signing_secret"]}


if __name__ == "__main__":  # pragma: no cover - manual check: python bench/stack.py
    print(json.dumps({"cores": cores(), "python": sys.version}))
