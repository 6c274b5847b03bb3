"""Operator prediction: the catalog operator a phone number's mobile network belongs to.

phonenumbers parses the number and names its network from its prefix (its carrier data); the
catalog says which operator is which network (Operator.network_names, edited by ops), and which
wallets work with any network's number (Operator.network_independent: never the prediction,
listed beside it). Numbers ported to another network keep their prefix: the prediction is the
prefix's network, as every provider's is.
"""

import re
from dataclasses import dataclass

import phonenumbers
from django.db.models import OuterRef
from phonenumbers import carrier

from core.exceptions import DomainError
from merchants.models import Merchant
from quotes.models import Operator, RailType
from quotes.selectors import merchant_has_operator

# Longer than any number written with separators; phonenumbers itself refuses past 250.
MAX_PHONE_LENGTH = 64
# A number as people write it: one +, the country code, digits and separators. phonenumbers
# alone would also take "++221...", "tel:+221..." and an extension ("ext 5", ";ext=5").
WRITTEN_NUMBER = re.compile(r"\s*\(?\+\d[\d ().-]*\s*")


class PhoneInvalid(DomainError):
    status = 400
    reason = "phone_invalid"
    message = "Not a valid phone number: give it in international form, + and country code."


class OperatorUnknown(DomainError):
    status = 400
    reason = "operator_unknown"
    message = "The number's country or network has no operator in the catalog."


@dataclass(frozen=True)
class OperatorPrediction:
    phone: str  # E.164
    country_code: str
    operator: Operator
    enabled: bool  # active in the catalog and enabled for the merchant
    also_usable: list[str]  # codes of the country's active network-independent wallets


def operator_predict(*, merchant: Merchant, phone: str) -> OperatorPrediction:
    """The operator whose network the number belongs to, for POST /operators/predict.
    Raises PhoneInvalid for what is not a valid number, OperatorUnknown for a valid number of
    a country or network outside the catalog. One query."""
    number = _parse(phone)
    country_code = phonenumbers.region_code_for_number(number)
    network = carrier.name_for_number(number, "en")
    operators = list(
        Operator.objects.filter(country_code=country_code, rail_type=RailType.MOBILE_MONEY)
        .annotate(
            enabled_for_merchant=merchant_has_operator(merchant=merchant, operator=OuterRef("pk"))
        )
        .order_by("code")
    )
    predicted = _operator_of_network(operators, network)
    if predicted is None:
        message = _unknown_message(country_code, network, covered=bool(operators))
        raise OperatorUnknown(message, fields={"phone": [message]})
    return OperatorPrediction(
        phone=phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164),
        country_code=country_code,
        operator=predicted,
        enabled=predicted.active and predicted.enabled_for_merchant,
        also_usable=[op.code for op in operators if op.network_independent and op.active],
    )


def network_names_claimed_elsewhere(
    *, operator_id: int | None, country_code: str, network_names: list[str]
) -> dict[str, list[str]]:
    """Of these names, those another operator of the country already lists: operator code ->
    names (the operator admin refuses them, so a number never has two predictions)."""
    wanted = {name.strip().casefold() for name in network_names}
    others = Operator.objects.filter(country_code=country_code, network_independent=False)
    if operator_id is not None:
        others = others.exclude(pk=operator_id)
    claimed = {}
    for other in others.order_by("code"):
        shared = [name for name in other.network_names if name.strip().casefold() in wanted]
        if shared:
            claimed[other.code] = shared
    return claimed


def _parse(phone: str) -> phonenumbers.PhoneNumber:
    message = PhoneInvalid.message
    if len(phone) > MAX_PHONE_LENGTH or not WRITTEN_NUMBER.fullmatch(phone):
        raise PhoneInvalid(message, fields={"phone": [message]})
    try:
        number = phonenumbers.parse(phone, None)  # no default region: + and country code
    except phonenumbers.NumberParseException:
        raise PhoneInvalid(message, fields={"phone": [message]}) from None
    if not phonenumbers.is_valid_number(number):
        raise PhoneInvalid(message, fields={"phone": [message]})
    return number


def _operator_of_network(operators: list[Operator], network: str) -> Operator | None:
    """The first operator by code that lists the network's name (case ignored)."""
    if not network:
        return None  # a landline, or a range the library knows no network of
    wanted = network.casefold()
    for operator in operators:
        names = {name.strip().casefold() for name in operator.network_names}
        if not operator.network_independent and wanted in names:
            return operator
    return None


def _unknown_message(country_code: str, network: str, *, covered: bool) -> str:
    if not covered:
        return f"No operator in the catalog covers {country_code} numbers."
    if not network:
        return f"The number is not a mobile number of a network in {country_code}."
    return f"The {network} network in {country_code} has no operator in the catalog."
