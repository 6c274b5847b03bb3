"""SIGKILL of the Celery worker in the middle of applying a provider answer and in the middle
of a webhook delivery: after a restart the outcome is applied exactly once.

The "middle" is made deterministic, never by racing a sleep: the test holds a row the worker
applying the answer needs, so the worker stops inside its transaction (status and history
written, ledger not yet), and the test sees it waiting in pg_stat_activity; the receiver holds the
webhook request open until the test has killed the worker.
"""

import os
import signal
import time
from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from payments import tasks
from payments.ledger.checks import ledger_breaches
from payments.models import Journal, Payin
from payments.services.sweeps import RESUBMIT_AFTER_SECONDS, payments_stale_submissions
from tests.faults.conftest import (
    WORKER_ENV,
    admin_connection,
    backend_gone,
    backends_waiting_on_a_lock,
)
from tests.payments.conftest import create_customer, create_quote, payin_body
from tests.support import MerchantClient, wallet_balance
from tests.worker import celery_worker, wait_until
from webhooks.models import Delivery, DeliveryAttempt, DeliveryStatus, Event
from webhooks.services.events import event_record
from webhooks.services.sweeps import deliveries_dispatch_due

pytestmark = [pytest.mark.faults, pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def _kill(worker) -> None:
    os.kill(worker.pid, signal.SIGKILL)
    worker.wait(timeout=30)


def _payin_answered_by_a_worker_killed_while_waiting(api, body: dict, hold: str, params) -> str:
    """POST a payin while a transaction of the test's, having run `hold`, keeps a row its
    provider answer needs; kill the worker once pg_stat_activity shows it waiting for the
    wallet, then let the row go and wait for the killed worker's backend to end. Returns the
    payin's id."""
    # Two connections: pg_stat_activity is a snapshot within a transaction, so the one that
    # watches must not be the one that holds the lock.
    locker, monitor = admin_connection(), admin_connection()
    try:
        with locker.transaction():
            locker.execute(hold, params)
            with celery_worker(extra_env=WORKER_ENV) as worker:
                response = api.post("/payins", body)
                assert response.status_code == 201
                assert wait_until(
                    lambda: backends_waiting_on_a_lock(monitor, pattern="%payments_wallet%"),
                    timeout=60,
                )
                (stuck,) = backends_waiting_on_a_lock(monitor, pattern="%payments_wallet%")
                _kill(worker)
        assert wait_until(lambda: backend_gone(monitor, stuck), timeout=30)
    finally:
        locker.close()
        monitor.close()
    return response.json()["id"]


def test_worker_killed_while_applying_a_provider_answer_applies_it_once_after_restart(
    enabled_merchant, isolated_broker, webhook_endpoint, hanging_receiver
):
    """The locked transition (the merchant's first posting in XOF: the answer creates the
    wallet), killed inside its transaction: nothing of it is kept."""
    api = MerchantClient(enabled_merchant)
    webhook_endpoint(enabled_merchant)
    customer = create_customer(api)
    quote = create_quote(api, "payin")

    # The wallet the answer would create, inserted and not yet committed: the worker's insert
    # of it waits for this transaction, with `completed` and its history written in its own
    # and the journal not yet posted. Then the worker's transaction can only roll back.
    payin_id = _payin_answered_by_a_worker_killed_while_waiting(
        api,
        payin_body(quote, customer),
        "INSERT INTO payments_wallet"
        " (id, merchant_id, currency, available, reserved, created_at, updated_at)"
        " VALUES (gen_random_uuid(), %s, 'XOF', 0, 0, now(), now())",
        [enabled_merchant.pk],
    )

    payin = Payin.objects.get(pk=payin_id)
    assert payin.status == "pending"
    assert not Journal.objects.filter(resource_id=payin.pk).exists()
    assert not Event.objects.filter(data_id=payin.pk).exists()
    assert wallet_balance(merchant=enabled_merchant, currency="XOF")[0] == Decimal(0)

    # The killed worker had moved the payin to pending (no provider reference yet): the
    # sweep of lost submissions resubmits it when next due (the body of
    # payments.tasks.fail_timed_out_payments then) under the same reference, the same provider
    # transaction, and a new worker applies the answer.
    later = timezone.now() + timedelta(seconds=RESUBMIT_AFTER_SECONDS + 1)
    assert [str(payin_id) for payin_id in payments_stale_submissions(now=later)[0]] == [payin_id]
    with celery_worker(extra_env=WORKER_ENV) as worker:
        tasks.submit_payin.delay(payin_id=payin_id)
        assert wait_until(
            lambda: worker.poll() is None and Payin.objects.get(pk=payin_id).status == "completed",
            timeout=90,
        )
        event = Event.objects.get(data_id=payin_id)
        assert wait_until(lambda: str(event.id) in hanging_receiver.webhook_ids(), timeout=60)

    assert event.event_type == "payin.completed"
    assert Event.objects.filter(data_id=payin_id).count() == 1
    assert Journal.objects.filter(resource_id=payin_id).count() == 1
    # 9850 credited (10000 less the 1.5% fee), once.
    assert wallet_balance(merchant=enabled_merchant, currency="XOF")[0] == Decimal("9850")
    assert ledger_breaches() == []
    assert set(hanging_receiver.webhook_ids()) == {str(event.id)}


def test_worker_killed_during_a_webhook_delivery_delivers_it_again_with_the_same_id(
    merchant, isolated_broker, webhook_endpoint, hanging_receiver
):
    endpoint = webhook_endpoint(merchant)
    hanging_receiver.hold = True
    with celery_worker(extra_env=WORKER_ENV) as worker:
        event = event_record(
            merchant_id=merchant.pk,
            event_type="payin.completed",
            data_type="payin",
            data_id=merchant.pk,
            data_object={"id": str(merchant.pk), "status": "completed"},
            at=timezone.now(),
        )
        # The request has reached the receiver, which holds it open: kill the sender now.
        assert hanging_receiver.arrived.wait(timeout=60), "the worker never sent the webhook"
        _kill(worker)
    hanging_receiver.release()

    delivery = Delivery.objects.get(event=event)
    assert delivery.status == DeliveryStatus.DELIVERING  # claimed; no result was recorded
    assert delivery.attempts == 1

    with celery_worker(extra_env=WORKER_ENV) as worker:
        # The lease runs out (a due time in the database, not a countdown); the beat sweep
        # hands the delivery to the new worker.
        now = timezone.now()
        Delivery.objects.filter(pk=delivery.pk).update(next_attempt_at=now)
        assert deliveries_dispatch_due(now=now) == 1
        assert wait_until(
            lambda: (
                worker.poll() is None
                and Delivery.objects.get(pk=delivery.pk).status == DeliveryStatus.SUCCEEDED
            ),
            timeout=60,
        )

    ids = hanging_receiver.webhook_ids()
    assert len(ids) >= 2
    assert set(ids) == {str(event.id)}
    assert Event.objects.filter(merchant=merchant).count() == 1
    first, second = DeliveryAttempt.objects.filter(delivery=delivery).order_by("number")
    assert "worker was lost" in first.error
    assert second.response_status == 200
    assert endpoint.deliveries.get().attempts == 2


def test_deliveries_a_killed_worker_held_are_final_within_two_minutes_of_its_restart(
    merchant, isolated_broker, webhook_endpoint, hanging_receiver
):
    """Nothing moved by hand: the restarted worker gets the beat's sweep every 30 s, as beat
    sends it, and the sweep hands out each delivery whose lease ran out, once per attempt."""
    from webhooks import tasks as webhook_tasks

    webhook_endpoint(merchant)
    hanging_receiver.hold = True
    with celery_worker(extra_env=WORKER_ENV) as worker:
        events = [
            event_record(
                merchant_id=merchant.pk,
                event_type="payin.completed",
                data_type="payin",
                data_id=merchant.pk,
                data_object={"id": str(merchant.pk), "status": "completed", "n": n},
                at=timezone.now(),
            )
            for n in range(2)
        ]
        assert hanging_receiver.arrived.wait(timeout=60), "the worker never sent the webhook"
        _kill(worker)
    hanging_receiver.release()
    held = Delivery.objects.filter(event__in=events, status=DeliveryStatus.DELIVERING)
    assert held.count() == 1

    open_deliveries = Delivery.objects.filter(
        event__in=events, status__in=[DeliveryStatus.PENDING, DeliveryStatus.DELIVERING]
    )
    restarted_at = time.monotonic()
    with celery_worker(extra_env=WORKER_ENV) as worker:
        next_beat = restarted_at
        while open_deliveries.exists() and time.monotonic() - restarted_at < 150:
            assert worker.poll() is None, "the worker died"
            if time.monotonic() >= next_beat:
                webhook_tasks.deliver_due_webhooks.delay()  # what beat sends every 30 s
                next_beat += 30
            time.sleep(0.5)
        final_after = time.monotonic() - restarted_at
    assert final_after < 120, final_after

    deliveries = Delivery.objects.filter(event__in=events)
    assert set(deliveries.values_list("status", flat=True)) == {DeliveryStatus.SUCCEEDED}
    ids = hanging_receiver.webhook_ids()
    for delivery in deliveries:
        attempts = list(delivery.attempt_log.order_by("number"))
        assert [a.number for a in attempts] == list(range(1, delivery.attempts + 1))
        # exactly one request per attempt
        assert ids.count(str(delivery.event_id)) == len(attempts)
