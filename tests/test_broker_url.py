"""The embedded broker URL names a host: kombu warned "No hostname was supplied" at every
enqueue of `make run` without one."""

import logging
import os
import subprocess
import sys

from celery import Celery

from tests.test_gunicorn_errors import ROOT


def test_an_enqueue_on_the_embedded_broker_makes_kombu_warn_nothing(caplog, tmp_path, monkeypatch):
    monkeypatch.delenv("CELERY_BROKER_URL", raising=False)  # Celery reads it before its own URL
    url = subprocess.run(
        [sys.executable, "-c", "from config import settings; print(settings.CELERY_BROKER_URL)"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert url.startswith("filesystem://")
    embedded = Celery("embedded", broker=url, set_as_current=False)
    embedded.conf.broker_transport_options = {
        "data_folder_in": str(tmp_path),
        "data_folder_out": str(tmp_path),
        "control_folder": str(tmp_path),
    }

    with caplog.at_level(logging.WARNING, logger="kombu"):
        embedded.send_task("embedded.ping", kwargs={"hello": "world"})
    assert [r.getMessage() for r in caplog.records if r.name.startswith("kombu")] == []
    assert any(tmp_path.glob("*.msg")), "nothing was enqueued"
