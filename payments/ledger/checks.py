"""check_ledger: every invariant the ledger must hold, read in one snapshot.

Apps above payments add their own (the transfers app, its journals and transfer_suspense)
with breaches_register() from their AppConfig.ready()."""

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime
from decimal import Decimal
from uuid import UUID

from django.core.cache import cache
from django.db import connection, transaction
from django.db.models import Count, Exists, F, OuterRef, Q, Subquery, Sum

from payments.ledger.accounts import MERCHANT_AVAILABLE, WALLET_COLUMNS
from payments.ledger.discrepancies import refund_holds_its_payin
from payments.models import (
    Journal,
    JournalLine,
    Payin,
    PayinStatus,
    Payout,
    PayoutStatus,
    Refund,
    RefundStatus,
    Wallet,
)

# (model, resource_type, journal kind, the rows that must have it: None for every row)
EXPECTED_JOURNALS: list[tuple[type, str, str, Q | None]] = [
    (Payin, "payin", "payin_completed", Q(status=PayinStatus.COMPLETED)),
    (Payout, "payout", "payout_reserved", None),
    (Payout, "payout", "payout_completed", Q(status=PayoutStatus.COMPLETED)),
    (Payout, "payout", "payout_released", Q(status=PayoutStatus.FAILED)),
    (Refund, "refund", "refund_reserved", None),
    (Refund, "refund", "refund_completed", Q(status=RefundStatus.COMPLETED)),
    (Refund, "refund", "refund_released", Q(status=RefundStatus.FAILED)),
]
_MORE_CHECKS: list[Callable[[], list[str]]] = []


def breaches_register(
    *, expected: Iterable[tuple[type, str, str, Q | None]] = (), check: Callable[[], list[str]]
) -> None:
    """An app above payments adds the journals its rows must have and a check of its own."""
    EXPECTED_JOURNALS.extend(item for item in expected if item not in EXPECTED_JOURNALS)
    if check not in _MORE_CHECKS:
        _MORE_CHECKS.append(check)


def ledger_breaches(*, merchant_ids: Iterable[UUID] | None = None) -> list[str]:
    """Every violated ledger invariant, as human-readable lines; empty when the ledger is sound:
    - every journal has at least two lines and its lines sum to zero;
    - every line's account belongs to the journal's merchant and currency;
    - every wallet's available/reserved equals the sum of its account's lines, never negative;
    - no merchant_available/merchant_reserved account has lines without a wallet.
    """
    journals = Journal.objects.all()
    lines = JournalLine.objects.all()
    wallets = Wallet.objects.all()
    if merchant_ids is not None:
        merchant_ids = list(merchant_ids)
        journals = journals.filter(merchant_id__in=merchant_ids)
        lines = lines.filter(journal__merchant_id__in=merchant_ids)
        wallets = wallets.filter(merchant_id__in=merchant_ids)

    breaches: list[str] = []
    unbalanced = (
        journals.annotate(total=Sum("lines__amount"), line_count=Count("lines"))
        .filter(Q(line_count__lt=2) | ~Q(total=0))
        .values_list("id", "kind", "total", "line_count")
    )
    for journal_id, kind, total, count in unbalanced:
        breaches.append(f"journal {journal_id} ({kind}) has {count} lines summing to {total}")

    foreign = lines.exclude(
        account__merchant_id=F("journal__merchant_id"), account__currency=F("journal__currency")
    ).values_list("id", "journal_id")
    for line_id, journal_id in foreign:
        breaches.append(
            f"line {line_id} of journal {journal_id} posts to another merchant's or currency's "
            "account"
        )

    sums = {
        (row["account__merchant_id"], row["account__currency"], row["account__code"]): row["total"]
        for row in lines.filter(account__code__in=list(WALLET_COLUMNS))
        .values("account__merchant_id", "account__currency", "account__code")
        .annotate(total=Sum("amount"))
    }
    seen = set()
    for wallet in wallets:
        for code, column in WALLET_COLUMNS.items():
            key = (wallet.merchant_id, wallet.currency, code)
            seen.add(key)
            expected = sums.get(key) or Decimal(0)
            actual = getattr(wallet, column)
            if actual != expected:
                breaches.append(
                    f"wallet {wallet.merchant_id} {wallet.currency}: {column} is {actual} but "
                    f"its ledger account sums to {expected}"
                )
            if actual < 0:
                breaches.append(
                    f"wallet {wallet.merchant_id} {wallet.currency}: {column} is negative"
                )
    for key, total in sums.items():
        if key not in seen and total != 0:
            breaches.append(f"account {key[2]} of {key[0]} {key[1]} has lines but no wallet")
    return breaches


def _payment_breaches() -> list[str]:
    """Every payment has exactly the journals its status implies."""
    breaches = []
    for model, resource_type, kind, should_have in EXPECTED_JOURNALS:
        posted = Journal.objects.filter(
            resource_type=resource_type, kind=kind, resource_id=OuterRef("pk")
        )
        rows = model.objects.annotate(posted=Exists(posted))
        missing = rows.filter(posted=False)
        if should_have is not None:
            missing = missing.filter(should_have)
            extra = rows.exclude(should_have).filter(posted=True)
            for payment_id, status in extra.values_list("id", "status"):
                breaches.append(f"{resource_type} {payment_id} ({status}) has a {kind} journal")
        for payment_id, status in missing.values_list("id", "status"):
            breaches.append(f"{resource_type} {payment_id} ({status}) has no {kind} journal")
    return breaches


def _refund_breaches() -> list[str]:
    """No payin is refunded beyond its amount (its refunds that hold part of it), and a failed
    refund leaves the merchant's available balance as it was (its journals net to zero there)."""
    breaches = []
    held = (
        Refund.objects.filter(refund_holds_its_payin(), payin=OuterRef("pk"))
        .order_by()
        .values("payin")
        .annotate(total=Sum("amount"))
        .values("total")
    )
    beyond = (
        Payin.objects.filter(pk__in=Refund.objects.values("payin"))
        .annotate(refunded=Subquery(held))
        .filter(refunded__gt=F("send_amount"))
        .values_list("id", "send_amount", "refunded")
    )
    for payin_id, amount, total in beyond:
        breaches.append(f"payin {payin_id} of {amount} has {total} refunded or being refunded")
    failed = Refund.objects.filter(status=RefundStatus.FAILED).values("id")
    moved = (
        JournalLine.objects.filter(
            journal__resource_type="refund",
            journal__resource_id__in=failed,
            account__code=MERCHANT_AVAILABLE,
        )
        .values("journal__resource_id")
        .annotate(total=Sum("amount"))
        .exclude(total=0)
        .values_list("journal__resource_id", "total")
    )
    for refund_id, total in moved:
        breaches.append(f"refund {refund_id} (failed) moved {total} of the available balance")
    return breaches


def ledger_check() -> dict:
    """Run every ledger invariant; {"ok", "breaches", "journals", "wallets"}. Its statements
    read one snapshot (see _one_snapshot), so a posting committed while it runs is seen whole
    or not at all."""
    with _one_snapshot():
        breaches = ledger_breaches() + _payment_breaches() + _refund_breaches()
        for check in _MORE_CHECKS:
            breaches += check()
        return {
            "ok": not breaches,
            "breaches": breaches,
            "journals": Journal.objects.count(),
            "wallets": Wallet.objects.count(),
        }


LAST_CHECK_CACHE_KEY = "payments:ledger_check:last"
"""Where the last check's result waits for the ops home page (the last 20 breaches)."""


def ledger_check_recorded(*, at: datetime) -> dict:
    """ledger_check(), its outcome kept for the ops home page (ledger_check_last)."""
    report = ledger_check()
    outcome = {"ok": report["ok"], "breaches": report["breaches"][:20], "checked_at": at}
    cache.set(LAST_CHECK_CACHE_KEY, outcome, timeout=None)
    return report


def ledger_check_last() -> dict | None:
    """The last recorded check: {"ok", "breaches", "checked_at"}, or None."""
    return cache.get(LAST_CHECK_CACHE_KEY)


@contextmanager
def _one_snapshot() -> Iterator[None]:
    """A read-only REPEATABLE READ transaction: every statement inside sees the database as of
    the first. Under the default READ COMMITTED each statement sees what has committed when it
    starts, so a check that sums the wallets' lines in one statement and reads the wallets in
    the next reports a breach for a payment that completed in between. Inside a caller's
    transaction the caller's isolation stands."""
    if connection.in_atomic_block:
        yield
        return
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        yield
