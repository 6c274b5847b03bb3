"""`make run`'s pieces: the embedded PostgreSQL server (config.embedded_postgres) and the
Procfile's processes under honcho (bin/run-procfile), stopped by a SIGTERM as systemd or a
container stops them."""

import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
import psycopg
import pytest
import requests
from django.conf import settings

from config import embedded_postgres
from tests.worker import _database_url

ROOT = Path(__file__).resolve().parent.parent


def test_the_embedded_server_starts_in_a_fresh_directory_answers_and_stops():
    # Not pytest's tmp_path: under root the wheel opens the directories above the data to the
    # server's user, and pytest keeps its own base directory private.
    with tempfile.TemporaryDirectory() as directory:
        data = Path(directory) / "pg"
        with embedded_postgres.running(data, database="cowry_check") as url:
            with psycopg.connect(url) as connection:
                row = connection.execute("SELECT current_database(), 6 * 7").fetchone()
            assert (data / "postmaster.pid").exists()
        assert row == ("cowry_check", 42)
        assert (data / "PG_VERSION").exists()
        assert not (data / "postmaster.pid").exists()  # a clean shutdown removes it


@pytest.mark.skipif(os.geteuid() != 0, reason="the system user is made only under root")
def test_under_root_the_servers_user_is_made_even_when_path_lacks_sbin(monkeypatch):
    import pwd

    name = f"cowry_pg_check_{os.getpid()}"
    monkeypatch.setattr(embedded_postgres, "SYSTEM_USER", name)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # as `su` without `-` leaves it
    try:
        embedded_postgres.ensure_system_user()
        assert pwd.getpwnam(name).pw_shell in {"/usr/sbin/nologin", "/sbin/nologin", "/bin/false"}
    finally:
        subprocess.run(["/usr/sbin/userdel", name], check=False, capture_output=True)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.worker
@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "ctrl-c"])
def test_a_sigterm_to_make_runs_process_group_stops_web_worker_and_beat_within_10_s(
    django_db_setup, stop
):
    port = _free_port()
    env = {key: value for key, value in os.environ.items() if not key.startswith("DJANGO_")}
    env |= {
        "DATABASE_URL": _database_url(),
        "REDIS_URL": os.environ.get("REDIS_URL", ""),
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        "PORT": str(port),
        "WEB_CONCURRENCY": "1",
        "WORKER_CONCURRENCY": "1",
    }
    manager = subprocess.Popen(
        [sys.executable, "bin/run-procfile"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group, as `make run` has
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(manager.stdout), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 60
        while not (
            any("celery@" in line and " ready." in line for line in lines)
            and any("beat: Starting" in line for line in lines)
            and _answers(port)
        ):
            assert manager.poll() is None and time.monotonic() < deadline, "".join(lines)
            time.sleep(0.2)
        children = psutil.Process(manager.pid).children(recursive=True)
        assert len(children) >= 5  # web master and worker, worker and its pool, beat

        os.killpg(manager.pid, stop)
        started = time.monotonic()
        _, alive = psutil.wait_procs([psutil.Process(manager.pid), *children], timeout=10)
        took = time.monotonic() - started
    finally:
        if manager.poll() is None:
            for process in psutil.Process(manager.pid).children(recursive=True):
                process.kill()
            manager.kill()
        manager.wait(timeout=10)
        reader.join(timeout=5)
    log = "".join(lines)
    assert alive == [], log
    assert took < 10
    assert "sending SIGKILL" not in log, log  # each stopped by itself
    assert manager.returncode == 0, log  # asked to stop, and stopped: not an error


STEP_STOPPED = """
import runpy, signal, sys
run = runpy.run_path("bin/run")
signal.signal(signal.SIGTERM, run["_forward"])
child = "import time; print('ready', flush=True); time.sleep(30)"  # ends by the SIGTERM
print("step", run["_step"](sys.executable, "-c", child), flush=True)
"""


def test_make_run_counts_a_step_a_stop_signal_ended_as_a_clean_stop():
    runner = subprocess.Popen(
        [sys.executable, "-c", STEP_STOPPED], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    assert runner.stdout.readline().strip() == "ready"
    runner.send_signal(signal.SIGTERM)
    out, _ = runner.communicate(timeout=30)
    assert out.split() == ["step", "0"]


def _answers(port: int) -> bool:
    try:
        return requests.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200
    except requests.ConnectionError:
        return False
