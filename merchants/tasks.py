from celery import shared_task

from merchants import idempotency


@shared_task
def purge_expired_idempotency_records() -> int:
    return idempotency.purge_expired()
