"""How the dashboard shows ids, amounts and times: one way everywhere, lists and record pages.

`list_columns` turns a ModelAdmin's list_display into columns that fit a 1400 px screen: ids
as their first 8 characters (the whole id on hover and in search), amounts as the API's digits
with thousands separators and their currency, times in ISO 8601 with seconds and zone.
`record_value` shows a record page's fields the same way (dashboard.ShownAsListed), read-only
fields of an editable page too; `AmountInput` holds an amount in its input as the API writes it."""

import functools
import re
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from django.db import models
from django.utils.dateparse import parse_datetime
from django.utils.html import format_html, format_html_join
from unfold.widgets import UnfoldAdminDecimalFieldWidget

from core import money

SHORT_ID_LENGTH = 8
# A time inside a JSON value (a quote's locked_at): shown as every other time.
ISO_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d")
ACRONYMS = {"kyc": "KYC"}

# An amount column and the column holding its currency, where the name alone does not say.
CURRENCY_OF = {
    "send_amount": "send_currency",
    "receive_amount": "receive_currency",
    "payin_amount": "payin_currency",
    "payout_amount": "payout_currency",
    "debit_amount": "send_currency",
    "total_fee": "send_currency",
}


def short_id(value: object) -> str:
    """The first characters of an id, the whole of it on hover."""
    if value in (None, ""):
        return "—"
    text = str(value)
    return format_html('<span class="short-id" title="{}">{}</span>', text, text[:SHORT_ID_LENGTH])


def amount_text(value: Decimal | None, currency: str | None = None) -> str:
    """20000 as "20,000 XOF": the API's digits, grouped by thousands, with the currency; as
    plain text, for a message or a history entry (`amount` in a page)."""
    if value is None:
        return "—"
    digits = money.format_amount(Decimal(value))
    whole, _, fraction = digits.partition(".")
    grouped = f"{int(whole):,}" if whole.lstrip("-").isdigit() else whole
    text = f"{grouped}.{fraction}" if fraction else grouped
    return f"{text} {currency}" if currency else text


def amount(value: Decimal | None, currency: str | None = None) -> str:
    """20000 as "20,000 XOF" (`amount_text`), on one line of the page."""
    if value is None:
        return "—"
    return format_html('<span class="whitespace-nowrap">{}</span>', amount_text(value, currency))


class AmountInput(UnfoldAdminDecimalFieldWidget):
    """A decimal's input holds the API's digits, "1500" or "1500.5", not "1500.00": no
    grouping, so what is typed is parsed and saved as it was."""

    def format_value(self, value):
        if isinstance(value, Decimal) and value.is_finite():
            return money.format_amount(value)
        return super().format_value(value)


def wrapped(text: str, *, min_width: str = "auto") -> str:
    """Text without spaces (a URL, a recorded error) that wraps anywhere to fit its column,
    kept on one line up to `min_width` ("10rem")."""
    return format_html(
        '<span style="display: inline-block; min-width: {}; overflow-wrap: anywhere">{}</span>',
        min_width,
        text,
    )


def timestamp(value: datetime | None) -> str:
    """An aware time as 2026-11-27T12:00:00Z (UTC, seconds, zone)."""
    if value is None:
        return "—"
    text = value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return format_html('<span class="whitespace-nowrap">{}</span>', text)


def _currency_field(model: type[models.Model], name: str) -> str | None:
    names = {f.name for f in model._meta.concrete_fields}
    candidate = CURRENCY_OF.get(name) or ("currency" if "currency" in names else None)
    return candidate if candidate in names else None


def _column(name: str, label: str, render: Callable[[Any], str], order: str | None) -> Callable:
    def column(obj: models.Model) -> str:
        return render(obj)

    column.__name__ = name
    column.short_description = label
    if order:
        column.admin_order_field = order
    return column


def value_shown(model: type[models.Model], field: models.Field) -> Callable | None:
    """How a list and a record page show this field of an object: a time as `timestamp`, an
    amount as `amount` with its currency; None for any other field (Django shows it)."""
    name = field.name
    if isinstance(field, models.DateTimeField):
        return lambda obj: timestamp(getattr(obj, name))
    if isinstance(field, models.DecimalField):
        currency = _currency_field(model, name)
        return lambda obj: amount(getattr(obj, name), getattr(obj, currency) if currency else None)
    return None


def _field_column(model: type[models.Model], field: models.Field) -> Callable | None:
    name, label = field.name, field.verbose_name
    if isinstance(field, models.UUIDField):
        return _column(name, label, lambda obj: short_id(getattr(obj, name)), name)
    render = value_shown(model, field)
    return _column(name, label, render, name) if render else None


def list_columns(model: type[models.Model], names: Sequence[Any], *, hide: set[str]) -> list:
    """list_display with ids, amounts and times shown one way; columns in `hide` left out."""
    fields = {f.name: f for f in model._meta.concrete_fields}
    shown_with_amounts = {
        _currency_field(model, name)
        for name in names
        if isinstance(name, str) and isinstance(fields.get(name), models.DecimalField)
    }
    columns: list = []
    for entry in names:
        if isinstance(entry, str) and (entry in hide or entry in shown_with_amounts):
            continue
        field = fields.get(entry) if isinstance(entry, str) else None
        column = _field_column(model, field) if field is not None else None
        columns.append(column or entry)
    return columns


def record_value(model: type[models.Model], field: models.Field) -> Callable | None:
    """How a record page shows this field of an object: as the lists do (`value_shown`), a
    JSON object as labelled fields; None for any other field (Django shows it)."""
    if isinstance(field, models.JSONField):
        return lambda obj: labelled(getattr(obj, field.name))
    return value_shown(model, field)


def labelled(value: Any) -> str:
    """A JSON object (pricing, a party, a wallet impact) as labelled fields, nested objects
    indented under their label; lists joined; a time written in it as `timestamp`."""
    if isinstance(value, dict):
        if not value:
            return "—"
        rows = format_html_join(
            "",
            '<div class="flex gap-4" style="padding: 0.125rem 0">'
            '<dt class="font-semibold" style="min-width: 12rem">{}</dt><dd>{}</dd></div>',
            ((_label(key), labelled(item)) for key, item in sorted(value.items())),
        )
        return format_html('<dl class="labelled">{}</dl>', rows)
    if isinstance(value, list):
        return format_html_join(", ", "{}", ((labelled(item),) for item in value)) or "—"
    if isinstance(value, str) and ISO_TIME.match(value):
        moment = parse_datetime(value)
        if moment is not None and moment.tzinfo is not None:
            return timestamp(moment)
    return "—" if value in (None, "") else str(value)


def _label(key: str) -> str:
    """A JSON key as a label: requires_kyc as "requires KYC"."""
    return " ".join(ACRONYMS.get(word, word) for word in key.split("_"))


def computed_once(method: Callable) -> Callable:
    """A read-only page's display method, run once per object: unfold resolves a read-only
    field more than once per page, and these read tables (events, journals, discrepancies)."""
    attribute = f"_shown_{method.__name__}"

    @functools.wraps(method)
    def shown(admin: object, obj: models.Model) -> str:
        if not hasattr(obj, attribute):
            setattr(obj, attribute, method(admin, obj))
        return getattr(obj, attribute)

    return shown
