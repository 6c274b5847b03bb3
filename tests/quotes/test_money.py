from decimal import Decimal

import pytest
from rest_framework import serializers

from core import money


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1500", Decimal("1500")),
        ("1500.00", Decimal("1500")),
        ("0", Decimal("0")),
        ("007", Decimal("7")),
    ],
)
def test_parse_amount_accepts_whole_amounts(text, expected):
    parsed = money.parse_amount(text, "XAF")
    assert parsed == expected
    assert parsed.as_tuple().exponent == 0


@pytest.mark.parametrize(
    "text",
    [
        "",
        "-1500",
        "1e3",
        "1E3",
        "1,500",
        "1500,00",
        "1500.5",
        "1500.05",
        " 1500",
        "+1500",
        ".5",
        "1500.",
        "1500\n",
    ],
)
def test_parse_amount_refuses_other_forms(text):
    with pytest.raises(ValueError):
        money.parse_amount(text, "XOF")


def test_parse_amount_names_the_missing_minor_unit():
    with pytest.raises(ValueError, match="no minor unit"):
        money.parse_amount("1500.5", "XAF")


def test_parse_amount_refuses_unknown_currency():
    with pytest.raises(ValueError, match="Unknown currency"):
        money.parse_amount("1500", "EUR")


def test_quantize_and_rounding_helpers():
    assert money.quantize(Decimal("1500.4"), "XAF") == Decimal("1500")
    assert money.quantize(Decimal("1500.5"), "XAF") == Decimal("1501")
    assert money.round_up(Decimal("150.01"), "XOF") == Decimal("151")
    assert money.round_down(Decimal("150.99"), "XOF") == Decimal("150")


def test_quantize_refuses_float():
    with pytest.raises(TypeError):
        money.quantize(1500.0, "XAF")


@pytest.mark.parametrize(
    ("amount", "text"),
    [
        (Decimal("1500"), "1500"),
        (Decimal("1500.00"), "1500"),
        (Decimal("1E+3"), "1000"),
        (Decimal("12.50"), "12.5"),
        (Decimal("0.00"), "0"),
    ],
)
def test_format_amount(amount, text):
    assert money.format_amount(amount) == text


class _AmountInput(serializers.Serializer):
    amount = money.AmountField()
    currency = money.CurrencyField()


@pytest.mark.parametrize("value", [1500, 1500.0, None, ["1500"], "-1", "1e3", "1,5", "", "1500\n"])
def test_amount_field_takes_only_decimal_strings(value):
    serializer = _AmountInput(data={"amount": value, "currency": "XAF"})
    assert not serializer.is_valid()
    assert "amount" in serializer.errors


def test_amount_field_parses_to_decimal_and_renders_a_string():
    serializer = _AmountInput(data={"amount": "1500.00", "currency": "XOF"})
    assert serializer.is_valid(), serializer.errors
    assert serializer.validated_data["amount"] == Decimal("1500")
    assert _AmountInput({"amount": Decimal("1500.00"), "currency": "XOF"}).data["amount"] == "1500"


def test_currency_field_takes_only_xaf_and_xof():
    serializer = _AmountInput(data={"amount": "1", "currency": "EUR"})
    assert not serializer.is_valid()
    assert "currency" in serializer.errors
