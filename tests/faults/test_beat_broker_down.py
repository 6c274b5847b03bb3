"""Beat with the broker's Redis stopped: a due task it cannot send is one line naming the
schedule entry, its task and the error. Celery's own line carried beat's call stack in its
message and the error's traceback beside it, for each due task at each tick of the outage.

Celery's scheduler sends the entry, in this process, through a really stopped Redis."""

import pytest
from celery.beat import Scheduler

from config.celery import app
from tests.logs import console_lines

pytestmark = pytest.mark.faults

ENTRY = "fail-timed-out-payments"


def test_a_due_task_beat_cannot_send_is_one_line_without_a_stack(
    broker_down, isolated_broker, settings
):
    scheduler = Scheduler(app=app, lazy=True)
    entry = scheduler.Entry(name=ENTRY, app=app, **settings.CELERY_BEAT_SCHEDULE[ENTRY])
    producer = scheduler.producer  # connected before the outage, as a running beat's is
    try:
        with console_lines() as lines, broker_down():
            scheduler.apply_entry(entry, producer=producer)
    finally:
        scheduler.close()

    errors = [line for line in lines if line["level"] == "ERROR"]
    assert errors == [
        {
            "time": errors[0]["time"],
            "level": "ERROR",
            "logger": "celery.beat",
            "message": (
                f"Beat could not send {ENTRY} (payments.tasks.fail_timed_out_payments):"
                f" OperationalError: Error 111 connecting to 127.0.0.1:{isolated_broker.port}."
                " Connection refused. (skipped until its next run)"
            ),
            "request_id": None,
        }
    ]
