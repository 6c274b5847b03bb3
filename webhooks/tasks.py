from uuid import UUID

from celery import Task, shared_task
from django.utils import timezone

from config import shared_cache
from webhooks import services


@shared_task(acks_late=True, ignore_result=True)
def deliver_webhook(*, delivery_id: str, **_: object) -> None:
    """One attempt of one delivery (routed to the `webhooks` queue). A failure is recorded and
    scheduled in the database; the task itself never retries or sleeps."""
    services.delivery_attempt(delivery_id=UUID(delivery_id))


@shared_task(bind=True, acks_late=True, ignore_result=True)
def send_webhooks(self: Task, helper: bool = False, **_: object) -> None:
    """Send due deliveries until none is left (routed to the `webhooks` queue); enqueued when
    deliveries are created, at most one waiting at a time (services._sender_wake)."""
    services.deliveries_send(
        linger=shared_cache.linger_seconds(self.request),
        gather=shared_cache.gather_seconds(self.request),
        helper=helper,
    )


@shared_task(ignore_result=True)
def deliver_due_webhooks(**_: object) -> None:
    """Beat, every 30 s: hand every due delivery to the `webhooks` queue."""
    services.deliveries_dispatch_due(now=timezone.now())


@shared_task(ignore_result=True)
def disable_failing_endpoints(**_: object) -> None:
    """Beat, hourly: disable the endpoints whose every delivery failed for 5 days."""
    services.endpoints_disable_failing(now=timezone.now())
