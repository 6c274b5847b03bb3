"""The safety net of delivery: the beat sweep hands to the broker every due delivery whose task
was never enqueued, was lost, or whose worker died mid-attempt; lost attempts to disabled
endpoints are closed; and the ops command sends what is due in its own process."""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from webhooks import selectors
from webhooks.models import Delivery, DeliveryStatus
from webhooks.services.delivery import _lost_attempt_close, delivery_attempt, lease_seconds
from webhooks.services.events import deliveries_enqueue_after_commit


def deliveries_release_lost_leases(*, now: datetime, limit: int = 500) -> int:
    """Close the lost attempts of deliveries to disabled endpoints (part of the beat sweep).
    The claim that closes a lost attempt takes enabled endpoints only, so a delivery whose
    sender died while its endpoint was off read `delivering` as long as it stayed off, though
    nothing was sending it. Once its lease is over it is pending (or failed, after its
    seventh), as that claim would leave it; switched back on, the endpoint gets it like any
    pending delivery. Returns the number of deliveries released."""
    with transaction.atomic():
        lost = list(
            Delivery.objects.select_for_update(skip_locked=True, of=("self",))
            .annotate(merchant_id=F("endpoint__merchant_id"))  # as DELIVERY_CLAIM_READ's
            .filter(
                status=DeliveryStatus.DELIVERING,
                next_attempt_at__lte=now,
                endpoint__enabled=False,
            )
            .order_by("next_attempt_at")[:limit]
        )
        for delivery in lost:
            _lost_attempt_close(delivery, now=now)
    return len(lost)


@dataclass(frozen=True)
class SentDue:
    """The attempts deliveries_send_due made, and how many the receivers acknowledged
    (delivered) or not (failed: retried on the schedule, or failed for good)."""

    attempted: int
    delivered: int
    failed: int


def deliveries_send_due(*, now: datetime | None = None, limit: int = 100) -> SentDue:
    """Attempt every due delivery once, in this process (the `deliver_webhooks` command). Without
    `now`, each attempt reads the clock, so its signature timestamp is fresh. Lost attempts to
    disabled endpoints are closed first, as the beat sweep closes them."""
    deliveries_release_lost_leases(now=now or timezone.now())
    due_ids = selectors.deliveries_due(now=now or timezone.now(), limit=limit)
    statuses = [delivery_attempt(delivery_id=delivery_id, now=now) for delivery_id in due_ids]
    made = [status for status in statuses if status is not None]
    delivered = made.count(DeliveryStatus.SUCCEEDED)
    return SentDue(attempted=len(made), delivered=delivered, failed=len(made) - delivered)


def deliveries_dispatch_due(*, now: datetime, limit: int = 500) -> int:
    """The beat sweep: enqueue a `deliver_webhook` task for each due delivery that has not been
    handed to the broker for its current due time (or whose hand-off is older than a lease, so
    a lost message is sent again); first, a lost attempt to a disabled endpoint is closed
    (deliveries_release_lost_leases). Returns the number of tasks enqueued."""
    deliveries_release_lost_leases(now=now)
    stale = now - timedelta(seconds=lease_seconds())
    with transaction.atomic():
        ids = list(
            Delivery.objects.select_for_update(skip_locked=True, of=("self",))
            .filter(status__in=selectors.OPEN_STATUSES, next_attempt_at__lte=now)
            .filter(endpoint__enabled=True)
            .filter(
                Q(dispatched_at__isnull=True)
                | Q(dispatched_at__lt=F("next_attempt_at"))
                | Q(dispatched_at__lte=stale)
            )
            .order_by("next_attempt_at")
            .values_list("id", flat=True)[:limit]
        )
        Delivery.objects.filter(pk__in=ids).update(dispatched_at=now, updated_at=now)
        deliveries_enqueue_after_commit(ids)
    return len(ids)
