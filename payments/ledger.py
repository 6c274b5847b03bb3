"""The double-entry ledger: the only code that moves money between accounts.

Every movement is a Journal of signed lines that sum to zero, scoped to one merchant and one
currency, tied to the resource that caused it. `(resource_type, resource_id, kind)` is unique:
posting the same movement twice (a retried task, a repeated provider answer) returns the first
journal and changes nothing.

Sign convention: a positive line credits the account (what Cowry owes grows), a negative line
debits it. The merchant's wallet balances are the credit balances of two accounts.

Account codes (per merchant and currency):

    merchant_available            the merchant's spendable balance      (= Wallet.available)
    merchant_reserved             debits held for payouts in flight     (= Wallet.reserved)
    provider_clearing:<OPERATOR>  money held/paid by one operator on our behalf; a collection
                                  debits it, a disbursement credits it
    fee_revenue                   Cowry's fees
    adjustments                   the counterpart of manual ops adjustments (credit_wallet,
                                  debit_wallet)
    transfer_suspense             (transfers app) money collected for a transfer, not yet paid out
                                  (or returned to the wallet: journal transfer_returned)

Movements posted by the payments app (journal kind: lines):

    payin_completed:   provider_clearing:OP -send, merchant_available +receive, fee_revenue +fee
    payout_reserved:   merchant_available -debit, merchant_reserved +debit        (at creation)
    payout_completed:  merchant_reserved -debit, provider_clearing:OP +send, fee_revenue +fee
    payout_released:   merchant_reserved -debit, merchant_available +debit        (on failure)
    adjustment:        adjustments -amount, merchant_available +amount   (credit_wallet;
                       debit_wallet posts the opposite)
"""

from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import datetime
from decimal import Decimal
from uuid import UUID

from django.db import transaction
from django.db.models import Count, F, Q, Sum
from django.utils import timezone

from config import money, rawsql
from config.exceptions import DomainError
from config.rawsql import RowReader
from config.transactions import joined_atomic
from merchants.models import Merchant
from payments.models import Journal, JournalLine, LedgerAccount, Wallet

MERCHANT_AVAILABLE = "merchant_available"
MERCHANT_RESERVED = "merchant_reserved"
FEE_REVENUE = "fee_revenue"
ADJUSTMENTS = "adjustments"
TRANSFER_SUSPENSE = "transfer_suspense"
PROVIDER_CLEARING_PREFIX = "provider_clearing:"

WALLET_COLUMNS = {MERCHANT_AVAILABLE: "available", MERCHANT_RESERVED: "reserved"}


def provider_clearing(operator_code: str) -> str:
    return f"{PROVIDER_CLEARING_PREFIX}{operator_code}"


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


# Read on every posting: plain reads, without the ORM's compilation.
_WALLET_LOCKED = RowReader(Wallet, where=("merchant", "currency"), for_update=True)
_ACCOUNTS_OF = RowReader(LedgerAccount, where=("merchant", "currency"))
_JOURNAL_OF = RowReader(Journal, where=("resource_type", "resource_id", "kind"))


def _wallet_locked(*, merchant_id: UUID, currency: str) -> Wallet:
    """The merchant's wallet in this currency, created if missing, locked until commit."""
    wallet = _WALLET_LOCKED.first(merchant_id, currency)
    if wallet is None:
        Wallet.objects.bulk_create(
            [Wallet(merchant_id=merchant_id, currency=currency)], ignore_conflicts=True
        )
        wallet = _WALLET_LOCKED.first(merchant_id, currency)
    return wallet


# (merchant id, currency) -> {code: account id}. Accounts are never deleted or renumbered, so
# ids once committed stay right for the life of the process; filled only after commit, so an
# account created by a transaction that rolled back is never remembered.
_ACCOUNT_IDS: dict[tuple[UUID, str], dict[str, int]] = {}
_ACCOUNT_IDS_LIMIT = 10_000  # merchant-currency pairs; then it starts over


def _account_ids(*, merchant_id: UUID, currency: str, codes: set[str]) -> dict[str, int]:
    """The ids of the merchant's ledger accounts with these codes, the missing ones created:
    no query once they are known to this process, one once they all exist."""
    key = (merchant_id, currency)
    known = _ACCOUNT_IDS.get(key, {})
    if codes <= known.keys():
        return known

    def read() -> dict[str, int]:  # a merchant has a handful per currency
        return {account.code: account.pk for account in _ACCOUNTS_OF.all(merchant_id, currency)}

    found = read()
    if not codes <= found.keys():
        # In one order of codes: a concurrent posting creating two of the same accounts (ON
        # CONFLICT waits for its uncommitted row) in a set's order, which differs between
        # processes with the strings' hashes, could wait for this one while it waited for
        # that one, a deadlock.
        LedgerAccount.objects.bulk_create(
            [
                LedgerAccount(merchant_id=merchant_id, currency=currency, code=code)
                for code in sorted(codes - found.keys())
            ],
            ignore_conflicts=True,
        )
        found = read()

    def remember() -> None:
        if len(_ACCOUNT_IDS) >= _ACCOUNT_IDS_LIMIT:
            _ACCOUNT_IDS.clear()
        _ACCOUNT_IDS[key] = found

    transaction.on_commit(remember)
    return found


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
    account_ids = _account_ids(
        merchant_id=merchant_id, currency=currency, codes={code for code, _ in checked}
    )
    lines = [
        JournalLine(journal=journal, account_id=account_ids[code], amount=amount)
        for code, amount in checked
    ]
    return journal, lines, dict(deltas)


def credit_rows(
    *,
    merchant_id: UUID,
    currency: str,
    kind: str,
    resource_type: str,
    resource_id: UUID,
    lines: Sequence[tuple[str, Decimal]],
    at: datetime,
    memo: str = "",
) -> tuple[Journal, list[JournalLine], dict[str, Decimal]] | None:
    """What `post_journal` would write for a posting that only adds to the wallet (no wallet
    column goes down, so no balance can fall short): the journal, its lines and each wallet
    column's delta, for a caller that writes them in a statement of its own, adding the deltas
    to the wallet's columns in the database. None when the posting takes money from the
    wallet: that one needs post_journal and its lock."""
    journal, journal_lines, deltas = _journal_rows(
        merchant_id=merchant_id,
        currency=currency,
        kind=kind,
        resource_type=resource_type,
        resource_id=resource_id,
        checked=_validated(lines),
        at=at,
        memo=memo,
    )
    if any(delta < 0 for delta in deltas.values()):
        return None
    return journal, journal_lines, deltas


def _refusal(balances: Iterable[Decimal]) -> DomainError | None:
    """Why a wallet cannot take these balances (None: it can)."""
    balances = list(balances)
    if any(value < 0 for value in balances):
        return InsufficientBalance()
    if any(value >= money.AMOUNT_CEILING for value in balances):
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
    with joined_atomic():
        wallet = _wallet_locked(merchant_id=merchant_id, currency=currency)
        at = at or timezone.now()
        journal, lines, deltas = _journal_rows(
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
        refusal = _refusal(new_values.values())
        if refusal is not None:
            existing = _JOURNAL_OF.first(resource_type, resource_id, kind)
            if existing is not None:  # posted before, when the balance allowed it
                return existing
            raise refusal
        for column, value in new_values.items():
            setattr(wallet, column, value)
        # The unique (resource_type, resource_id, kind) makes the posting idempotent in one
        # statement with its lines and the wallet: a row already there is the earlier posting,
        # returned unchanged, and then neither the lines nor the wallet are written.
        if not rawsql.save_together(
            unless_present=journal,
            updates=[(wallet, [*new_values, "updated_at"])] if new_values else [],
            inserts=lines,
        ):
            return _JOURNAL_OF.first(resource_type, resource_id, kind)
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


def ledger_breaches(*, merchant_ids: Iterable[UUID] | None = None) -> list[str]:
    """Every violated ledger invariant, as human-readable lines; empty when the ledger is sound.

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
