"""Journals: one balanced, idempotent posting per movement (post_journal)."""

from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime
from decimal import Decimal
from uuid import UUID

from django.db.models import Subquery, Sum
from django.utils import timezone

from core import money
from core.exceptions import DomainError
from core.transactions import joined_atomic
from merchants.models import Merchant
from payments.ledger.accounts import WALLET_COLUMNS, account_ids, wallet_locked
from payments.models import Journal, JournalLine


class InsufficientBalance(DomainError):
    status = 400
    reason = "insufficient_balance"
    message = "The wallet's available balance is too low for this operation."


class BalanceOutOfRange(DomainError):
    status = 400
    reason = "balance_out_of_range"
    message = "The wallet's balance would exceed the largest amount the ledger can hold."


class UnbalancedJournal(ValueError):
    """A programming error: the lines given to post_journal do not sum to zero."""


def _validated(lines: Sequence[tuple[str, Decimal]]) -> list[tuple[str, Decimal]]:
    if len(lines) < 2:
        raise UnbalancedJournal("A journal needs at least two lines.")
    checked = []
    for code, amount in lines:
        if not isinstance(amount, Decimal) or not amount.is_finite():
            raise UnbalancedJournal(f"Line {code}: amount must be a finite Decimal.")
        if not code:
            raise UnbalancedJournal("Every line needs an account code.")
        if amount != 0:
            checked.append((code, amount))
    if sum((amount for _, amount in checked), Decimal(0)) != 0:
        raise UnbalancedJournal(f"Lines do not sum to zero: {lines!r}")
    if not checked:
        raise UnbalancedJournal("A journal must move some money.")
    return checked


def _journal_rows(
    *,
    merchant_id: UUID,
    currency: str,
    kind: str,
    resource_type: str,
    resource_id: UUID,
    checked: list[tuple[str, Decimal]],
    at: datetime,
    memo: str,
) -> tuple[Journal, list[JournalLine], dict[str, Decimal]]:
    """The journal and its lines for these validated lines (unsaved), and what they add to
    each wallet column."""
    deltas: dict[str, Decimal] = defaultdict(Decimal)
    for code, amount in checked:
        if code in WALLET_COLUMNS:
            deltas[WALLET_COLUMNS[code]] += amount
    journal = Journal(
        merchant_id=merchant_id,
        currency=currency,
        kind=kind,
        resource_type=resource_type,
        resource_id=resource_id,
        memo=memo[:255],
        created_at=at,
    )
    ids = account_ids(
        merchant_id=merchant_id, currency=currency, codes={code for code, _ in checked}
    )
    lines = [
        JournalLine(journal=journal, account_id=ids[code], amount=amount)
        for code, amount in checked
    ]
    return journal, lines, dict(deltas)


def _refusal(wallet, new_values: dict[str, Decimal], *, currency: str) -> DomainError | None:
    """Why a wallet cannot take these balances (None: it can); a short balance is named with
    what it holds and what the operation needs of it."""
    for column, value in new_values.items():
        if value < 0:
            held = getattr(wallet, column)
            details = {
                column: money.format_amount(held),
                "requested": money.format_amount(held - value),
                "currency": currency,
            }
            return InsufficientBalance(
                f"{InsufficientBalance.message} {money.format_amount(held)} {currency}"
                f" {column}, {details['requested']} {currency} needed.",
                details=details,
            )
    if any(value >= money.AMOUNT_CEILING for value in new_values.values()):
        return BalanceOutOfRange()
    return None


def post_journal(
    *,
    merchant_id: UUID,
    currency: str,
    kind: str,
    resource_type: str,
    resource_id: UUID,
    lines: Sequence[tuple[str, Decimal]],
    at: datetime | None,
    memo: str = "",
) -> Journal:
    """Post one balanced journal and update the wallet in the same transaction. `at` None
    stamps the journal when it is posted, once the wallet is locked: a debit checked against
    the balance is then dated after every posting it relied on, so a statement's running
    balance, in date order, never shows it before the credit that paid for it.

    Call it inside the caller's transaction, which it joins. It locks the merchant's wallet row
    for the currency first, so every posting for one merchant and currency is serialized.
    Raises InsufficientBalance (nothing posted) if the available or reserved balance would go
    below zero, BalanceOutOfRange if it would pass what its numeric(20, 2) column holds.
    Idempotent on (resource_type, resource_id, kind)."""
    checked = _validated(lines)
    with joined_atomic():  # refusals raise before any write: the caller's goes on
        posted = Journal.objects.filter(
            resource_type=resource_type, resource_id=resource_id, kind=kind
        )
        # Read in the lock's statement, so with its snapshot from before any wait: callers hold
        # the resource's row lock; two posts not serialized so meet the unique key instead.
        wallet = wallet_locked(
            merchant_id=merchant_id,
            currency=currency,
            posted_id=Subquery(posted.values("id")[:1]),
        )
        if wallet.posted_id is not None:  # a retried task, a repeated answer
            return posted.get()
        at = at or timezone.now()
        journal, journal_lines, deltas = _journal_rows(
            merchant_id=merchant_id,
            currency=currency,
            kind=kind,
            resource_type=resource_type,
            resource_id=resource_id,
            checked=checked,
            at=at,
            memo=memo,
        )
        new_values = {column: getattr(wallet, column) + delta for column, delta in deltas.items()}
        refusal = _refusal(wallet, new_values, currency=currency)
        if refusal is not None:
            raise refusal
        journal.save(force_insert=True)
        JournalLine.objects.bulk_create(journal_lines)
        if new_values:
            for column, value in new_values.items():
                setattr(wallet, column, value)
            wallet.save(update_fields=[*new_values, "updated_at"])
        return journal


def journal_exists(*, resource_type: str, resource_id: UUID, kind: str) -> bool:
    return Journal.objects.filter(
        resource_type=resource_type, resource_id=resource_id, kind=kind
    ).exists()


def account_balances(*, merchant: Merchant, currency: str) -> dict[str, Decimal]:
    """Credit balance of every account of the merchant in this currency (sum of its lines)."""
    rows = (
        JournalLine.objects.filter(account__merchant=merchant, account__currency=currency)
        .values("account__code")
        .annotate(total=Sum("amount"))
    )
    return {row["account__code"]: row["total"] for row in rows}
