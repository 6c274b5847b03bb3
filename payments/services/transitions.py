"""What the payin, payout and refund state machines share on core.transitions: the move of a
locked payment, its refusal and history, the reasons they record, the provider's callbacks,
and what a late answer leaves behind."""

import logging
from datetime import datetime

from core.transactions import log_on_commit
from core.transitions import InvalidTransition, StateMachine, transition_locked
from payments import provider
from payments.ledger.discrepancies import provider_discrepancy_record
from payments.models import Payin, Payout, Refund

logger = logging.getLogger("cowry.payments")

# The legs whose answers the provider brings back (payments.provider.ANSWER_APPLIERS).
PAYIN_CALLBACK = "payin"
PAYOUT_CALLBACK = "payout"
REFUND_CALLBACK = "refund"

REASON_PROVIDER_TIMEOUT = "provider_timeout"
REASON_SUBMITTED = "submitted_to_provider"
REASON_MARKED_FAILED = "marked_failed_by_support"
# Failures Cowry decides (logged where they are decided); any other is the provider's answer.
OUR_FAILURE_REASONS = {REASON_PROVIDER_TIMEOUT, REASON_MARKED_FAILED}

TERMINAL = {"completed", "failed"}

Payment = Payin | Payout | Refund


def _stamps(to: str, *, at: datetime, reason: str) -> dict[str, object]:
    """What a move to `to` writes beside status and updated_at."""
    if to == "pending":
        return {"submitted_at": at}
    if to == "completed":
        return {"completed_at": at}
    return {"failed_at": at, "failure_reason": reason}


def payment_refused(payment: Payment, was: str, to: str) -> InvalidTransition:
    return InvalidTransition(f"A {was} {payment._meta.model_name} cannot become {to}.")


def payment_history_write(payment: Payment, *, was: str, reason: str, at: datetime) -> None:
    payment.history.create(status=payment.status, reason=reason, created_at=at)


def decline_log(payment: Payment, *, at: datetime, reason: str) -> None:
    """A failure the provider decided, logged once the move commits (ours are logged where
    they are decided)."""
    if reason not in OUR_FAILURE_REASONS:
        log_on_commit(
            logger,
            logging.INFO,
            "%s %s of merchant %s failed: declined by the provider (%s)",
            type(payment).__name__,
            payment.id,
            payment.merchant_id,
            reason or "no reason given",
        )


def payment_move_locked(
    payment: Payment,
    *,
    to: str,
    reason: str,
    at: datetime,
    provider_reference: str,
    machine: StateMachine,
) -> Payment:
    """Move a payment whose row the caller's transaction has locked through `machine` (the
    one transition_locked). Moving to the current status changes nothing but keeps a provider
    reference the payment did not have."""
    kept = []
    # The first reference we hear of is kept, and the one a completion names replaces it (MTN's
    # transaction id replaces its request's id).
    completes = to == "completed" and payment.status != to
    if provider_reference and (
        not payment.provider_reference
        or (completes and payment.provider_reference != provider_reference)
    ):
        payment.provider_reference = provider_reference
        kept = ["provider_reference"]
    if payment.status == to:
        if kept:
            payment.save(update_fields=kept)
        return payment
    changes = {"status": to, "updated_at": at, **_stamps(to, at=at, reason=reason)}
    return transition_locked(
        payment, machine=machine, move=to, changes=changes, at=at, reason=reason, kept=kept
    )


def late_answer_ignored(
    *,
    payment: Payin | Payout | Refund,
    resource_type: str,
    provider_reference: str,
    outcome: str,
    reason: str,
    at: datetime,
) -> None:
    """An answer for a payment already final: kept for reconciliation when it contradicts. Its
    provider reference is kept on a payment that has none (failed before its receipt came)."""
    if provider_reference and not payment.provider_reference:
        type(payment).objects.filter(pk=payment.pk, provider_reference="").update(
            provider_reference=provider_reference
        )
    final = payment.status in (provider.COMPLETED, provider.FAILED)
    if final and outcome != payment.status:
        provider_discrepancy_record(
            merchant=payment.merchant,
            resource_type=resource_type,
            resource_id=payment.id,
            reference=str(payment.id),
            provider_reference=provider_reference,
            outcome=outcome,
            reason=reason,
            our_status=payment.status,
            at=at,
        )
    logger.warning(
        "Late provider answer %s for %s %s ignored (%s)", outcome, resource_type, payment.id, reason
    )
