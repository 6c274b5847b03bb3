"""Every line the web (gunicorn, as the Procfile runs it), the Celery worker and beat write is one
JSON object with time, level, logger, message and request_id (their startup banners aside), and
a task enqueued by a request logs that request's id."""

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import pytest
import requests

from tests.payments.conftest import SN_PHONE, create_customer, create_quote, payin_body
from tests.support import MerchantClient
from tests.test_gunicorn_errors import ROOT, _free_port
from tests.worker import _database_url, celery_worker, wait_until

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

FIELDS = {"time", "level", "logger", "message", "request_id"}
# What Celery prints rather than logs: the worker's and beat's banners, and a shutdown notice.
BANNER_START = re.compile(r"^ -+ celery@|^celery beat v")
NOTICE = re.compile(r"^worker: (Warm|Cold) shutdown \(MainProcess\)$")


@dataclass
class Processes:
    url: str
    outputs: dict[str, IO[str]]
    stops: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)

    def lines(self, name: str) -> list[str]:
        self.outputs[name].flush()
        return Path(self.outputs[name].name).read_text().splitlines()

    def json_lines(self, name: str) -> list[dict]:
        return [json.loads(line) for line in self.lines(name) if line.startswith("{")]

    def stop(self) -> None:
        self.stops.close()


def _web_command() -> str:
    """The Procfile's web command, as `make run` starts it."""
    procfile = (ROOT / "Procfile").read_text()
    return re.search(r"^web:\s*(.+)$", procfile, re.M).group(1)


def _stopped(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _live(url: str) -> bool:
    try:
        return requests.get(f"{url}/health/live", timeout=10).status_code == 200
    except requests.RequestException:
        return False


@pytest.fixture
def processes(tmp_path, transactional_db) -> Iterator[Processes]:
    outputs = {name: (tmp_path / f"{name}.log").open("w+") for name in ("web", "worker", "beat")}
    port = _free_port()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DATABASE_URL": _database_url(),
        "HOST": "127.0.0.1",
        "PORT": str(port),
        "WEB_CONCURRENCY": "1",
        "PYTHONUNBUFFERED": "1",
    }
    schedule = str(tmp_path / "celerybeat-schedule")
    started = Processes(url=f"http://127.0.0.1:{port}", outputs=outputs)
    web = subprocess.Popen(
        ["bash", "-c", f"exec {_web_command()}"],
        cwd=ROOT,
        env=env,
        stdout=outputs["web"],
        stderr=subprocess.STDOUT,
    )
    started.stops.callback(_stopped, web)
    beat = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "config", "beat", "--loglevel=INFO", "-s", schedule],
        cwd=ROOT,
        env=env,
        stdout=outputs["beat"],
        stderr=subprocess.STDOUT,
    )
    started.stops.callback(_stopped, beat)
    started.stops.enter_context(
        celery_worker(extra_env={"PYTHONUNBUFFERED": "1"}, output=outputs["worker"])
    )
    try:
        assert wait_until(lambda: _live(started.url)), "gunicorn did not start:\n" + "\n".join(
            started.lines("web")
        )
        for name, ready in (("worker", " ready."), ("beat", "beat: Starting")):
            assert wait_until(
                lambda name=name, ready=ready: any(
                    ready in line["message"] for line in started.json_lines(name)
                )
            ), f"{name} did not start:\n" + "\n".join(started.lines(name))
        yield started
    finally:
        started.stop()
        for output in outputs.values():
            output.close()


def test_a_task_enqueued_by_a_request_logs_the_requests_id(enabled_merchant, processes):
    api = MerchantClient(enabled_merchant)
    body = payin_body(create_quote(api, "payin"), create_customer(api))
    headers = {
        "X-Api-Key": api.api_key,
        "X-Api-Secret": api.api_secret,
        "Idempotency-Key": str(uuid.uuid4()),
    }
    payin = requests.post(f"{processes.url}/payins", json=body, headers=headers, timeout=30)
    assert payin.status_code == 201, payin.text
    request_id = payin.headers["X-Request-Id"]

    def tasks_of_the_request() -> list[dict]:
        return [line for line in processes.json_lines("worker") if line["request_id"] == request_id]

    assert wait_until(tasks_of_the_request), "no worker line carries the request's id"
    assert wait_until(
        lambda: any(
            "payments.tasks." in line["message"] and line["logger"] == "celery.app.trace"
            for line in tasks_of_the_request()
        )
    ), tasks_of_the_request()
    # every line about the request's tasks, "Task ... received" (the main process) included
    assert wait_until(
        lambda: any(
            line["logger"] == "celery.worker.strategy" and "received" in line["message"]
            for line in tasks_of_the_request()
        )
    ), processes.lines("worker")
    received = [
        line
        for line in processes.json_lines("worker")
        if line["logger"] == "celery.worker.strategy" and "submit_payin[" in line["message"]
    ]
    assert received and all(line["request_id"] == request_id for line in received), received
    access = [
        line
        for line in processes.json_lines("web")
        if line["logger"] == "gunicorn.access" and line["request_id"] == request_id
    ]
    assert len(access) == 1 and '"POST /payins HTTP/1.1" 201' in access[0]["message"], access


def test_every_line_of_the_web_the_worker_and_beat_is_json(processes):
    response = requests.get(f"{processes.url}/health", params={"phone": SN_PHONE}, timeout=30)
    assert response.status_code in (200, 503)
    assert requests.get(f"{processes.url}/no-such-thing", timeout=30).status_code == 404
    static = "/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui.css"
    assert requests.get(f"{processes.url}{static}", timeout=30).status_code == 200
    assert requests.get(f"{processes.url}/static/no-such.css", timeout=30).status_code == 404
    processes.stop()  # their shutdown lines too

    for name in ("web", "worker", "beat"):
        lines = processes.lines(name)
        parsed, in_banner = [], False
        for line in lines:
            if line.startswith("{"):
                parsed.append(json.loads(line))
                in_banner = False
            elif BANNER_START.match(line) or in_banner:
                in_banner = True
            else:
                assert not line.strip() or NOTICE.match(line), f"{name}: not JSON: {line!r}"
        assert parsed, f"{name} logged nothing"
        for entry in parsed:
            assert set(entry) >= FIELDS, entry
            assert entry["time"].endswith("+00:00") and entry["level"] and entry["logger"]
        assert not any(SN_PHONE[1:] in line for line in lines), f"{name} logged a phone number"
    access = [
        e
        for e in processes.json_lines("web")
        if e["logger"] == "gunicorn.access" and "/health/live" not in e["message"]
    ]
    assert '"GET /health HTTP/1.1"' in access[0]["message"], access
    assert '"GET /no-such-thing HTTP/1.1" 404' in access[1]["message"], access
    assert access[0]["request_id"] == response.headers["X-Request-Id"]
    # a static file served is not an access line; a missing one is
    assert not any(static in entry["message"] for entry in access), access
    assert any('/static/no-such.css HTTP/1.1" 404' in entry["message"] for entry in access)
    assert len(access[1]["request_id"]) == 32 and access[1]["request_id"] != access[0]["request_id"]
