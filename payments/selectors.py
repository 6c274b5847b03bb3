"""Reads of the payments app."""

import functools
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from uuid import UUID

from django.contrib.postgres.expressions import ArraySubquery
from django.db.models import (
    Count,
    DecimalField,
    DurationField,
    Expression,
    ExpressionWrapper,
    F,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Sum,
    Value,
)
from django.db.models.functions import Coalesce, TruncDate

from core import money, pagination
from core.exceptions import NotFound
from merchants.models import Merchant
from payments.ledger.checks import ledger_check_last as ledger_check_last
from payments.models import (
    AMOUNT,
    Journal,
    JournalLine,
    Payin,
    PayinHistory,
    PayinStatus,
    Payout,
    PayoutStatus,
    ProviderDiscrepancy,
    Refund,
    RefundStatus,
    Wallet,
)

AMOUNT_FIELD = DecimalField(**AMOUNT)
WAITING_FOR_PROVIDER = {
    Payin: (PayinStatus.CREATED, PayinStatus.PENDING),
    Payout: (PayoutStatus.PENDING,),
}


class PayinNotFound(NotFound):
    reason = "payin_not_found"
    message = "The payin does not exist."


class PayoutNotFound(NotFound):
    reason = "payout_not_found"
    message = "The payout does not exist."


class RefundNotFound(NotFound):
    reason = "refund_not_found"
    message = "The refund does not exist."


@functools.cache
def _refund_annotations() -> dict[str, Expression]:
    """`refund_ids` (oldest first) and `refunded_total` (the completed ones' amounts) of the
    payins of a query; built once (a query copies what it annotates)."""
    refunds = Refund.objects.filter(payin=OuterRef("pk")).order_by()
    completed = (
        refunds.filter(status=RefundStatus.COMPLETED)
        .values("payin")
        .annotate(total=Sum("amount"))
        .values("total")
    )
    return {
        "refund_ids": ArraySubquery(refunds.order_by("created_at", "id").values("id")),
        "refunded_total": Coalesce(
            Subquery(completed), Value(Decimal(0)), output_field=AMOUNT_FIELD
        ),
    }


def _with_refunds(payins: QuerySet[Payin]) -> QuerySet[Payin]:
    """Payins with what their representation shows of their refunds, in the payins' own query."""
    return payins.annotate(**_refund_annotations())


def _one_with_history(queryset: QuerySet, not_found: type[NotFound]):
    """The one row of `queryset` with its history entries, oldest first; `not_found` if none."""
    row = queryset.first()
    if row is None:
        raise not_found()
    row.history_entries = list(row.history.order_by("created_at", "id"))
    return row


PAYIN_READ = """
SELECT p.*,
    ARRAY(
        SELECT r.id FROM payments_refund r WHERE r.payin_id = p.id ORDER BY r.created_at, r.id
    ) AS refund_ids,
    COALESCE(
        (SELECT sum(r.amount) FROM payments_refund r
         WHERE r.payin_id = p.id AND r.status = 'completed'),
        0
    ) AS refunded_total,
    (SELECT json_agg(json_build_array(h.id, h.status, h.reason, h.created_at)
                     ORDER BY h.created_at, h.id)
     FROM payments_payinhistory h WHERE h.payin_id = p.id) AS history_rows
FROM payments_payin p
WHERE p.id = %s AND p.merchant_id = %s
"""
"""GET /payins/{id}: the merchant's payin with what its representation shows of its refunds
(as _with_refunds annotates them) and its history, oldest first, in one statement the ORM
would compile on every read (a query and its three subqueries, then the history's query);
measured in docs/decisions.md (Performance)."""


def payin_get(*, merchant: Merchant, payin_id: UUID) -> Payin:
    """The merchant's payin with its history; another merchant's is indistinguishable from none
    (PAYIN_READ)."""
    payin = next(iter(Payin.objects.raw(PAYIN_READ, [payin_id, merchant.pk])), None)
    if payin is None:
        raise PayinNotFound()
    payin.history_entries = [
        PayinHistory(
            id=entry_id,
            payin_id=payin.pk,
            status=status,
            reason=reason,
            created_at=datetime.fromisoformat(created_at),
        )
        for entry_id, status, reason, created_at in payin.__dict__.pop("history_rows") or ()
    ]
    return payin


def payout_get(*, merchant: Merchant, payout_id: UUID) -> Payout:
    payouts = Payout.objects.filter(pk=payout_id, merchant=merchant)
    return _one_with_history(payouts, PayoutNotFound)


def refund_get(*, merchant: Merchant, refund_id: UUID) -> Refund:
    refunds = Refund.objects.filter(pk=refund_id, merchant=merchant)
    return _one_with_history(refunds, RefundNotFound)


def refund_list(
    *,
    merchant: Merchant,
    page: pagination.PageRequest,
    status: str | None = None,
    payin_id: UUID | None = None,
    created_gte: datetime | None = None,
    created_lt: datetime | None = None,
) -> pagination.Page:
    """The merchant's refunds with their history, newest first, one page (GET /refunds)."""
    queryset = pagination.filtered(
        Refund.objects.filter(merchant=merchant),
        status=status,
        payin_id=payin_id,
        created_gte=created_gte,
        created_lt=created_lt,
    )
    return pagination.paginate(queryset.prefetch_related("history"), page=page)


def payin_list(
    *,
    merchant: Merchant,
    page: pagination.PageRequest,
    status: str | None = None,
    customer_id: UUID | None = None,
    created_gte: datetime | None = None,
    created_lt: datetime | None = None,
) -> pagination.Page:
    """The merchant's payins with their history and refunds, newest first, one page
    (GET /payins)."""
    queryset = pagination.filtered(
        _with_refunds(Payin.objects.filter(merchant=merchant)),
        status=status,
        customer_id=customer_id,
        created_gte=created_gte,
        created_lt=created_lt,
    )
    return pagination.paginate(queryset.prefetch_related("history"), page=page)


def payout_list(
    *,
    merchant: Merchant,
    page: pagination.PageRequest,
    status: str | None = None,
    customer_id: UUID | None = None,
    created_gte: datetime | None = None,
    created_lt: datetime | None = None,
) -> pagination.Page:
    """The merchant's payouts with their history, newest first, one page (GET /payouts)."""
    queryset = pagination.filtered(
        Payout.objects.filter(merchant=merchant),
        status=status,
        customer_id=customer_id,
        created_gte=created_gte,
        created_lt=created_lt,
    )
    return pagination.paginate(queryset.prefetch_related("history"), page=page)


@dataclass(frozen=True)
class CurrencyBalance:
    currency: str
    available: Decimal
    reserved: Decimal


def balances_list(*, merchant: Merchant) -> list[CurrencyBalance]:
    """Available and reserved per payment currency (GET /balances), every currency listed
    (zero where the merchant has no wallet yet). Read from the wallet rows, which hold the
    credit balances of the merchant_available / merchant_reserved ledger accounts: both are
    written by ledger.post_journal in one transaction, and check_ledger verifies they agree."""
    wallets = {wallet.currency: wallet for wallet in Wallet.objects.filter(merchant=merchant)}
    balances = []
    for currency in sorted(set(money.CURRENCIES) | set(wallets)):
        wallet = wallets.get(currency)
        balances.append(
            CurrencyBalance(
                currency=currency,
                available=wallet.available if wallet else Decimal(0),
                reserved=wallet.reserved if wallet else Decimal(0),
            )
        )
    return balances


def provider_discrepancies_of(*, resource_id: UUID) -> QuerySet[ProviderDiscrepancy]:
    """The provider answers that contradicted a payin, payout or transfer (both legs), oldest
    first: support reconciles them from the resource's page."""
    return ProviderDiscrepancy.objects.filter(resource_id=resource_id).order_by("received_at")


def provider_discrepancy_subject(*, discrepancy_id: UUID) -> tuple[str, UUID, UUID, str] | None:
    """A discrepancy's (resource_type, resource_id, merchant_id, provider_outcome), unlocked."""
    return (
        ProviderDiscrepancy.objects.filter(pk=discrepancy_id)
        .values_list("resource_type", "resource_id", "merchant_id", "provider_outcome")
        .first()
    )


def journals_of(*, resource_type: str, resource_id: UUID) -> QuerySet[Journal]:
    """The ledger journals of a resource with their lines, oldest first."""
    return (
        Journal.objects.filter(resource_type=resource_type, resource_id=resource_id)
        .prefetch_related("lines__account")
        .order_by("created_at", "kind")
    )


def account_total_of(*, resource_type: str, resource_id: UUID, account_code: str) -> Decimal:
    """The sum of a resource's journal lines on accounts with this code (zero when none)."""
    total = JournalLine.objects.filter(
        journal__resource_type=resource_type,
        journal__resource_id=resource_id,
        account__code=account_code,
    ).aggregate(total=Sum("amount"))["total"]
    return total or Decimal(0)


def journal_lines_on(*, account_code: str) -> QuerySet[JournalLine]:
    """Every journal line posted to accounts with this code, for a ledger check to refine."""
    return JournalLine.objects.filter(account__code=account_code)


def past_provider_timeout(rows: QuerySet, *, now: datetime) -> QuerySet:
    """The payins or payouts among `rows` still waiting for the provider past their timeout."""
    return rows.filter(status__in=WAITING_FOR_PROVIDER[rows.model], provider_timeout_at__lt=now)


# The dashboard homes' charts: what they are given, computed from the payments (one query each).


@dataclass(frozen=True)
class PayinDay:
    day: date
    completed: int
    failed: int
    volume: dict[str, Decimal]  # completed payins' send amounts, per currency

    @property
    def success_rate(self) -> float | None:
        """Completed out of the payins that ended (completed or failed); None on a day none
        ended."""
        ended = self.completed + self.failed
        return round(100 * self.completed / ended, 1) if ended else None


def payin_days(*, merchant_id: object, now: datetime, days: int = 30) -> list[PayinDay]:
    """The merchant's payins per UTC day of creation, the last `days` days with today, oldest
    first; a day without payins is there with zeros."""
    first = now.astimezone(UTC).date() - timedelta(days=days - 1)
    rows = (
        Payin.objects.filter(
            merchant_id=merchant_id,
            created_at__gte=datetime.combine(first, time.min, tzinfo=UTC),
        )
        .annotate(day=TruncDate("created_at", tzinfo=UTC))
        .values("day", "send_currency")
        .annotate(
            completed=Count("id", filter=Q(status=PayinStatus.COMPLETED)),
            failed=Count("id", filter=Q(status=PayinStatus.FAILED)),
            volume=Sum("send_amount", filter=Q(status=PayinStatus.COMPLETED)),
        )
    )
    by_day: dict[date, dict] = {
        first + timedelta(days=n): {"completed": 0, "failed": 0, "volume": {}} for n in range(days)
    }
    for row in rows:
        day = by_day.get(row["day"])
        if day is None:
            continue  # created after `now`
        day["completed"] += row["completed"]
        day["failed"] += row["failed"]
        if row["volume"]:
            day["volume"][row["send_currency"]] = row["volume"]
    return [PayinDay(day=day, **values) for day, values in by_day.items()]


def payments_by_operator(*, merchant_id: object, now: datetime, days: int = 30) -> list[dict]:
    """The merchant's payins and payouts created in the last `days` days per operator, most
    first: {"operator_code", "payins", "payouts"}."""
    since = now - timedelta(days=days)
    counts: dict[str, dict] = {}
    for model, kind in ((Payin, "payins"), (Payout, "payouts")):
        rows = (
            model.objects.filter(merchant_id=merchant_id, created_at__gte=since)
            .values("operator_code")
            .annotate(count=Count("id"))
        )
        for row in rows:
            entry = counts.setdefault(
                row["operator_code"],
                {"operator_code": row["operator_code"], "payins": 0, "payouts": 0},
            )
            entry[kind] = row["count"]
    return sorted(
        counts.values(), key=lambda e: (-(e["payins"] + e["payouts"]), e["operator_code"])
    )


@dataclass(frozen=True)
class OperatorHealth:
    operator_code: str
    completed: int
    failed: int
    answer_seconds: float | None  # the mean time from submission to the provider's answer

    @property
    def success_rate(self) -> float | None:
        ended = self.completed + self.failed
        return round(100 * self.completed / ended, 1) if ended else None


def operator_health(*, now: datetime, hours: int = 24) -> list[OperatorHealth]:
    """Per operator, the payins and payouts the provider answered in the last `hours` hours:
    how many completed, how many failed, and the mean answer time; by operator code."""
    since = now - timedelta(hours=hours)
    answered = Coalesce("completed_at", "failed_at")
    totals: dict[str, dict] = {}
    for model in (Payin, Payout):
        rows = (
            model.objects.annotate(answered_at=answered)
            .filter(answered_at__gte=since, answered_at__lte=now)
            .values("operator_code")
            .annotate(
                completed=Count("id", filter=Q(status="completed")),
                failed=Count("id", filter=Q(status="failed")),
                answers=Count("id", filter=Q(submitted_at__isnull=False)),
                waited=Sum(
                    ExpressionWrapper(
                        F("answered_at") - F("submitted_at"), output_field=DurationField()
                    ),
                    filter=Q(submitted_at__isnull=False),
                ),
            )
        )
        for row in rows:
            total = totals.setdefault(
                row["operator_code"],
                {"completed": 0, "failed": 0, "answers": 0, "waited": timedelta(0)},
            )
            for key in ("completed", "failed", "answers"):
                total[key] += row[key]
            total["waited"] += row["waited"] or timedelta(0)
    return [
        OperatorHealth(
            operator_code=code,
            completed=t["completed"],
            failed=t["failed"],
            answer_seconds=(
                round(t["waited"].total_seconds() / t["answers"], 1) if t["answers"] else None
            ),
        )
        for code, t in sorted(totals.items())
    ]
