"""Payins: creation, the one state machine (payin_transition) and its effects, provider
answers."""

from datetime import datetime
from decimal import Decimal
from typing import Any
from uuid import UUID

from django.db import transaction

from core import money
from merchants.models import Merchant
from payments import provider
from payments.ledger.accounts import FEE_REVENUE, MERCHANT_AVAILABLE, provider_clearing
from payments.ledger.journals import post_journal
from payments.models import Payin, PayinHistory, PayinStatus
from payments.services import enqueue, parties, transitions
from payments.services.transitions import InvalidTransition, late_answer_ignored
from quotes import services as quote_services
from quotes.models import FlowType
from webhooks.services.events import event_record

PAYIN_ALLOWED = {
    PayinStatus.CREATED: {PayinStatus.PENDING, PayinStatus.FAILED},
    PayinStatus.PENDING: {PayinStatus.COMPLETED, PayinStatus.FAILED},
}


def payin_create(
    *,
    merchant: Merchant,
    quote_id: UUID,
    customer_id: UUID,
    source: dict[str, Any],
    now: datetime,
) -> Payin:
    """Consume the merchant's active payin quote and create the payin (`created`); the provider
    submission is enqueued when the transaction commits."""
    with transaction.atomic():
        quote = quote_services.quote_consume(
            merchant=merchant,
            quote_id=quote_id,
            flow_type=FlowType.PAYIN,
            customer_id=customer_id,
            now=now,
        )
        payer = parties.party_for_quote(quote=quote, party=source, field="source")
        payin = Payin.objects.create(
            merchant=merchant,
            customer_id=customer_id,
            quote=quote,
            status=PayinStatus.CREATED,
            **parties.quote_amounts(quote),
            wallet_impact={
                "credit_amount": money.format_amount(quote.receive_amount),
                "currency": quote.receive_currency,
            },
            source=payer,
            provider_connection=provider.route(quote.operator_code),
            provider_timeout_at=parties.provider_timeout_at(now),
            created_at=now,
            updated_at=now,
        )
        created = PayinHistory.objects.create(
            payin=payin, status=PayinStatus.CREATED, created_at=now
        )
        payin.history_entries = [created]
        payin.refund_ids, payin.refunded_total = [], Decimal(0)  # as the selectors annotate
        enqueue.submission_enqueue_on_commit(payin)
    return payin


def payin_snapshot(payin: Payin) -> dict[str, Any]:
    """data.object of the payin.* events (docs/webhooks.md)."""
    return {
        "id": payin.id,
        "status": payin.status,
        "send_amount": money.format_amount(payin.send_amount),
        "send_currency": payin.send_currency,
        "receive_amount": money.format_amount(payin.receive_amount),
        "receive_currency": payin.receive_currency,
        "country_code": payin.country_code,
        "operator_code": payin.operator_code,
        "rail_type": payin.rail_type,
        "provider_reference": payin.provider_reference or None,
        "wallet_impact": payin.wallet_impact,
        "completed_at": payin.completed_at,
        "failed_at": payin.failed_at,
        "failure_reason": payin.failure_reason or None,
    }


def payin_transition(
    *,
    payin_id: UUID,
    to: str,
    reason: str = "",
    at: datetime,
    provider_reference: str = "",
) -> Payin:
    """The one way a payin changes status: locks it, checks the move (InvalidTransition), writes
    the status and its history, then applies the move's effects (the ledger posting, the
    webhook event), in one transaction. Moving to the current status changes nothing (but keeps
    a provider reference it did not have)."""
    with transaction.atomic():
        # Only the payin's row: locking its merchant's too would deadlock with the deferred
        # foreign-key checks of concurrent inserts (wallet lock, then merchant key share).
        payin = Payin.objects.select_for_update(of=("self",)).filter(pk=payin_id).first()
        if payin is None:
            raise Payin.DoesNotExist(f"No payin {payin_id}.")
        return payin_move_locked(
            payin, to=to, reason=reason, at=at, provider_reference=provider_reference
        )


def payin_move_locked(
    payin: Payin, *, to: str, reason: str = "", at: datetime, provider_reference: str = ""
) -> Payin:
    """payin_transition's move of a payin whose row the caller's transaction has just locked
    (the submission, which decides under the same lock whether to move it)."""
    return transitions.payment_move_locked(
        payin,
        to=to,
        reason=reason,
        at=at,
        provider_reference=provider_reference,
        allowed=PAYIN_ALLOWED,
        effects=_PAYIN_EFFECTS,
    )


def _payin_post_completion(payin: Payin, *, at: datetime) -> None:
    """The journal of a completed payin: the provider's clearing pays the merchant and the fee."""
    post_journal(
        merchant_id=payin.merchant_id,
        currency=payin.receive_currency,
        kind="payin_completed",
        resource_type="payin",
        resource_id=payin.id,
        lines=[
            (provider_clearing(payin.operator_code), -payin.send_amount),
            (MERCHANT_AVAILABLE, payin.receive_amount),
            (FEE_REVENUE, payin.total_fee),
        ],
        at=at,
    )


def _payin_event_record(payin: Payin, *, at: datetime) -> None:
    """The event of a payin's final status."""
    event_record(
        merchant_id=payin.merchant_id,
        event_type=f"payin.{payin.status}",
        data_type="payin",
        data_id=payin.id,
        data_object=payin_snapshot(payin),
        at=at,
    )


_PAYIN_EFFECTS = {
    PayinStatus.COMPLETED: (_payin_post_completion, _payin_event_record),
    PayinStatus.FAILED: (_payin_event_record,),
}


def payin_answer_move(outcome: str, reason: str) -> dict[str, str]:
    """The move a provider's answer makes: `to` and its `reason`."""
    to = PayinStatus.COMPLETED if outcome == provider.COMPLETED else PayinStatus.FAILED
    return {"to": to, "reason": reason if to == PayinStatus.FAILED else ""}


@provider.answer_applier(transitions.PAYIN_CALLBACK)
def payin_apply_provider_result(
    *, reference: str, provider_reference: str, outcome: str, reason: str, at: datetime
) -> None:
    """The provider's answer for a collection (gateway callback, a receipt, or the provider
    asked by the sweep). Repeated answers change nothing; an answer for a payin already final
    otherwise (e.g. failed by the timeout sweep) is logged and ignored."""
    try:
        payin_transition(
            payin_id=UUID(reference),
            **payin_answer_move(outcome, reason),
            at=at,
            provider_reference=provider_reference,
        )
    except InvalidTransition:
        late_answer_ignored(
            payment=Payin.objects.get(pk=UUID(reference)),
            resource_type="payin",
            provider_reference=provider_reference,
            outcome=outcome,
            reason=reason,
            at=at,
        )
