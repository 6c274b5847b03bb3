"""A consumer (the submitter, the webhook sender) whose database connection is cut in the middle
of its work (pg_terminate_backend, as a PostgreSQL failover does): work committed once it is
gone still wakes a consumer at once, instead of waiting for a sweep while the wake key of a
consumer no longer at work expires. The answers lost with the connection are recovered as
before: the sweep of lost submissions asks again under the same reference, the due sweep sends
a delivery again once its lease has run out; each payment ends with one outcome.

Real worker processes; the submitter's connection is cut by its own provider gateway right
after each payin's first call (tests.faults.gateways), the sender's by the test while the
receiver holds its request open."""

from datetime import timedelta

import pytest
from django.utils import timezone

from config import shared_cache
from config.celery import app
from payments import services, tasks
from payments.models import Journal, Payin, PayinHistory
from tests.faults.conftest import WORKER_ENV, admin_connection, backend_gone
from tests.payments.conftest import create_customer, create_quote, payin_body
from tests.support import MerchantClient
from tests.worker import _database_url, celery_worker, wait_until
from webhooks import services as webhook_services
from webhooks.models import Delivery, DeliveryStatus, Event

pytestmark = [pytest.mark.faults, pytest.mark.worker, pytest.mark.django_db(transaction=True)]

# How soon committed work is taken up when a consumer can be woken (a few ms normally); the
# sweeps that are the fallback run every 30 to 60 s and wait for a lease or RESUBMIT_AFTER.
PROMPTLY = 5


def _no_consumer_at_work(key: str) -> bool:
    """The consumer let its wake key go: the next commit wakes a new one. Only a point to wait
    for before that commit (the test asserts on what the commit brings)."""
    return not shared_cache.redis_client().exists(shared_cache.cache_key(key))


def test_a_payin_after_the_submitters_connection_was_cut_mid_claim_is_submitted_at_once(
    enabled_merchant, isolated_broker, faulty_provider
):
    env, provider_requests = faulty_provider
    api = MerchantClient(enabled_merchant)
    customer = create_customer(api)

    def create_payin() -> str:
        response = api.post("/payins", payin_body(create_quote(api, "payin"), customer))
        assert response.status_code == 201, response.json()
        return response.json()["id"]

    # A full claim waiting for the worker: the first payin enqueues the submitter.
    app.conf.task_always_eager = False
    claimed = [create_payin() for _ in range(services.SUBMITTER_CLAIM_SIZE)]
    with celery_worker(extra_env=env(cut=("collection",))) as worker:
        # Each payin's call is taken by the provider, its answer lost with the connection.
        assert wait_until(lambda: len(provider_requests()) == len(claimed), timeout=60)
        # A payin committed once the submitter has stopped (and the helper its full claim
        # enqueued has found nothing) must wake a new one.
        wait_until(lambda: _no_consumer_at_work(services.SUBMITTER_WAKE_KEY), timeout=PROMPTLY)

        late = create_payin()
        assert wait_until(lambda: f"collection:{late}" in provider_requests(), timeout=PROMPTLY), (
            "the payin was left to the sweep of lost submissions"
        )

        # The sweep of lost submissions, when next due, asks again under the same references.
        later = timezone.now() + timedelta(seconds=services.RESUBMIT_AFTER_SECONDS + 1)
        payin_ids, _ = services.payments_stale_submissions(now=later)
        assert sorted(map(str, payin_ids)) == sorted([*claimed, late])
        for payin_id in payin_ids:
            tasks.submit_payin.delay(payin_id=str(payin_id))
        payins = Payin.objects.filter(pk__in=payin_ids)
        assert wait_until(
            lambda: set(payins.values_list("status", flat=True)) == {"completed"}, timeout=60
        )
        assert worker.poll() is None

    # Each payin asked twice under its own reference, answered once.
    assert sorted(provider_requests()) == sorted(
        f"collection:{payin_id}" for payin_id in [*claimed, late] * 2
    )
    for payin_id in [*claimed, late]:
        history = PayinHistory.objects.filter(payin_id=payin_id)
        assert list(history.order_by("id").values_list("status", flat=True)) == [
            "created",
            "pending",
            "completed",
        ]
        events = Event.objects.filter(data_id=payin_id).values_list("event_type", flat=True)
        assert list(events) == ["payin.completed"]
        journals = Journal.objects.filter(resource_id=payin_id).values_list("kind", flat=True)
        assert list(journals) == ["payin_completed"]
    assert services.ledger_check()["breaches"] == []


APPLICATION = "cowry-test-sender"


def _event(merchant) -> Event:
    return webhook_services.event_record(
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
    env = {**WORKER_ENV, "DATABASE_URL": f"{_database_url()}?application_name={APPLICATION}"}
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
            assert webhook_services.deliveries_dispatch_due(now=now) == 1
            assert wait_until(
                lambda: Delivery.objects.get(pk=delivery.pk).status == DeliveryStatus.SUCCEEDED,
                timeout=60,
            )
            assert worker.poll() is None
    finally:
        monitor.close()

    assert sorted(hanging_receiver.webhook_ids()) == sorted([str(first.id)] * 2 + [str(second.id)])
    assert Delivery.objects.get(event=second).status == DeliveryStatus.SUCCEEDED
