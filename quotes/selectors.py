"""Reads of the catalog, the merchant configuration and quotes.

The payments and transfers apps validate routing through operator_enabled_for() and
corridor_enabled_for(): a 400 whose reason and fields name what is wrong.
"""

from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from django.db import connection
from django.db.models import Q

from config import pagination
from config.exceptions import DomainError, NotFound
from config.rawsql import RowReader
from customers.models import Customer, CustomerStatus
from merchants.models import Merchant, MerchantCorridor, MerchantOperator
from quotes.models import (
    Corridor,
    FeeSchedule,
    FlowType,
    FxRate,
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


# On every quote and payment, hand-written: the operator, and whether the merchant has it
# enabled in the same statement.
_OPERATOR_BY_CODE = RowReader(Operator, where=("code",))
_OPERATOR_BY_CODE_FOR_MERCHANT = RowReader(
    Operator,
    where=("code",),
    annotations={
        "enabled_for_merchant": (
            f"EXISTS (SELECT 1 FROM {MerchantOperator._meta.db_table} link"  # noqa: S608 (model metadata)
            f" WHERE link.operator_id = {Operator._meta.db_table}.id AND link.merchant_id = %s)",
            [MerchantOperator._meta.get_field("merchant")],
        )
    },
)


_ENABLED_FOR_MERCHANT = _OPERATOR_BY_CODE_FOR_MERCHANT.annotations["enabled_for_merchant"]
_OPERATOR_AND_CUSTOMER = RowReader(
    Operator,
    where=("code",),
    annotations={
        "enabled_for_merchant": _ENABLED_FOR_MERCHANT,
        # known and active: anything else takes the slow path, which says which it is
        "customer_known": (
            f"EXISTS (SELECT 1 FROM {Customer._meta.db_table} c"  # noqa: S608 (model metadata)
            f" WHERE c.id = %s AND c.merchant_id = %s AND c.status = '{CustomerStatus.ACTIVE}')",
            [Customer._meta.pk, Customer._meta.get_field("merchant")],
        ),
    },
)


# The merchant's own and the platform's (merchant NULL) active schedules, newest first.
_ACTIVE_FEE_SCHEDULES = RowReader(
    FeeSchedule, where=("flow_type", "active", "merchant"), or_null=("merchant",), order_by=("-id",)
)

# On PostgreSQL, the fee schedules that may apply come in the same statement too, as one jsonb
# array of what _ACTIVE_FEE_SCHEDULES reads.
_OPERATOR_CUSTOMER_AND_FEES = RowReader(
    Operator,
    where=("code",),
    annotations={
        **_OPERATOR_AND_CUSTOMER.annotations,
        "flow_fee_schedules": _ACTIVE_FEE_SCHEDULES.jsonb_array(),
    },
)


def operator_for_quote(
    *, code: str, merchant: Merchant, customer_id: UUID | None, flow_type: str
) -> Operator | None:
    """operator_get(merchant=...)'s operator (None: unknown), and in the same statement
    `customer_known`: whether `customer_id` is one of the merchant's customers (False for
    None); on PostgreSQL also `flow_fee_schedules`, the rows fee_schedule_for() would read for
    `flow_type` (elsewhere None: read them)."""
    values = [merchant.pk, customer_id, merchant.pk]
    if connection.vendor == "postgresql":
        operator = _OPERATOR_CUSTOMER_AND_FEES.first(
            code, annotation_values=[*values, flow_type, True, merchant.pk]
        )
        if operator is not None:
            operator.flow_fee_schedules = _ACTIVE_FEE_SCHEDULES.from_jsonb(
                operator.flow_fee_schedules
            )
    else:
        operator = _OPERATOR_AND_CUSTOMER.first(code, annotation_values=values)
        if operator is not None:
            operator.flow_fee_schedules = None
    if operator is not None:  # SQLite: 0 or 1
        operator.enabled_for_merchant = bool(operator.enabled_for_merchant)
        operator.customer_known = bool(operator.customer_known)
    return operator


def operator_get(
    *, code: str, field: str = "operator_code", merchant: Merchant | None = None
) -> Operator:
    """The catalog operator with this code, active or not; unknown is a 400 naming `field`.
    With `merchant`, `enabled_for_merchant` also tells whether the merchant has it enabled."""
    if merchant is None:
        operator = _OPERATOR_BY_CODE.first(code)
    else:
        operator = _OPERATOR_BY_CODE_FOR_MERCHANT.first(code, annotation_values=[merchant.pk])
    if operator is None:
        message = f"Unknown operator {code!r}."
        raise UnknownOperator(message, fields={field: [message]})
    if merchant is not None:
        operator.enabled_for_merchant = bool(operator.enabled_for_merchant)  # SQLite: 0 or 1
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


# A payin or payout quote's operator, read with the quote (quote_consume): whether it is active
# (NULL: no such operator) and enabled for the quote's merchant, as `operator_active` and
# `operator_enabled_for_merchant`.
QUOTE_OPERATOR_ANNOTATIONS = {
    # the customer the quote names is still active (not blocked since): see quote_consume
    "customer_active": (
        f"EXISTS (SELECT 1 FROM {Customer._meta.db_table} c"  # noqa: S608 (model metadata)
        f" WHERE c.id = {Quote._meta.db_table}.customer_id"
        f" AND c.status = '{CustomerStatus.ACTIVE}')",
        [],
    ),
    "operator_active": (
        f"SELECT o.active FROM {Operator._meta.db_table} o"  # noqa: S608 (model metadata)
        f" WHERE o.code = {Quote._meta.db_table}.operator_code",
        [],
    ),
    "operator_enabled_for_merchant": (
        f"EXISTS (SELECT 1 FROM {MerchantOperator._meta.db_table} link"  # noqa: S608 (model metadata)
        f" JOIN {Operator._meta.db_table} o ON o.id = link.operator_id"
        f" WHERE o.code = {Quote._meta.db_table}.operator_code"
        f" AND link.merchant_id = {Quote._meta.db_table}.merchant_id)",
        [],
    ),
}


def quote_operator_check_enabled(quote: Quote, field: str = "quote_id") -> None:
    """operator_enabled_for()'s checks of a payin/payout quote's operator, from what was read
    with the quote (QUOTE_OPERATOR_ANNOTATIONS): no read of its own."""
    active = quote.operator_active
    _check_enabled(
        quote.operator_code,
        None if active is None else bool(active),  # SQLite: 0 or 1
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
    if not MerchantCorridor.objects.filter(merchant=merchant, corridor=corridor).exists():
        message = f"Corridor {code} is not enabled for this merchant."
        raise CorridorNotEnabled(message, fields={field: [message]})
    return corridor


def fee_schedule_for(
    *,
    merchant: Merchant,
    flow_type: str,
    operator: Operator | None = None,
    corridor: Corridor | None = None,
) -> FeeSchedule | None:
    """The most specific active schedule: the merchant's own before the platform default, and
    one narrowed to this operator/corridor before a flow-wide one. None: no fee."""
    rows = _ACTIVE_FEE_SCHEDULES.all(flow_type, True, merchant.pk)
    return fee_schedule_among(rows, operator=operator, corridor=corridor)


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
    if flow_type is not None:
        queryset = queryset.filter(flow_type=flow_type)
    if customer_id is not None:
        queryset = queryset.filter(customer_id=customer_id)
    queryset = pagination.created_filter(queryset, created_gte=created_gte, created_lt=created_lt)
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
