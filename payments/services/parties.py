"""The parties of a payment (a payin's source, a payout's recipient), checked against the quote's
rail and routing; shared with the transfers app (payment_services.RAIL_FIELDS, PartyInvalid,
party_for_rail, routing_mismatches, provider_timeout_at)."""

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings

from core.exceptions import DomainError
from customers.selectors import CustomerNotFound  # noqa: F401  (payment_services.CustomerNotFound)
from quotes.models import Quote, RailType

MOBILE_MONEY_FIELDS = ("phone",)


BANK_FIELDS = ("bank_name", "bank_code", "account_name", "account_number")


RAIL_FIELDS = {
    RailType.MOBILE_MONEY: MOBILE_MONEY_FIELDS,
    RailType.BANK_TRANSFER: BANK_FIELDS,
}


class PartyInvalid(DomainError):
    """A source/recipient field is missing, or belongs to the other rail."""

    status = 400
    reason = "invalid_request"
    message = "The request is invalid."


class PartyRoutingMismatch(DomainError):
    status = 400
    reason = "party_routing_mismatch"
    message = "The party's country, rail or operator does not match the quote."


def routing_mismatches(
    party: dict[str, Any], expected: dict[str, str], *, what: str
) -> dict[str, list[str]]:
    """The routing fields a party states that differ from `expected` (the quote's), each with
    its error; those it leaves out are not checked."""
    return {
        name: [f"Must be {value!r} for this {what}; got {party[name]!r}."]
        for name, value in expected.items()
        if party.get(name) not in (None, value)
    }


def party_for_quote(
    *, quote: Quote, party: dict[str, Any], field: str, required: tuple[str, ...] = ()
) -> dict[str, Any]:
    """party_for_rail for the quote's rail, after the routing the party states (if any) is
    checked against the quote's: routing comes from the quote, and a request that names another
    country, rail or operator does not match it (400 party_routing_mismatch)."""
    routing = quote_routing(quote)
    mismatches = routing_mismatches(party, routing, what="quote")
    if mismatches:
        first = next(iter(mismatches))
        raise PartyRoutingMismatch(
            f"{field}.{first}: {mismatches[first][0]}", fields={field: mismatches}
        )
    party = {name: value for name, value in party.items() if name not in routing}
    return party_for_rail(rail_type=quote.rail_type, party=party, field=field, required=required)


def party_for_rail(
    *, rail_type: str, party: dict[str, Any], field: str, required: tuple[str, ...] = ()
) -> dict[str, Any]:
    """The party's fields for this rail: the rail's own fields are required, the other rail's
    fields are refused; each error names `field.<name>`."""
    own = RAIL_FIELDS.get(rail_type)
    if own is None:
        raise PartyInvalid(f"Unsupported rail {rail_type!r}.")
    foreign = [name for fields in RAIL_FIELDS.values() if fields is not own for name in fields]
    errors: dict[str, list[str]] = {}
    for name in (*own, *required):
        if not party.get(name):
            errors[name] = [f"This field is required for a {rail_type} quote."]
    for name in foreign:
        if name in party:
            errors[name] = [f"This field belongs to another rail; the quote is {rail_type}."]
    if errors:
        first = next(iter(errors))
        raise PartyInvalid(f"{field}.{first}: {errors[first][0]}", fields={field: errors})
    return {key: value for key, value in party.items() if value not in (None, "")}


def quote_routing(quote: Quote) -> dict[str, str]:
    return {
        "country_code": quote.country_code,
        "rail_type": quote.rail_type,
        "operator_code": quote.operator_code,
    }


def quote_amounts(quote: Quote) -> dict[str, Any]:
    return {
        "send_amount": quote.send_amount,
        "send_currency": quote.send_currency,
        "receive_amount": quote.receive_amount,
        "receive_currency": quote.receive_currency,
        "total_fee": quote.total_fee,
        **quote_routing(quote),
        "pricing": quote.pricing,
    }


def provider_timeout_at(now: datetime) -> datetime:
    """When a payment created or submitted `now` is failed unless the provider answered."""
    return now + timedelta(seconds=settings.PROVIDER_TIMEOUT_SECONDS)


def party_identifier(party: dict[str, Any]) -> dict[str, str]:
    """What the provider knows a party by: its phone or its account number."""
    return {
        "phone": party.get("phone", ""),
        "account_number": party.get("account_number", ""),
    }
