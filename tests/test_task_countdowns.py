"""No task waits in the broker longer than its visibility timeout: Redis hands a message that
long unacknowledged (a countdown held by a worker, a retry's backoff) to another worker, so a
longer wait would run it twice. Long waits (webhook retries, provider timeouts, stalled KYC)
are due times in the database that the beat sweeps pick up."""

from celery.utils.time import get_exponential_backoff_interval
from django.conf import settings

from config.celery import app

APPS = ("customers.", "kyc.", "merchants.", "payments.", "quotes.", "transfers.", "webhooks.")
# Countdowns given at the call (apply_async): the simulated provider's answer, the KYC review.
CALL_COUNTDOWNS = {
    "payments.tasks.deliver_provider_answer": "PROVIDER_SIMULATION_DELAY_SECONDS",
    "kyc.tasks.review_kyc_submission": "KYC_REVIEW_DELAY_SECONDS",
}


def _longest_retry_countdown(task) -> float:
    """The longest countdown an autoretry of `task` can be given (no jitter: its upper bound)."""
    if not getattr(task, "autoretry_for", ()):
        return 0
    # Celery's defaults where the task names none (celery.app.autoretry)
    backoff = getattr(task, "retry_backoff", False)
    if not backoff:
        return task.default_retry_delay
    return max(
        get_exponential_backoff_interval(
            factor=int(backoff),
            retries=retries,
            maximum=getattr(task, "retry_backoff_max", 600),
            full_jitter=False,
        )
        for retries in range(task.max_retries)
    )


def test_no_task_waits_in_the_broker_longer_than_the_visibility_timeout():
    app.loader.import_default_modules()
    visibility = settings.CELERY_BROKER_TRANSPORT_OPTIONS["visibility_timeout"]
    ours = {name: task for name, task in app.tasks.items() if name.startswith(APPS)}
    assert set(CALL_COUNTDOWNS) <= set(ours)
    waits = {
        name: max(
            _longest_retry_countdown(task),
            getattr(settings, CALL_COUNTDOWNS.get(name, ""), 0),
        )
        for name, task in ours.items()
    }
    assert {name: wait for name, wait in waits.items() if wait >= visibility} == {}
    # the longest, a provider outage's retry: under the floor production settings require
    assert max(waits.values()) < settings.VISIBILITY_TIMEOUT_FLOOR
