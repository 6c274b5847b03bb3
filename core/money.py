"""Money in one place (docs/api.md): Decimal only, quantized per currency, rendered as strings.

XAF and XOF have no minor unit: "1500" and "1500.00" are 1500, "1500.5" is refused.
"""

import re
from decimal import ROUND_CEILING, ROUND_FLOOR, ROUND_HALF_UP, Decimal, InvalidOperation

from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from drf_spectacular.plumbing import ResolvedComponent
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

CURRENCIES = ("XAF", "XOF")

# The countries whose money each currency is: the CEMAC's XAF and the UEMOA's XOF.
CURRENCY_COUNTRIES = {
    "XAF": ("CF", "CG", "CM", "GA", "GQ", "TD"),
    "XOF": ("BF", "BJ", "CI", "GW", "ML", "NE", "SN", "TG"),
}

# Digits after the decimal point that a currency can carry.
MINOR_UNITS = {"XAF": 0, "XOF": 0}

AMOUNT_PATTERN = r"^[0-9]+(\.[0-9]+)?$"
_AMOUNT_RE = re.compile(AMOUNT_PATTERN)

# Amount columns are numeric(20, 2): 18 integer digits at most.
MAX_INTEGER_DIGITS = 18
AMOUNT_CEILING = Decimal(10) ** MAX_INTEGER_DIGITS  # the first value such a column cannot hold


def _unit(currency: str) -> Decimal:
    if currency not in MINOR_UNITS:
        raise ValueError(f"Unknown currency {currency!r}; expected one of {', '.join(CURRENCIES)}.")
    return Decimal(1).scaleb(-MINOR_UNITS[currency])


def quantize(amount: Decimal, currency: str, *, rounding: str = ROUND_HALF_UP) -> Decimal:
    """The amount to the currency's unit (XAF/XOF: whole units)."""
    if not isinstance(amount, Decimal):
        raise TypeError("Amounts are Decimal, never float or int.")
    return amount.quantize(_unit(currency), rounding=rounding)


def round_up(amount: Decimal, currency: str) -> Decimal:
    """Up to the next unit: how fees are rounded."""
    return quantize(amount, currency, rounding=ROUND_CEILING)


def round_down(amount: Decimal, currency: str) -> Decimal:
    """Down to the unit: how converted payout amounts are rounded."""
    return quantize(amount, currency, rounding=ROUND_FLOOR)


def has_valid_precision(amount: Decimal, currency: str) -> bool:
    """True when the amount has no digits below the currency's unit (1500.00 yes, 1500.5 no)."""
    return amount == amount.quantize(_unit(currency), rounding=ROUND_FLOOR)


def parse_amount(text: str, currency: str) -> Decimal:
    """A DecimalString (^[0-9]+(\\.[0-9]+)?$) in the currency, quantized to its unit.

    Raises ValueError with a message fit for a merchant on any other form: empty, negative,
    exponent, comma, whitespace, or digits below the currency's unit ("1500.5" in XAF).
    """
    if not isinstance(text, str):
        raise ValueError('An amount must be a string such as "1500".')
    if text == "":
        raise ValueError("An amount must not be empty.")
    if not _AMOUNT_RE.fullmatch(text):
        raise ValueError(
            f"{text!r} is not an amount: use digits with an optional decimal point, "
            'such as "1500" (no sign, exponent, comma or spaces).'
        )
    amount = Decimal(text)
    if len(text.split(".")[0].lstrip("0")) > MAX_INTEGER_DIGITS:
        raise ValueError(f"{text!r} is too large.")
    unit = _unit(currency)
    if not has_valid_precision(amount, currency):
        if unit == 1:
            raise ValueError(f"{currency} has no minor unit: {text!r} must be a whole amount.")
        raise ValueError(f"{currency} amounts have at most {MINOR_UNITS[currency]} decimals.")
    return amount.quantize(unit)


def format_amount(amount: Decimal) -> str:
    """The DecimalString form: no exponent, no trailing zeros ("1500", "12.5")."""
    if not isinstance(amount, Decimal):
        raise TypeError("Amounts are Decimal, never float or int.")
    if amount == amount.to_integral_value():
        return str(amount.quantize(Decimal(1)))
    return format(amount.normalize(), "f")


@extend_schema_field({"type": "string", "pattern": AMOUNT_PATTERN, "example": "1500"})
class AmountField(serializers.Field):
    """Input: a JSON string matching ^[0-9]+(\\.[0-9]+)?$ (numbers are refused) -> Decimal.
    Whether the amount suits its currency is checked where the currency is known.
    Output: the DecimalString form of a Decimal."""

    default_error_messages = {
        "not_a_string": 'An amount must be a JSON string such as "1500", not a number.',
        "invalid": 'Must be a string of digits with an optional decimal point, such as "1500".',
        "too_large": "The amount is too large.",
    }

    def to_internal_value(self, data) -> Decimal:
        if not isinstance(data, str):
            self.fail("not_a_string")
        if not _AMOUNT_RE.fullmatch(data):
            self.fail("invalid")
        if len(data.split(".")[0].lstrip("0")) > MAX_INTEGER_DIGITS:
            self.fail("too_large")
        try:
            return Decimal(data)
        except InvalidOperation:  # pragma: no cover - the pattern already excludes it
            self.fail("invalid")

    def to_representation(self, value) -> str:
        if not isinstance(value, Decimal):
            value = Decimal(str(value))
        return format_amount(value)


class CurrencyField(serializers.ChoiceField):
    def __init__(self, **kwargs) -> None:
        super().__init__(choices=[(c, c) for c in CURRENCIES], **kwargs)


class CurrencyFieldSchema(OpenApiSerializerFieldExtension):
    """Every currency field points at one `Currency` component, so the schema has one enum
    (XAF, XOF) however many fields (send_currency, payout_currency...) use it."""

    target_class = CurrencyField

    def map_serializer_field(self, auto_schema, direction):
        component = ResolvedComponent(
            name="Currency",
            type=ResolvedComponent.SCHEMA,
            object="Currency",
            schema={"type": "string", "enum": list(CURRENCIES)},
        )
        auto_schema.registry.register_on_missing(component)
        return component.ref
