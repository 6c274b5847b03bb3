"""Writes of the quotes app: the three quote flows, consume and expire (the catalog's own in
quotes.catalog)."""

from datetime import datetime, timedelta
from decimal import Decimal
from uuid import UUID

from django.conf import settings
from django.db import transaction

from customers import selectors as customer_selectors
from merchants.models import Merchant
from quotes import quote_pricing, selectors
from quotes.models import Corridor, FlowType, Operator, Quote, QuoteStatus
from quotes.quote_pricing import (  # noqa: F401 - the last two for refunds and relaunches
    BadRequest,
    InvalidAmountPrecision,
    check_within_limits,
)

# --- errors --------------------------------------------------------------------------------


class OperatorCountryMismatch(BadRequest):
    reason = "operator_country_mismatch"
    message = "The operator does not serve this country."


class CurrencyMismatch(BadRequest):
    reason = "currency_mismatch"
    message = "The currency is not the operator's currency."


class RailMismatch(BadRequest):
    reason = "rail_mismatch"
    message = "The rail_type is not the operator's rail."


class PayerOperatorMismatch(BadRequest):
    reason = "payer_operator_mismatch"
    message = "The payer operator is not in the corridor's payer country and currency."


class RecipientOperatorMismatch(BadRequest):
    reason = "recipient_operator_mismatch"
    message = "The recipient operator is not in the corridor's recipient country and currency."


class PayinCurrencyMismatch(BadRequest):
    reason = "payin_currency_mismatch"
    message = "payin_currency is not the corridor's payer currency."


class PayoutCurrencyMismatch(BadRequest):
    reason = "payout_currency_mismatch"
    message = "payout_currency is not the corridor's recipient currency."


class PayinCurrencyRequired(BadRequest):
    reason = "payin_currency_required"
    message = "payin_currency is required with payin_amount."


class AmountRequired(BadRequest):
    reason = "amount_required"
    message = "Send payin_amount (with payin_currency), or a fixed payout_amount."


class AmountAmbiguous(BadRequest):
    reason = "amount_ambiguous"
    message = "Send either payin_amount or payout_amount, not both."


class SendFieldConflict(BadRequest):
    reason = "send_field_conflict"
    message = "send_amount/send_currency must equal payin_amount/payin_currency when both are sent."


class QuoteNotFoundForPayment(BadRequest):
    """A body's quote_id naming no quote of the merchant: a 400, where a path id is a 404."""

    reason = selectors.QuoteNotFound.reason
    message = selectors.QuoteNotFound.message


class QuoteExpired(BadRequest):
    reason = "quote_expired"
    message = "The quote has expired; create a new one."


class QuoteConsumed(BadRequest):
    reason = "quote_consumed"
    message = "The quote has already been used; create a new one."


class QuoteFlowMismatch(BadRequest):
    reason = "quote_flow_mismatch"
    message = "The quote was made for another flow."


class QuoteCustomerMismatch(BadRequest):
    reason = "quote_customer_mismatch"
    message = "The quote was made for another customer."


# --- quotes --------------------------------------------------------------------------------


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
    """A payin or payout quote (the same request shape for both)."""
    if flow_type not in (FlowType.PAYIN, FlowType.PAYOUT):
        raise ValueError(f"not a payin/payout flow: {flow_type}")
    operator = _collection_operator(
        merchant=merchant,
        customer_id=customer_id,
        country_code=country_code,
        operator_code=operator_code,
        rail_type=rail_type,
        send_currency=send_currency,
    )
    expires_at = _lifetime(now)
    priced = quote_pricing.collection_priced(
        merchant=merchant,
        flow_type=flow_type,
        operator=operator,
        send_amount=send_amount,
        now=now,
        expires_at=expires_at,
    )
    return Quote.objects.create(
        merchant=merchant,
        customer_id=customer_id,
        flow_type=flow_type,
        status=QuoteStatus.ACTIVE,
        created_at=now,
        expires_at=expires_at,
        country_code=operator.country_code,
        operator_code=operator.code,
        rail_type=operator.rail_type,
        **priced,
    )


def _collection_operator(
    *,
    merchant: Merchant,
    customer_id: UUID | None,
    country_code: str,
    operator_code: str,
    rail_type: str,
    send_currency: str,
) -> Operator:
    """The quotable operator a payin or payout quote names, checked against the request; the
    customer, if named, is checked first (in the operator's read when it is known)."""
    found = selectors.operator_for_quote(
        code=operator_code, merchant=merchant, customer_id=customer_id
    )
    if customer_id is not None and (found is None or not found.customer_known):
        customer_selectors.customer_get_for_payment(merchant=merchant, customer_id=customer_id)
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
    return selectors.operator_check_quotable(operator)


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
    payin_amount, payin_currency = _transfer_payin_fields(
        payin_amount=payin_amount,
        payin_currency=payin_currency,
        payout_amount=payout_amount,
        send_amount=send_amount,
        send_currency=send_currency,
    )
    customer = None
    if customer_id is not None:
        customer = customer_selectors.customer_get_for_payment(
            merchant=merchant, customer_id=customer_id
        )
    corridor, payer, recipient = _transfer_route(
        merchant=merchant,
        corridor_code=corridor_code,
        payer_operator_code=payer_operator_code,
        recipient_operator_code=recipient_operator_code,
        payin_currency=payin_currency,
        payout_currency=payout_currency,
    )
    expires_at = _lifetime(now)
    priced = quote_pricing.transfer_priced(
        merchant=merchant,
        route=(corridor, payer, recipient),
        payin_amount=payin_amount,
        payout_amount=payout_amount,
        now=now,
        expires_at=expires_at,
    )
    return Quote.objects.create(
        merchant=merchant,
        customer=customer,
        flow_type=FlowType.TRANSFER,
        status=QuoteStatus.ACTIVE,
        created_at=now,
        expires_at=expires_at,
        corridor_code=corridor.code,
        corridor_type=corridor.corridor_type,
        payer_operator_code=payer.code,
        recipient_operator_code=recipient.code,
        **priced,
    )


def _transfer_payin_fields(
    *,
    payin_amount: Decimal | None,
    payin_currency: str | None,
    payout_amount: Decimal | None,
    send_amount: Decimal | None,
    send_currency: str | None,
) -> tuple[Decimal | None, str | None]:
    """payin_amount and payin_currency, send_* read as their synonyms; exactly one side's
    amount must be fixed."""
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
    return payin_amount, payin_currency


def _transfer_route(
    *,
    merchant: Merchant,
    corridor_code: str,
    payer_operator_code: str,
    recipient_operator_code: str,
    payin_currency: str | None,
    payout_currency: str,
) -> tuple[Corridor, Operator, Operator]:
    """The merchant's corridor and its two quotable operators, each on its side of it and in
    its currency."""
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
    _check_transfer_currencies(
        corridor, payin_currency=payin_currency, payout_currency=payout_currency
    )
    return corridor, payer, recipient


def _check_transfer_currencies(
    corridor: Corridor, *, payin_currency: str | None, payout_currency: str
) -> None:
    if payin_currency is not None and payin_currency != corridor.payer_currency:
        raise PayinCurrencyMismatch(
            f"{corridor.code} collects in {corridor.payer_currency}, not {payin_currency}.",
            field="payin_currency",
        )
    if payout_currency != corridor.recipient_currency:
        raise PayoutCurrencyMismatch(
            f"{corridor.code} pays out in {corridor.recipient_currency}, not {payout_currency}.",
            field="payout_currency",
        )


def quote_consume(
    *, merchant: Merchant, quote_id: UUID, flow_type: str, customer_id: UUID | None, now: datetime
) -> Quote:
    """quote_lock_consumable(), then mark the quote consumed."""
    quote = quote_lock_consumable(
        merchant=merchant, quote_id=quote_id, flow_type=flow_type, customer_id=customer_id, now=now
    )
    quote.status = QuoteStatus.CONSUMED
    quote.consumed_at = now
    quote.save(update_fields=["status", "consumed_at"])
    return quote


def quote_lock_consumable(
    *, merchant: Merchant, quote_id: UUID, flow_type: str, customer_id: UUID | None, now: datetime
) -> Quote:
    """Lock the merchant's quote and check it can pay for this flow and customer; the caller
    consumes it in the same transaction (quote_consume, or a payin's creation statement), so
    the quote is consumed iff the payment is created: of two racing payments the second waits
    for the row lock, then sees `consumed`. The customer is checked first
    (CustomerNotFoundForPayment, CustomerBlocked), unless the quote names it and it is still
    active (read with the quote), then the quote, then its operator."""
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("A quote is consumed inside the caller's transaction.atomic().")
    quote = quote_locked(merchant=merchant, quote_id=quote_id)
    if customer_id is not None and (
        quote is None or not _names(quote, customer_id) or not quote.customer_active
    ):
        customer_selectors.customer_get_for_payment(merchant=merchant, customer_id=customer_id)
    _check_consumable(quote, flow_type=flow_type, customer_id=customer_id, now=now)
    if quote.operator_code:  # a payin or payout quote; a transfer's names its two in pricing
        selectors.quote_operator_check_enabled(quote, field="quote_id")
    return quote


QUOTE_LOCKED_READ = """
SELECT q.*,
    EXISTS (SELECT 1 FROM customers_customer c
        WHERE c.id = q.customer_id AND c.status = 'active') AS customer_active,
    (SELECT o.active FROM quotes_operator o WHERE o.code = q.operator_code) AS operator_active,
    EXISTS (SELECT 1 FROM merchants_merchantoperator mo
        JOIN quotes_operator o ON o.id = mo.operator_id
        WHERE mo.merchant_id = q.merchant_id AND o.code = q.operator_code
    ) AS operator_enabled_for_merchant
FROM quotes_quote q
WHERE q.id = %s AND q.merchant_id = %s
FOR UPDATE OF q
"""
"""The merchant's quote, locked, with what quote_operator_check_enabled() needs to know:
whether the customer it names is still active (not blocked since), whether its operator is
active (NULL: no such operator) and enabled for the merchant. Its ORM form spent most of a
payin's creation compiling the three subqueries; the measurement is in docs/decisions.md
(Performance)."""


def quote_locked(*, merchant: Merchant, quote_id: UUID) -> Quote | None:
    """QUOTE_LOCKED_READ: the merchant's quote, its row locked until the transaction ends."""
    return next(iter(Quote.objects.raw(QUOTE_LOCKED_READ, [quote_id, merchant.pk])), None)


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
