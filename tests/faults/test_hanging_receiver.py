"""A receiver that hangs (or whose name never resolves, or whose TLS handshake never ends): the
attempt times out, is recorded, and the retry delivers it."""

import time
from datetime import timedelta

import pytest
from django.utils import timezone

from tests.slow_network import slow_connect
from webhooks.models import Delivery, DeliveryStatus
from webhooks.services.delivery import delivery_attempt
from webhooks.services.events import event_record
from webhooks.services.sweeps import deliveries_send_due

pytestmark = [pytest.mark.faults, pytest.mark.django_db]


def _record(merchant, now):
    event = event_record(
        merchant_id=merchant.pk,
        event_type="payin.completed",
        data_type="payin",
        data_id=merchant.pk,
        data_object={"id": str(merchant.pk), "status": "completed"},
        at=now,
    )
    return event, Delivery.objects.get(event=event)


def test_a_hanging_receiver_times_out_is_recorded_and_is_retried(
    merchant, webhook_endpoint, hanging_receiver, settings
):
    settings.WEBHOOK_TIMEOUT_SECONDS = 1
    webhook_endpoint(merchant)
    now = timezone.now()
    event, delivery = _record(merchant, now)
    hanging_receiver.hold = True  # the receiver accepts the request and never answers

    delivery_attempt(delivery_id=delivery.pk, now=now)

    delivery.refresh_from_db()
    assert delivery.status == DeliveryStatus.PENDING
    assert delivery.attempts == 1
    # The first retry is due a minute after the attempt ended (docs/webhooks.md).
    assert now + timedelta(seconds=60) < delivery.next_attempt_at < now + timedelta(seconds=120)
    (attempt,) = delivery.attempt_log.all()
    assert attempt.response_status is None
    assert "Timed out" in attempt.error
    assert attempt.finished_at is not None

    hanging_receiver.release()
    assert deliveries_send_due(now=now + timedelta(seconds=120)).attempted == 1

    delivery.refresh_from_db()
    assert delivery.status == DeliveryStatus.SUCCEEDED
    assert delivery.attempts == 2
    assert hanging_receiver.webhook_ids() == [str(event.id)] * 2


def test_a_receiver_whose_name_does_not_resolve_times_out_and_holds_up_no_other_merchant(
    merchant, other_merchant, webhook_endpoint, hanging_receiver, stalled_dns, settings
):
    """A webhook host whose DNS never answers (a hostile or broken name server): the attempt
    gives up at WEBHOOK_TIMEOUT_SECONDS like one to a hanging receiver, the sender goes on to
    the next merchant's delivery, and the retry comes on the normal schedule."""
    settings.WEBHOOK_TIMEOUT_SECONDS = 1
    stalled_dns.stall("hooks.slow-dns.example")  # then 127.0.0.1: the receiver
    webhook_endpoint(
        merchant, url=hanging_receiver.url.replace("127.0.0.1", "hooks.slow-dns.example")
    )
    webhook_endpoint(other_merchant)
    now = timezone.now()
    event, delivery = _record(merchant, now - timedelta(seconds=1))  # first in line
    other_event, other_delivery = _record(other_merchant, now)

    started = time.monotonic()
    assert deliveries_send_due(now=now).attempted == 2
    assert time.monotonic() - started < 2.5  # not until the name server answers

    other_delivery.refresh_from_db()
    assert other_delivery.status == DeliveryStatus.SUCCEEDED
    delivery.refresh_from_db()
    assert delivery.status == DeliveryStatus.PENDING
    assert delivery.attempts == 1
    assert now + timedelta(seconds=60) < delivery.next_attempt_at < now + timedelta(seconds=120)
    (attempt,) = delivery.attempt_log.all()
    assert attempt.response_status is None
    assert attempt.error == "Timed out after 1 s: the host name did not resolve in time"
    assert delivery.last_error == attempt.error
    assert attempt.duration_ms < 1500
    assert hanging_receiver.webhook_ids() == [str(other_event.id)]

    stalled_dns.release()  # the name server answers again
    assert deliveries_send_due(now=now + timedelta(seconds=120)).attempted == 1

    delivery.refresh_from_db()
    assert delivery.status == DeliveryStatus.SUCCEEDED
    assert delivery.attempts == 2
    assert hanging_receiver.webhook_ids() == [str(other_event.id), str(event.id)]


def test_a_receiver_whose_tls_handshake_never_ends_times_out_and_is_retried(
    merchant, webhook_endpoint, silent_tls_server, settings, monkeypatch
):
    """A receiver slow to accept the connection, then never finishing the TLS handshake (in
    silence, or a byte at a time well within the socket timeout): the connect and the handshake
    share WEBHOOK_TIMEOUT_SECONDS."""
    settings.WEBHOOK_TIMEOUT_SECONDS = 1
    slow_connect(monkeypatch, port=silent_tls_server.port, seconds=0.9)
    webhook_endpoint(merchant, url=f"https://127.0.0.1:{silent_tls_server.port}/hook")
    now = timezone.now()
    _event, delivery = _record(merchant, now)

    started = time.monotonic()
    delivery_attempt(delivery_id=delivery.pk, now=now)
    assert time.monotonic() - started < 1.5

    delivery.refresh_from_db()
    assert delivery.status == DeliveryStatus.PENDING
    assert delivery.attempts == 1
    assert now + timedelta(seconds=60) < delivery.next_attempt_at < now + timedelta(seconds=120)
    (attempt,) = delivery.attempt_log.all()
    assert (attempt.response_status, attempt.error) == (None, "Timed out after 1 s")
    assert attempt.duration_ms < 1500

    later = now + timedelta(seconds=120)  # the retry is due, and is made, on the schedule
    assert deliveries_send_due(now=later).attempted == 1
    delivery.refresh_from_db()
    assert delivery.status == DeliveryStatus.PENDING
    assert delivery.attempts == 2
    assert (
        later + timedelta(seconds=300) < delivery.next_attempt_at < later + timedelta(seconds=360)
    )
    assert silent_tls_server.accepted == 2
