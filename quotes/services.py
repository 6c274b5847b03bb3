"""Writes of the quotes app: the catalog seed, the three quote flows, consume and expire."""

import logging
from datetime import datetime, timedelta
from decimal import ROUND_FLOOR, Decimal
from typing import Any
from uuid import UUID

from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet
from django.db.models.expressions import RawSQL

from config import money, rawsql
from config.exceptions import DomainError
from config.fields import format_timestamp
from customers import selectors as customer_selectors
from customers.models import Customer
from merchants.models import Merchant, MerchantCorridor, MerchantOperator
from quotes import catalog, pricing, selectors
from quotes.models import Corridor, FeeSchedule, FlowType, FxRate, Operator, Quote, QuoteStatus

logger = logging.getLogger(__name__)

# --- errors --------------------------------------------------------------------------------


class _BadRequest(DomainError):
    status = 400

    def __init__(self, message: str | None = None, *, field: str | None = None) -> None:
        message = message or self.message
        super().__init__(message, fields={field: [message]} if field else None)


class CustomerNotFound(_BadRequest):
    reason = "customer_not_found"
    message = "The customer does not exist."


class OperatorCountryMismatch(_BadRequest):
    reason = "operator_country_mismatch"
    message = "The operator does not serve this country."


class CurrencyMismatch(_BadRequest):
    reason = "currency_mismatch"
    message = "The currency is not the operator's currency."


class RailMismatch(_BadRequest):
    reason = "rail_mismatch"
    message = "The rail_type is not the operator's rail."


class InvalidAmountPrecision(_BadRequest):
    reason = "invalid_amount_precision"
    message = "The amount has digits below the currency's unit."


class AmountBelowMinimum(_BadRequest):
    reason = "amount_below_minimum"
    message = "The amount is below the operator's minimum."


class AmountAboveMaximum(_BadRequest):
    reason = "amount_above_maximum"
    message = "The amount is above the operator's maximum."


class AmountTooSmallForFees(_BadRequest):
    reason = "amount_too_small_for_fees"
    message = "The amount does not cover the fees."


class PayerOperatorMismatch(_BadRequest):
    reason = "payer_operator_mismatch"
    message = "The payer operator is not in the corridor's payer country and currency."


class RecipientOperatorMismatch(_BadRequest):
    reason = "recipient_operator_mismatch"
    message = "The recipient operator is not in the corridor's recipient country and currency."


class PayinCurrencyMismatch(_BadRequest):
    reason = "payin_currency_mismatch"
    message = "payin_currency is not the corridor's payer currency."


class PayoutCurrencyMismatch(_BadRequest):
    reason = "payout_currency_mismatch"
    message = "payout_currency is not the corridor's recipient currency."


class PayinCurrencyRequired(_BadRequest):
    reason = "payin_currency_required"
    message = "payin_currency is required with payin_amount."


class AmountRequired(_BadRequest):
    reason = "amount_required"
    message = "Send payin_amount (with payin_currency), or a fixed payout_amount."


class AmountAmbiguous(_BadRequest):
    reason = "amount_ambiguous"
    message = "Send either payin_amount or payout_amount, not both."


class SendFieldConflict(_BadRequest):
    reason = "send_field_conflict"
    message = "send_amount/send_currency must equal payin_amount/payin_currency when both are sent."


class FxRateUnavailable(_BadRequest):
    reason = "fx_rate_unavailable"
    message = "No FX rate is configured for this currency pair."


class QuoteNotFoundForPayment(_BadRequest):
    reason = "quote_not_found"
    message = "The quote does not exist."


class QuoteExpired(_BadRequest):
    reason = "quote_expired"
    message = "The quote has expired; create a new one."


class QuoteConsumed(_BadRequest):
    reason = "quote_consumed"
    message = "The quote has already been used; create a new one."


class QuoteFlowMismatch(_BadRequest):
    reason = "quote_flow_mismatch"
    message = "The quote was made for another flow."


class QuoteCustomerMismatch(_BadRequest):
    reason = "quote_customer_mismatch"
    message = "The quote was made for another customer."


# --- catalog -------------------------------------------------------------------------------


def catalog_seed() -> dict[str, int]:
    """Idempotently load the 12 operators, 25 corridors, the platform fee schedules and FX
    rates. Existing rows are left as the admin edited them; only missing ones are created."""
    created = {"operators": 0, "corridors": 0, "fee_schedules": 0, "fx_rates": 0}
    with transaction.atomic():
        for row in catalog.operators():
            _, made = Operator.objects.get_or_create(code=row["code"], defaults=row)
            created["operators"] += made
        for row in catalog.corridors():
            _, made = Corridor.objects.get_or_create(code=row["code"], defaults=row)
            created["corridors"] += made
        for flow_type, terms in catalog.DEFAULT_FEES.items():
            exists = FeeSchedule.objects.filter(
                merchant=None, flow_type=flow_type, operator=None, corridor=None
            ).exists()
            if not exists:
                FeeSchedule.objects.create(flow_type=flow_type, **terms)
                created["fee_schedules"] += 1
        for source, target, rate in catalog.DEFAULT_FX_RATES:
            _, made = FxRate.objects.get_or_create(
                merchant=None,
                source_currency=source,
                target_currency=target,
                defaults={"rate": rate},
            )
            created["fx_rates"] += made
    return created


def merchant_enable_catalog(
    *,
    merchant: Merchant,
    operators: QuerySet[Operator] | None = None,
    corridors: QuerySet[Corridor] | None = None,
) -> None:
    """Enable every catalog operator and corridor for the merchant, or only those given
    (idempotent)."""
    operators = Operator.objects.all() if operators is None else operators
    corridors = Corridor.objects.all() if corridors is None else corridors
    with transaction.atomic():
        MerchantOperator.objects.bulk_create(
            [MerchantOperator(merchant=merchant, operator=op) for op in operators],
            ignore_conflicts=True,
        )
        MerchantCorridor.objects.bulk_create(
            [MerchantCorridor(merchant=merchant, corridor=c) for c in corridors],
            ignore_conflicts=True,
        )


# --- quotes --------------------------------------------------------------------------------


def _customer(*, merchant: Merchant, customer_id: UUID | None) -> Customer | None:
    if customer_id is None:
        return None
    try:
        return customer_selectors.customer_get_active(merchant=merchant, customer_id=customer_id)
    except customer_selectors.CustomerNotFound:
        raise CustomerNotFound(field="customer_id") from None


def _whole(amount: Decimal, currency: str, *, field: str) -> Decimal:
    if not money.has_valid_precision(amount, currency):
        raise InvalidAmountPrecision(
            f"{currency} has no minor unit: {field} must be a whole amount.", field=field
        )
    return money.quantize(amount, currency)


def _within_limits(
    amount: Decimal, operator: Operator, *, field: str, what: str | None = None
) -> None:
    """`what` names the amount checked when it is not `field` itself but follows from it (the
    payout a payin_amount leaves), so the message does not blame the amount that was sent; its
    `{amount}` is filled in only on a refusal."""
    if operator.min_amount <= amount <= operator.max_amount:
        return
    what = (what or field).format(amount=f"{money.format_amount(amount)} {operator.currency}")
    if amount < operator.min_amount:
        raise AmountBelowMinimum(
            f"{what} is below {operator.code}'s minimum of "
            f"{money.format_amount(operator.min_amount)} {operator.currency}.",
            field=field,
        )
    if amount > operator.max_amount:
        raise AmountAboveMaximum(
            f"{what} is above {operator.code}'s maximum of "
            f"{money.format_amount(operator.max_amount)} {operator.currency}.",
            field=field,
        )


def _fee_terms(
    *,
    merchant: Merchant,
    flow_type: str,
    operator: Operator | None = None,
    corridor: Corridor | None = None,
    schedules: list[FeeSchedule] | None = None,
) -> tuple[pricing.FeeTerms, dict[str, Any]]:
    """The fee terms of the schedule that applies; `schedules`: the rows fee_schedule_for()
    would read, when they came with another read (None: read them)."""
    if schedules is None:
        schedule = selectors.fee_schedule_for(
            merchant=merchant, flow_type=flow_type, operator=operator, corridor=corridor
        )
    else:
        schedule = selectors.fee_schedule_among(schedules, operator=operator, corridor=corridor)
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


def _operator_json(operator: Operator) -> dict[str, Any]:
    return {
        "code": operator.code,
        "country_code": operator.country_code,
        "currency": operator.currency,
        "rail_type": operator.rail_type,
        "name": operator.name,
    }


def _lifetime(now: datetime) -> datetime:
    return now + timedelta(seconds=settings.QUOTE_TTL_SECONDS)


def quote_create_collection(
    *,
    merchant: Merchant,
    flow_type: str,
    customer_id: UUID | None,
    country_code: str,
    operator_code: str,
    rail_type: str,
    send_amount: Decimal,
    send_currency: str,
    now: datetime,
) -> Quote:
    """A payin or payout quote (same request shape, spec 4.2; arithmetic of DESIGN §5)."""
    if flow_type not in (FlowType.PAYIN, FlowType.PAYOUT):
        raise ValueError(f"not a payin/payout flow: {flow_type}")
    # the customer is checked in the operator's statement: one read fewer
    found = selectors.operator_for_quote(
        code=operator_code, merchant=merchant, customer_id=customer_id, flow_type=flow_type
    )
    if customer_id is not None and (found is None or not found.customer_known):
        _customer(merchant=merchant, customer_id=customer_id)  # customer_not_found first
    operator = found or selectors.operator_get(code=operator_code, merchant=merchant)
    if operator.country_code != country_code or not operator_code.startswith(f"{country_code}_"):
        raise OperatorCountryMismatch(
            f"Operator {operator.code} serves {operator.country_code}, not {country_code}.",
            field="operator_code",
        )
    if operator.currency != send_currency:
        raise CurrencyMismatch(
            f"{operator.code} pays in {operator.currency}, not {send_currency}.",
            field="send_currency",
        )
    if operator.rail_type != rail_type:
        raise RailMismatch(
            f"{operator.code} is a {operator.rail_type} operator, not {rail_type}.",
            field="rail_type",
        )
    selectors.operator_check_quotable(operator)
    send_amount = _whole(send_amount, send_currency, field="send_amount")
    _within_limits(send_amount, operator, field="send_amount")

    terms, schedule = _fee_terms(
        merchant=merchant,
        flow_type=flow_type,
        operator=operator,
        schedules=found.flow_fee_schedules if found is not None else None,
    )
    fee = pricing.fee_for(terms=terms, amount=send_amount, currency=send_currency)
    if flow_type == FlowType.PAYIN:
        receive_amount = send_amount - fee
        if receive_amount <= 0:
            raise AmountTooSmallForFees(
                f"A fee of {money.format_amount(fee)} {send_currency} leaves nothing to credit.",
                field="send_amount",
            )
        wallet_impact = {
            "credit_amount": money.format_amount(receive_amount),
            "currency": send_currency,
        }
    else:
        receive_amount = send_amount
        wallet_impact = {
            "debit_amount": money.format_amount(send_amount + fee),
            "currency": send_currency,
        }
    expires_at = _lifetime(now)
    locked = {
        "flow_type": flow_type,
        "send_amount": money.format_amount(send_amount),
        "send_currency": send_currency,
        "receive_amount": money.format_amount(receive_amount),
        "receive_currency": send_currency,
        "total_fee": money.format_amount(fee),
        "fee_currency": send_currency,
        "fee": {**terms.as_json(), **schedule, "basis_amount": money.format_amount(send_amount)},
        "fx": None,
        "wallet_impact": wallet_impact,
        "routing": {"operator": _operator_json(operator)},
        "locked_at": format_timestamp(now),
        "expires_at": format_timestamp(expires_at),
    }
    quote = Quote(
        merchant=merchant,
        customer_id=customer_id,
        flow_type=flow_type,
        status=QuoteStatus.ACTIVE,
        created_at=now,
        expires_at=expires_at,
        send_amount=send_amount,
        send_currency=send_currency,
        receive_amount=receive_amount,
        receive_currency=send_currency,
        country_code=operator.country_code,
        operator_code=operator.code,
        rail_type=operator.rail_type,
        total_fee=fee,
        wallet_impact=wallet_impact,
        pricing=locked,
    )
    # one statement with the Idempotency-Key's record when the view holds writes (rawsql.holding)
    rawsql.save_together(inserts=[quote])
    return quote


def quote_create_transfer(
    *,
    merchant: Merchant,
    customer_id: UUID | None,
    corridor_code: str,
    payer_operator_code: str,
    recipient_operator_code: str,
    payout_currency: str,
    payin_amount: Decimal | None = None,
    payin_currency: str | None = None,
    payout_amount: Decimal | None = None,
    send_amount: Decimal | None = None,
    send_currency: str | None = None,
    now: datetime,
) -> Quote:
    """A transfer quote: payer pays payin_amount, recipient gets
    floor((payin_amount - fee) x rate); or, with a fixed payout_amount, the smallest payin_amount
    that reaches it. send_* are synonyms of payin_*."""
    if send_amount is not None:
        if payin_amount is not None and payin_amount != send_amount:
            raise SendFieldConflict(field="send_amount")
        payin_amount = send_amount
    if send_currency is not None:
        if payin_currency is not None and payin_currency != send_currency:
            raise SendFieldConflict(field="send_currency")
        payin_currency = send_currency
    if payin_amount is None and payout_amount is None:
        raise AmountRequired(field="payin_amount")
    if payin_amount is not None and payout_amount is not None:
        raise AmountAmbiguous(field="payout_amount")
    if payin_amount is not None and payin_currency is None:
        raise PayinCurrencyRequired(field="payin_currency")

    customer = _customer(merchant=merchant, customer_id=customer_id)
    corridor = selectors.corridor_enabled_for(merchant=merchant, code=corridor_code)
    payer = selectors.operator_quotable_for(
        merchant=merchant, code=payer_operator_code, field="payer_operator_code"
    )
    if payer.country_code != corridor.payer_country or payer.currency != corridor.payer_currency:
        raise PayerOperatorMismatch(
            f"Payer operator {payer.code} is not in {corridor.payer_country} "
            f"({corridor.payer_currency}), the payer side of {corridor.code}.",
            field="payer_operator_code",
        )
    recipient = selectors.operator_quotable_for(
        merchant=merchant, code=recipient_operator_code, field="recipient_operator_code"
    )
    if (
        recipient.country_code != corridor.recipient_country
        or recipient.currency != corridor.recipient_currency
    ):
        raise RecipientOperatorMismatch(
            f"Recipient operator {recipient.code} is not in {corridor.recipient_country} "
            f"({corridor.recipient_currency}), the recipient side of {corridor.code}.",
            field="recipient_operator_code",
        )
    if payin_currency is not None and payin_currency != corridor.payer_currency:
        raise PayinCurrencyMismatch(
            f"{corridor.code} collects in {corridor.payer_currency}, not {payin_currency}.",
            field="payin_currency",
        )
    payin_currency = corridor.payer_currency
    if payout_currency != corridor.recipient_currency:
        raise PayoutCurrencyMismatch(
            f"{corridor.code} pays out in {corridor.recipient_currency}, not {payout_currency}.",
            field="payout_currency",
        )

    fx = _fx(merchant=merchant, source=payin_currency, target=payout_currency)
    terms, schedule = _fee_terms(merchant=merchant, flow_type=FlowType.TRANSFER, corridor=corridor)
    if payin_amount is not None:
        payin_amount = _whole(payin_amount, payin_currency, field="payin_amount")
        _within_limits(payin_amount, payer, field="payin_amount")
        amounts = pricing.transfer_from_payin(
            terms=terms,
            payin_amount=payin_amount,
            payin_currency=payin_currency,
            rate=fx["rate_decimal"],
            payout_currency=payout_currency,
        )
        if amounts.payout_amount <= 0:
            raise AmountTooSmallForFees(
                f"A fee of {money.format_amount(amounts.fee)} {payin_currency} leaves nothing "
                "to pay out.",
                field="payin_amount",
            )
        _within_limits(
            amounts.payout_amount,
            recipient,
            field="payin_amount",
            what="The payout of {amount} this payin_amount leaves",
        )
        fixed = "payin"
    else:
        payout_amount = _whole(payout_amount, payout_currency, field="payout_amount")
        _within_limits(payout_amount, recipient, field="payout_amount")
        amounts = pricing.transfer_for_payout(
            terms=terms,
            payout_amount=payout_amount,
            payin_currency=payin_currency,
            rate=fx["rate_decimal"],
            payout_currency=payout_currency,
        )
        if amounts is None:
            raise AmountAboveMaximum(field="payout_amount")
        _within_limits(
            amounts.payin_amount,
            payer,
            field="payout_amount",
            what="The payin of {amount} this payout_amount needs",
        )
        fixed = "payout"

    wallet_impact = {
        "collect_amount": money.format_amount(amounts.payin_amount),
        "collect_currency": payin_currency,
        "disburse_amount": money.format_amount(amounts.payout_amount),
        "disburse_currency": payout_currency,
        "fee_amount": money.format_amount(amounts.fee),
        "fee_currency": payin_currency,
    }
    expires_at = _lifetime(now)
    fx_json = {key: value for key, value in fx.items() if key != "rate_decimal"}
    locked = {
        "flow_type": FlowType.TRANSFER,
        "fixed_side": fixed,
        "send_amount": money.format_amount(amounts.payin_amount),
        "send_currency": payin_currency,
        "receive_amount": money.format_amount(amounts.payout_amount),
        "receive_currency": payout_currency,
        "payin_amount": money.format_amount(amounts.payin_amount),
        "payin_currency": payin_currency,
        "payout_amount": money.format_amount(amounts.payout_amount),
        "payout_currency": payout_currency,
        "total_fee": money.format_amount(amounts.fee),
        "fee_currency": payin_currency,
        "fee": {
            **terms.as_json(),
            **schedule,
            "basis_amount": money.format_amount(amounts.payin_amount),
        },
        "fx": {**fx_json, "rounding_residual": money.format_amount(amounts.rounding_residual)},
        "wallet_impact": wallet_impact,
        "routing": {
            "corridor": {
                "code": corridor.code,
                "corridor_type": corridor.corridor_type,
                "payer_country": corridor.payer_country,
                "recipient_country": corridor.recipient_country,
                "requires_sender_details": corridor.requires_sender_details,
                "requires_kyc": corridor.requires_kyc,
            },
            "payer_operator": _operator_json(payer),
            "recipient_operator": _operator_json(recipient),
        },
        "locked_at": format_timestamp(now),
        "expires_at": format_timestamp(expires_at),
    }
    return rawsql.insert(
        Quote(
            merchant=merchant,
            customer=customer,
            flow_type=FlowType.TRANSFER,
            status=QuoteStatus.ACTIVE,
            created_at=now,
            expires_at=expires_at,
            send_amount=amounts.payin_amount,
            send_currency=payin_currency,
            receive_amount=amounts.payout_amount,
            receive_currency=payout_currency,
            corridor_code=corridor.code,
            corridor_type=corridor.corridor_type,
            payer_operator_code=payer.code,
            recipient_operator_code=recipient.code,
            total_fee=amounts.fee,
            fx_rate=fx["rate_decimal"],
            wallet_impact=wallet_impact,
            pricing=locked,
        )
    )


def _fx(*, merchant: Merchant, source: str, target: str) -> dict[str, Any]:
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


def quote_consume(
    *, merchant: Merchant, quote_id: UUID, flow_type: str, customer_id: UUID | None, now: datetime
) -> Quote:
    """Lock the merchant's quote, check it can pay for this flow and customer, mark it consumed.
    Runs inside the caller's transaction.atomic(), so the quote is consumed iff the payment is
    created; of two racing payments the second waits for the row lock, then sees `consumed`."""
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("quote_consume() must run inside the caller's transaction.atomic().")
    quote = (
        Quote.objects.select_for_update(of=("self",))
        .annotate(
            **{
                name: RawSQL(sql, params)  # noqa: S611 (fixed text of model metadata)
                for name, (sql, params) in selectors.QUOTE_OPERATOR_ANNOTATIONS.items()
            }
        )
        .filter(pk=quote_id, merchant=merchant)
        .first()
    )
    # The customer the quote names, still active, was checked when it was quoted: no read.
    if customer_id is not None and (
        quote is None or not _names(quote, customer_id) or not quote.customer_active
    ):
        _customer(merchant=merchant, customer_id=customer_id)
    _check_consumable(quote, flow_type=flow_type, customer_id=customer_id, now=now)
    if quote.flow_type != FlowType.TRANSFER:  # a transfer quote's two operators: the caller's
        selectors.quote_operator_check_enabled(quote, field="quote_id")
    quote.status = QuoteStatus.CONSUMED
    quote.consumed_at = now
    quote.save(update_fields=["status", "consumed_at"])
    return quote


def _check_consumable(
    quote: Quote | None, *, flow_type: str, customer_id: UUID | None, now: datetime
) -> None:
    if quote is None:
        raise QuoteNotFoundForPayment(field="quote_id")
    if quote.status == QuoteStatus.CONSUMED:
        raise QuoteConsumed(field="quote_id")
    if quote.effective_status(now) == QuoteStatus.EXPIRED:
        raise QuoteExpired(field="quote_id")
    if quote.flow_type != flow_type:
        raise QuoteFlowMismatch(
            f"The quote is a {quote.flow_type} quote, not a {flow_type} quote.", field="quote_id"
        )
    if quote.customer_id is not None and not _names(quote, customer_id):
        raise QuoteCustomerMismatch(field="customer_id")


def _names(quote: Quote, customer_id: UUID | str | None) -> bool:
    """Whether the quote was made for this customer."""
    return customer_id is not None and quote.customer_id == UUID(str(customer_id))


def quotes_expire(*, now: datetime) -> int:
    """Mark every active quote past expires_at as expired, in one UPDATE. Returns the count."""
    return Quote.objects.filter(status=QuoteStatus.ACTIVE, expires_at__lt=now).update(
        status=QuoteStatus.EXPIRED
    )
