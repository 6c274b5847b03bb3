"""What a quote locks: its amounts checked against the currency's unit and the operators'
limits, the fee schedule's terms, the FX rate with its margin, and the `pricing` that shows
them, with the errors these raise. The arithmetic itself is quotes.pricing."""

import logging
from datetime import datetime
from decimal import ROUND_FLOOR, Decimal
from typing import Any

from core import money
from core.exceptions import DomainError
from core.fields import format_timestamp
from merchants.models import Merchant
from quotes import pricing, selectors
from quotes.models import Corridor, FlowType, Operator

logger = logging.getLogger(__name__)


class BadRequest(DomainError):
    """A 400 naming the request's field at fault."""

    status = 400

    def __init__(
        self,
        message: str | None = None,
        *,
        field: str | None = None,
        details: dict[str, str] | None = None,
    ) -> None:
        message = message or self.message
        super().__init__(message, fields={field: [message]} if field else None, details=details)


class InvalidAmountPrecision(BadRequest):
    reason = "invalid_amount_precision"
    message = "The amount has digits below the currency's unit."


class AmountBelowMinimum(BadRequest):
    reason = "amount_below_minimum"
    message = "The amount is below the operator's minimum."


class AmountAboveMaximum(BadRequest):
    reason = "amount_above_maximum"
    message = "The amount is above the operator's maximum."


class FxRateUnavailable(BadRequest):
    reason = "fx_rate_unavailable"
    message = "No FX rate is configured for this currency pair."


class AmountTooSmallForFees(BadRequest):
    reason = "amount_too_small_for_fees"
    message = "The amount does not cover the fees."


def whole_amount(amount: Decimal, currency: str, *, field: str) -> Decimal:
    """The amount in the currency's unit; digits below it are refused."""
    if not money.has_valid_precision(amount, currency):
        raise InvalidAmountPrecision(
            f"{currency} has no minor unit: {field} must be a whole amount.", field=field
        )
    return money.quantize(amount, currency)


def check_within_limits(
    amount: Decimal, operator: Operator, *, field: str, what: str | None = None
) -> None:
    """`what` names the amount checked when it is not `field` itself but follows from it (the
    payout a payin_amount leaves), so the message does not blame the amount that was sent; its
    `{amount}` is filled in only on a refusal."""
    if operator.min_amount <= amount <= operator.max_amount:
        return
    what = (what or field).format(amount=f"{money.format_amount(amount)} {operator.currency}")
    details = {"amount": money.format_amount(amount), "currency": operator.currency}
    if amount < operator.min_amount:
        raise AmountBelowMinimum(
            f"{what} is below {operator.code}'s minimum of "
            f"{money.format_amount(operator.min_amount)} {operator.currency}.",
            field=field,
            details={**details, "minimum": money.format_amount(operator.min_amount)},
        )
    if amount > operator.max_amount:
        raise AmountAboveMaximum(
            f"{what} is above {operator.code}'s maximum of "
            f"{money.format_amount(operator.max_amount)} {operator.currency}.",
            field=field,
            details={**details, "maximum": money.format_amount(operator.max_amount)},
        )


def fee_terms_for(
    *,
    merchant: Merchant,
    flow_type: str,
    operator: Operator | None = None,
    corridor: Corridor | None = None,
) -> tuple[pricing.FeeTerms, dict[str, Any]]:
    """The fee terms of the schedule that applies."""
    schedule = selectors.fee_schedule_for(
        merchant=merchant, flow_type=flow_type, operator=operator, corridor=corridor
    )
    if schedule is None:
        return pricing.FeeTerms(), {"schedule_id": None, "scope": "none"}
    terms = pricing.FeeTerms(
        percentage=schedule.percentage,
        fixed_amount=schedule.fixed_amount,
        minimum_fee=schedule.minimum_fee,
        maximum_fee=schedule.maximum_fee,
    )
    scope = "merchant" if schedule.merchant_id else "platform"
    return terms, {"schedule_id": schedule.pk, "scope": scope}


def operator_json(operator: Operator) -> dict[str, Any]:
    return {
        "code": operator.code,
        "country_code": operator.country_code,
        "currency": operator.currency,
        "rail_type": operator.rail_type,
        "name": operator.name,
    }


def fx_locked(*, merchant: Merchant, source: str, target: str) -> dict[str, Any]:
    """The rate a quote locks for source -> target, its margin taken, as the quote shows it;
    `rate_decimal` is the rate itself."""
    if source == target:
        one = Decimal(1)
        return {
            "source_currency": source,
            "target_currency": target,
            "rate_id": None,
            "base_rate": "1",
            "margin_percent": "0",
            "rate": "1",
            "rate_decimal": one,
        }
    row = selectors.fx_rate_for(merchant=merchant, source_currency=source, target_currency=target)
    if row is None:
        raise FxRateUnavailable(f"No FX rate is configured for {source}->{target}.")
    rate = pricing.effective_rate(base_rate=row.rate, margin_percent=row.margin_percent)
    # down, as the payout it converts to: the locked rate never exceeds rate x (1 - margin)
    rate = rate.quantize(Decimal("1e-10"), rounding=ROUND_FLOOR)
    if rate == 0:  # a rate too small for the places a quote locks converts nothing
        logger.warning("FX rate %s for %s->%s rounds to zero: not quoted", row.pk, source, target)
        raise FxRateUnavailable(
            f"The FX rate configured for {source}->{target} is too small to quote with."
        )
    return {
        "source_currency": source,
        "target_currency": target,
        "rate_id": row.pk,
        "base_rate": money.format_amount(row.rate),
        "margin_percent": money.format_amount(row.margin_percent),
        "rate": money.format_amount(rate),
        "rate_decimal": rate,
    }


def collection_priced(
    *,
    merchant: Merchant,
    flow_type: str,
    operator: Operator,
    send_amount: Decimal,
    now: datetime,
    expires_at: datetime,
) -> dict[str, Any]:
    """A payin or payout quote's amounts, fee and `pricing` (its fields), the amount sent in
    the operator's currency (checked before) and limits."""
    currency = operator.currency
    send_amount = whole_amount(send_amount, currency, field="send_amount")
    check_within_limits(send_amount, operator, field="send_amount")
    terms, schedule = fee_terms_for(merchant=merchant, flow_type=flow_type, operator=operator)
    fee = pricing.fee_for(terms=terms, amount=send_amount, currency=currency)
    if flow_type == FlowType.PAYIN:
        receive_amount = send_amount - fee
        if receive_amount <= 0:
            raise AmountTooSmallForFees(
                f"A fee of {money.format_amount(fee)} {currency} leaves nothing to credit.",
                field="send_amount",
                details={
                    "amount": money.format_amount(send_amount),
                    "fee": money.format_amount(fee),
                    "currency": currency,
                },
            )
        wallet_impact = {"credit_amount": money.format_amount(receive_amount)}
    else:
        receive_amount = send_amount
        wallet_impact = {"debit_amount": money.format_amount(send_amount + fee)}
    wallet_impact["currency"] = currency
    locked = {
        "flow_type": flow_type,
        "send_amount": money.format_amount(send_amount),
        "send_currency": currency,
        "receive_amount": money.format_amount(receive_amount),
        "receive_currency": currency,
        "total_fee": money.format_amount(fee),
        "fee_currency": currency,
        "fee": {**terms.as_json(), **schedule, "basis_amount": money.format_amount(send_amount)},
        "fx": None,
        "wallet_impact": wallet_impact,
        "routing": {"operator": operator_json(operator)},
        "locked_at": format_timestamp(now),
        "expires_at": format_timestamp(expires_at),
    }
    return {
        "send_amount": send_amount,
        "send_currency": currency,
        "receive_amount": receive_amount,
        "receive_currency": currency,
        "total_fee": fee,
        "wallet_impact": wallet_impact,
        "pricing": locked,
    }


def transfer_priced(
    *,
    merchant: Merchant,
    route: tuple[Corridor, Operator, Operator],
    payin_amount: Decimal | None,
    payout_amount: Decimal | None,
    now: datetime,
    expires_at: datetime,
) -> dict[str, Any]:
    """A transfer quote's amounts, fee, rate and `pricing` (its fields)."""
    corridor, payer, recipient = route
    fx = fx_locked(merchant=merchant, source=payer.currency, target=recipient.currency)
    terms, schedule = fee_terms_for(
        merchant=merchant, flow_type=FlowType.TRANSFER, corridor=corridor
    )
    amounts, fixed = _transfer_amounts(
        terms=terms,
        rate=fx["rate_decimal"],
        payer=payer,
        recipient=recipient,
        payin_amount=payin_amount,
        payout_amount=payout_amount,
    )
    locked = _transfer_pricing(
        amounts=amounts,
        fixed=fixed,
        terms=terms,
        schedule=schedule,
        fx=fx,
        route=route,
        now=now,
        expires_at=expires_at,
    )
    return {
        "send_amount": amounts.payin_amount,
        "send_currency": payer.currency,
        "receive_amount": amounts.payout_amount,
        "receive_currency": recipient.currency,
        "total_fee": amounts.fee,
        "fx_rate": fx["rate_decimal"],
        "wallet_impact": locked["wallet_impact"],
        "pricing": locked,
    }


def _transfer_amounts(
    *,
    terms: pricing.FeeTerms,
    rate: Decimal,
    payer: Operator,
    recipient: Operator,
    payin_amount: Decimal | None,
    payout_amount: Decimal | None,
) -> tuple[pricing.TransferAmounts, str]:
    """The transfer's amounts from its fixed side (payin_amount, else payout_amount), each
    within its operator's limits, and which side was fixed."""
    payin_currency, payout_currency = payer.currency, recipient.currency
    if payin_amount is None:
        payout_amount = whole_amount(payout_amount, payout_currency, field="payout_amount")
        check_within_limits(payout_amount, recipient, field="payout_amount")
        amounts = pricing.transfer_for_payout(
            terms=terms,
            payout_amount=payout_amount,
            payin_currency=payin_currency,
            rate=rate,
            payout_currency=payout_currency,
        )
        if amounts is None:
            raise AmountAboveMaximum(field="payout_amount")
        what = "The payin of {amount} this payout_amount needs"
        check_within_limits(amounts.payin_amount, payer, field="payout_amount", what=what)
        return amounts, "payout"
    payin_amount = whole_amount(payin_amount, payin_currency, field="payin_amount")
    check_within_limits(payin_amount, payer, field="payin_amount")
    amounts = pricing.transfer_from_payin(
        terms=terms,
        payin_amount=payin_amount,
        payin_currency=payin_currency,
        rate=rate,
        payout_currency=payout_currency,
    )
    if amounts.payout_amount <= 0:
        raise AmountTooSmallForFees(
            f"A fee of {money.format_amount(amounts.fee)} {payin_currency} leaves nothing "
            "to pay out.",
            field="payin_amount",
            details={
                "amount": money.format_amount(payin_amount),
                "fee": money.format_amount(amounts.fee),
                "currency": payin_currency,
            },
        )
    what = "The payout of {amount} this payin_amount leaves"
    check_within_limits(amounts.payout_amount, recipient, field="payin_amount", what=what)
    return amounts, "payin"


def _transfer_pricing(
    *,
    amounts: pricing.TransferAmounts,
    fixed: str,
    terms: pricing.FeeTerms,
    schedule: dict[str, Any],
    fx: dict[str, Any],
    route: tuple[Corridor, Operator, Operator],
    now: datetime,
    expires_at: datetime,
) -> dict[str, Any]:
    """What a transfer quote locks, as its `pricing` shows it."""
    corridor, payer, recipient = route
    payin_currency, payout_currency = payer.currency, recipient.currency
    payin, payout = (
        money.format_amount(amounts.payin_amount),
        money.format_amount(amounts.payout_amount),
    )
    fee = money.format_amount(amounts.fee)
    fx_json = {key: value for key, value in fx.items() if key != "rate_decimal"}
    return {
        "flow_type": FlowType.TRANSFER,
        "fixed_side": fixed,
        "send_amount": payin,
        "send_currency": payin_currency,
        "receive_amount": payout,
        "receive_currency": payout_currency,
        "payin_amount": payin,
        "payin_currency": payin_currency,
        "payout_amount": payout,
        "payout_currency": payout_currency,
        "total_fee": fee,
        "fee_currency": payin_currency,
        "fee": {**terms.as_json(), **schedule, "basis_amount": payin},
        "fx": {**fx_json, "rounding_residual": money.format_amount(amounts.rounding_residual)},
        "wallet_impact": {
            "collect_amount": payin,
            "collect_currency": payin_currency,
            "disburse_amount": payout,
            "disburse_currency": payout_currency,
            "fee_amount": fee,
            "fee_currency": payin_currency,
        },
        "routing": {
            "corridor": {
                "code": corridor.code,
                "corridor_type": corridor.corridor_type,
                "payer_country": corridor.payer_country,
                "recipient_country": corridor.recipient_country,
                "requires_sender_details": corridor.requires_sender_details,
                "requires_kyc": corridor.requires_kyc,
            },
            "payer_operator": operator_json(payer),
            "recipient_operator": operator_json(recipient),
        },
        "locked_at": format_timestamp(now),
        "expires_at": format_timestamp(expires_at),
    }
