"""A real Celery worker process for end-to-end tests (marker `worker`).

    @pytest.mark.worker
    @pytest.mark.django_db(transaction=True)
    def test_something(celery_worker_process):
        ...  # tasks enqueued on commit now go through Redis to a separate worker process

The worker talks to the pytest test database and to CELERY_BROKER_URL; the simulated provider
answers at once (PROVIDER_SIMULATION_DELAY_SECONDS=0). Eager execution is switched off in this
process for the duration, so .delay() really publishes to the broker.
"""

import contextlib
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO
from urllib.parse import quote, urlencode

import pytest
from django.conf import settings

BASE_DIR = Path(settings.BASE_DIR)
QUEUES = "default,provider,webhooks,kyc"


def _database_url(**params: str) -> str:
    """The test database's URL for a process of its own, with these query parameters."""
    db = settings.DATABASES["default"]
    if "postgresql" not in db["ENGINE"]:
        raise RuntimeError("The worker tests need PostgreSQL (DATABASE_URL).")
    user = quote(db.get("USER") or "")
    password = quote(db.get("PASSWORD") or "")
    auth = f"{user}:{password}@" if password else (f"{user}@" if user else "")
    # the embedded server of `make test`: its socket directory, as ?host= in DATABASE_URL
    host = db.get("HOST") or db.get("OPTIONS", {}).get("host") or "127.0.0.1"
    if host.startswith("/"):
        params = {"host": host, **params}
        host = ""
    port = f":{db['PORT']}" if db.get("PORT") and host else ""
    query = f"?{urlencode(params, safe='/')}" if params else ""
    return f"postgres://{auth}{host}{port}/{db['NAME']}{query}"


@contextlib.contextmanager
def celery_worker(
    *, extra_env: dict[str, str] | None = None, output: IO[str] | None = None
) -> Iterator[subprocess.Popen]:
    """Start `celery -A config worker` on every queue; stop it on exit. Its log (in `output`, if
    given) is printed when the block fails, to explain a timeout."""
    from config.celery import app

    env = {key: value for key, value in os.environ.items() if key != "CELERY_TASK_ALWAYS_EAGER"}
    env.update(
        DJANGO_SETTINGS_MODULE="config.settings",
        DATABASE_URL=_database_url(),
        CELERY_BROKER_URL=settings.CELERY_BROKER_URL,
        PROVIDER_SIMULATION_DELAY_SECONDS="0",
        KYC_REVIEW_DELAY_SECONDS="0",
        CONN_MAX_AGE="0",
    )
    env.update(extra_env or {})
    with contextlib.nullcontext(output) if output else tempfile.TemporaryFile(mode="w+") as log:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "config",
                "worker",
                "-Q",
                QUEUES,
                "--pool=solo",
                "--concurrency=1",
                "--without-gossip",
                "--without-mingle",
                "--loglevel=INFO",
            ],
            cwd=BASE_DIR,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        eager = app.conf.task_always_eager
        app.conf.task_always_eager = False
        try:
            yield process
        except BaseException:
            log.seek(0)
            sys.stderr.write("---- celery worker log ----\n" + log.read()[-8000:])
            raise
        finally:
            app.conf.task_always_eager = eager
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def wait_until(check: Callable[[], bool], *, timeout: float = 30, interval: float = 0.2) -> bool:
    """Poll `check` until it is true or `timeout` seconds pass (a bound, not an assertion)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(interval)
    return check()


@pytest.fixture
def celery_worker_process(transactional_db) -> Iterator[subprocess.Popen]:
    with celery_worker() as process:
        yield process
