"""Thin Celery tasks: each calls one service. All are routed to the "provider" queue."""

import logging
from datetime import datetime
from uuid import UUID

from celery import shared_task
from django.db import InterfaceError, OperationalError
from django.utils import timezone

from payments.ledger.checks import ledger_check_recorded
from payments.provider import ProviderUnavailable, deliver_answer
from payments.services.submission import (
    payin_submit,
    payout_submit,
    provider_status_check,
    refund_submit,
)
from payments.services.sweeps import (
    payments_ask_provider,
    payments_fail_timed_out,
    payments_stale_submissions,
    refunds_stale_submissions,
)
from webhooks.services.delivery import deliveries_sent_here

logger = logging.getLogger("cowry.payments")


# A deadlock victim or a dropped database connection is transient; every service these tasks
# call is idempotent, so retrying is always safe and a provider answer is never lost to it.
TRANSIENT_DATABASE_ERRORS = (OperationalError, InterfaceError)


@shared_task(
    acks_late=True,
    autoretry_for=TRANSIENT_DATABASE_ERRORS,
    retry_backoff=True,
    retry_backoff_max=60,
    retry_jitter=True,
    max_retries=20,
)
def deliver_provider_answer(
    *,
    callback: str,
    reference: str,
    provider_reference: str,
    outcome: str,
    reason: str = "",
    **_: object,
) -> None:
    """The simulated provider's callback. Applying an answer twice changes nothing. The
    payment's webhook is sent from here once the answer commits (no task of its own)."""
    with deliveries_sent_here():
        deliver_answer(
            callback=callback,
            reference=reference,
            provider_reference=provider_reference,
            outcome=outcome,
            reason=reason,
        )


@shared_task(
    acks_late=True,
    autoretry_for=(ProviderUnavailable, *TRANSIENT_DATABASE_ERRORS),
    retry_backoff=True,
    retry_backoff_max=60,
    retry_jitter=True,
    max_retries=5,
)
def provider_callback_check(*, connection: str, leg: str, reference: str, **_: object) -> None:
    """A real operator's callback: read the status it hints at and apply it (the polls and the
    timeout sweep find the leg again if this gives up)."""
    provider_status_check(connection=connection, leg=leg, reference=reference)


@shared_task(acks_late=True)
def check_ledger(**_: object) -> dict:
    """Nightly: verify every ledger invariant; a breach is logged as an error."""
    report = ledger_check_recorded(at=timezone.now())
    if report["breaches"]:
        logger.error("Ledger check found %d breaches: %s", len(report["breaches"]), report)
    return report


PROVIDER_TASK_OPTIONS = {
    "acks_late": True,
    "autoretry_for": (ProviderUnavailable, *TRANSIENT_DATABASE_ERRORS),
    "retry_backoff": True,
    "retry_jitter": True,
    "max_retries": 8,
}


# The submissions send the webhook of an answer that comes in the receipt themselves.
@shared_task(**PROVIDER_TASK_OPTIONS)
def submit_payin(*, payin_id: str, **_: object) -> None:
    with deliveries_sent_here():
        payin_submit(payin_id=UUID(payin_id), now=timezone.now())


@shared_task(**PROVIDER_TASK_OPTIONS)
def submit_payout(*, payout_id: str, **_: object) -> None:
    with deliveries_sent_here():
        payout_submit(payout_id=UUID(payout_id), now=timezone.now())


@shared_task(**PROVIDER_TASK_OPTIONS)
def submit_refund(*, refund_id: str, **_: object) -> None:
    with deliveries_sent_here():
        refund_submit(refund_id=UUID(refund_id), now=timezone.now())


@shared_task(acks_late=True)
def fail_timed_out_payments(**_: object) -> int:
    """Beat: fail legs the provider never answered within PROVIDER_TIMEOUT_SECONDS (see
    payments_fail_timed_out for the ones it answers late or cannot be asked about), and
    re-enqueue submissions whose enqueue after commit was lost (submitting is idempotent)."""
    now = timezone.now()
    failed = payments_fail_timed_out(now=now)
    _resubmit_stale(now=now)
    return failed


@shared_task(acks_late=True)
def ask_provider_about_overdue_payments(**_: object) -> int:
    """Beat: ask the provider about payments whose answer is overdue (one lost with a killed
    worker is applied within a run or two of it, not at the broker's visibility timeout), and
    re-enqueue submissions whose enqueue after commit was lost (submitting is idempotent)."""
    now = timezone.now()
    applied = payments_ask_provider(now=now)
    _resubmit_stale(now=now)
    return applied


def _resubmit_stale(*, now: datetime) -> None:
    payin_ids, payout_ids = payments_stale_submissions(now=now)
    for payin_id in payin_ids:
        submit_payin.delay(payin_id=str(payin_id))
    for payout_id in payout_ids:
        submit_payout.delay(payout_id=str(payout_id))
    for refund_id in refunds_stale_submissions(now=now):
        submit_refund.delay(refund_id=str(refund_id))
