"""Recording an event in the transaction of the change it reports (the outbox), fanning it out
to a delivery per subscribed endpoint, and handing each delivery to a worker after commit."""

import json
import logging
from collections.abc import Iterable
from contextvars import ContextVar
from datetime import datetime
from functools import partial
from typing import Any
from uuid import UUID

from django.core.serializers.json import DjangoJSONEncoder
from django.db import connection, transaction
from kombu.exceptions import OperationalError as BrokerError

from core import jobs
from core.exceptions import NotFound
from core.fields import format_timestamp
from core.transactions import joined_atomic
from webhooks.models import (
    TEST_EVENT_TYPE,
    Delivery,
    DeliveryStatus,
    Event,
    WebhookEndpoint,
)
from webhooks.services.endpoints import WebhookNotConfigured

logger = logging.getLogger("cowry.webhooks")


def serialize(payload: dict[str, Any]) -> str:
    """The exact text of an event's body: compact JSON, UTF-8 kept as is."""
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False)


class _ApiJSONEncoder(DjangoJSONEncoder):
    """DjangoJSONEncoder, but datetimes keep their microseconds, as the REST API renders them
    (DRF): a webhook's snapshot reconciles exactly with GET, and two events stamped 1 µs apart
    (a leg event and its transfer's aggregate event) do not show the same `created_at`."""

    def default(self, o: Any) -> Any:
        if isinstance(o, datetime):
            return format_timestamp(o)
        return super().default(o)


def _json_safe(value: Any) -> Any:
    """Decimals, UUIDs and datetimes as the API renders them (strings)."""
    return json.loads(json.dumps(value, cls=_ApiJSONEncoder))


def delivery_enqueue(delivery_id: UUID, *, eta: datetime | None = None) -> None:
    """Hand one delivery to the `webhooks` queue (at `eta`, if given). A broker that is down
    loses nothing: the delivery is in the database and the beat sweep sends it."""
    try:
        jobs.enqueue("webhooks.tasks.deliver_webhook", eta=eta, delivery_id=str(delivery_id))
    except BrokerError:
        logger.warning("Broker unavailable; delivery %s left to the sweep", delivery_id)


# Set by deliveries_sent_here(): the deliveries made due by what commits inside it go to this
# list instead of the broker, and that process sends them itself.
SENT_HERE: ContextVar[list[UUID] | None] = ContextVar("deliveries_sent_here", default=None)


def deliveries_enqueue_after_commit(delivery_ids: Iterable[UUID]) -> None:
    """A `deliver_webhook` task per delivery, once the caller's transaction commits (a commit
    inside deliveries_sent_here(): sent by this process instead)."""
    for delivery_id in delivery_ids:
        transaction.on_commit(partial(_hand_off, delivery_id))


def _hand_off(delivery_id: UUID) -> None:
    sent_here = SENT_HERE.get()
    if sent_here is None:
        delivery_enqueue(delivery_id)
    else:
        sent_here.append(delivery_id)


def _event_deliveries_enqueue(event_id: UUID) -> None:
    pending = Delivery.objects.filter(event_id=event_id, status=DeliveryStatus.PENDING)
    for delivery_id in pending.values_list("pk", flat=True):
        delivery_enqueue(delivery_id)


def event_deliveries_enqueue_after_commit(*, event_id: UUID) -> None:
    """After commit, a `deliver_webhook` task for each pending delivery of the event: for a
    caller that wrote them in a statement of its own."""
    transaction.on_commit(partial(_event_deliveries_enqueue, event_id))


def due_now(now: datetime) -> dict[str, Any]:
    """The values of a new delivery, due now and counted as handed to a worker now."""
    return {
        "status": DeliveryStatus.PENDING,
        "next_attempt_at": now,
        "dispatched_at": now,
        "created_at": now,
        "updated_at": now,
    }


def deliveries_create(*, pairs: list[tuple[UUID, UUID]], now: datetime) -> list[Delivery]:
    """A delivery due now per (event id, endpoint id), each sent after commit."""
    deliveries = Delivery.objects.bulk_create(
        [
            Delivery(event_id=event_id, endpoint_id=endpoint_id, **due_now(now))
            for event_id, endpoint_id in pairs
        ]
    )
    deliveries_enqueue_after_commit(delivery.pk for delivery in deliveries)
    return deliveries


DELIVERIES_FAN_OUT = """
INSERT INTO webhooks_delivery
    (id, event_id, endpoint_id, status, attempts, next_attempt_at, dispatched_at, last_error,
     created_at, updated_at)
SELECT gen_random_uuid(), %(event_id)s, e.id, 'pending', 0, %(at)s, %(at)s, '', %(at)s, %(at)s
FROM webhooks_webhookendpoint e
WHERE e.merchant_id = %(merchant_id)s AND e.enabled
    AND (e.event_types = '[]'::jsonb OR e.event_types @> jsonb_build_array(%(event_type)s::text))
RETURNING id
"""
"""A delivery per enabled endpoint subscribed to the event (as WebhookEndpoint.subscribed_to
decides: no types, or this one), due at the event's time, in one statement: the ORM needed a
read of the endpoints and a bulk insert. Every event a payment records runs it. Measured
(bench/webhook_fan_out.py): 10x, median 3.6 ms to 0.35 ms (8.5 ms to 0.79 ms on a busier
machine), on 2,000 events of a merchant with two endpoints, one subscribed, each fan-out
timed alone inside its event's transaction, the ORM's and the statement in turn."""


def deliveries_fan_out(*, event: Event) -> list[UUID]:
    """The deliveries of the saved `event`, due at its time and sent after commit (see
    DELIVERIES_FAN_OUT); call it in the event's transaction. Returns their ids."""
    params = {
        "event_id": event.pk,
        "at": event.created_at,
        "merchant_id": event.merchant_id,
        "event_type": event.event_type,
    }
    with connection.cursor() as cursor:
        cursor.execute(DELIVERIES_FAN_OUT, params)
        delivery_ids = [row[0] for row in cursor.fetchall()]
    deliveries_enqueue_after_commit(delivery_ids)
    return delivery_ids


def event_new(
    *,
    merchant_id: UUID,
    event_type: str,
    data_type: str,
    data_id: UUID,
    data_object: dict[str, Any],
    at: datetime,
) -> Event:
    """The event (unsaved) that event_record would record: its envelope and body built."""
    event = Event(
        merchant_id=merchant_id,
        event_type=event_type,
        data_type=data_type,
        data_id=data_id,
        created_at=at,
    )
    event.payload = _json_safe(
        {
            "id": event.id,
            "event": event_type,
            "created_at": at,
            "data": {"type": data_type, "id": data_id, "object": data_object},
        }
    )
    event.body = serialize(event.payload)
    return event


def event_record(
    *,
    merchant_id: UUID,
    event_type: str,
    data_type: str,
    data_id: UUID,
    data_object: dict[str, Any],
    at: datetime,
    fan_out: bool = True,
) -> Event:
    """Record one event. Call it inside the transaction that makes the state change, so the
    event exists if and only if the change committed. data_object is the snapshot at `at`.
    A delivery is created for each enabled endpoint subscribed to the event type, and sent
    after commit (`fan_out=False`: none)."""
    event = event_new(
        merchant_id=merchant_id,
        event_type=event_type,
        data_type=data_type,
        data_id=data_id,
        data_object=data_object,
        at=at,
    )
    with joined_atomic():
        event.save(force_insert=True)
        if fan_out:
            deliveries_fan_out(event=event)
    return event


def endpoint_send_test_event(*, endpoint_id: UUID, now: datetime) -> Delivery:
    """Record a `webhook.test` event for the endpoint's merchant and deliver it like any other."""
    with transaction.atomic():
        endpoint = WebhookEndpoint.objects.filter(pk=endpoint_id).first()
        if endpoint is None:
            raise NotFound()
        if not endpoint.enabled:
            raise WebhookNotConfigured("The webhook endpoint is disabled.")
        event = event_record(
            fan_out=False,
            merchant_id=endpoint.merchant_id,
            event_type=TEST_EVENT_TYPE,
            data_type="test",
            data_id=endpoint.id,
            data_object={
                "id": endpoint.id,
                "message": "Test event from Cowry: your endpoint is reachable.",
                "created_at": now,
            },
            at=now,
        )
        (delivery,) = deliveries_create(pairs=[(event.pk, endpoint.pk)], now=now)
        return delivery
