"""End to end through Redis: deliveries run on the `webhooks` queue in a separate worker."""

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.webhooks.conftest import record_event
from tests.worker import celery_worker, wait_until
from webhooks.models import Delivery, DeliveryStatus
from webhooks.services.endpoints import endpoint_set
from webhooks.services.sweeps import deliveries_dispatch_due
from webhooks.verify import verify_signature

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_an_event_and_its_retry_are_delivered_by_a_real_worker(
    merchant, receiver, webhook_settings
):
    endpoint, secret = endpoint_set(merchant=merchant, url=receiver.url, now=timezone.now())
    receiver.plan = [500]
    # a retry an hour off is a due time in the database only, which the beat sweep hands out
    hour_off = {
        "ALLOW_PRIVATE_NETWORK_URLS": "true",
        "WEBHOOK_RETRY_SCHEDULE": "3600," * 5 + "3600",
    }
    with celery_worker(extra_env=hour_off) as worker:
        event = record_event(merchant)
        delivery = Delivery.objects.get(event=event)

        def first_attempt_recorded() -> bool:
            assert worker.poll() is None, "the worker died"
            current = Delivery.objects.get(pk=delivery.pk)
            return current.attempts == 1 and current.status != DeliveryStatus.DELIVERING

        assert wait_until(first_attempt_recorded, timeout=60)
        delivery.refresh_from_db()
        assert delivery.status == DeliveryStatus.PENDING  # the 500 was recorded: a retry is due

        # The retry falls due; the beat sweep hands it to the worker through Redis.
        due = timezone.now()
        Delivery.objects.filter(pk=delivery.pk).update(next_attempt_at=due)
        assert deliveries_dispatch_due(now=due + timedelta(seconds=1)) == 1
        assert wait_until(
            lambda: Delivery.objects.get(pk=delivery.pk).status == DeliveryStatus.SUCCEEDED,
            timeout=60,
        )

    assert [r.headers["X-Cowry-Webhook-Id"] for r in receiver.requests] == [str(event.id)] * 2
    for received in receiver.requests:
        assert verify_signature(payload=received.body, headers=received.headers, secret=secret)
    assert endpoint.deliveries.get().attempts == 2


def test_a_burst_of_deliveries_is_drained_once_each_by_a_real_worker(
    merchant, receiver, webhook_settings
):
    """Deliveries committed close together, a task each: every one arrives exactly once,
    signed."""
    _, secret = endpoint_set(merchant=merchant, url=receiver.url, now=timezone.now())
    with celery_worker(extra_env={"ALLOW_PRIVATE_NETWORK_URLS": "true"}) as worker:
        events = [record_event(merchant) for _ in range(40)]

        def all_delivered() -> bool:
            assert worker.poll() is None, "the worker died"
            return (
                Delivery.objects.filter(event__in=events, status=DeliveryStatus.SUCCEEDED).count()
                == 40
            )

        assert wait_until(all_delivered, timeout=60)

    received_ids = [r.headers["X-Cowry-Webhook-Id"] for r in receiver.requests]
    assert sorted(received_ids) == sorted(str(event.id) for event in events)
    for received in receiver.requests:
        assert verify_signature(payload=received.body, headers=received.headers, secret=secret)
    assert set(Delivery.objects.filter(event__in=events).values_list("attempts", flat=True)) == {1}


def test_each_retry_is_attempted_within_five_seconds_of_its_due_time(
    merchant, receiver, webhook_settings
):
    """Retries due soon are handed to the broker for their due time, not left to the 30 s
    sweep: with six 1 s delays, a receiver failing six times gets all seven attempts, each
    started within 5 s of its due time (the event's time, then each failure's end + 1 s)."""
    endpoint, _ = endpoint_set(merchant=merchant, url=receiver.url, now=timezone.now())
    receiver.plan = [500] * 6
    every_second = {"ALLOW_PRIVATE_NETWORK_URLS": "true", "WEBHOOK_RETRY_SCHEDULE": "1,1,1,1,1,1"}
    with celery_worker(extra_env=every_second) as worker:
        event = record_event(merchant)

        def finished() -> bool:
            assert worker.poll() is None, "the worker died"
            return Delivery.objects.get(event=event).status == DeliveryStatus.SUCCEEDED

        assert wait_until(finished, timeout=90)

    delivery = endpoint.deliveries.get()
    attempts = list(delivery.attempt_log.order_by("number"))
    assert [a.number for a in attempts] == [1, 2, 3, 4, 5, 6, 7]
    assert [a.response_status for a in attempts] == [500] * 6 + [200]
    due_times = [event.created_at] + [a.finished_at + timedelta(seconds=1) for a in attempts[:-1]]
    lateness = [
        (a.started_at - due).total_seconds() for a, due in zip(attempts, due_times, strict=True)
    ]
    assert all(0 <= late < 5 for late in lateness), lateness
    assert len(receiver.requests) == 7
    assert {r.headers["X-Cowry-Webhook-Id"] for r in receiver.requests} == {str(event.id)}
