"""Create a transfer: consume its quote, check its parties and sender, write it `pending`;
the collection is submitted after commit."""

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from decimal import Decimal
from typing import Any
from uuid import UUID

from django.db import transaction

from core import jobs
from core.exceptions import DomainError
from customers import selectors as customer_selectors
from customers.models import Customer, KycStatus
from merchants.models import Merchant
from payments import provider
from payments.services.parties import (
    RAIL_FIELDS,
    PartyInvalid,
    PartyRoutingMismatch,
    provider_timeout_at,
    routing_mismatches,
)
from quotes import selectors as quote_selectors
from quotes import services as quote_services
from quotes.models import CorridorType, FlowType, Operator, Quote
from transfers.models import LegStatus, Transfer, TransferHistory, TransferStatus
from transfers.services.transitions import REASON_CREATED

ROUTING_FIELDS = ("country_code", "rail_type", "operator_code")


class SenderDetailsRequired(DomainError):
    status = 400
    reason = "sender_details_required"
    message = "This corridor requires sender details that are missing."


class KycNotApproved(DomainError):
    status = 400
    reason = "kyc_not_approved"
    message = "This corridor requires the customer's KYC to be approved."


@contextmanager
def nested_error_fields() -> Iterator[None]:
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


def party_check(
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
        for name, errors in routing_mismatches(party, expected, what="transfer").items()
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


def recipient_names(recipient: dict[str, Any]) -> tuple[str, ...]:
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


def _parties(
    *, merchant: Merchant, quote: Quote, payer: dict[str, Any], recipient: dict[str, Any]
) -> tuple[Operator, Operator, dict[str, Any], dict[str, Any]]:
    """The quote's two operators, still enabled for the merchant, and the two parties checked
    against them."""
    payer_operator = quote_selectors.operator_enabled_for(
        merchant=merchant, code=quote.payer_operator_code, field="quote_id"
    )
    recipient_operator = quote_selectors.operator_enabled_for(
        merchant=merchant, code=quote.recipient_operator_code, field="quote_id"
    )
    payer_party = party_check(
        party=payer,
        field="payer",
        country_code=payer_operator.country_code,
        rail_type=payer_operator.rail_type,
        operator_code=payer_operator.code,
    )
    recipient_party = recipient_check(
        recipient,
        country_code=recipient_operator.country_code,
        rail_type=recipient_operator.rail_type,
        operator_code=recipient_operator.code,
    )
    return payer_operator, recipient_operator, payer_party, recipient_party


def recipient_check(
    recipient: dict[str, Any], *, country_code: str, rail_type: str, operator_code: str
) -> dict[str, Any]:
    """The recipient party checked for its operator, an individual unless it says otherwise."""
    party = party_check(
        party=recipient,
        field="recipient",
        country_code=country_code,
        rail_type=rail_type,
        operator_code=operator_code,
        required=recipient_names(recipient),
    )
    party.setdefault("recipient_type", "individual")
    return party


def _quote_columns(quote: Quote) -> dict[str, Any]:
    """What a transfer keeps of its quote."""
    return {
        "quote": quote,
        "payin_amount": quote.send_amount,
        "payin_currency": quote.send_currency,
        "payout_amount": quote.receive_amount,
        "payout_currency": quote.receive_currency,
        "quoted_payout_amount": quote.receive_amount,
        "total_fee": quote.total_fee,
        "fx_rate": quote.fx_rate if quote.fx_rate is not None else Decimal(1),
        "corridor_code": quote.corridor_code,
        "corridor_type": quote.corridor_type,
        "pricing": quote.pricing,
    }


def _operator_columns(*, payer: Operator, recipient: Operator) -> dict[str, str]:
    return {
        "payer_operator_code": payer.code,
        "recipient_operator_code": recipient.code,
        "payer_country_code": payer.country_code,
        "recipient_country_code": recipient.country_code,
        "payer_rail_type": payer.rail_type,
        "recipient_rail_type": recipient.rail_type,
        # each leg's provider connection, kept by the leg (a relaunch too)
        "collection_connection": provider.route(payer.code),
        "disbursement_connection": provider.route(recipient.code),
    }


def _created_record(transfer: Transfer, *, at: datetime) -> None:
    """The new transfer's first history row; its collection is submitted after commit."""
    TransferHistory.objects.create(
        transfer=transfer,
        status=transfer.status,
        payin_status=transfer.payin_status,
        payout_status=transfer.payout_status,
        reason=REASON_CREATED,
        created_at=at,
    )
    jobs.enqueue_on_commit(
        "transfers.tasks.submit_transfer_collection", transfer_id=str(transfer.id)
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
    with nested_error_fields(), transaction.atomic():
        customer = customer_selectors.customer_get_for_payment(
            merchant=merchant, customer_id=customer_id
        )
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
        payer_operator, recipient_operator, payer_party, recipient_party = _parties(
            merchant=merchant, quote=quote, payer=payer, recipient=recipient
        )
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
            **_quote_columns(quote),
            status=TransferStatus.PENDING,
            payin_status=LegStatus.PENDING,
            payout_status=LegStatus.NOT_STARTED,
            **_operator_columns(payer=payer_operator, recipient=recipient_operator),
            payer=payer_party,
            recipient=recipient_party,
            payment_reason_code=payment_reason_code,
            sender_source_of_funds=sender_source_of_funds,
            sender_occupation=sender_occupation,
            leg_timeout_at=provider_timeout_at(now),
            created_at=now,
            updated_at=now,
        )
        _created_record(transfer, at=now)
    return transfer
