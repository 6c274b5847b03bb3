from uuid import UUID

from celery import shared_task
from django.utils import timezone

from webhooks.services.delivery import delivery_attempt
from webhooks.services.endpoints import endpoints_disable_failing
from webhooks.services.sweeps import deliveries_dispatch_due


@shared_task(acks_late=True, ignore_result=True)
def deliver_webhook(*, delivery_id: str, **_: object) -> None:
    """One attempt of one delivery (routed to the `webhooks` queue), enqueued after the commit
    that made it due, or for the due time of a retry soon. It may run twice or early: the
    claim takes a due delivery nobody holds, once. A failure is recorded and scheduled in the
    database; the task itself never retries or sleeps."""
    delivery_attempt(delivery_id=UUID(delivery_id))


@shared_task(ignore_result=True)
def deliver_due_webhooks(**_: object) -> None:
    """Beat, every 30 s: hand every due delivery whose task was never enqueued or was lost to
    the `webhooks` queue (the safety net)."""
    deliveries_dispatch_due(now=timezone.now())


@shared_task(ignore_result=True)
def disable_failing_endpoints(**_: object) -> None:
    """Beat, hourly: disable the endpoints whose every delivery failed for 5 days."""
    endpoints_disable_failing(now=timezone.now())
