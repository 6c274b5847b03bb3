"""A customer's KYC status: the one state machine that moves it, with its history row."""

from datetime import datetime
from typing import Any
from uuid import UUID

from django.db import transaction

from core.exceptions import DomainError
from core.transitions import StateMachine, transition_locked
from customers import services as customer_services
from customers.models import Customer, KycStatus
from kyc.models import KycStatusChange


class KycTransitionRefused(DomainError):
    status = 409
    reason = "kyc_transition_not_allowed"
    message = "This kyc_status change is not allowed."


# Moves the system makes: a submission puts the customer in review (also after a rejection,
# and after an approval: a resubmission re-opens the review), the reviewer decides.
KYC_ALLOWED = {
    KycStatus.NOT_STARTED: {KycStatus.PENDING},
    KycStatus.PENDING: {KycStatus.APPROVED, KycStatus.REJECTED},
    KycStatus.REJECTED: {KycStatus.PENDING},
    KycStatus.APPROVED: {KycStatus.PENDING},
}
# A support user may also overturn a decision by hand.
KYC_ALLOWED_BY_SUPPORT = {
    KycStatus.PENDING: {KycStatus.APPROVED, KycStatus.REJECTED},
    KycStatus.REJECTED: {KycStatus.APPROVED},
    KycStatus.APPROVED: {KycStatus.REJECTED},
}


def _kyc_refused(customer: Customer, was: str, to: str) -> KycTransitionRefused:
    return KycTransitionRefused(
        f"kyc_status cannot move from {KycStatus(was).value} to {KycStatus(to).value}."
    )


def _kyc_history_write(
    customer: Customer,
    *,
    was: str,
    reason: str,
    at: datetime,
    submission_id: UUID | None,
    changed_by: Any,
) -> None:
    """The move's KycStatusChange row, with the submission and the support user behind it."""
    KycStatusChange.objects.create(
        customer=customer,
        from_status=was,
        to_status=customer.kyc_status,
        reason=reason[:500],
        submission_id=submission_id,
        changed_by=changed_by,
        created_at=at,
    )


def _kyc_status(customer: Customer) -> str:
    return customer.kyc_status


KYC_MACHINE = StateMachine(
    allowed=KYC_ALLOWED, refused=_kyc_refused, history=_kyc_history_write, state=_kyc_status
)
KYC_MACHINE_BY_SUPPORT = StateMachine(
    allowed=KYC_ALLOWED_BY_SUPPORT,
    refused=_kyc_refused,
    history=_kyc_history_write,
    state=_kyc_status,
)


def customer_kyc_transition(
    *,
    customer_id: UUID,
    to: str,
    reason: str = "",
    at: datetime,
    changed_by: Any = None,
    submission_id: UUID | None = None,
) -> Customer:
    """The one way to change a customer's kyc_status: checks the move, saves it and writes the
    history row (KycStatusChange) in one transaction, through core.transitions. Moving to the
    current status is a no-op. `changed_by` is the support user making a manual decision
    (None for the system)."""
    to = KycStatus(to)
    with transaction.atomic():
        # FOR NO KEY UPDATE: KYC's writers take turns; the customer's quotes and payments
        # (whose inserts lock its key) do not wait for them
        customer = customer_services.customer_lock(customer_id=customer_id)
        if customer.kyc_status == to:
            return customer
        return transition_locked(
            customer,
            machine=KYC_MACHINE_BY_SUPPORT if changed_by is not None else KYC_MACHINE,
            move=to,
            changes={"kyc_status": to},
            kept=["updated_at"],  # auto_now
            at=at,
            reason=reason,
            context={"submission_id": submission_id, "changed_by": changed_by},
        )
