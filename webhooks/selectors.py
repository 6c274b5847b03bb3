from datetime import datetime
from uuid import UUID

from django.db import models
from django.db.models import Case, Exists, OuterRef, Prefetch, Q, QuerySet, Value, When

from core import pagination, secrets_at_rest
from core.exceptions import NotFound
from merchants.models import Merchant
from webhooks.models import TEST_EVENT_TYPE, Delivery, DeliveryStatus, Event, WebhookEndpoint

OPEN_STATUSES = (DeliveryStatus.PENDING, DeliveryStatus.DELIVERING)


def failing_deliveries(deliveries: QuerySet[Delivery] | None = None) -> QuerySet[Delivery]:
    """The one definition of a failing delivery, counted on every dashboard home and listed by
    the deliveries' "failing" filter: failed for good, or still retried after a failed
    attempt."""
    deliveries = Delivery.objects.all() if deliveries is None else deliveries
    return deliveries.filter(
        Q(status=DeliveryStatus.FAILED) | Q(status__in=OPEN_STATUSES, attempts__gt=0)
    )


def endpoint_signing_secret(*, endpoint: WebhookEndpoint) -> str:
    """The endpoint's signing secret in clear (an owner's audited reveal);
    secrets_at_rest.UnreadableSecret when no key of WEBHOOK_SECRETS_KEYS decrypts it."""
    return secrets_at_rest.decrypt(endpoint.signing_secret)


def deliveries_due(*, now: datetime, limit: int) -> list[UUID]:
    """Deliveries that may be claimed at `now`: a pending one whose retry is due, or one whose
    worker's lease has run out. Oldest due first."""
    return list(
        Delivery.objects.filter(
            status__in=OPEN_STATUSES, next_attempt_at__lte=now, endpoint__enabled=True
        )
        .order_by("next_attempt_at")
        .values_list("id", flat=True)[:limit]
    )


def deliveries_failed_not_resent(
    *, merchant: Merchant, since: datetime, endpoint_ids: list[UUID]
) -> list[tuple[UUID, UUID]]:
    """(event id, endpoint id) of each failed delivery of the merchant created at or after
    `since` to one of these endpoints, with no later delivery of its event to that endpoint (a
    re-send since, or a retry still under way), oldest first."""
    later = Delivery.objects.filter(
        event_id=OuterRef("event_id"),
        endpoint_id=OuterRef("endpoint_id"),
        created_at__gt=OuterRef("created_at"),
    )
    return list(
        Delivery.objects.filter(
            event__merchant=merchant,
            status=DeliveryStatus.FAILED,
            created_at__gte=since,
            endpoint_id__in=endpoint_ids,
        )
        .exclude(Exists(later))
        .order_by("created_at", "id")
        .values_list("event_id", "endpoint_id")
    )


def events_missed(*, endpoint: WebhookEndpoint, since: datetime) -> list[UUID]:
    """The ids of the events of the endpoint's merchant recorded at or after `since`, and after
    the endpoint was created, that it is subscribed to (as it is now) and never got a delivery
    of: recorded while it was disabled (an event fans out to the enabled endpoints only).
    A test event is of one endpoint and never missed by another. Oldest first; the merchant's
    events by time (`event_merchant_page`), each looked up in the deliveries of its event."""
    events = (
        Event.objects.filter(
            merchant_id=endpoint.merchant_id,
            created_at__gte=since,
            created_at__gt=endpoint.created_at,
        )
        .exclude(event_type=TEST_EVENT_TYPE)
        .exclude(Exists(Delivery.objects.filter(event_id=OuterRef("pk"), endpoint=endpoint)))
    )
    if endpoint.event_types:
        events = events.filter(event_type__in=endpoint.event_types)
    return list(events.order_by("created_at", "id").values_list("pk", flat=True))


def events_about(*, data_type: str, data_id: UUID) -> QuerySet[Event]:
    """The events of one payin, payout or transfer, oldest first, with their deliveries (and
    each delivery's endpoint) prefetched: the dashboard shows them on the resource's page."""
    deliveries = Delivery.objects.select_related("endpoint").order_by("created_at")
    return (
        Event.objects.filter(data_type=data_type, data_id=data_id)
        .prefetch_related(Prefetch("deliveries", queryset=deliveries))
        .order_by("created_at")
    )


class EventNotFound(NotFound):
    reason = "event_not_found"
    message = "The event does not exist."


class EventDeliveryStatus(models.TextChoices):
    """One summary of an event's deliveries, across its endpoints and re-sends."""

    NONE = "none"  # no delivery: no endpoint subscribed when it happened
    PENDING = "pending"  # a delivery is waiting for or making an attempt
    FAILED = "failed"  # a delivery failed and no later one to that endpoint succeeded
    SUCCEEDED = "succeeded"


def _with_delivery_status(queryset: QuerySet[Event]) -> QuerySet[Event]:
    deliveries = Delivery.objects.filter(event_id=OuterRef("pk"))
    succeeded_later = Delivery.objects.filter(
        event_id=OuterRef("event_id"),
        endpoint_id=OuterRef("endpoint_id"),
        status=DeliveryStatus.SUCCEEDED,
        created_at__gt=OuterRef("created_at"),
    )
    unresolved_failure = deliveries.filter(status=DeliveryStatus.FAILED).exclude(
        Exists(succeeded_later)
    )
    return queryset.annotate(
        delivery_status=Case(
            When(
                Exists(deliveries.filter(status__in=OPEN_STATUSES)),
                then=Value(EventDeliveryStatus.PENDING),
            ),
            When(Exists(unresolved_failure), then=Value(EventDeliveryStatus.FAILED)),
            When(
                Exists(deliveries.filter(status=DeliveryStatus.SUCCEEDED)),
                then=Value(EventDeliveryStatus.SUCCEEDED),
            ),
            default=Value(EventDeliveryStatus.NONE),
            output_field=models.CharField(),
        )
    )


def event_get(*, merchant: Merchant, event_id: UUID) -> Event:
    """The merchant's event with its delivery_status; another merchant's is a 404."""
    event = _with_delivery_status(Event.objects.filter(merchant=merchant, pk=event_id)).first()
    if event is None:
        raise EventNotFound()
    return event


def event_list(
    *,
    merchant: Merchant,
    page: pagination.PageRequest,
    type: str | None = None,
    data_id: UUID | None = None,
    delivery_status: str | None = None,
    created_gte: datetime | None = None,
    created_lt: datetime | None = None,
) -> pagination.Page:
    """The merchant's events, newest first, one page (GET /events)."""
    queryset = pagination.filtered(
        Event.objects.filter(merchant=merchant),
        event_type=type,
        data_id=data_id,
        created_gte=created_gte,
        created_lt=created_lt,
    )
    queryset = _with_delivery_status(queryset)
    if delivery_status is not None:
        queryset = queryset.filter(delivery_status=delivery_status)
    return pagination.paginate(queryset, page=page)
