"""Thin Celery tasks: each calls one service. Routed to the "provider" queue."""

from uuid import UUID

from celery import shared_task
from django.utils import timezone

from payments.tasks import PROVIDER_TASK_OPTIONS
from transfers.services.submission import transfer_submit_collection, transfer_submit_disbursement
from transfers.services.sweeps import (
    transfers_ask_overdue_answers,
    transfers_fail_timed_out,
    transfers_stale_submissions,
)


@shared_task(**PROVIDER_TASK_OPTIONS)
def submit_transfer_collection(*, transfer_id: str, **_: object) -> None:
    transfer_submit_collection(transfer_id=UUID(transfer_id), now=timezone.now())


@shared_task(**PROVIDER_TASK_OPTIONS)
def submit_transfer_disbursement(*, transfer_id: str, attempt: int, **_: object) -> None:
    transfer_submit_disbursement(
        transfer_id=UUID(transfer_id), attempt=int(attempt), now=timezone.now()
    )


@shared_task(acks_late=True)
def fail_timed_out_transfers(**_: object) -> int:
    """Beat, the safety net of the legs: ask the provider about answers that are overdue (lost
    with a killed worker, say), fail legs it never answered within PROVIDER_TIMEOUT_SECONDS,
    and re-enqueue submissions whose enqueue after commit was lost (submitting is
    idempotent)."""
    now = timezone.now()
    transfers_ask_overdue_answers(now=now)
    failed = transfers_fail_timed_out(now=now)
    for transfer_id, attempt in transfers_stale_submissions(now=now):
        if attempt is None:
            submit_transfer_collection.delay(transfer_id=str(transfer_id))
        else:
            submit_transfer_disbursement.delay(transfer_id=str(transfer_id), attempt=attempt)
    return failed
