"""Refunds: creation with the wallet's reservation (never more than the payin's amount), the
one state machine (refund_transition) and its effects, provider answers."""

from datetime import datetime
from decimal import Decimal
from typing import Any
from uuid import UUID

from django.db import transaction
from django.db.models import Exists, OuterRef, QuerySet, Sum

from core import money
from core.exceptions import DomainError
from core.transitions import InvalidTransition, StateMachine
from merchants.models import Merchant
from payments import provider
from payments.ledger.discrepancies import refund_holds_its_payin
from payments.ledger.reservations import (
    Reservation,
    reservation_hold,
    reservation_pay,
    reservation_release,
)
from payments.models import (
    Payin,
    PayinStatus,
    ProviderDiscrepancy,
    Refund,
    RefundHistory,
    RefundStatus,
)
from payments.selectors import PayinNotFound
from payments.services import enqueue, parties, transitions
from payments.services.transitions import late_answer_ignored
from quotes import selectors as quote_selectors
from quotes import services as quote_services
from webhooks.services.events import event_record

REFUND_ALLOWED = {
    RefundStatus.PENDING: {RefundStatus.COMPLETED, RefundStatus.FAILED},
}


class PayinNotRefundable(DomainError):
    status = 400
    reason = "payin_not_refundable"
    message = "Only a completed payin can be refunded."


class RefundExceedsPayin(DomainError):
    status = 400
    reason = "refund_exceeds_payin"
    message = "The refund is more than what remains refundable of the payin."


def refundable_remainder(payin: Payin) -> Decimal:
    """The payin's send_amount less its refunds that hold part of it."""
    refunded = Refund.objects.filter(refund_holds_its_payin(), payin=payin).aggregate(
        total=Sum("amount")
    )["total"]
    return payin.send_amount - (refunded or Decimal(0))


def refund_create(
    *,
    merchant: Merchant,
    payin_id: UUID,
    amount: Decimal | None = None,
    reason: str = "",
    now: datetime,
) -> Refund:
    """Refund `amount` (None: the whole refundable remainder) of the merchant's completed payin
    to its payer: reserved from the wallet at once (400 insufficient_balance, nothing changed,
    when it is short); the provider submission is enqueued when the transaction commits. The
    payin's row is locked while its refunds are summed, so concurrent refunds never exceed it.
    Refused (payin_not_refundable) while the provider says, unreconciled, that the payin's
    collection failed after all."""
    with transaction.atomic():
        payin = (
            Payin.objects.select_for_update(of=("self",))
            .filter(pk=payin_id, merchant=merchant)
            .annotate(reported_failed=Exists(_reported_failed()))
            .first()
        )
        _refundable_check(payin)
        amount = _refund_amount(payin, amount)
        refund = Refund.objects.create(
            merchant=merchant,
            payin=payin,
            customer_id=payin.customer_id,
            status=RefundStatus.PENDING,
            amount=amount,
            currency=payin.send_currency,
            reason=reason,
            recipient=dict(payin.source),
            country_code=payin.country_code,
            rail_type=payin.rail_type,
            operator_code=payin.operator_code,
            provider_connection=payin.provider_connection,  # back the way the money came
            wallet_impact={
                "debit_amount": money.format_amount(amount),
                "currency": payin.send_currency,
            },
            provider_timeout_at=parties.provider_timeout_at(now),
            created_at=now,
            updated_at=now,
        )
        pending = RefundHistory.objects.create(
            refund=refund, status=RefundStatus.PENDING, created_at=now
        )
        refund.history_entries = [pending]
        reservation_hold(_refund_reservation(refund))
        enqueue.submission_enqueue_on_commit(refund)
    return refund


def _refundable_check(payin: Payin | None) -> None:
    """The locked payin exists, is completed, and the provider has not since reported it failed."""
    if payin is None:
        raise PayinNotFound()
    if payin.status != PayinStatus.COMPLETED:
        raise PayinNotRefundable(f"A {payin.status} payin cannot be refunded.")
    if payin.reported_failed:
        raise PayinNotRefundable(
            "The provider reported this payin's collection as failed after it completed (a "
            "reversal, say): the payer may never have paid, and a refund would pay out money "
            "the provider says it does not hold. Support reconciles it first."
        )


def _reported_failed() -> QuerySet[ProviderDiscrepancy]:
    """The provider's unreconciled "failed" for the (outer) payin: its collection failed after
    all, though we completed it (a reversal, say)."""
    return ProviderDiscrepancy.objects.filter(
        resource_type="payin",
        resource_id=OuterRef("pk"),
        provider_outcome=provider.FAILED,
        resolved_at__isnull=True,
    )


def _refund_amount(payin: Payin, amount: Decimal | None) -> Decimal:
    """The amount asked for (None: the refundable remainder), in whole units of the payin's
    currency, within the remainder and within the operator's limits (a refund is paid by the
    operator as any disbursement)."""
    if amount is not None and not money.has_valid_precision(amount, payin.send_currency):
        message = f"{payin.send_currency} has no minor unit: send a whole amount."
        raise quote_services.InvalidAmountPrecision(message, field="amount")
    remainder = refundable_remainder(payin)
    if remainder <= 0 or (amount is not None and amount > remainder):
        refundable = money.format_amount(max(remainder, Decimal(0)))
        raise RefundExceedsPayin(
            f"At most {refundable} {payin.send_currency} of this payin can still be refunded.",
            details={
                "refundable": refundable,
                "requested": money.format_amount(remainder if amount is None else amount),
                "currency": payin.send_currency,
            },
        )
    amount = remainder if amount is None else money.quantize(amount, payin.send_currency)
    operator = quote_selectors.operator_get(code=payin.operator_code)
    quote_services.check_within_limits(amount, operator, field="amount")
    return amount


def refund_snapshot(refund: Refund) -> dict[str, Any]:
    """data.object of the refund.* events."""
    return {
        "id": refund.id,
        "payin_id": refund.payin_id,
        "status": refund.status,
        "amount": money.format_amount(refund.amount),
        "currency": refund.currency,
        "operator_code": refund.operator_code,
        "provider_reference": refund.provider_reference or None,
        "wallet_impact": refund.wallet_impact,
        "completed_at": refund.completed_at,
        "failed_at": refund.failed_at,
        "failure_reason": refund.failure_reason or None,
    }


def refund_transition(
    *,
    refund_id: UUID,
    to: str,
    reason: str = "",
    at: datetime,
    provider_reference: str = "",
) -> Refund:
    """The one way a refund changes status: locks it, checks the move (InvalidTransition),
    writes the status and its history, then applies the move's effects (the reservation paid
    out or released, the webhook event), in one transaction. Moving to the current status
    changes nothing (but keeps a provider reference it did not have)."""
    with transaction.atomic():
        refund = Refund.objects.select_for_update(of=("self",)).filter(pk=refund_id).first()
        if refund is None:
            raise Refund.DoesNotExist(f"No refund {refund_id}.")
        return transitions.payment_move_locked(
            refund,
            to=to,
            reason=reason,
            at=at,
            provider_reference=provider_reference,
            machine=REFUND_MACHINE,
        )


def _refund_reservation(refund: Refund) -> Reservation:
    return Reservation(
        merchant_id=refund.merchant_id,
        currency=refund.currency,
        resource_type="refund",
        resource_id=refund.id,
        amount=refund.amount,
    )


def _refund_pay(refund: Refund, *, at: datetime, **_: object) -> None:
    """A completed refund: the reservation pays the provider's clearing (no fee)."""
    reservation_pay(
        _refund_reservation(refund), operator_code=refund.operator_code, paid=refund.amount, at=at
    )


def _refund_release(refund: Refund, *, at: datetime, **_: object) -> None:
    """A failed refund: the reservation goes back to the available balance."""
    reservation_release(_refund_reservation(refund), at=at)


def _refund_event_record(refund: Refund, *, at: datetime, **_: object) -> None:
    event_record(
        merchant_id=refund.merchant_id,
        event_type=f"refund.{refund.status}",
        data_type="refund",
        data_id=refund.id,
        data_object=refund_snapshot(refund),
        at=at,
    )


_REFUND_EFFECTS = {
    RefundStatus.COMPLETED: (_refund_pay, _refund_event_record),
    RefundStatus.FAILED: (transitions.decline_log, _refund_release, _refund_event_record),
}
REFUND_MACHINE = StateMachine(
    allowed=REFUND_ALLOWED,
    refused=transitions.payment_refused,
    history=transitions.payment_history_write,
    effects=_REFUND_EFFECTS,
)


@provider.answer_applier(transitions.REFUND_CALLBACK)
def refund_apply_provider_result(
    *, reference: str, provider_reference: str, outcome: str, reason: str, at: datetime
) -> None:
    """The provider's answer for a refund's disbursement (gateway callback)."""
    to = RefundStatus.COMPLETED if outcome == provider.COMPLETED else RefundStatus.FAILED
    try:
        refund_transition(
            refund_id=UUID(reference),
            to=to,
            reason=reason if to == RefundStatus.FAILED else "",
            at=at,
            provider_reference=provider_reference,
        )
    except InvalidTransition:
        late_answer_ignored(
            payment=Refund.objects.get(pk=UUID(reference)),
            resource_type="refund",
            provider_reference=provider_reference,
            outcome=outcome,
            reason=reason,
            at=at,
        )
