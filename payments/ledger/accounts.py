"""Ledger accounts: their codes, their ids, and the wallet row each posting locks."""

from typing import Any
from uuid import UUID

from django.db import transaction

from payments.models import LedgerAccount, Wallet

MERCHANT_AVAILABLE = "merchant_available"
MERCHANT_RESERVED = "merchant_reserved"
FEE_REVENUE = "fee_revenue"
ADJUSTMENTS = "adjustments"
TRANSFER_SUSPENSE = "transfer_suspense"
PROVIDER_CLEARING_PREFIX = "provider_clearing:"

WALLET_COLUMNS = {MERCHANT_AVAILABLE: "available", MERCHANT_RESERVED: "reserved"}


def provider_clearing(operator_code: str) -> str:
    return f"{PROVIDER_CLEARING_PREFIX}{operator_code}"


def wallet_locked(*, merchant_id: UUID, currency: str, **annotations: Any) -> Wallet:
    """The merchant's wallet in this currency, created if missing, locked until commit (with
    the caller's `annotations`, read in the same statement)."""
    wallets = (
        Wallet.objects.select_for_update(of=("self",))
        .filter(merchant_id=merchant_id, currency=currency)
        .order_by()  # one row; Wallet's ordering would join the merchant
        .annotate(**annotations)
    )
    wallet = wallets.first()
    if wallet is None:
        Wallet.objects.bulk_create(
            [Wallet(merchant_id=merchant_id, currency=currency)], ignore_conflicts=True
        )
        wallet = wallets.get()
    return wallet


# (merchant id, currency) -> {code: account id}. Accounts are never deleted or renumbered, so
# ids once committed stay right for the life of the process; filled only after commit, so an
# account created by a transaction that rolled back is never remembered.
_ACCOUNT_IDS: dict[tuple[UUID, str], dict[str, int]] = {}
_ACCOUNT_IDS_LIMIT = 10_000  # merchant-currency pairs; then it starts over


def account_ids(*, merchant_id: UUID, currency: str, codes: set[str]) -> dict[str, int]:
    """The ids of the merchant's ledger accounts with these codes, the missing ones created:
    no query once they are known to this process, one once they all exist."""
    key = (merchant_id, currency)
    known = _ACCOUNT_IDS.get(key, {})
    if codes <= known.keys():
        return known

    def read() -> dict[str, int]:  # a merchant has a handful per currency
        return dict(
            LedgerAccount.objects.filter(merchant_id=merchant_id, currency=currency)
            .order_by()
            .values_list("code", "pk")
        )

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


def account_ids_known(
    *, merchant_id: UUID, currency: str, codes: set[str]
) -> dict[str, int] | None:
    """account_ids() from this process's memory alone, or None when one of them is not known
    yet (reading or creating it would need the wallet locked first, as post_journal does)."""
    known = _ACCOUNT_IDS.get((merchant_id, currency), {})
    return known if codes <= known.keys() else None
