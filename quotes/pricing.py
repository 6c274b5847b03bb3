"""Pure fee and FX arithmetic (docs/api.md). No database, no time: easy to reason about and test."""

from dataclasses import dataclass
from decimal import Decimal

from core import money

HUNDRED = Decimal(100)


@dataclass(frozen=True)
class FeeTerms:
    percentage: Decimal = Decimal(0)
    fixed_amount: Decimal = Decimal(0)
    minimum_fee: Decimal = Decimal(0)
    maximum_fee: Decimal | None = None

    def as_json(self) -> dict[str, str | None]:
        return {
            "percentage": money.format_amount(self.percentage),
            "fixed_amount": money.format_amount(self.fixed_amount),
            "minimum_fee": money.format_amount(self.minimum_fee),
            "maximum_fee": (
                None if self.maximum_fee is None else money.format_amount(self.maximum_fee)
            ),
        }


def fee_for(*, terms: FeeTerms, amount: Decimal, currency: str) -> Decimal:
    """percentage% x amount + fixed, clamped to [minimum, maximum], rounded up to the unit, and
    never above the maximum: a maximum with digits below the unit (10000.50 XAF) caps the fee
    at the whole amount under it (10000), not the one the rounding up reaches (10001)."""
    fee = amount * terms.percentage / HUNDRED + terms.fixed_amount
    fee = max(fee, terms.minimum_fee)
    if terms.maximum_fee is not None:
        fee = min(fee, terms.maximum_fee)
    fee = money.round_up(fee, currency)
    if terms.maximum_fee is not None:
        fee = min(fee, money.round_down(terms.maximum_fee, currency))
    return fee


def effective_rate(*, base_rate: Decimal, margin_percent: Decimal) -> Decimal:
    return base_rate * (HUNDRED - margin_percent) / HUNDRED


def convert_down(*, amount: Decimal, rate: Decimal, currency: str) -> Decimal:
    """amount x rate in the target currency, rounded down to its unit (never overpay)."""
    return money.round_down(amount * rate, currency)


@dataclass(frozen=True)
class TransferAmounts:
    payin_amount: Decimal
    fee: Decimal
    payout_amount: Decimal
    # (payin - fee) x rate, unrounded, beyond the payout: what the rounding down keeps (in the
    # payout currency, below one unit for a fixed payin; 0 when the rate is 1).
    rounding_residual: Decimal


def transfer_from_payin(
    *,
    terms: FeeTerms,
    payin_amount: Decimal,
    payin_currency: str,
    rate: Decimal,
    payout_currency: str,
) -> TransferAmounts:
    fee = fee_for(terms=terms, amount=payin_amount, currency=payin_currency)
    payout = convert_down(amount=payin_amount - fee, rate=rate, currency=payout_currency)
    return TransferAmounts(payin_amount, fee, payout, (payin_amount - fee) * rate - payout)


def transfer_for_payout(
    *,
    terms: FeeTerms,
    payout_amount: Decimal,
    payin_currency: str,
    rate: Decimal,
    payout_currency: str,
) -> TransferAmounts | None:
    """The smallest payin_amount whose floor((payin - fee(payin)) x rate) reaches payout_amount.

    payin - fee(payin) never decreases as payin grows (the percentage is below 100 and the fee
    moves by at most one unit per unit), so a doubling search then a bisection finds it.
    None when no representable amount reaches it.
    """
    unit = Decimal(1).scaleb(-money.MINOR_UNITS[payin_currency])

    def reaches(payin: Decimal) -> bool:
        fee = fee_for(terms=terms, amount=payin, currency=payin_currency)
        return (
            convert_down(amount=payin - fee, rate=rate, currency=payout_currency) >= payout_amount
        )

    low = money.round_up(payout_amount / rate, payin_currency)
    if low <= 0:
        low = unit
    high = low
    while not reaches(high):
        if high > money.AMOUNT_CEILING:
            return None
        high = high * 2
    # Invariant: reaches(high); the answer lies in [low, high].
    while low < high:
        middle = money.round_down((low + high) / 2, payin_currency)
        if reaches(middle):
            high = middle
        else:
            low = middle + unit
    fee = fee_for(terms=terms, amount=high, currency=payin_currency)
    return TransferAmounts(high, fee, payout_amount, (high - fee) * rate - payout_amount)
