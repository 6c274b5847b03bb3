"""A payment's provider submission, enqueued after its creation commits (the sending is in
payments.services.submission; a submission the broker lost is the sweep's)."""

from core import jobs
from payments.models import Payin, Payout, Refund

# Each kind of payment's submission task, and the keyword that names the payment.
SUBMIT_TASKS = {
    Payin: ("payments.tasks.submit_payin", "payin_id"),
    Payout: ("payments.tasks.submit_payout", "payout_id"),
    Refund: ("payments.tasks.submit_refund", "refund_id"),
}


def submission_enqueue_on_commit(payment: Payin | Payout | Refund) -> None:
    task, keyword = SUBMIT_TASKS[type(payment)]
    jobs.enqueue_on_commit(task, **{keyword: str(payment.id)})
