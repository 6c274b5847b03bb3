"""Reads of the catalog, the merchant configuration and quotes.

The payments and transfers apps validate routing through operator_enabled_for() and
corridor_enabled_for(): a 400 whose reason and fields name what is wrong.
"""

from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from django.db.models import Exists, Model, OuterRef, Q

from core import pagination
from core.exceptions import DomainError, NotFound
from merchants.models import Merchant
from quotes.models import (
    Corridor,
    FeeSchedule,
    FlowType,
    FxRate,
    MerchantCorridor,
    MerchantOperator,
    Operator,
    OperatorStatus,
    Quote,
    QuoteStatus,
)


class QuoteNotFound(NotFound):
    reason = "quote_not_found"
    message = "The quote does not exist."


class UnknownOperator(DomainError):
    status = 400
    reason = "unknown_operator"
    message = "Unknown operator."


class OperatorInactive(DomainError):
    status = 400
    reason = "operator_inactive"
    message = "This operator is not available."


class OperatorNotEnabled(DomainError):
    status = 400
    reason = "operator_not_enabled"
    message = "This operator is not enabled for the merchant."


class OperatorClosed(DomainError):
    status = 400
    reason = "operator_closed"
    message = "This operator is closed for now."


class UnknownCorridor(DomainError):
    status = 400
    reason = "unknown_corridor"
    message = "Unknown corridor."


class CorridorInactive(DomainError):
    status = 400
    reason = "corridor_inactive"
    message = "This corridor is not available."


class CorridorNotEnabled(DomainError):
    status = 400
    reason = "corridor_not_enabled"
    message = "This transfer corridor is not enabled for the merchant."


def quote_get(*, merchant: Merchant, quote_id: UUID) -> Quote:
    """The merchant's quote; another merchant's quote is indistinguishable from none (404)."""
    quote = Quote.objects.filter(merchant=merchant, pk=quote_id).first()
    if quote is None:
        raise QuoteNotFound()
    return quote


def _enabled_for(merchant: Merchant) -> Exists:
    """Whether the merchant has the operator of the outer row enabled."""
    return merchant_has_operator(merchant=merchant, operator=OuterRef("pk"))


OPERATOR_FOR_QUOTE = """
SELECT o.*,
    EXISTS (SELECT 1 FROM merchants_merchantoperator mo
        WHERE mo.merchant_id = %(merchant_id)s AND mo.operator_id = o.id) AS enabled_for_merchant,
    EXISTS (SELECT 1 FROM customers_customer c
        WHERE c.id = %(customer_id)s AND c.merchant_id = %(merchant_id)s AND c.status = 'active'
    ) AS customer_known
FROM quotes_operator o
WHERE o.code = %(code)s
"""
"""The catalog operator a quote names, whether the merchant has it enabled and whether the
customer named is one of the merchant's active customers, in one read. Its ORM form spent a
third of a quote's creation compiling the two subqueries; the measurement is in
docs/decisions.md (Performance)."""


def operator_for_quote(
    *, code: str, merchant: Merchant, customer_id: UUID | None
) -> Operator | None:
    """OPERATOR_FOR_QUOTE: operator_get(merchant=...)'s operator (None: unknown) and
    `customer_known` (False for None; anything else takes the slow path, which says which it
    is)."""
    params = {"code": code, "merchant_id": merchant.pk, "customer_id": customer_id}
    return next(iter(Operator.objects.raw(OPERATOR_FOR_QUOTE, params)), None)


def operator_get(
    *, code: str, field: str = "operator_code", merchant: Merchant | None = None
) -> Operator:
    """The catalog operator with this code, active or not; unknown is a 400 naming `field`.
    With `merchant`, `enabled_for_merchant` also tells whether the merchant has it enabled."""
    operators = Operator.objects.filter(code=code)
    if merchant is not None:
        operators = operators.annotate(enabled_for_merchant=_enabled_for(merchant))
    operator = operators.first()
    if operator is None:
        message = f"Unknown operator {code!r}."
        raise UnknownOperator(message, fields={field: [message]})
    return operator


def operator_enabled_for(
    *, merchant: Merchant, code: str, field: str = "operator_code"
) -> Operator:
    """The operator if it exists, is active in the catalog and is enabled for the merchant."""
    return operator_check_enabled(operator_get(code=code, field=field, merchant=merchant), field)


def operator_quotable_for(
    *, merchant: Merchant, code: str, field: str = "operator_code"
) -> Operator:
    """operator_enabled_for(), and not `closed` by support (a `delayed` one still quotes)."""
    return operator_check_quotable(operator_get(code=code, field=field, merchant=merchant), field)


def operator_check_enabled(operator: Operator, field: str = "operator_code") -> Operator:
    """Raise unless the operator (from operator_get(merchant=...)) is active and enabled."""
    _check_enabled(operator.code, operator.active, operator.enabled_for_merchant, field)
    return operator


def _check_enabled(code: str, active: bool | None, enabled: bool, field: str) -> None:
    if active is None:
        message = f"Unknown operator {code!r}."
        raise UnknownOperator(message, fields={field: [message]})
    if not active:
        message = f"Operator {code} is not available."
        raise OperatorInactive(message, fields={field: [message]})
    if not enabled:
        message = f"Operator {code} is not enabled for this merchant."
        raise OperatorNotEnabled(message, fields={field: [message]})


def quote_operator_check_enabled(quote: Quote, field: str = "quote_id") -> None:
    """operator_enabled_for()'s checks of a payin/payout quote's operator, from what was read
    with the quote (services.QUOTE_LOCKED_READ): no read of its own."""
    active = quote.operator_active
    _check_enabled(
        quote.operator_code,
        active,
        bool(quote.operator_enabled_for_merchant),
        field,
    )


def operator_check_quotable(operator: Operator, field: str = "operator_code") -> Operator:
    """operator_check_enabled(), and not `closed` by support."""
    operator_check_enabled(operator, field)
    if operator.status == OperatorStatus.CLOSED:
        message = f"Operator {operator.code} is closed for now; try again later or use another one."
        raise OperatorClosed(message, fields={field: [message]})
    return operator


def corridor_get(*, code: str, field: str = "corridor_code") -> Corridor:
    corridor = Corridor.objects.filter(code=code).first()
    if corridor is None:
        message = f"Unknown corridor {code!r}."
        raise UnknownCorridor(message, fields={field: [message]})
    return corridor


def corridor_enabled_for(
    *, merchant: Merchant, code: str, field: str = "corridor_code"
) -> Corridor:
    """The corridor if it exists, is active in the catalog and is enabled for the merchant."""
    corridor = corridor_get(code=code, field=field)
    if not corridor.active:
        message = f"Corridor {code} is not available."
        raise CorridorInactive(message, fields={field: [message]})
    if not merchant_has_corridor(merchant=merchant, corridor=corridor):
        message = f"Corridor {code} is not enabled for this merchant."
        raise CorridorNotEnabled(message, fields={field: [message]})
    return corridor


FEE_SCHEDULES_ACTIVE = """
SELECT * FROM quotes_feeschedule
WHERE (merchant_id IS NULL OR merchant_id = %s) AND flow_type = %s AND active
ORDER BY id DESC
"""
"""The active fee schedules of one merchant and flow, the platform's included, newest first.
Its ORM form was a quarter of a quote's creation, compiling the OR; the measurement is in
docs/decisions.md (Performance)."""


def fee_schedule_for(
    *,
    merchant: Merchant,
    flow_type: str,
    operator: Operator | None = None,
    corridor: Corridor | None = None,
) -> FeeSchedule | None:
    """The most specific active schedule: the merchant's own before the platform default, and
    one narrowed to this operator/corridor before a flow-wide one. None: no fee."""
    rows = FeeSchedule.objects.raw(FEE_SCHEDULES_ACTIVE, [merchant.pk, flow_type])
    return fee_schedule_among(list(rows), operator=operator, corridor=corridor)


def fee_schedule_among(
    rows: list[FeeSchedule], *, operator: Operator | None, corridor: Corridor | None
) -> FeeSchedule | None:
    """Of the active schedules of one merchant and flow (newest first), the one that applies."""

    def rank(schedule: FeeSchedule) -> tuple[int, int]:
        own = 1 if schedule.merchant_id is not None else 0
        narrowed = 1 if (schedule.operator_id or schedule.corridor_id) else 0
        return (own, narrowed)

    matching = [
        s
        for s in rows
        if (s.operator_id is None or (operator is not None and s.operator_id == operator.pk))
        and (s.corridor_id is None or (corridor is not None and s.corridor_id == corridor.pk))
    ]
    if not matching:
        return None
    return max(matching, key=rank)


def _merchant_q(merchant: Merchant) -> Q:
    return Q(merchant__isnull=True) | Q(merchant=merchant)


def fx_rate_for(*, merchant: Merchant, source_currency: str, target_currency: str) -> FxRate | None:
    """The merchant's own rate row, else the platform's; None when no rate is configured."""
    rows = FxRate.objects.filter(
        _merchant_q(merchant), source_currency=source_currency, target_currency=target_currency
    )
    own = [r for r in rows if r.merchant_id is not None]
    if own:
        return own[0]
    return next(iter(rows), None)


def quote_list(
    *,
    merchant: Merchant,
    page: pagination.PageRequest,
    now: datetime,
    status: str | None = None,
    flow_type: str | None = None,
    customer_id: UUID | None = None,
    created_gte: datetime | None = None,
    created_lt: datetime | None = None,
) -> pagination.Page:
    """The merchant's quotes, newest first, one page (GET /quotes). `status` is the status the
    API shows: an active quote past expires_at counts as expired even before the sweep ran."""
    queryset = Quote.objects.filter(merchant=merchant)
    if status == QuoteStatus.ACTIVE:
        queryset = queryset.filter(status=QuoteStatus.ACTIVE, expires_at__gte=now)
    elif status == QuoteStatus.EXPIRED:
        queryset = queryset.filter(
            Q(status=QuoteStatus.EXPIRED) | Q(status=QuoteStatus.ACTIVE, expires_at__lt=now)
        )
    elif status is not None:
        queryset = queryset.filter(status=status)
    queryset = pagination.filtered(
        queryset,
        flow_type=flow_type,
        customer_id=customer_id,
        created_gte=created_gte,
        created_lt=created_lt,
    )
    return pagination.paginate(queryset, page=page)


@dataclass(frozen=True)
class AvailableOperator:
    operator: Operator
    fees: dict[str, FeeSchedule | None]  # flow_type (payin, payout) -> the schedule that applies


@dataclass(frozen=True)
class AvailableCorridor:
    corridor: Corridor
    fees: FeeSchedule | None  # the transfer schedule that applies


def _schedules_by_flow(*, merchant: Merchant) -> dict[str, list[FeeSchedule]]:
    rows = FeeSchedule.objects.filter(_merchant_q(merchant), active=True).order_by("-id")
    by_flow: dict[str, list[FeeSchedule]] = {flow: [] for flow in FlowType.values}
    for row in rows:
        by_flow.setdefault(row.flow_type, []).append(row)
    return by_flow


def operators_available_for(*, merchant: Merchant) -> list[AvailableOperator]:
    """What the merchant can route payins and payouts through right now (GET /operators):
    operators active in the catalog and enabled for the merchant, with their status and the
    fee schedule that applies per flow. Three queries whatever the catalog size."""
    operators = list(
        Operator.objects.filter(active=True, merchant_links__merchant=merchant).order_by("code")
    )
    schedules = _schedules_by_flow(merchant=merchant)
    return [
        AvailableOperator(
            operator=operator,
            fees={
                flow: fee_schedule_among(schedules[flow], operator=operator, corridor=None)
                for flow in (FlowType.PAYIN, FlowType.PAYOUT)
            },
        )
        for operator in operators
    ]


def corridors_available_for(*, merchant: Merchant) -> list[AvailableCorridor]:
    """The transfer corridors the merchant can quote right now (GET /corridors): active in the
    catalog and enabled for the merchant, with their requirements and transfer fees."""
    corridors = list(
        Corridor.objects.filter(active=True, merchant_links__merchant=merchant).order_by("code")
    )
    schedules = _schedules_by_flow(merchant=merchant)[FlowType.TRANSFER]
    return [
        AvailableCorridor(
            corridor=corridor,
            fees=fee_schedule_among(schedules, operator=None, corridor=corridor),
        )
        for corridor in corridors
    ]


def operator_codes() -> list[str]:
    """Every operator's code in the catalog (the dashboard's operator filters)."""
    return list(Operator.objects.order_by("code").values_list("code", flat=True))


def corridor_codes() -> list[str]:
    """Every corridor's code in the catalog (the dashboard's corridor filter)."""
    return list(Corridor.objects.order_by("code").values_list("code", flat=True))


def merchant_has_operator(*, merchant: Merchant | OuterRef, operator: Model | OuterRef) -> Exists:
    """Whether the merchant has the operator enabled, as an expression for a query."""
    return Exists(MerchantOperator.objects.filter(merchant=merchant, operator=operator))


def merchant_has_operator_code(*, merchant: Merchant | OuterRef, operator_code: OuterRef) -> Exists:
    """Whether the merchant has the operator with this code enabled, as an expression."""
    return Exists(MerchantOperator.objects.filter(operator__code=operator_code, merchant=merchant))


def merchant_has_corridor(*, merchant: Merchant, corridor: Model) -> bool:
    """Whether the merchant has the corridor (a quotes.Corridor) enabled."""
    return MerchantCorridor.objects.filter(merchant=merchant, corridor=corridor).exists()
