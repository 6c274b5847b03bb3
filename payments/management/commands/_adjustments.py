"""What credit_wallet and debit_wallet read from their arguments alike."""

from decimal import Decimal

from django.core.management.base import CommandError

from config import money
from merchants import services as merchant_services
from merchants.models import Merchant


def merchant_and_amount(
    *, merchant_id: str, currency: str, amount: str
) -> tuple[Merchant, Decimal]:
    """The merchant and the parsed amount; CommandError (one line, exit 1) when either is bad."""
    try:
        merchant = merchant_services.merchant_get(merchant_id=merchant_id)
    except (ValueError, merchant_services.NotFound) as exc:
        raise CommandError(f"No merchant {merchant_id}.") from exc
    try:
        return merchant, money.parse_amount(amount, currency)
    except ValueError as exc:
        raise CommandError(str(exc)) from exc
