"""A payment's provider submission, enqueued after its creation commits (the sending is in
payments.services.submission)."""

import logging

from django.db import transaction
from kombu.exceptions import OperationalError as BrokerError

from config import jobs
from payments.models import Payin, Payout, Refund

logger = logging.getLogger("cowry.payments")

# Each kind of payment's submission task, and the keyword that names the payment.
SUBMIT_TASKS = {
    Payin: ("payments.tasks.submit_payin", "payin_id"),
    Payout: ("payments.tasks.submit_payout", "payout_id"),
    Refund: ("payments.tasks.submit_refund", "refund_id"),
}


def submission_enqueue(payment: Payin | Payout | Refund) -> None:
    """Enqueue the payment's provider submission. A broker that is down must not turn a
    committed payment into a 500: the sweep of lost submissions resubmits it."""
    task, keyword = SUBMIT_TASKS[type(payment)]
    try:
        jobs.enqueue(task, **{keyword: str(payment.id)})
    except BrokerError:
        logger.warning(
            "Broker unreachable; %s %s left to the sweep of lost submissions",
            type(payment).__name__.lower(),
            payment.id,
        )


def submission_enqueue_on_commit(payment: Payin | Payout | Refund) -> None:
    # robust: whatever the enqueue raises is logged, never a 500 for a committed payment
    transaction.on_commit(lambda: submission_enqueue(payment), robust=True)
