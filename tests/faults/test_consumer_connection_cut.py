"""A consumer (the webhook sender) whose database connection is cut in the middle
of its work (pg_terminate_backend, as a PostgreSQL failover does): work committed once it is
gone still wakes a consumer at once, instead of waiting for a sweep while the wake key of a
consumer no longer at work expires. The answers lost with the connection are recovered as
before: the sweep of lost submissions asks again under the same reference, the due sweep sends
a delivery again once its lease has run out; each payment ends with one outcome.

Real worker processes; the submitter's connection is cut by its own provider gateway right
after each payin's first call (tests.faults.gateways), the sender's by the test while the
receiver holds its request open."""

import pytest
from django.utils import timezone

from core import shared_cache
from tests.faults.conftest import WORKER_ENV, admin_connection, backend_gone
from tests.worker import _database_url, celery_worker, wait_until
from webhooks.models import Delivery, DeliveryStatus, Event
from webhooks.services.events import event_record
from webhooks.services.sweeps import deliveries_dispatch_due

pytestmark = [pytest.mark.faults, pytest.mark.worker, pytest.mark.django_db(transaction=True)]

# How soon committed work is taken up when a consumer can be woken (a few ms normally); the
# sweeps that are the fallback run every 30 to 60 s and wait for a lease or RESUBMIT_AFTER.
PROMPTLY = 5


def _no_consumer_at_work(key: str) -> bool:
    """The consumer let its wake key go: the next commit wakes a new one. Only a point to wait
    for before that commit (the test asserts on what the commit brings)."""
    return not shared_cache.redis_client().exists(shared_cache.cache_key(key))


APPLICATION = "cowry-test-sender"


def _event(merchant) -> Event:
    return event_record(
        merchant_id=merchant.pk,
        event_type="payin.completed",
        data_type="payin",
        data_id=merchant.pk,
        data_object={"id": str(merchant.pk), "status": "completed"},
        at=timezone.now(),
    )


def test_an_event_after_the_senders_connection_was_cut_mid_send_is_delivered_at_once(
    merchant, isolated_broker, webhook_endpoint, hanging_receiver
):
    webhook_endpoint(merchant)
    hanging_receiver.hold = True
    env = {**WORKER_ENV, "DATABASE_URL": _database_url(application_name=APPLICATION)}
    monitor = admin_connection()
    try:
        with celery_worker(extra_env=env) as worker:
            first = _event(merchant)
            assert hanging_receiver.arrived.wait(timeout=60), "the worker never sent the webhook"
            # The sender waits for the receiver's answer: its connection is cut meanwhile.
            (sender,) = monitor.execute(
                "SELECT pid FROM pg_stat_activity WHERE application_name = %s", [APPLICATION]
            ).fetchone()
            monitor.execute("SELECT pg_terminate_backend(%s)", [sender])
            assert wait_until(lambda: backend_gone(monitor, sender), timeout=10)
            hanging_receiver.release()  # answered; recording the attempt fails

            second = _event(merchant)
            assert wait_until(
                lambda: str(second.id) in hanging_receiver.webhook_ids(), timeout=PROMPTLY
            ), "the webhook was left to the due sweep"

            # The first attempt's answer was lost: once its lease has run out (a due time in
            # the database), the due sweep sends it again, under the same webhook id.
            delivery = Delivery.objects.get(event=first)
            assert (delivery.status, delivery.attempts) == (DeliveryStatus.DELIVERING, 1)
            now = timezone.now()
            Delivery.objects.filter(pk=delivery.pk).update(next_attempt_at=now)
            assert deliveries_dispatch_due(now=now) == 1
            assert wait_until(
                lambda: Delivery.objects.get(pk=delivery.pk).status == DeliveryStatus.SUCCEEDED,
                timeout=60,
            )
            assert worker.poll() is None
    finally:
        monitor.close()

    assert sorted(hanging_receiver.webhook_ids()) == sorted([str(first.id)] * 2 + [str(second.id)])
    assert Delivery.objects.get(event=second).status == DeliveryStatus.SUCCEEDED
