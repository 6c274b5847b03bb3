"""Sending events again: one event now (the API's and the dashboard's re-send), or what an
endpoint did not get since a time (a failed delivery, an event recorded while it was off)."""

from datetime import datetime, timedelta
from uuid import UUID

from django.conf import settings
from django.db import transaction

from core.exceptions import DomainError
from merchants import services as merchant_services
from merchants.models import Merchant
from webhooks import selectors
from webhooks.models import (
    TEST_EVENT_TYPE,
    Delivery,
    DeliveryStatus,
    EndpointDisabledReason,
    Event,
    WebhookEndpoint,
)
from webhooks.services.endpoints import (
    FAILING_DISABLE_AFTER,
    endpoints_enabled,
    endpoints_subscribed,
)
from webhooks.services.events import deliveries_create, deliveries_enqueue_after_commit, due_now


class NoWebhookEndpoint(DomainError):
    status = 409
    reason = "no_webhook_endpoint"
    message = "The merchant has no enabled webhook endpoint subscribed to this event."


def event_resend(
    *, event_id: UUID, now: datetime, merchant: Merchant | None = None
) -> list[Delivery]:
    """Send an event again now, same event id and body, to every enabled endpoint subscribed
    to it. An endpoint with a delivery of the event still open gets no second one: that
    delivery is the re-send, made due now if it was waiting for a retry (it keeps its attempt
    count), so the receiver does not get the event now and once more at that retry. Any other
    endpoint gets a new delivery (fresh attempt count). `merchant`: only that merchant's event
    (the API); another's is NotFound. NoWebhookEndpoint (409) when no endpoint would get it.
    Returns the deliveries that make the re-send, open ones first. Re-sends of a merchant's
    events (and events_resend_failed) take turns on its row, so two at once (a double click,
    a retry under a new Idempotency-Key) see each other's delivery and make one."""
    with transaction.atomic():
        events = Event.objects.filter(pk=event_id)
        if merchant is not None:
            events = events.filter(merchant=merchant)
        event = events.first()
        if event is None:
            raise selectors.EventNotFound()
        merchant_services.merchant_turn(event.merchant_id)
        if event.event_type == TEST_EVENT_TYPE:  # a test is of one endpoint, its data id
            endpoints = [
                endpoint
                for endpoint in endpoints_enabled(merchant_id=event.merchant_id)
                if endpoint.pk == event.data_id
            ]
        else:
            endpoints = endpoints_subscribed(
                merchant_id=event.merchant_id, event_type=event.event_type
            )
        if not endpoints:
            raise NoWebhookEndpoint()
        still_open = _deliveries_due_now(event=event, endpoints=endpoints, now=now)
        covered = {delivery.endpoint_id for delivery in still_open}
        pairs = [(event.pk, e.pk) for e in endpoints if e.pk not in covered]
        return still_open + deliveries_create(pairs=pairs, now=now)


def _deliveries_due_now(
    *, event: Event, endpoints: list[WebhookEndpoint], now: datetime
) -> list[Delivery]:
    """The open deliveries of the event to these endpoints, those waiting for a retry made due
    now (each handed to the broker after commit). One whose attempt is under way is left to it: that
    attempt is the re-send. Only pending rows are written, never a delivering one, so this
    waits on no sender's record of an outcome."""
    targets = Delivery.objects.filter(event=event, endpoint__in=[e.pk for e in endpoints])
    targets.filter(status=DeliveryStatus.PENDING, next_attempt_at__gt=now).update(
        next_attempt_at=now, dispatched_at=now, updated_at=now
    )
    still_open = list(
        targets.filter(status__in=selectors.OPEN_STATUSES).order_by("created_at", "id")
    )
    # a task for each one pending (one already due may get a second: the claim takes it once)
    deliveries_enqueue_after_commit(d.pk for d in still_open if d.status == DeliveryStatus.PENDING)
    return still_open


def endpoint_recovery_since(*, disabled_at: datetime, disabled_reason: str) -> datetime:
    """The `since` that recovers, with events_resend_failed, what an endpoint disabled at
    `disabled_at` did not get: the events of the time it was off and, when the sweep disabled
    it for failing, the deliveries that failed over the days before (their first failure at
    least FAILING_DISABLE_AFTER old then, each created up to its retries' span before it, the
    hourly sweep up to an hour late)."""
    if disabled_reason != EndpointDisabledReason.FAILING:
        return disabled_at
    retries = timedelta(seconds=sum(settings.WEBHOOK_RETRY_SCHEDULE))
    return disabled_at - FAILING_DISABLE_AFTER - retries - timedelta(hours=1)


RESEND_INSERT_ROWS = 1000  # deliveries per INSERT of a recovery (PostgreSQL takes 65535 values)
RESEND_ENQUEUE_ROWS = 200  # deliveries of a recovery handed to the broker at once


def events_resend_failed(*, merchant: Merchant, since: datetime, now: datetime) -> int:
    """Recover, for each of the merchant's enabled endpoints, what it did not get of the events
    since `since` (POST /events/resend-failed), each event once per endpoint:
    - a failed delivery created at or after `since` is re-sent (a new delivery of the same
      event, fresh attempts) unless a later delivery of its event to its endpoint exists;
    - an event recorded at or after `since`, after the endpoint was created, that it is
      subscribed to and never got a delivery of (it was disabled then: an event fans out to
      the enabled endpoints only) is sent to it (selectors.events_missed). Test events never.
    A delivery still open is left to its retry. Every delivery made is a later delivery of its
    event to its endpoint, so repeating the call sends nothing twice; calls take turns on the
    merchant's row with each other and with event_resend, so two at once send once. A bounded
    number of statements: a read per endpoint (five at most), an insert per
    RESEND_INSERT_ROWS deliveries. Returns the number of deliveries made."""
    with transaction.atomic():
        merchant_services.merchant_turn(merchant.pk)
        endpoints = endpoints_enabled(merchant_id=merchant.pk)
        targets = selectors.deliveries_failed_not_resent(
            merchant=merchant, since=since, endpoint_ids=[e.pk for e in endpoints]
        )
        for endpoint in endpoints:
            targets += [
                (event_id, endpoint.pk)
                for event_id in selectors.events_missed(endpoint=endpoint, since=since)
            ]
        sent_now = deliveries_create(pairs=targets[:RESEND_ENQUEUE_ROWS], now=now)
        # the rest are left to the beat sweep (never handed to the broker), 500 a beat
        rest = [
            Delivery(event_id=event_id, endpoint_id=endpoint_id, **due_now(now))
            for event_id, endpoint_id in targets[RESEND_ENQUEUE_ROWS:]
        ]
        for delivery in rest:
            delivery.dispatched_at = None
        Delivery.objects.bulk_create(rest, batch_size=RESEND_INSERT_ROWS)
    return len(sent_now) + len(rest)


def event_resend_for_merchant(*, merchant: Merchant, event_id: UUID, now: datetime) -> Event:
    """POST /events/{id}/resend: event_resend() scoped to the merchant; returns the event
    with its delivery_status (pending now)."""
    with transaction.atomic():
        event_resend(event_id=event_id, now=now, merchant=merchant)
        return selectors.event_get(merchant=merchant, event_id=event_id)
