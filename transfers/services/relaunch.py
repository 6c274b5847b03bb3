"""Relaunch-payout: a new disbursement attempt for a transfer whose disbursement leg failed,
refused while the provider has said, unreconciled, that money moved otherwise."""

from datetime import datetime
from decimal import Decimal
from typing import Any
from uuid import UUID

from django.db import transaction

from core import money
from core.exceptions import DomainError
from merchants import services as merchant_services
from merchants.models import Merchant
from payments import provider
from payments import selectors as payment_selectors
from payments.services.parties import PartyRoutingMismatch
from quotes import selectors as quote_selectors
from quotes import services as quote_services
from quotes.models import Operator
from transfers.models import Transfer
from transfers.services.create import nested_error_fields, recipient_check
from transfers.services.transitions import (
    FUNDS_RETURNED,
    PAYOUT_RELAUNCHED,
    REASON_PAYOUT_RELAUNCHED,
    TransferNotRelaunchable,
    is_relaunchable,
    state_of,
    transfer_transition,
)


class PayoutAmountAboveOriginal(DomainError):
    status = 400
    reason = "payout_amount_above_original"
    message = "payout_amount cannot be above the transfer's original payout amount."


class InvalidPayoutAmount(DomainError):
    status = 400
    reason = "invalid_amount"
    message = "payout_amount is not a valid amount for the payout currency."


class InvalidPayoutAmountPrecision(InvalidPayoutAmount):
    reason = "invalid_amount_precision"  # as a quote's amount with digits below the unit


def _relaunch_amount(*, transfer: Transfer, payout_amount: Decimal) -> Decimal:
    if not money.has_valid_precision(payout_amount, transfer.payout_currency):
        message = f"{transfer.payout_currency} has no minor unit: send a whole amount."
        raise InvalidPayoutAmountPrecision(message, fields={"payout_amount": [message]})
    payout_amount = money.quantize(payout_amount, transfer.payout_currency)
    if payout_amount <= 0:
        message = "payout_amount must be above zero."
        raise InvalidPayoutAmount(message, fields={"payout_amount": [message]})
    if payout_amount > transfer.quoted_payout_amount:
        message = (
            f"payout_amount {money.format_amount(payout_amount)} is above the original "
            f"{money.format_amount(transfer.quoted_payout_amount)} {transfer.payout_currency}."
        )
        details = {
            "requested": money.format_amount(payout_amount),
            "original": money.format_amount(transfer.quoted_payout_amount),
            "currency": transfer.payout_currency,
        }
        raise PayoutAmountAboveOriginal(
            message, fields={"payout_amount": [message]}, details=details
        )
    return payout_amount


def _relaunch_operator(*, transfer: Transfer, recipient: dict[str, Any] | None) -> Operator:
    """The operator of the (replacement) recipient: same country, rail and currency as the
    corridor's recipient side, active and enabled for the merchant, and, when it is not the
    transfer's own (a route the quote did not lock), not closed by support."""
    code = (recipient or {}).get("operator_code") or transfer.recipient_operator_code
    operator = quote_selectors.operator_enabled_for(
        merchant=transfer.merchant, code=code, field="recipient.operator_code"
    )
    if code != transfer.recipient_operator_code:
        quote_selectors.operator_check_quotable(operator, field="recipient.operator_code")
    if (
        operator.country_code != transfer.recipient_country_code
        or operator.rail_type != transfer.recipient_rail_type
        or operator.currency != transfer.payout_currency
    ):
        message = (
            f"Operator {code} is not a {transfer.recipient_rail_type} operator of "
            f"{transfer.recipient_country_code} in {transfer.payout_currency}."
        )
        raise PartyRoutingMismatch(message, fields={"recipient.operator_code": [message]})
    return operator


# The provider answers that stop a failed disbursement's collected money from moving until
# support reconciles them: a failed disbursement reported paid after all (the recipient may have
# the money), a completed collection reported failed after all (a reversal: the money may never
# have been collected).
_DISBURSEMENT_REPORTED_PAID = ("transfer_disbursement", provider.COMPLETED)
_COLLECTION_REPORTED_FAILED = ("transfer_collection", provider.FAILED)


def _unresolved_provider_answers(transfer: Transfer) -> set[tuple[str, str]]:
    """The (resource_type, provider_outcome) of the transfer's unresolved ProviderDiscrepancy
    rows, in one query."""
    return set(
        payment_selectors.provider_discrepancies_of(resource_id=transfer.id)
        .filter(
            resource_type__in=[_DISBURSEMENT_REPORTED_PAID[0], _COLLECTION_REPORTED_FAILED[0]],
            resolved_at__isnull=True,
        )
        .values_list("resource_type", "provider_outcome")
    )


def unreconciled_provider_answer(transfer: Transfer, *, moving: str) -> str:
    """Why the money collected for a failed disbursement must not move yet, as a refusal's
    message ("" when nothing stops it): the provider has said, and support has not yet
    reconciled, that the failed disbursement paid after all (the recipient may have the
    money) or that the completed collection failed after all (a reversal: the money may never
    have been collected). `moving` is what would move it ("a relaunch"). Relaunch-payout and
    the return of the collected funds both ask, under the transfer's row lock, which a provider
    answer holds while it records its discrepancy."""
    answers = _unresolved_provider_answers(transfer)
    if _DISBURSEMENT_REPORTED_PAID in answers:
        return (
            "The provider reported this transfer's failed disbursement as paid after all: the "
            f"recipient may have the money, and {moving} would pay it out a second time. "
            "Support reconciles it first (applies the provider's completion, or marks the "
            "discrepancy resolved if the provider did not pay)."
        )
    if _COLLECTION_REPORTED_FAILED in answers:
        return (
            "The provider reported this transfer's collection as failed after it completed (a "
            "reversal, say): the money may never have been collected, and "
            f"{moving} would pay out money the provider says it does not hold. Support "
            "reconciles it first (marks the discrepancy resolved once the provider confirms it "
            "collected the money)."
        )
    return ""


def _relaunch_changes(
    *, transfer: Transfer, payout_amount: Decimal | None, recipient: dict[str, Any] | None
) -> dict[str, Any]:
    """The columns a relaunch changes (payout_amount, recipient, recipient_operator_code),
    each checked: 400 naming the field otherwise."""
    changes: dict[str, Any] = {}
    amount = transfer.payout_amount
    if payout_amount is not None:
        amount = _relaunch_amount(transfer=transfer, payout_amount=payout_amount)
        changes["payout_amount"] = amount
    operator = _relaunch_operator(transfer=transfer, recipient=recipient)
    if recipient is not None:
        changes["recipient"] = recipient_check(
            recipient,
            country_code=transfer.recipient_country_code,
            rail_type=transfer.recipient_rail_type,
            operator_code=operator.code,
        )
        changes["recipient_operator_code"] = operator.code
        if operator.code != transfer.recipient_operator_code:  # another operator's route
            changes["disbursement_connection"] = provider.route(operator.code)
    quote_services.check_within_limits(amount, operator, field="payout_amount")
    return changes


def transfer_relaunch_payout(
    *,
    merchant: Merchant,
    transfer_id: UUID,
    payout_amount: Decimal | None = None,
    recipient: dict[str, Any] | None = None,
    actor: Any = None,
    now: datetime,
) -> Transfer:
    """Start a new disbursement attempt for a transfer whose disbursement leg failed; the
    collection is never repeated. Without arguments the attempt reuses the transfer's current
    recipient and payout amount. 404 for another merchant's transfer, 409
    transfer_not_relaunchable otherwise, 400 naming the field for a bad amount or recipient;
    409 too while the provider has said, unreconciled, that the failed disbursement paid or
    that the completed collection failed (see unreconciled_provider_answer). Of two racing
    relaunches, the second waits for the row lock and gets the 409. With an
    `actor` (support staff) the relaunch is written to the audit log in the same transaction."""
    from transfers import selectors

    with nested_error_fields(), transaction.atomic():
        transfer = selectors.transfer_get(merchant=merchant, transfer_id=transfer_id, lock=True)
        if state_of(transfer) == FUNDS_RETURNED:
            raise TransferNotRelaunchable(
                "This transfer's collected funds were returned to the merchant's wallet: its "
                "payout can no longer be relaunched."
            )
        if not is_relaunchable(transfer):
            raise TransferNotRelaunchable(
                f"{TransferNotRelaunchable.message} This one is {transfer.status} with "
                f"payin_status {transfer.payin_status} and payout_status "
                f"{transfer.payout_status}."
            )
        if unreconciled := unreconciled_provider_answer(transfer, moving="a relaunch"):
            raise TransferNotRelaunchable(unreconciled)
        changes = _relaunch_changes(
            transfer=transfer, payout_amount=payout_amount, recipient=recipient
        )
        transfer = transfer_transition(
            transfer_id=transfer.id,
            to=PAYOUT_RELAUNCHED,
            reason=REASON_PAYOUT_RELAUNCHED,
            at=now,
            changes=changes,
        )
        if actor is not None:
            merchant_services.audit_record(
                merchant=transfer.merchant,
                actor=actor,
                action="support.action",
                target=str(transfer.id),
                detail={
                    "action": "transfer.relaunch_payout",
                    "disbursement_attempt": transfer.disbursement_attempt,
                    "payout_amount": money.format_amount(transfer.payout_amount),
                },
            )
    return transfer
