"""Writes of the transfers app: create, the two legs through the provider gateway, the one
transition function of the transfer state machine, relaunch-payout, the support actions and the
timeout sweep.

States are (status, payin_status, payout_status); MOVES is the table of allowed moves. Every
move writes a history row, records its webhook events and posts its journals in the
transaction that makes it. Provider calls happen with no lock held.
"""

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any
from uuid import UUID

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q

from config import money, rawsql
from config.exceptions import DomainError
from config.rawsql import RowReader
from customers import selectors as customer_selectors
from customers.models import Customer, KycStatus
from merchants import services as merchant_services
from merchants.models import Merchant
from payments import ledger, provider
from payments import services as payment_services
from payments.models import ProviderDiscrepancy
from quotes import selectors as quote_selectors
from quotes import services as quote_services
from quotes.models import CorridorType, FlowType, Operator, RailType
from transfers.models import (
    LegStatus,
    Transfer,
    TransferDisbursementAttempt,
    TransferHistory,
    TransferStatus,
)
from webhooks import services as webhook_services

logger = logging.getLogger("cowry.transfers")

COLLECTION_CALLBACK = "transfers.services.transfer_apply_collection_result"
DISBURSEMENT_CALLBACK = "transfers.services.transfer_apply_disbursement_result"

# The FX position between the two currencies of a cross-currency transfer (docs/decisions.md).
FX_CONVERSION = "fx_conversion"
# The journal that returns a failed transfer's collected money to the merchant's wallet.
RETURNED_JOURNAL = "transfer_returned"

REASON_CREATED = "created"
REASON_COLLECTION_SUBMITTED = "collection_submitted"
REASON_COLLECTION_COMPLETED = "collection_completed"
REASON_DISBURSEMENT_COMPLETED = "disbursement_completed"
REASON_PAYOUT_RELAUNCHED = "payout_relaunched"
REASON_PROVIDER_TIMEOUT = "provider_timeout"
REASON_MARKED_FAILED = "marked_failed_by_support"
REASON_PROVIDER_COMPLETION_APPLIED = "provider_completion_applied_by_support"
REASON_COLLECTED_FUNDS_RETURNED = "collected_funds_returned_by_support"

RAIL_FIELDS = {
    RailType.MOBILE_MONEY: ("phone",),
    RailType.BANK_TRANSFER: ("bank_name", "bank_code", "account_name", "account_number"),
}
ROUTING_FIELDS = ("country_code", "rail_type", "operator_code")


# --- errors --------------------------------------------------------------------------------


class TransferNotRelaunchable(DomainError):
    status = 409
    reason = "transfer_not_relaunchable"
    message = (
        "Only a transfer whose disbursement leg failed (status failed, payin_status completed, "
        "payout_status failed) can be relaunched."
    )


class InvalidTransferTransition(DomainError):
    status = 409
    reason = "invalid_transition"
    message = "The transfer cannot make that move now."


class ProviderCompletionNotApplicable(DomainError):
    status = 409
    reason = "provider_completion_not_applicable"
    message = (
        'Only an unresolved "completed" answer for the current disbursement attempt of a '
        "transfer whose disbursement leg failed can be applied."
    )


class CollectedFundsNotReturnable(DomainError):
    status = 409
    reason = "collected_funds_not_returnable"
    message = (
        "Only the collected funds of a transfer whose disbursement leg failed (status failed, "
        "payin_status completed, payout_status failed) can be returned to the merchant's wallet."
    )


class StaleDisbursementAnswer(Exception):
    """A provider answer for a disbursement attempt that a relaunch has replaced."""


class CustomerNotFound(DomainError):
    status = 400
    reason = "customer_not_found"
    message = "The customer does not exist."


class PartyInvalid(DomainError):
    status = 400
    reason = "invalid_request"
    message = "The request is invalid."


class PartyRoutingMismatch(DomainError):
    status = 400
    reason = "party_routing_mismatch"
    message = "The party's country, rail or operator does not match the quote."


class SenderDetailsRequired(DomainError):
    status = 400
    reason = "sender_details_required"
    message = "This corridor requires sender details that are missing."


class KycNotApproved(DomainError):
    status = 400
    reason = "kyc_not_approved"
    message = "This corridor requires the customer's KYC to be approved."


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


@contextmanager
def _nested_error_fields() -> Iterator[None]:
    """Error fields named `party.name` are reported nested, {"party": {"name": [...]}}, the
    same shape DRF gives to a nested serializer's errors."""
    try:
        yield
    except DomainError as exc:
        if exc.fields:
            nested: dict[str, Any] = {}
            for key, messages in exc.fields.items():
                head, _, rest = key.partition(".")
                if rest:
                    nested.setdefault(head, {})[rest] = messages
                else:
                    nested[key] = messages
            exc.fields = nested
        raise


# --- the state machine ---------------------------------------------------------------------

State = tuple[str, str, str]
S, L = TransferStatus, LegStatus


@dataclass(frozen=True)
class Move:
    sources: frozenset[State]
    target: State
    events: tuple[str, ...] = ()
    # A repeated provider answer finds the transfer already at the target: nothing changes.
    repeat_is_noop: bool = True


COLLECTION_SUBMITTED = "collection_submitted"
COLLECTION_COMPLETED = "collection_completed"
COLLECTION_FAILED = "collection_failed"
DISBURSEMENT_COMPLETED = "disbursement_completed"
DISBURSEMENT_FAILED = "disbursement_failed"
PAYOUT_RELAUNCHED = "payout_relaunched"
PROVIDER_COMPLETION_APPLIED = "provider_completion_applied"
COLLECTED_FUNDS_RETURNED = "collected_funds_returned"

_CREATED: State = (S.PENDING, L.PENDING, L.NOT_STARTED)
_COLLECTING: State = (S.COLLECTING, L.PENDING, L.NOT_STARTED)
_DISBURSING: State = (S.DISBURSING, L.COMPLETED, L.PENDING)
_PAYOUT_FAILED: State = (S.FAILED, L.COMPLETED, L.FAILED)
# The disbursement was given up and the collected money returned to the merchant's wallet.
_FUNDS_RETURNED: State = (S.FAILED, L.COMPLETED, L.CANCELLED)

MOVES: dict[str, Move] = {
    COLLECTION_SUBMITTED: Move(frozenset({_CREATED}), _COLLECTING),
    COLLECTION_COMPLETED: Move(
        frozenset({_COLLECTING}), _DISBURSING, events=("transfer.payin.completed",)
    ),
    COLLECTION_FAILED: Move(
        frozenset({_CREATED, _COLLECTING}),
        (S.FAILED, L.FAILED, L.CANCELLED),
        events=("transfer.payin.failed", "transfer.failed"),
    ),
    DISBURSEMENT_COMPLETED: Move(
        frozenset({_DISBURSING}),
        (S.COMPLETED, L.COMPLETED, L.COMPLETED),
        events=("transfer.payout.completed", "transfer.completed"),
    ),
    # Only the leg event (docs/api.md): a transfer whose payout failed may still be relaunched and
    # complete, so it is not final and gets no aggregate event.
    DISBURSEMENT_FAILED: Move(
        frozenset({_DISBURSING}), _PAYOUT_FAILED, events=("transfer.payout.failed",)
    ),
    PAYOUT_RELAUNCHED: Move(frozenset({_PAYOUT_FAILED}), _DISBURSING, repeat_is_noop=False),
    # Support applies a "completed" answer that came after we had failed the attempt: the
    # disbursement completes as it would have, from the failed state (never by a provider
    # answer on its own: see transfer_apply_provider_completion).
    PROVIDER_COMPLETION_APPLIED: Move(
        frozenset({_PAYOUT_FAILED}),
        (S.COMPLETED, L.COMPLETED, L.COMPLETED),
        events=("transfer.payout.completed", "transfer.completed"),
        repeat_is_noop=False,
    ),
    # Support gives the disbursement up and returns the collected money to the merchant's
    # wallet: the transfer is now final, failed, so it gets its aggregate event (docs/webhooks.md).
    COLLECTED_FUNDS_RETURNED: Move(
        frozenset({_PAYOUT_FAILED}),
        _FUNDS_RETURNED,
        events=("transfer.failed",),
        repeat_is_noop=False,
    ),
}
DISBURSEMENT_MOVES = {DISBURSEMENT_COMPLETED, DISBURSEMENT_FAILED, PROVIDER_COMPLETION_APPLIED}


def _state(transfer: Transfer) -> State:
    return (transfer.status, transfer.payin_status, transfer.payout_status)


def is_relaunchable(transfer: Transfer) -> bool:
    return _state(transfer) == _PAYOUT_FAILED


def _timeout_at(now: datetime) -> datetime:
    return now + timedelta(seconds=settings.PROVIDER_TIMEOUT_SECONDS)


def _fmt(amount: Decimal) -> str:
    return money.format_amount(amount)


def _leg_snapshot(transfer: Transfer) -> dict[str, Any]:
    return {
        "id": transfer.id,
        "status": transfer.status,
        "payin_status": transfer.payin_status,
        "payout_status": transfer.payout_status,
        "payin_amount": _fmt(transfer.payin_amount),
        "payin_currency": transfer.payin_currency,
        "payout_amount": _fmt(transfer.payout_amount),
        "payout_currency": transfer.payout_currency,
        "payer_operator_code": transfer.payer_operator_code,
        "recipient_operator_code": transfer.recipient_operator_code,
    }


def payin_leg_snapshot(transfer: Transfer) -> dict[str, Any]:
    """data.object of transfer.payin.* (docs/webhooks.md)."""
    return {
        **_leg_snapshot(transfer),
        "collection_reference": transfer.collection_reference or None,
        "collection_completed_at": transfer.collection_completed_at,
        "collection_failed_at": transfer.collection_failed_at,
        "collection_failure_reason": transfer.collection_failure_reason or None,
    }


def payout_leg_snapshot(transfer: Transfer) -> dict[str, Any]:
    """data.object of transfer.payout.* (docs/webhooks.md)."""
    return {
        **_leg_snapshot(transfer),
        "disbursement_attempt": transfer.disbursement_attempt,
        "disbursement_reference": transfer.disbursement_reference or None,
        "disbursement_completed_at": transfer.disbursement_completed_at,
        "disbursement_failed_at": transfer.disbursement_failed_at,
        "disbursement_failure_reason": transfer.disbursement_failure_reason or None,
    }


def aggregate_snapshot(transfer: Transfer) -> dict[str, Any]:
    """data.object of transfer.completed / transfer.failed (docs/webhooks.md)."""
    return {
        "id": transfer.id,
        "status": transfer.status,
        "payin_status": transfer.payin_status,
        "payout_status": transfer.payout_status,
        "send_amount": _fmt(transfer.send_amount),
        "send_currency": transfer.send_currency,
        "receive_amount": _fmt(transfer.receive_amount),
        "receive_currency": transfer.receive_currency,
        "corridor_code": transfer.corridor_code,
        "payer_operator_code": transfer.payer_operator_code,
        "recipient_operator_code": transfer.recipient_operator_code,
        "collection_completed_at": transfer.collection_completed_at,
        "disbursement_completed_at": transfer.disbursement_completed_at,
        "disbursement_failed_at": transfer.disbursement_failed_at,
    }


def _snapshot_for(event_type: str, transfer: Transfer) -> dict[str, Any]:
    if event_type.startswith("transfer.payin."):
        return payin_leg_snapshot(transfer)
    if event_type.startswith("transfer.payout."):
        return payout_leg_snapshot(transfer)
    return aggregate_snapshot(transfer)


def _post_collected(transfer: Transfer, at: datetime) -> None:
    """The collected money waits in transfer_suspense until the disbursement completes."""
    ledger.post_journal(
        merchant_id=transfer.merchant_id,
        currency=transfer.payin_currency,
        kind="transfer_collected",
        resource_type="transfer",
        resource_id=transfer.id,
        lines=[
            (ledger.provider_clearing(transfer.payer_operator_code), -transfer.payin_amount),
            (ledger.TRANSFER_SUSPENSE, transfer.payin_amount),
        ],
        at=at,
    )


def _post_disbursed(transfer: Transfer, at: datetime) -> None:
    """Empty the suspense: the fee to fee_revenue, the payout to the recipient operator and,
    when a relaunch lowered the payout, the difference to the merchant's wallet. Across two
    currencies the net amount passes through fx_conversion so each journal balances in its
    own currency."""
    payin, fee = transfer.payin_amount, transfer.total_fee
    quoted, paid = transfer.quoted_payout_amount, transfer.payout_amount
    payout_lines = [
        (ledger.provider_clearing(transfer.recipient_operator_code), paid),
        (ledger.MERCHANT_AVAILABLE, quoted - paid),
    ]
    common = {"merchant_id": transfer.merchant_id, "resource_type": "transfer", "at": at}
    if transfer.payin_currency == transfer.payout_currency:
        ledger.post_journal(
            **common,
            currency=transfer.payin_currency,
            kind="transfer_disbursed",
            resource_id=transfer.id,
            lines=[
                (ledger.TRANSFER_SUSPENSE, -payin),
                (ledger.FEE_REVENUE, fee),
                *payout_lines,
            ],
        )
        return
    journals = {
        transfer.payin_currency: (
            "transfer_settled",
            [
                (ledger.TRANSFER_SUSPENSE, -payin),
                (ledger.FEE_REVENUE, fee),
                (FX_CONVERSION, payin - fee),
            ],
        ),
        transfer.payout_currency: ("transfer_disbursed", [(FX_CONVERSION, -quoted), *payout_lines]),
    }
    # Each posting locks the merchant's wallet in its currency until commit: posted in one
    # order of currencies, a XAF->XOF and a XOF->XAF transfer of one merchant completing at the
    # same moment cannot each hold the wallet the other waits for (a deadlock).
    for currency in sorted(journals):
        kind, lines = journals[currency]
        ledger.post_journal(
            **common, currency=currency, kind=kind, resource_id=transfer.id, lines=lines
        )


def _post_returned(transfer: Transfer, at: datetime) -> None:
    """Empty the suspense into the merchant's available balance, in the payin currency: the
    whole collected amount, no fee (fees are earned at completion, and this transfer never
    completed). Unique per transfer, so it is posted once."""
    ledger.post_journal(
        merchant_id=transfer.merchant_id,
        currency=transfer.payin_currency,
        kind=RETURNED_JOURNAL,
        resource_type="transfer",
        resource_id=transfer.id,
        lines=[
            (ledger.TRANSFER_SUSPENSE, -transfer.payin_amount),
            (ledger.MERCHANT_AVAILABLE, transfer.payin_amount),
        ],
        at=at,
    )


def _attempt_ended(transfer: Transfer) -> TransferDisbursementAttempt:
    """The current disbursement attempt, answered, as the transfer's columns hold it."""
    completed = transfer.payout_status == LegStatus.COMPLETED
    return TransferDisbursementAttempt(
        transfer=transfer,
        attempt=transfer.disbursement_attempt,
        provider_reference=transfer.disbursement_reference,
        payout_amount=transfer.payout_amount,
        payout_currency=transfer.payout_currency,
        recipient_operator_code=transfer.recipient_operator_code,
        submitted_at=transfer.disbursement_submitted_at,
        answered_at=(
            transfer.disbursement_completed_at if completed else transfer.disbursement_failed_at
        ),
        outcome=LegStatus.COMPLETED if completed else LegStatus.FAILED,
        failure_reason=transfer.disbursement_failure_reason,
    )


_ATTEMPT_KEY = ["transfer", "attempt"]
_ATTEMPT_COLUMNS = [
    "provider_reference",
    "payout_amount",
    "payout_currency",
    "recipient_operator_code",
    "submitted_at",
    "answered_at",
    "outcome",
    "failure_reason",
]


def _history_write(history: TransferHistory, attempt: TransferDisbursementAttempt | None) -> None:
    """Insert the history row of a move and write (insert, or update: a relaunch writes again
    the attempt its answer wrote, a provider's completion applied by support the attempt that
    failed) the disbursement attempt it ended, in the history row's statement on PostgreSQL."""
    if attempt is None:
        history.save(force_insert=True)
    elif connection.vendor == "postgresql":
        part = rawsql.upsert_part(attempt, unique=_ATTEMPT_KEY, name="attempt")
        rawsql.save_together(inserts=[history], also=[part])
    else:
        history.save(force_insert=True)
        TransferDisbursementAttempt.objects.bulk_create(
            [attempt],
            update_conflicts=True,
            unique_fields=_ATTEMPT_KEY,
            update_fields=_ATTEMPT_COLUMNS,
        )


def transfer_transition(
    *,
    transfer_id: UUID,
    move: str,
    reason: str = "",
    at: datetime,
    provider_reference: str = "",
    attempt: int | None = None,
    changes: dict[str, Any] | None = None,
) -> Transfer:
    """The one way a transfer changes state: checks the move against MOVES, applies it with
    the leg's timestamps, writes the history row (with the disbursement attempt the move
    answered or replaced: TransferDisbursementAttempt), posts the journals, records the events
    and enqueues the next leg after commit, in one transaction.

    `attempt` (disbursement moves): the answer is for this disbursement attempt; an older
    attempt's answer raises StaleDisbursementAnswer and changes nothing. `changes`
    (relaunch): new payout_amount / recipient / recipient_operator_code."""
    from transfers import tasks

    spec = MOVES[move]
    with transaction.atomic():
        transfer = (
            Transfer.objects.select_for_update(of=("self",))
            .select_related("merchant")
            .get(pk=transfer_id)
        )
        if (
            move in DISBURSEMENT_MOVES
            and attempt is not None
            and attempt != transfer.disbursement_attempt
        ):
            raise StaleDisbursementAnswer(
                f"answer for attempt {attempt}, transfer is on attempt "
                f"{transfer.disbursement_attempt}"
            )
        fields = {"updated_at"}
        if provider_reference:
            column = (
                "disbursement_reference" if move in DISBURSEMENT_MOVES else "collection_reference"
            )
            if not getattr(transfer, column):
                setattr(transfer, column, provider_reference)
                fields.add(column)
        state = _state(transfer)
        if state not in spec.sources:
            if spec.repeat_is_noop and state == spec.target:
                if len(fields) > 1:
                    transfer.save(update_fields=sorted(fields - {"updated_at"}))
                return transfer
            if move == PAYOUT_RELAUNCHED:
                raise TransferNotRelaunchable()
            raise InvalidTransferTransition(f"A transfer in {state} cannot make the move {move}.")

        # The attempt a relaunch replaces is kept as it ended, before its columns are reset.
        ended_attempt = _attempt_ended(transfer) if move == PAYOUT_RELAUNCHED else None
        transfer.status, transfer.payin_status, transfer.payout_status = spec.target
        transfer.updated_at = at
        fields |= {"status", "payin_status", "payout_status"}
        enqueue_disbursement = False
        if move == COLLECTION_SUBMITTED:
            transfer.collection_submitted_at = at
            transfer.leg_timeout_at = _timeout_at(at)
            fields |= {"collection_submitted_at", "leg_timeout_at"}
        elif move == COLLECTION_COMPLETED:
            transfer.collection_completed_at = at
            transfer.disbursement_attempt = 1
            transfer.leg_timeout_at = _timeout_at(at)
            fields |= {"collection_completed_at", "disbursement_attempt", "leg_timeout_at"}
            _post_collected(transfer, at)
            enqueue_disbursement = True
        elif move == COLLECTION_FAILED:
            transfer.collection_failed_at = at
            transfer.collection_failure_reason = reason
            transfer.leg_timeout_at = None
            fields |= {"collection_failed_at", "collection_failure_reason", "leg_timeout_at"}
        elif move in (DISBURSEMENT_COMPLETED, PROVIDER_COMPLETION_APPLIED):
            transfer.disbursement_completed_at = at
            transfer.leg_timeout_at = None
            fields |= {"disbursement_completed_at", "leg_timeout_at"}
            if move == PROVIDER_COMPLETION_APPLIED:  # the attempt did not fail after all
                transfer.disbursement_failed_at = None
                transfer.disbursement_failure_reason = ""
                fields |= {"disbursement_failed_at", "disbursement_failure_reason"}
            _post_disbursed(transfer, at)
        elif move == DISBURSEMENT_FAILED:
            transfer.disbursement_failed_at = at
            transfer.disbursement_failure_reason = reason
            transfer.leg_timeout_at = None
            fields |= {"disbursement_failed_at", "disbursement_failure_reason", "leg_timeout_at"}
        elif move == PAYOUT_RELAUNCHED:
            for name, value in (changes or {}).items():
                setattr(transfer, name, value)
                fields.add(name)
            transfer.disbursement_attempt += 1
            transfer.disbursement_reference = ""
            transfer.disbursement_submitted_at = None
            transfer.disbursement_failed_at = None
            transfer.disbursement_failure_reason = ""
            transfer.leg_timeout_at = _timeout_at(at)
            fields |= {
                "disbursement_attempt",
                "disbursement_reference",
                "disbursement_submitted_at",
                "disbursement_failed_at",
                "disbursement_failure_reason",
                "leg_timeout_at",
            }
            enqueue_disbursement = True
        elif move == COLLECTED_FUNDS_RETURNED:
            _post_returned(transfer, at)
        transfer.save(update_fields=sorted(fields))
        if move in DISBURSEMENT_MOVES:
            ended_attempt = _attempt_ended(transfer)
        _history_write(
            TransferHistory(
                transfer=transfer,
                status=transfer.status,
                payin_status=transfer.payin_status,
                payout_status=transfer.payout_status,
                reason=reason,
                created_at=at,
            ),
            ended_attempt,
        )
        for offset, event_type in enumerate(spec.events):
            # A leg event, then the aggregate one: 1 µs apart so created_at orders them.
            webhook_services.event_record(
                merchant_id=transfer.merchant_id,
                event_type=event_type,
                data_type="transfer",
                data_id=transfer.id,
                data_object=_snapshot_for(event_type, transfer),
                at=at + timedelta(microseconds=offset),
            )
        if enqueue_disbursement:
            transfer_id_text, attempt_now = str(transfer.id), transfer.disbursement_attempt
            transaction.on_commit(
                lambda: tasks.submit_transfer_disbursement.delay(
                    transfer_id=transfer_id_text, attempt=attempt_now
                ),
                robust=True,  # a broker hiccup is not a failed move: the sweep resubmits
            )
        return transfer


# --- create --------------------------------------------------------------------------------


def _customer(*, merchant: Merchant, customer_id: UUID) -> Customer:
    try:
        return customer_selectors.customer_get_active(merchant=merchant, customer_id=customer_id)
    except customer_selectors.CustomerNotFound:
        raise CustomerNotFound(fields={"customer_id": [CustomerNotFound.message]}) from None


def _party(
    *,
    party: dict[str, Any],
    field: str,
    country_code: str,
    rail_type: str,
    operator_code: str,
    required: tuple[str, ...] = (),
) -> dict[str, Any]:
    """The party's own fields (routing removed). Routing fields, when sent, must equal the
    quote's; the rail's fields (and `required`) must be present; the other rail's refused.
    Each error names `field.<name>`."""
    expected = {
        "country_code": country_code,
        "rail_type": rail_type,
        "operator_code": operator_code,
    }
    mismatches = {
        f"{field}.{name}": errors
        for name, errors in payment_services.routing_mismatches(
            party, expected, what="transfer"
        ).items()
    }
    if mismatches:
        first = next(iter(mismatches))
        raise PartyRoutingMismatch(f"{first}: {mismatches[first][0]}", fields=mismatches)
    own = RAIL_FIELDS[rail_type]
    foreign = [n for rail, names in RAIL_FIELDS.items() if rail != rail_type for n in names]
    errors: dict[str, list[str]] = {}
    for name in (*own, *required):
        if not party.get(name):
            errors[f"{field}.{name}"] = ["This field is required."]
    for name in foreign:
        if name in party:
            errors[f"{field}.{name}"] = [f"This field belongs to another rail, not {rail_type}."]
    if errors:
        first = next(iter(errors))
        raise PartyInvalid(f"{first}: {errors[first][0]}", fields=errors)
    return {
        key: value
        for key, value in party.items()
        if key not in ROUTING_FIELDS and value not in (None, "")
    }


def _recipient_names(recipient: dict[str, Any]) -> tuple[str, ...]:
    if recipient.get("recipient_type") == "business":
        return ("business_name",)
    return ("first_name", "last_name")


def _sender_requirements(
    *,
    customer: Customer,
    requires_details: bool,
    requires_kyc: bool,
    corridor_code: str,
    sender_occupation: str,
    sender_source_of_funds: str,
) -> None:
    """Each missing sender detail (and a KYC not approved) is named in one 400."""
    missing: dict[str, list[str]] = {}
    if requires_details:
        for name in ("address_line1", "city"):
            if not getattr(customer, name):
                missing[f"customer.{name}"] = [
                    f"{corridor_code} requires the customer's {name}; set it on the customer."
                ]
        if not (sender_occupation or customer.occupation):
            missing["sender_occupation"] = [
                f"{corridor_code} requires the sender's occupation: send sender_occupation or "
                "set occupation on the customer."
            ]
        if not (sender_source_of_funds or customer.source_of_funds):
            missing["sender_source_of_funds"] = [
                f"{corridor_code} requires the sender's source of funds: send "
                "sender_source_of_funds or set source_of_funds on the customer."
            ]
    kyc_missing = requires_kyc and customer.kyc_status != KycStatus.APPROVED
    if kyc_missing:
        missing["customer.kyc_status"] = [
            f"{corridor_code} requires an approved KYC; the customer's is {customer.kyc_status}."
        ]
    if not missing:
        return
    names = ", ".join(missing)
    if set(missing) == {"customer.kyc_status"}:
        raise KycNotApproved(missing["customer.kyc_status"][0], fields=missing)
    raise SenderDetailsRequired(
        f"{corridor_code} requires sender details that are missing: {names}.", fields=missing
    )


def transfer_create(
    *,
    merchant: Merchant,
    quote_id: UUID,
    customer_id: UUID,
    payer: dict[str, Any],
    recipient: dict[str, Any],
    payment_reason_code: str = "",
    sender_source_of_funds: str = "",
    sender_occupation: str = "",
    now: datetime,
) -> Transfer:
    """Consume the merchant's active transfer quote and create the transfer (`pending`); the
    collection is submitted when the transaction commits. Any 400 leaves the quote active."""
    from transfers import tasks

    with _nested_error_fields(), transaction.atomic():
        customer = _customer(merchant=merchant, customer_id=customer_id)
        quote = quote_services.quote_consume(
            merchant=merchant,
            quote_id=quote_id,
            flow_type=FlowType.TRANSFER,
            customer_id=customer_id,
            now=now,
        )
        corridor = quote_selectors.corridor_enabled_for(
            merchant=merchant, code=quote.corridor_code, field="quote_id"
        )
        payer_operator = quote_selectors.operator_enabled_for(
            merchant=merchant, code=quote.payer_operator_code, field="quote_id"
        )
        recipient_operator = quote_selectors.operator_enabled_for(
            merchant=merchant, code=quote.recipient_operator_code, field="quote_id"
        )
        payer_party = _party(
            party=payer,
            field="payer",
            country_code=payer_operator.country_code,
            rail_type=payer_operator.rail_type,
            operator_code=payer_operator.code,
        )
        recipient_party = _party(
            party=recipient,
            field="recipient",
            country_code=recipient_operator.country_code,
            rail_type=recipient_operator.rail_type,
            operator_code=recipient_operator.code,
            required=_recipient_names(recipient),
        )
        recipient_party.setdefault("recipient_type", "individual")
        _sender_requirements(
            customer=customer,
            requires_details=corridor.requires_sender_details
            or quote.corridor_type == CorridorType.CROSS_BORDER,
            requires_kyc=corridor.requires_kyc,
            corridor_code=corridor.code,
            sender_occupation=sender_occupation,
            sender_source_of_funds=sender_source_of_funds,
        )
        transfer = Transfer.objects.create(
            merchant=merchant,
            customer=customer,
            quote=quote,
            status=TransferStatus.PENDING,
            payin_status=LegStatus.PENDING,
            payout_status=LegStatus.NOT_STARTED,
            payin_amount=quote.send_amount,
            payin_currency=quote.send_currency,
            payout_amount=quote.receive_amount,
            payout_currency=quote.receive_currency,
            quoted_payout_amount=quote.receive_amount,
            total_fee=quote.total_fee,
            fx_rate=quote.fx_rate if quote.fx_rate is not None else Decimal(1),
            corridor_code=quote.corridor_code,
            corridor_type=quote.corridor_type,
            payer_operator_code=payer_operator.code,
            recipient_operator_code=recipient_operator.code,
            payer_country_code=payer_operator.country_code,
            recipient_country_code=recipient_operator.country_code,
            payer_rail_type=payer_operator.rail_type,
            recipient_rail_type=recipient_operator.rail_type,
            payer=payer_party,
            recipient=recipient_party,
            payment_reason_code=payment_reason_code,
            sender_source_of_funds=sender_source_of_funds,
            sender_occupation=sender_occupation,
            pricing=quote.pricing,
            leg_timeout_at=_timeout_at(now),
            created_at=now,
            updated_at=now,
        )
        TransferHistory.objects.create(
            transfer=transfer,
            status=transfer.status,
            payin_status=transfer.payin_status,
            payout_status=transfer.payout_status,
            reason=REASON_CREATED,
            created_at=now,
        )
        transfer_id = str(transfer.id)
        transaction.on_commit(
            lambda: tasks.submit_transfer_collection.delay(transfer_id=transfer_id),
            robust=True,  # a committed transfer is never a 500; the sweep resubmits
        )
    return transfer


# --- the legs ------------------------------------------------------------------------------


def _party_identifier(party: dict[str, Any]) -> dict[str, str]:
    return {"phone": party.get("phone", ""), "account_number": party.get("account_number", "")}


def disbursement_reference(transfer_id: UUID, attempt: int) -> str:
    """Our reference of one disbursement attempt: a relaunch is a new provider transaction."""
    return f"{transfer_id}:{attempt}"


def transfer_submit_collection(*, transfer_id: UUID, now: datetime) -> Transfer:
    """Send the collection leg to the provider (idempotent: a retried task resubmits the same
    reference). The transfer is `collecting` before the call; no lock is held during it."""
    transfer = Transfer.objects.get(pk=transfer_id)
    # Each call's start is recorded first (collection_submitted_at), and none starts once the
    # leg is answered, received or past its timeout, as for a disbursement: the timeout sweep
    # leaves a collection whose last call started recently, and fails one only while no call
    # has started since it looked, so a payer is not charged for a transfer.failed.
    started = False
    if _state(transfer) == _CREATED:
        if transfer.leg_timeout_at <= now:  # never sent in time: the timeout sweep fails it
            return transfer
        try:
            transfer = transfer_transition(  # records the start, with a fresh leg timeout
                transfer_id=transfer.id,
                move=COLLECTION_SUBMITTED,
                reason=REASON_COLLECTION_SUBMITTED,
                at=now,
            )
        except InvalidTransferTransition:  # the timeout sweep failed it since it was read
            return Transfer.objects.get(pk=transfer_id)
        started = transfer.collection_submitted_at == now  # not another submission's move
    if _state(transfer) != _COLLECTING or transfer.collection_reference:
        return transfer
    if not started and not (
        Transfer.objects.filter(
            pk=transfer.id,
            status=TransferStatus.COLLECTING,
            collection_reference="",
            leg_timeout_at__gt=now,
        ).update(collection_submitted_at=now)
    ):
        return transfer
    try:
        receipt = provider.gateway().submit_collection(
            reference=str(transfer.id),
            amount=transfer.payin_amount,
            currency=transfer.payin_currency,
            operator_code=transfer.payer_operator_code,
            callback=COLLECTION_CALLBACK,
            **_party_identifier(transfer.payer),
        )
    except provider.ProviderRejected as rejected:
        return _apply_quietly(
            transfer_id=transfer.id, move=COLLECTION_FAILED, reason=rejected.reason, at=now
        )
    provider.receipt_answer_deliver(
        receipt, callback=COLLECTION_CALLBACK, reference=str(transfer.id)
    )
    payment_services.provider_reference_store(
        transfer, "collection_reference", receipt.provider_reference
    )
    return transfer


def transfer_submit_disbursement(*, transfer_id: UUID, attempt: int, now: datetime) -> Transfer:
    """Send disbursement attempt `attempt` to the provider. Does nothing when the transfer is
    not waiting for that attempt (a replaced attempt, an answer already in)."""
    transfer = Transfer.objects.get(pk=transfer_id)
    if (
        _state(transfer) != _DISBURSING
        or transfer.disbursement_attempt != attempt
        or transfer.disbursement_reference
    ):
        return transfer
    # Each call's start is recorded first, and none starts once this attempt is answered,
    # received, replaced or past its timeout: the timeout sweep leaves an attempt whose last call
    # started recently, and fails one only while no call has started since it looked.
    started = Transfer.objects.filter(
        pk=transfer.id,
        status=TransferStatus.DISBURSING,
        disbursement_attempt=attempt,
        disbursement_reference="",
        leg_timeout_at__gt=now,
    ).update(disbursement_submitted_at=now)
    if not started:
        return transfer
    try:
        receipt = provider.gateway().submit_disbursement(
            reference=disbursement_reference(transfer.id, attempt),
            amount=transfer.payout_amount,
            currency=transfer.payout_currency,
            operator_code=transfer.recipient_operator_code,
            callback=DISBURSEMENT_CALLBACK,
            **_party_identifier(transfer.recipient),
        )
    except provider.ProviderRejected as rejected:
        return _apply_quietly(
            transfer_id=transfer.id,
            move=DISBURSEMENT_FAILED,
            reason=rejected.reason,
            at=now,
            attempt=attempt,
        )
    provider.receipt_answer_deliver(
        receipt,
        callback=DISBURSEMENT_CALLBACK,
        reference=disbursement_reference(transfer.id, attempt),
    )
    payment_services.provider_reference_store(
        transfer,
        "disbursement_reference",
        receipt.provider_reference,
        disbursement_attempt=attempt,
    )
    return transfer


def _apply_quietly(**kwargs) -> Transfer | None:
    """A provider answer that no longer fits (late, stale) is logged and changes nothing."""
    try:
        return transfer_transition(**kwargs)
    except (InvalidTransferTransition, StaleDisbursementAnswer) as exc:
        logger.warning("Provider answer ignored for transfer %s: %s", kwargs["transfer_id"], exc)
        return None


_TRANSFER_LOCKED = RowReader(Transfer, where=("id",), for_update=True)


def _apply_answer(
    *, leg: str, reference: str, outcome: str, provider_reason: str, **transition: Any
) -> None:
    """Apply a provider answer; one that no longer fits changes nothing, and one that
    contradicts what we recorded (money moved that our books do not show, or the reverse, or a
    superseded disbursement attempt that paid after all) is kept for support to reconcile, in
    the same transaction and under the transfer's row lock: a relaunch waiting for that lock
    then sees a "paid after all" and is refused."""
    with transaction.atomic():
        # Taken before the transition's savepoint, whose rollback would release it.
        _TRANSFER_LOCKED.first(transition["transfer_id"])
        try:
            transfer_transition(**transition)
            return
        except (InvalidTransferTransition, StaleDisbursementAnswer) as exc:
            logger.warning(
                "Provider answer ignored for transfer %s: %s", transition["transfer_id"], exc
            )
            stale = isinstance(exc, StaleDisbursementAnswer)
        transfer = Transfer.objects.select_related("merchant").get(pk=transition["transfer_id"])
        ours = transfer.payin_status if leg == "collection" else transfer.payout_status
        if stale:
            ours = "superseded"
        contradicts = (outcome == provider.COMPLETED and ours != provider.COMPLETED) or (
            outcome == provider.FAILED and ours == provider.COMPLETED
        )
        if contradicts:
            payment_services.provider_discrepancy_record(
                merchant=transfer.merchant,
                resource_type=f"transfer_{leg}",
                resource_id=transfer.id,
                reference=reference,
                provider_reference=transition.get("provider_reference", ""),
                outcome=outcome,
                reason=provider_reason,
                our_status=ours,
                at=transition["at"],
            )


def transfer_apply_collection_result(
    *, reference: str, provider_reference: str, outcome: str, reason: str, at: datetime
) -> None:
    """Gateway callback for the collection leg."""
    completed = outcome == provider.COMPLETED
    _apply_answer(
        leg="collection",
        reference=reference,
        outcome=outcome,
        provider_reason=reason,
        transfer_id=UUID(reference),
        move=COLLECTION_COMPLETED if completed else COLLECTION_FAILED,
        reason=REASON_COLLECTION_COMPLETED if completed else reason,
        at=at,
        provider_reference=provider_reference,
    )


def transfer_apply_disbursement_result(
    *, reference: str, provider_reference: str, outcome: str, reason: str, at: datetime
) -> None:
    """Gateway callback for a disbursement attempt (reference `<transfer_id>:<attempt>`)."""
    transfer_id, _, attempt = reference.partition(":")
    completed = outcome == provider.COMPLETED
    _apply_answer(
        leg="disbursement",
        reference=reference,
        outcome=outcome,
        provider_reason=reason,
        transfer_id=UUID(transfer_id),
        move=DISBURSEMENT_COMPLETED if completed else DISBURSEMENT_FAILED,
        reason=REASON_DISBURSEMENT_COMPLETED if completed else reason,
        at=at,
        provider_reference=provider_reference,
        attempt=int(attempt),
    )


# --- relaunch-payout and support actions ---------------------------------------------------


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
            f"payout_amount {_fmt(payout_amount)} is above the original "
            f"{_fmt(transfer.quoted_payout_amount)} {transfer.payout_currency}."
        )
        raise PayoutAmountAboveOriginal(message, fields={"payout_amount": [message]})
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


def _within_limits(*, operator: Operator, amount: Decimal) -> None:
    if amount < operator.min_amount:
        raise quote_services.AmountBelowMinimum(
            f"{_fmt(amount)} is below {operator.code}'s minimum of {_fmt(operator.min_amount)}.",
            field="payout_amount",
        )
    if amount > operator.max_amount:
        raise quote_services.AmountAboveMaximum(
            f"{_fmt(amount)} is above {operator.code}'s maximum of {_fmt(operator.max_amount)}.",
            field="payout_amount",
        )


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
        ProviderDiscrepancy.objects.filter(
            resource_type__in=[_DISBURSEMENT_REPORTED_PAID[0], _COLLECTION_REPORTED_FAILED[0]],
            resource_id=transfer.id,
            resolved_at__isnull=True,
        ).values_list("resource_type", "provider_outcome")
    )


def _unreconciled_provider_answer(transfer: Transfer, *, moving: str) -> str:
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
    that the completed collection failed (see _unreconciled_provider_answer). Of two racing
    relaunches, the second waits for the row lock and gets the 409. With an
    `actor` (support staff) the relaunch is written to the audit log in the same transaction."""
    from transfers import selectors

    with _nested_error_fields(), transaction.atomic():
        transfer = selectors.transfer_get(merchant=merchant, transfer_id=transfer_id, lock=True)
        if _state(transfer) == _FUNDS_RETURNED:
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
        if unreconciled := _unreconciled_provider_answer(transfer, moving="a relaunch"):
            raise TransferNotRelaunchable(unreconciled)
        changes: dict[str, Any] = {}
        amount = transfer.payout_amount
        if payout_amount is not None:
            amount = _relaunch_amount(transfer=transfer, payout_amount=payout_amount)
            changes["payout_amount"] = amount
        operator = _relaunch_operator(transfer=transfer, recipient=recipient)
        if recipient is not None:
            party = _party(
                party=recipient,
                field="recipient",
                country_code=transfer.recipient_country_code,
                rail_type=transfer.recipient_rail_type,
                operator_code=operator.code,
                required=_recipient_names(recipient),
            )
            party.setdefault("recipient_type", "individual")
            changes["recipient"] = party
            changes["recipient_operator_code"] = operator.code
        _within_limits(operator=operator, amount=amount)
        transfer = transfer_transition(
            transfer_id=transfer.id,
            move=PAYOUT_RELAUNCHED,
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
                    "payout_amount": _fmt(transfer.payout_amount),
                },
            )
    return transfer


def transfer_mark_disbursement_failed(*, transfer_id: UUID, actor: Any, now: datetime) -> Transfer:
    """Support: fail a disbursement leg stuck at the provider (reason marked_failed_by_support),
    recorded in the audit log with who did it. The money stays in transfer_suspense until a
    relaunch, or until support returns it to the merchant's wallet. Stuck means: the provider
    received the attempt (it has a disbursement reference) and it is past its leg timeout; an
    attempt without a reference may be on its way to the provider right now, and one relaunched
    after a leg failed too early may be paid twice. 409 otherwise."""
    with transaction.atomic():
        transfer = Transfer.objects.select_for_update().get(pk=transfer_id)
        if _state(transfer) != _DISBURSING:
            raise InvalidTransferTransition(
                "Only a transfer whose disbursement leg is in flight (disbursing) can have it "
                f"marked failed; this one is {transfer.status}."
            )
        if not transfer.disbursement_reference or transfer.leg_timeout_at > now:
            raise InvalidTransferTransition(
                "Only a disbursement stuck at the provider can be marked failed: received by "
                "the provider (it has a disbursement reference) and past its leg timeout."
            )
        transfer = transfer_transition(
            transfer_id=transfer_id, move=DISBURSEMENT_FAILED, reason=REASON_MARKED_FAILED, at=now
        )
        merchant_services.audit_record(
            merchant=transfer.merchant,
            actor=actor,
            action="support.action",
            target=str(transfer.id),
            detail={
                "action": "transfer.mark_disbursement_failed",
                "disbursement_attempt": transfer.disbursement_attempt,
            },
        )
    return transfer


def transfer_apply_provider_completion(
    *, discrepancy_id: UUID, actor: Any, now: datetime
) -> Transfer:
    """Support: the provider's "completed" for a disbursement attempt we had failed (timeout
    sweep, or marked failed by support) is true, so the transfer completes as that answer would
    have completed it: the transition's journals (suspense emptied, fee, FX, the part a lowered
    relaunch did not pay out back to the wallet) and events (transfer.payout.completed,
    transfer.completed), history reason provider_completion_applied_by_support; the
    discrepancy is resolved by the actor and the action audited, all in one transaction.

    Only an unresolved "completed" transfer_disbursement discrepancy for the transfer's
    current attempt, with the transfer failed / payin completed / payout failed; 409
    provider_completion_not_applicable otherwise, changing nothing. The transfer is locked
    first, then the discrepancy, and both are checked under the locks: of two clicks, or a
    click and a relaunch, a provider answer or a "Mark resolved", one wins."""
    refused = ProviderCompletionNotApplicable
    with transaction.atomic():
        # resource_type, resource_id and merchant never change: read without a lock, so the
        # transfer's row is locked before the discrepancy's, as every transfer action does.
        found = (
            ProviderDiscrepancy.objects.filter(pk=discrepancy_id)
            .values_list("resource_type", "resource_id", "merchant_id", "provider_outcome")
            .first()
        )
        if found is None:
            raise refused("The discrepancy does not exist.")
        resource_type, transfer_id, merchant_id, outcome = found
        if resource_type != "transfer_disbursement":
            raise refused(
                "Only a transfer disbursement's discrepancy can be applied; this one is about "
                f"a {resource_type.replace('_', ' ')}: "
                f"{payment_services.discrepancy_settlement_hint(resource_type, outcome)}."
            )
        transfer = (
            Transfer.objects.select_for_update(of=("self",))
            .filter(pk=transfer_id, merchant_id=merchant_id)
            .first()
        )
        discrepancy = ProviderDiscrepancy.objects.select_for_update().get(pk=discrepancy_id)
        if discrepancy.resolved_at is not None:
            raise refused(
                f"This discrepancy was already resolved by {discrepancy.resolved_by or 'support'}"
                f" at {discrepancy.resolved_at.isoformat(timespec='seconds')}."
            )
        if discrepancy.provider_outcome != provider.COMPLETED:
            raise refused(
                f'The provider answered "{discrepancy.provider_outcome}", not "completed": '
                "there is no completion to apply."
            )
        if transfer is None:
            raise refused("The discrepancy's transfer does not exist.")
        if _state(transfer) == _FUNDS_RETURNED:
            raise refused(
                "This transfer's collected funds were returned to the merchant's wallet: it can "
                "no longer complete. If the provider did pay the recipient, the merchant holds "
                "that money twice: ops take it back with debit_wallet --discrepancy, which "
                "resolves the discrepancy (mark it resolved if the provider did not pay)."
            )
        if not is_relaunchable(transfer):
            raise refused(
                "Only a transfer whose disbursement leg failed (status failed, payin_status "
                f"completed, payout_status failed) can complete; this one is {transfer.status} "
                f"with payin_status {transfer.payin_status} and payout_status "
                f"{transfer.payout_status}."
            )
        current = disbursement_reference(transfer.id, transfer.disbursement_attempt)
        if discrepancy.reference != current:
            raise refused(
                f"The answer is for disbursement attempt {discrepancy.reference}, not the "
                f"current one ({current}): that attempt's recipient, amount or operator may not "
                "be the transfer's now. Reconcile it by hand, then mark it resolved."
            )
        transfer = transfer_transition(
            transfer_id=transfer.id,
            move=PROVIDER_COMPLETION_APPLIED,
            reason=REASON_PROVIDER_COMPLETION_APPLIED,
            at=now,
            provider_reference=discrepancy.provider_reference,
            attempt=transfer.disbursement_attempt,
        )
        discrepancy.mark_resolved(by=actor.get_username(), at=now)
        merchant_services.audit_record(
            merchant=transfer.merchant,
            actor=actor,
            action="support.action",
            target=str(transfer.id),
            detail={
                "action": "transfer.provider_completion_applied",
                "discrepancy": str(discrepancy.id),
                "disbursement_attempt": transfer.disbursement_attempt,
                "provider_reference": discrepancy.provider_reference,
            },
        )
    return transfer


def transfer_return_collected_funds(*, transfer_id: UUID, actor: Any, now: datetime) -> Transfer:
    """Support: give up a failed disbursement and return the money collected for it, held in
    transfer_suspense, to the merchant's available balance in the payin currency, in full (no
    fee: the transfer never completed). The move collected_funds_returned of the one transition
    function (failed / completed / failed -> failed / completed / cancelled, history reason
    collected_funds_returned_by_support) posts the journal transfer_returned and records
    transfer.failed; the action is audited, all in one transaction. The transfer can then never
    be relaunched nor returned again.

    Only for a transfer failed / payin completed / payout failed whose failed disbursement the
    provider has not reported paid (an unresolved "completed" ProviderDiscrepancy: the recipient
    may have the money, as for a relaunch) and whose completed collection it has not reported
    failed (an unresolved "failed" one: the money may never have been collected); 409
    collected_funds_not_returnable otherwise, changing nothing. The transfer is locked first and
    checked under the lock, so of a return racing a relaunch, another return or a provider
    answer, one wins."""
    refused = CollectedFundsNotReturnable
    with transaction.atomic():
        transfer = (
            Transfer.objects.select_for_update(of=("self",))
            .select_related("merchant")
            .filter(pk=transfer_id)
            .first()
        )
        if transfer is None:
            raise refused("The transfer does not exist.")
        if _state(transfer) == _FUNDS_RETURNED:
            returned_at = (
                transfer.history.filter(reason=REASON_COLLECTED_FUNDS_RETURNED)
                .values_list("created_at", flat=True)
                .first()
            )
            when = f" at {returned_at.isoformat(timespec='seconds')}" if returned_at else ""
            raise refused(
                "This transfer's collected funds were already returned to the merchant's "
                f"wallet{when}."
            )
        if not is_relaunchable(transfer):
            raise refused(
                f"{refused.message} This one is {transfer.status} with payin_status "
                f"{transfer.payin_status} and payout_status {transfer.payout_status}."
            )
        if unreconciled := _unreconciled_provider_answer(
            transfer, moving="returning it to the merchant's wallet"
        ):
            raise refused(unreconciled)
        transfer = transfer_transition(
            transfer_id=transfer.id,
            move=COLLECTED_FUNDS_RETURNED,
            reason=REASON_COLLECTED_FUNDS_RETURNED,
            at=now,
        )
        merchant_services.audit_record(
            merchant=transfer.merchant,
            actor=actor,
            action="support.action",
            target=str(transfer.id),
            detail={
                "action": "transfer.collected_funds_returned",
                "amount": _fmt(transfer.payin_amount),
                "currency": transfer.payin_currency,
                "disbursement_attempt": transfer.disbursement_attempt,
            },
        )
    return transfer


def transfers_fail_timed_out(*, now: datetime) -> int:
    """Fail every leg the provider has not answered by leg_timeout_at (reason
    provider_timeout), each transfer in its own transaction, unless the provider, asked first
    about a leg it received (its reference), has an answer for it (then that answer is
    applied), or it is a disbursement the provider cannot be asked about, or a leg without a
    receipt whose last call started too recently to have ended (left as it is), or the leg
    changed since it was read (submitted, a call started, its receipt stored: the next run
    decides). Returns how many failed."""
    failed = 0
    due = Transfer.objects.filter(
        status__in=[TransferStatus.PENDING, TransferStatus.COLLECTING, TransferStatus.DISBURSING],
        leg_timeout_at__lte=now,
    ).values_list(
        "id",
        "status",
        "disbursement_attempt",
        "collection_reference",
        "disbursement_reference",
        "disbursement_submitted_at",
        "collection_submitted_at",
        "payer",
        "recipient",
    )
    for row in list(due):
        transfer_id, status, attempt, collected_as, disbursed_as, last_call = row[:6]
        last_collection_call, payer, recipient = row[6:]
        try:
            if status == TransferStatus.DISBURSING:
                kwargs = {"move": DISBURSEMENT_FAILED, "attempt": attempt}
                if not disbursed_as and payment_services.call_may_be_in_flight(last_call, now=now):
                    continue  # its last call may still reach the provider: the next run decides
                asked = disbursed_as and provider.answer_before_timeout(
                    kind=provider.DISBURSEMENT,
                    reference=disbursement_reference(transfer_id, attempt),
                    callback=DISBURSEMENT_CALLBACK,
                    party=_party_identifier(recipient),
                    at=now,
                )
            else:
                kwargs = {"move": COLLECTION_FAILED}
                if not collected_as and payment_services.call_may_be_in_flight(
                    last_collection_call, now=now
                ):
                    continue  # its last call may still charge the payer: the next run decides
                asked = collected_as and provider.answer_before_timeout(
                    kind=provider.COLLECTION,
                    reference=str(transfer_id),
                    callback=COLLECTION_CALLBACK,
                    party=_party_identifier(payer),
                    at=now,
                )
            if asked:
                continue
            with transaction.atomic():
                if status == TransferStatus.DISBURSING:
                    unchanged = _disbursement_unchanged(
                        transfer_id, attempt=attempt, reference=disbursed_as, last_call=last_call
                    )
                else:
                    unchanged = _collection_unchanged(
                        transfer_id,
                        status=status,
                        reference=collected_as,
                        last_call=last_collection_call,
                    )
                if not unchanged:
                    continue  # a call started, or its receipt came, since: the next run decides
                if _apply_quietly(
                    transfer_id=transfer_id, reason=REASON_PROVIDER_TIMEOUT, at=now, **kwargs
                ):
                    failed += 1
        except provider.DisbursementOutcomeUnknown as unknown:
            logger.error("Timeout sweep: %s (%r); left disbursing", unknown, unknown.__cause__)
        except Exception:  # one leg's trouble must not hold up every other leg's timeout
            logger.exception("Timeout sweep: transfer %s left for the next run", transfer_id)
    return failed


def _collection_unchanged(
    transfer_id: UUID, *, status: str, reference: str, last_call: datetime | None
) -> bool:
    """Whether the collection leg is as the sweep read it (not submitted since, for a transfer
    read pending: the submission renews the leg timeout and calls the provider; no call started
    and no receipt stored since), locking the transfer until the caller's transaction ends."""
    return (
        Transfer.objects.select_for_update()
        .filter(
            pk=transfer_id,
            status=status,
            collection_reference=reference,
            **payment_services.same_time("collection_submitted_at", last_call),
        )
        .exists()
    )


def _disbursement_unchanged(
    transfer_id: UUID, *, attempt: int, reference: str, last_call: datetime | None
) -> bool:
    """Whether the disbursement attempt is as the sweep read it (no call started, no receipt
    stored since), locking the transfer until the caller's transaction ends."""
    return (
        Transfer.objects.select_for_update()
        .filter(
            pk=transfer_id,
            disbursement_attempt=attempt,
            disbursement_reference=reference,
            **payment_services.same_time("disbursement_submitted_at", last_call),
        )
        .exists()
    )


RESUBMIT_AFTER_SECONDS = 60


def transfers_stale_submissions(*, now: datetime) -> list[tuple[UUID, int | None]]:
    """(transfer id, disbursement attempt or None for the collection) of every leg whose
    provider submission should have happened by now but has no provider reference (the
    enqueue after commit was lost), older than RESUBMIT_AFTER_SECONDS and not yet timed out.
    Submitting is idempotent, so resubmitting one that is merely slow is harmless."""
    before = now - timedelta(seconds=RESUBMIT_AFTER_SECONDS)
    rows = Transfer.objects.filter(
        Q(status=TransferStatus.PENDING)
        | Q(status=TransferStatus.COLLECTING, collection_reference="")
        | Q(status=TransferStatus.DISBURSING, disbursement_reference=""),
        updated_at__lte=before,
        leg_timeout_at__gt=now,
    ).values_list("id", "status", "disbursement_attempt")
    return [
        (transfer_id, attempt if status == TransferStatus.DISBURSING else None)
        for transfer_id, status, attempt in rows
    ]
