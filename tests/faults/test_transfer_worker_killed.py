"""SIGKILL of the Celery worker in the middle of transfer traffic: after a restart, every
transfer in flight reaches its final state within 2 minutes, exactly once.

The provider answers each leg 5 s after it received it, through a task with a countdown that
the worker fetches at once and holds until then, and the worker is killed while it holds some.
The broker hands a killed worker's tasks out again only after its visibility timeout (an hour
here, the production default), so what the killed worker held, submissions and answers alike,
is found again by the beat's sweep alone: it resubmits the submissions that never reached the
provider and asks the provider about the answers overdue. The test plays the beat, sending
the sweep's task at its production interval."""

import os
import signal
import time
from collections import Counter
from datetime import timedelta

import pytest
from django.conf import settings
from django.core.management import call_command
from django.utils import timezone

from tests.support import MerchantClient
from tests.transfers.conftest import (
    CM_DECLINED,
    CM_PHONE,
    SENDER_DETAILS,
    create_customer,
    create_quote,
    transfer_body,
)
from tests.worker import celery_worker, wait_until
from transfers import tasks
from transfers.models import Transfer, TransferHistory
from webhooks.models import Event

pytestmark = [pytest.mark.faults, pytest.mark.worker, pytest.mark.django_db(transaction=True)]

TRANSFERS = 10
RECOVERY_SECONDS = 120
ANSWER_DELAY_SECONDS = 5
WORKER = {
    "PROVIDER_SIMULATION_DELAY_SECONDS": str(ANSWER_DELAY_SECONDS),
    "CELERY_VISIBILITY_TIMEOUT_SECONDS": "3600",
}
FINAL = {("completed", "completed", "completed"), ("failed", "failed", "cancelled")}
TERMINAL_EVENTS = ("transfer.completed", "transfer.failed")


def _states() -> dict[str, tuple[str, str, str]]:
    rows = Transfer.objects.values_list("id", "status", "payin_status", "payout_status")
    return {str(pk): (status, payin, payout) for pk, status, payin, payout in rows}


def _answers_held() -> int:
    """How many collections the provider received 2 s ago or more and has not answered: the
    worker holds their answers (fetched with their countdown) for the rest of the delay."""
    return (
        Transfer.objects.filter(
            status="collecting",
            collection_submitted_at__lte=timezone.now() - timedelta(seconds=2),
        )
        .exclude(collection_reference="")
        .count()
    )


def _all_final() -> bool:
    states = _states()
    return len(states) == TRANSFERS and all(state in FINAL for state in states.values())


def test_worker_killed_mid_transfer_traffic_every_transfer_ends_once_within_two_minutes(
    enabled_merchant, isolated_broker
):
    api = MerchantClient(enabled_merchant)
    customer = create_customer(api, **SENDER_DETAILS)
    # Every fourth payer is declined by the provider: those transfers end failed.
    bodies = [
        transfer_body(
            create_quote(api, customer_id=customer["id"]),
            customer,
            payer_phone=CM_DECLINED if index % 4 == 3 else CM_PHONE,
        )
        for index in range(TRANSFERS)
    ]

    with celery_worker(extra_env=WORKER) as worker:
        for body in bodies:
            response = api.post("/transfers", body)
            assert response.status_code == 201, response.json()
        assert wait_until(lambda: _answers_held() >= 3, timeout=60, interval=0.1)
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait(timeout=30)

    # Answers lost with the worker: only the sweep's question to the provider ends these legs.
    assert _answers_held() >= 3

    beat_interval = settings.CELERY_BEAT_SCHEDULE["fail-timed-out-transfers"]["schedule"]
    with celery_worker(extra_env=WORKER):
        restarted_at = time.monotonic()
        next_beat = restarted_at
        while not _all_final() and time.monotonic() - restarted_at < RECOVERY_SECONDS:
            if time.monotonic() >= next_beat:
                tasks.fail_timed_out_transfers.delay()
                next_beat += beat_interval
            time.sleep(0.5)
        recovered_in = time.monotonic() - restarted_at
        assert _all_final(), f"not final {RECOVERY_SECONDS}s after the restart: {_states()}"

    assert recovered_in < RECOVERY_SECONDS
    states = _states()
    assert Counter(state[0] for state in states.values()) == {
        "completed": TRANSFERS - TRANSFERS // 4,
        "failed": TRANSFERS // 4,
    }
    # Exactly once: one terminal event each, no move written twice, the ledger balanced.
    terminal = Counter(
        str(data_id)
        for data_id in Event.objects.filter(event_type__in=TERMINAL_EVENTS).values_list(
            "data_id", flat=True
        )
    )
    assert terminal == dict.fromkeys(states, 1)
    for pk in states:
        moves = list(
            TransferHistory.objects.filter(transfer_id=pk).values_list(
                "status", "payin_status", "payout_status"
            )
        )
        assert len(moves) == len(set(moves)), (pk, moves)
    call_command("check_ledger")
