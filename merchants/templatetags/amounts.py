"""`{% load amounts %}{{ wallet.available|amount:wallet.currency }}`: an amount in a template as
the lists show it (display.amount), "1,234.5 XOF"."""

from django import template

from core import display

register = template.Library()


@register.filter
def amount(value, currency: str | None = None) -> str:
    return display.amount(value, currency)
