from celery import shared_task
from django.utils import timezone

from quotes import services


@shared_task(acks_late=True)
def expire_quotes(**_: object) -> int:
    """Beat, every minute: mark active quotes past expires_at as expired (one UPDATE)."""
    return services.quotes_expire(now=timezone.now())
