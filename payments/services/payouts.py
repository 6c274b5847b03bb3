"""Payouts: creation with the wallet's reservation, the one state machine (payout_transition)
and its effects, provider answers, support's mark-failed."""

from datetime import datetime
from typing import Any
from uuid import UUID

from django.db import transaction
from django.db.models import QuerySet

from core import money
from core.transitions import InvalidTransition, StateMachine
from merchants import services as merchant_services
from merchants.models import Merchant
from payments import provider
from payments.ledger.reservations import (
    Reservation,
    reservation_hold,
    reservation_pay,
    reservation_release,
)
from payments.models import Payout, PayoutHistory, PayoutStatus
from payments.services import enqueue, parties, transitions
from payments.services.transitions import (
    REASON_MARKED_FAILED,
    late_answer_ignored,
)
from quotes import services as quote_services
from quotes.models import FlowType
from webhooks.services.events import event_record

PAYOUT_ALLOWED = {
    PayoutStatus.PENDING: {PayoutStatus.COMPLETED, PayoutStatus.FAILED},
}


def payout_create(
    *,
    merchant: Merchant,
    quote_id: UUID,
    customer_id: UUID,
    recipient: dict[str, Any],
    payment_reason_code: str = "",
    payment_reason_text: str = "",
    now: datetime,
) -> Payout:
    """Consume the merchant's active payout quote, reserve send_amount + total_fee from the
    wallet (400 insufficient_balance, nothing changed, when it is short) and create the payout
    (`pending`); the provider submission is enqueued when the transaction commits."""
    with transaction.atomic():
        quote = quote_services.quote_consume(
            merchant=merchant,
            quote_id=quote_id,
            flow_type=FlowType.PAYOUT,
            customer_id=customer_id,
            now=now,
        )
        names = (
            ("business_name",)
            if recipient.get("recipient_type") == "business"
            else ("first_name", "last_name")
        )
        party = parties.party_for_quote(
            quote=quote, party=recipient, field="recipient", required=names
        )
        debit = quote.send_amount + quote.total_fee
        payout = Payout.objects.create(
            merchant=merchant,
            customer_id=customer_id,
            quote=quote,
            status=PayoutStatus.PENDING,
            **parties.quote_amounts(quote),
            debit_amount=debit,
            wallet_impact={
                "debit_amount": money.format_amount(debit),
                "currency": quote.send_currency,
            },
            recipient=party,
            payment_reason_code=payment_reason_code,
            payment_reason_text=payment_reason_text,
            provider_connection=provider.route(quote.operator_code),
            provider_timeout_at=parties.provider_timeout_at(now),
            created_at=now,
            updated_at=now,
        )
        pending = PayoutHistory.objects.create(
            payout=payout, status=PayoutStatus.PENDING, created_at=now
        )
        payout.history_entries = [pending]
        reservation_hold(_payout_reservation(payout))
        enqueue.submission_enqueue_on_commit(payout)
    return payout


def _payout_reservation(payout: Payout) -> Reservation:
    return Reservation(
        merchant_id=payout.merchant_id,
        currency=payout.send_currency,
        resource_type="payout",
        resource_id=payout.id,
        amount=payout.debit_amount,
    )


def payout_snapshot(payout: Payout) -> dict[str, Any]:
    """data.object of the payout.* events (docs/webhooks.md)."""
    return {
        "id": payout.id,
        "status": payout.status,
        "send_amount": money.format_amount(payout.send_amount),
        "send_currency": payout.send_currency,
        "receive_amount": money.format_amount(payout.receive_amount),
        "receive_currency": payout.receive_currency,
        "operator_code": payout.operator_code,
        "provider_reference": payout.provider_reference or None,
        "wallet_impact": payout.wallet_impact,
        "completed_at": payout.completed_at,
        "failed_at": payout.failed_at,
        "failure_reason": payout.failure_reason or None,
    }


def payout_transition(
    *,
    payout_id: UUID,
    to: str,
    reason: str = "",
    at: datetime,
    provider_reference: str = "",
) -> Payout:
    """The one way a payout changes status: locks it, checks the move (InvalidTransition),
    writes the status and its history, then applies the move's effects (the reservation
    settled or released, the webhook event), in one transaction. Moving to the current status
    changes nothing (but keeps a provider reference it did not have)."""
    with transaction.atomic():
        payout = Payout.objects.select_for_update(of=("self",)).filter(pk=payout_id).first()
        if payout is None:
            raise Payout.DoesNotExist(f"No payout {payout_id}.")
        return transitions.payment_move_locked(
            payout,
            to=to,
            reason=reason,
            at=at,
            provider_reference=provider_reference,
            machine=PAYOUT_MACHINE,
        )


def _payout_settle(payout: Payout, *, at: datetime, **_: object) -> None:
    """A completed payout: the reservation pays the provider's clearing and the fee."""
    reservation_pay(
        _payout_reservation(payout),
        operator_code=payout.operator_code,
        paid=payout.send_amount,
        fee=payout.total_fee,
        at=at,
    )


def _payout_release(payout: Payout, *, at: datetime, **_: object) -> None:
    """A failed payout: the reservation goes back to the available balance."""
    reservation_release(_payout_reservation(payout), at=at)


def _payout_event_record(payout: Payout, *, at: datetime, **_: object) -> None:
    event_record(
        merchant_id=payout.merchant_id,
        event_type=f"payout.{payout.status}",
        data_type="payout",
        data_id=payout.id,
        data_object=payout_snapshot(payout),
        at=at,
    )


_PAYOUT_EFFECTS = {
    PayoutStatus.COMPLETED: (_payout_settle, _payout_event_record),
    PayoutStatus.FAILED: (transitions.decline_log, _payout_release, _payout_event_record),
}
PAYOUT_MACHINE = StateMachine(
    allowed=PAYOUT_ALLOWED,
    refused=transitions.payment_refused,
    history=transitions.payment_history_write,
    effects=_PAYOUT_EFFECTS,
)


class PayoutNotStuck(InvalidTransition):
    """InvalidTransition's refusal of payout_mark_failed, named for the callers that expect it."""

    message = (
        "Only a payout stuck at the provider can be marked failed: pending, received by the "
        "provider (it has a provider reference) and past its provider timeout."
    )


def payouts_stuck(*, now: datetime) -> QuerySet[Payout]:
    """Pending payouts the provider received (a provider reference) past their provider
    timeout: what support may mark failed."""
    return Payout.objects.filter(status=PayoutStatus.PENDING, provider_timeout_at__lte=now).exclude(
        provider_reference=""
    )


def payout_mark_failed(*, payout_id: UUID, actor: Any, now: datetime) -> Payout:
    """Support: fail a payout stuck at the provider (reason marked_failed_by_support) once the
    provider has confirmed out of band that it did not pay: the reservation is released and
    payout.failed sent, as for a provider's decline, and the audit log records who did it, in
    the same transaction. A later answer from the provider becomes a ProviderDiscrepancy.
    Stuck means pending, past its provider timeout and received by the provider: one without
    a provider reference may be on its way to the provider right now (the submitter calls it
    without a lock), and releasing its reservation then would let it be paid unfunded."""
    with transaction.atomic():
        # locked first: of two racing clicks the second sees the payout failed and is refused
        if not payouts_stuck(now=now).select_for_update().filter(pk=payout_id).exists():
            raise PayoutNotStuck()
        payout = payout_transition(
            payout_id=payout_id, to=PayoutStatus.FAILED, reason=REASON_MARKED_FAILED, at=now
        )
        merchant_services.audit_record(
            merchant=payout.merchant,
            actor=actor,
            action="support.action",
            target=str(payout.id),
            detail={"action": "payout.mark_failed"},
        )
    return payout


@provider.answer_applier(transitions.PAYOUT_CALLBACK)
def payout_apply_provider_result(
    *, reference: str, provider_reference: str, outcome: str, reason: str, at: datetime
) -> None:
    """The provider's answer for a disbursement (gateway callback)."""
    to = PayoutStatus.COMPLETED if outcome == provider.COMPLETED else PayoutStatus.FAILED
    try:
        payout_transition(
            payout_id=UUID(reference),
            to=to,
            reason=reason if to == PayoutStatus.FAILED else "",
            at=at,
            provider_reference=provider_reference,
        )
    except InvalidTransition:
        late_answer_ignored(
            payment=Payout.objects.get(pk=UUID(reference)),
            resource_type="payout",
            provider_reference=provider_reference,
            outcome=outcome,
            reason=reason,
            at=at,
        )
