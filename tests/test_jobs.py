"""Services enqueue tasks by their registered names (core.jobs): each name they give must be
a task the worker knows, and an unknown one is refused, not sent."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from celery.exceptions import NotRegistered

from config.celery import app
from core import jobs

ROOT = Path(__file__).resolve().parent.parent
APPS = ("customers", "kyc", "merchants", "payments", "quotes", "transfers", "webhooks")
TASK_NAME = re.compile(r"[\"']((?:" + "|".join(APPS) + r")\.tasks\.\w+)[\"']")


def _names_in_application_code() -> set[str]:
    names = set()
    for app_dir in APPS:
        for path in (ROOT / app_dir).rglob("*.py"):
            if "migrations" not in path.parts and path.name != "tasks.py":
                names.update(TASK_NAME.findall(path.read_text()))
    return names


def test_every_task_name_a_service_enqueues_is_a_registered_task():
    app.loader.import_default_modules()
    names = _names_in_application_code()

    assert {"payments.tasks.submit_payin", "webhooks.tasks.deliver_webhook"} <= names
    assert names - set(app.tasks) == set()


def test_an_unknown_task_name_is_refused():
    with pytest.raises(NotRegistered):
        jobs.enqueue("payments.tasks.submit_nothing", payin_id="x")


def test_a_process_that_never_imported_a_tasks_module_finds_the_task_by_name():
    """The web imports no tasks module: its first enqueue must still find the task."""
    script = (
        "import sys, django; django.setup()\n"
        "from core import jobs\n"
        "assert 'payments.tasks' not in sys.modules\n"
        "print(jobs.registered('payments.tasks.submit_payin').name)\n"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings"}
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "payments.tasks.submit_payin"
