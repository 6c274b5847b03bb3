"""A receiver that hangs: the attempt times out, is recorded, and the retry delivers it."""

from datetime import timedelta

import pytest
from django.utils import timezone

from webhooks import services as webhook_services
from webhooks.models import Delivery, DeliveryStatus

pytestmark = [pytest.mark.faults, pytest.mark.django_db]


def test_a_hanging_receiver_times_out_is_recorded_and_is_retried(
    merchant, webhook_endpoint, hanging_receiver, settings
):
    settings.WEBHOOK_TIMEOUT_SECONDS = 1
    webhook_endpoint(merchant)
    now = timezone.now()
    event = webhook_services.event_record(
        merchant_id=merchant.pk,
        event_type="payin.completed",
        data_type="payin",
        data_id=merchant.pk,
        data_object={"id": str(merchant.pk), "status": "completed"},
        at=now,
    )
    delivery = Delivery.objects.get(event=event)
    hanging_receiver.hold = True  # the receiver accepts the request and never answers

    webhook_services.delivery_attempt(delivery_id=delivery.pk, now=now)

    delivery.refresh_from_db()
    assert delivery.status == DeliveryStatus.PENDING
    assert delivery.attempts == 1
    # The first retry is due a minute after the attempt ended (spec 6.4).
    assert now + timedelta(seconds=60) < delivery.next_attempt_at < now + timedelta(seconds=120)
    (attempt,) = delivery.attempt_log.all()
    assert attempt.response_status is None
    assert "Timed out" in attempt.error
    assert attempt.finished_at is not None

    hanging_receiver.release()
    assert webhook_services.deliveries_send_due(now=now + timedelta(seconds=120)) == 1

    delivery.refresh_from_db()
    assert delivery.status == DeliveryStatus.SUCCEEDED
    assert delivery.attempts == 2
    assert hanging_receiver.webhook_ids() == [str(event.id)] * 2
