"""Writes of the payments app: wallet adjustments, payins, payouts, provider answers."""

import logging
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any
from uuid import UUID

from django.conf import settings
from django.db import connection, models, transaction
from django.db.models import Case, Exists, F, OuterRef, Q, Subquery, Sum, Value, When
from django.db.models.functions import Coalesce
from django.utils import timezone
from kombu.exceptions import OperationalError as BrokerError

from config import money, rawsql, shared_cache
from config.exceptions import DomainError
from config.rawsql import RowReader
from config.transactions import joined_atomic
from customers import selectors as customer_selectors
from customers.models import Customer
from merchants import services as merchant_services
from merchants.models import AuditAction, AuditLogEntry, Merchant
from payments import ledger, provider
from payments.models import (
    Journal,
    JournalLine,
    Payin,
    PayinHistory,
    PayinStatus,
    Payout,
    PayoutHistory,
    PayoutStatus,
    ProviderDiscrepancy,
    Wallet,
)
from quotes import selectors as quote_selectors
from quotes import services as quote_services
from quotes.models import FlowType, Quote, RailType
from transfers.models import LegStatus, Transfer, TransferStatus
from webhooks import services as webhook_services

logger = logging.getLogger("cowry.payments")


class InvalidAdjustment(DomainError):
    status = 400
    reason = "invalid_adjustment"
    message = "An adjustment needs a positive amount in a supported currency and a reason."


class AdjustmentReferenceUsed(DomainError):
    status = 409
    reason = "adjustment_reference_used"
    message = "This reference was already used for another adjustment of the merchant."


class DiscrepancyNotCreditable(DomainError):
    status = 409
    reason = "discrepancy_not_creditable"
    message = "This discrepancy cannot be settled by a credit of the merchant's wallet."


class DiscrepancyNotDebitable(DomainError):
    status = 409
    reason = "discrepancy_not_debitable"
    message = "This discrepancy cannot be settled by a debit of the merchant's wallet."


@dataclass(frozen=True)
class _Settles:
    """A provider discrepancy an adjustment settles: an unresolved "completed" answer about one
    of the merchant's `resource_type`s, the resource (of `model`) in `state`, which is final, in
    its `currency_field`, for no more than its `amount_field`."""

    resource_type: str
    model: type[Payin] | type[Payout] | type[Transfer]
    state: dict[str, str]  # its fields when it can be settled
    only: str  # which can be settled, in a refusal
    what: str  # the resource, in a refusal naming its currency
    currency_field: str
    amount_field: str  # the most the adjustment may be
    at_most: str  # what that amount is, in a refusal
    also: str = ""  # the end of its settlement hint
    otherwise: str = ""  # what settles it in another state, in a refusal
    # Settled once per resource, whichever of its discrepancies: the refusal of another
    # ({command}, {id}, {reference}: the one settled); "" when each is settled on its own.
    once: str = ""


@dataclass(frozen=True)
class _Adjustment:
    """A manual adjustment's direction, and the provider discrepancies it may settle."""

    command: str  # the ops command; a settled discrepancy's resolved_by
    action: str  # the audit entry's detail action
    sign: int  # +1 into the available balance, -1 out of it
    settles: tuple[_Settles, ...]
    nothing: str  # why another provider outcome leaves nothing to settle
    refused: type[DomainError]


_CREDIT = _Adjustment(
    command="credit_wallet",
    action="wallet_credited",
    sign=1,
    settles=(
        _Settles(
            resource_type="payin",
            model=Payin,
            state={"status": PayinStatus.FAILED},
            only="a payin we failed",
            what="payin",
            currency_field="receive_currency",  # as its payin_completed journal (_payin_posting)
            amount_field="receive_amount",
            at_most="the payin would have credited the wallet, net of its fee",
        ),
        # The transfer failed at its collection and is final; the payer's money reached the
        # provider. The merchant gets what the payer paid, as when support returns the
        # collected funds of a failed disbursement: the whole payin amount, no fee.
        _Settles(
            resource_type="transfer_collection",
            model=Transfer,
            state={"payin_status": LegStatus.FAILED},
            only="a transfer whose collection we failed",
            what="transfer's collection",
            currency_field="payin_currency",
            amount_field="payin_amount",
            at_most="the transfer's payer paid (its payin amount)",
        ),
    ),
    nothing="it collected nothing to credit",
    refused=DiscrepancyNotCreditable,
)
_DEBIT = _Adjustment(
    command="debit_wallet",
    action="wallet_debited",
    sign=-1,
    settles=(
        _Settles(
            resource_type="payout",
            model=Payout,
            state={"status": PayoutStatus.FAILED},
            only="a payout we failed",
            what="payout",
            currency_field="send_currency",
            amount_field="debit_amount",
            at_most="the payout took from the wallet",
        ),
        # Support returned the collected funds of the failed disbursement to the wallet, then
        # the provider said it paid the recipient: the merchant holds that money twice.
        _Settles(
            resource_type="transfer_disbursement",
            model=Transfer,
            state={"payin_status": LegStatus.COMPLETED, "payout_status": LegStatus.CANCELLED},
            only="a transfer whose collected funds were returned to the merchant's wallet",
            what="transfer's return",
            currency_field="payin_currency",
            amount_field="payin_amount",
            at_most="the return of the transfer's collected funds credited the wallet",
            also=(
                " once the transfer's collected funds were returned to the merchant's wallet "
                "(while its disbursement is failed, support applies the provider's completion)"
            ),
            otherwise=(
                " While its disbursement is failed, support applies the provider's completion "
                "instead (or marks it resolved if the provider did not pay)."
            ),
            # Two attempts that both paid after the return are two discrepancies, but the
            # return credited the merchant once.
            once=(
                "The collected funds returned for this transfer were already taken back by "
                "{command} for discrepancy {id} (attempt {reference}): this one's payout is "
                "beyond what the return credited the merchant. Reconcile it by hand, then mark "
                "it resolved."
            ),
        ),
    ),
    nothing="it paid nothing to take back",
    refused=DiscrepancyNotDebitable,
)
_SETTLED_BY = {
    settles.resource_type: (adjustment, settles)
    for adjustment in (_CREDIT, _DEBIT)
    for settles in adjustment.settles
}


def discrepancy_settlement_hint(resource_type: str, outcome: str) -> str:
    """What settles a discrepancy about a `resource_type` whose provider answered `outcome`,
    for a refusal's message."""
    if outcome == provider.COMPLETED and resource_type in _SETTLED_BY:
        adjustment, settles = _SETTLED_BY[resource_type]
        return f"ops settle it with {adjustment.command} --discrepancy{settles.also}"
    return "reconcile it by hand, then mark it resolved"


def _adjustment_reason(*, currency: str, amount: Decimal, reason: str) -> str:
    """The reason of a valid manual adjustment of `amount` (positive, whole in the currency)."""
    if currency not in money.CURRENCIES:
        raise InvalidAdjustment(f"Unknown currency {currency!r}.")
    if not isinstance(amount, Decimal) or amount <= 0:
        raise InvalidAdjustment("The amount must be a positive Decimal.")
    if not money.has_valid_precision(amount, currency):
        raise InvalidAdjustment(f"{amount} is not a whole amount of {currency}.")
    if not reason.strip():
        raise InvalidAdjustment("A reason is required.")
    kept = Journal._meta.get_field("memo").max_length  # the journal keeps it, the audit too
    if len(reason.strip()) > kept:
        raise InvalidAdjustment(f"A reason has at most {kept} characters.")
    return reason.strip()


ADJUSTMENT_REFERENCE_MAX = 64


def _adjustment_reference(reference: str) -> str:
    """A valid reference of a manual adjustment (an ops ticket or run id): 1 to 64 printable
    ASCII characters, no spaces, kept as given (no trimming or case folding: a retry repeats
    it exactly)."""
    if not 0 < len(reference) <= ADJUSTMENT_REFERENCE_MAX or not all(
        "!" <= char <= "~" for char in reference
    ):
        raise InvalidAdjustment(
            f"A reference is 1 to {ADJUSTMENT_REFERENCE_MAX} printable ASCII characters "
            "without spaces (an ops ticket or run id)."
        )
    return reference


def adjustment_resource_id(*, merchant_id: UUID, reference: str) -> UUID:
    """The resource_id of the adjustment journal of the merchant's `reference`: the same at
    every run, so the journal's unique (resource_type, resource_id, kind) admits one."""
    return uuid.uuid5(merchant_id, reference)


@dataclass(frozen=True)
class Adjusted:
    """A manual adjustment's outcome: the wallet after it, and whether an earlier run with the
    same reference had already applied it (this one then changed nothing)."""

    wallet: Wallet
    already_applied: bool = False


def _adjustment_post(
    *,
    merchant: Merchant,
    currency: str,
    amount: Decimal,
    reason: str,
    at: datetime | None,
    resource_id: UUID,
) -> Journal:
    """A balanced adjustment between `adjustments` and the merchant's available balance:
    `amount` positive credits the wallet, negative debits it (InsufficientBalance, nothing
    posted, when it is short; the wallet is locked by the posting)."""
    return ledger.post_journal(
        merchant_id=merchant.pk,
        currency=currency,
        kind="adjustment",
        resource_type="adjustment",
        resource_id=resource_id,
        lines=[(ledger.ADJUSTMENTS, -amount), (ledger.MERCHANT_AVAILABLE, amount)],
        at=at,
        memo=reason,
    )


def wallet_credit(
    *,
    merchant: Merchant,
    currency: str,
    amount: Decimal,
    reason: str,
    at: datetime,
    discrepancy_id: UUID | None = None,
    reference: str | None = None,
) -> Adjusted:
    """A manual, balanced adjustment into the merchant's available balance (ops), e.g. to
    credit a payin, or a transfer's collection, the provider collected after we failed it.
    With a discrepancy (see _discrepancy_to_settle: _CREDIT), it is resolved in the same
    transaction, so a second credit for it is refused. With a reference, applied once per
    merchant and reference (see _wallet_adjust). Audited as "system"."""
    return _wallet_adjust(
        adjustment=_CREDIT,
        merchant=merchant,
        currency=currency,
        amount=amount,
        reason=reason,
        at=at,
        discrepancy_id=discrepancy_id,
        reference=reference,
    )


def wallet_debit(
    *,
    merchant: Merchant,
    currency: str,
    amount: Decimal,
    reason: str,
    discrepancy_id: UUID | None = None,
    reference: str | None = None,
) -> Adjusted:
    """A manual, balanced adjustment out of the merchant's available balance (ops): the mirror
    of wallet_credit, e.g. to take back a payout the provider paid after we failed it, or the
    collected funds returned for a transfer whose disbursement the provider then paid.

    Refused, changing nothing, when the available balance is short (InsufficientBalance: the
    posting locks the wallet, so a payout reserving the same funds waits, then is checked
    against what the debit left). With a discrepancy (see _discrepancy_to_settle: _DEBIT), it is
    resolved in the same transaction, so a second debit for it is refused. With a reference,
    applied once per merchant and reference (see _wallet_adjust). Audited as "system"; the
    journal is stamped when the wallet is locked."""
    return _wallet_adjust(
        adjustment=_DEBIT,
        merchant=merchant,
        currency=currency,
        amount=amount,
        reason=reason,
        at=None,
        discrepancy_id=discrepancy_id,
        reference=reference,
    )


def _wallet_adjust(
    *,
    adjustment: _Adjustment,
    merchant: Merchant,
    currency: str,
    amount: Decimal,
    reason: str,
    at: datetime | None,
    discrepancy_id: UUID | None,
    reference: str | None,
) -> Adjusted:
    """Post the adjustment of `amount` (positive) in its direction, resolve the discrepancy it
    settles at the journal's time, and audit it, in one transaction.

    With a reference (an ops ticket or run id), the journal's resource_id is derived from the
    merchant and the reference, so its unique constraint admits one adjustment per merchant and
    reference whatever runs race. A run again with the same reference (a dropped session, a
    script's retry) changes nothing: already applied when it asks for the same adjustment
    (direction, currency, amount, reason, discrepancy), AdjustmentReferenceUsed otherwise. The
    runs with a reference take turns on the merchant's row (FOR NO KEY UPDATE, before the
    discrepancy and the wallet; payments, which only lock its key, do not wait), so the second
    of two racing ones finds the first's journal rather than settling its discrepancy again or
    writing a second audit entry."""
    reason = _adjustment_reason(currency=currency, amount=amount, reason=reason)
    resource_id = uuid.uuid4()
    if reference is not None:
        reference = _adjustment_reference(reference)
        resource_id = adjustment_resource_id(merchant_id=merchant.pk, reference=reference)
    with transaction.atomic():
        if reference is not None:
            merchant_services.merchant_turn(merchant.pk)
            if _applied_before(
                adjustment=adjustment,
                merchant=merchant,
                currency=currency,
                amount=amount,
                reason=reason,
                discrepancy_id=discrepancy_id,
                reference=reference,
                resource_id=resource_id,
            ):
                wallet = Wallet.objects.get(merchant=merchant, currency=currency)
                return Adjusted(wallet=wallet, already_applied=True)
        discrepancy = None
        if discrepancy_id is not None:  # locked before the wallet, as a transfer action does
            discrepancy = _discrepancy_to_settle(
                adjustment=adjustment,
                merchant=merchant,
                currency=currency,
                amount=amount,
                discrepancy_id=discrepancy_id,
            )
        journal = _adjustment_post(
            merchant=merchant,
            currency=currency,
            amount=adjustment.sign * amount,
            reason=reason,
            at=at,
            resource_id=resource_id,
        )
        if discrepancy is not None:
            discrepancy.mark_resolved(by=adjustment.command, at=journal.created_at)
        _adjustment_audit(
            merchant=merchant,
            journal=journal,
            action=adjustment.action,
            amount=amount,
            discrepancy=discrepancy,
            reference=reference,
        )
        return Adjusted(wallet=Wallet.objects.get(merchant=merchant, currency=currency))


def _applied_before(
    *,
    adjustment: _Adjustment,
    merchant: Merchant,
    currency: str,
    amount: Decimal,
    reason: str,
    discrepancy_id: UUID | None,
    reference: str,
    resource_id: UUID,
) -> bool:
    """Whether the merchant's adjustment with this reference was already posted, as this run
    asks it (its direction, currency, amount, reason and the discrepancy it settled, the last
    from its audit entry); AdjustmentReferenceUsed, naming what differs, when it was posted
    otherwise."""
    journal = Journal.objects.filter(
        resource_type="adjustment", resource_id=resource_id, kind="adjustment"
    ).first()
    if journal is None:
        return False
    posted = journal.lines.get(account__code=ledger.MERCHANT_AVAILABLE).amount
    detail = (
        AuditLogEntry.objects.filter(
            merchant=merchant,
            action=AuditAction.WALLET_ADJUSTED,
            detail__journal_id=str(journal.id),
        )
        .values_list("detail", flat=True)
        .first()
        or {}
    )
    differs = [
        what
        for what, same in (
            ("direction", (posted > 0) == (adjustment.sign > 0)),
            ("currency", journal.currency == currency),
            ("amount", abs(posted) == amount),
            ("reason", journal.memo == reason),
            (
                "discrepancy",
                detail.get("discrepancy_id") == (str(discrepancy_id) if discrepancy_id else None),
            ),
        )
        if not same
    ]
    if differs:
        raise AdjustmentReferenceUsed(
            f"Reference {reference} was already used for this merchant, by a "
            f"{'credit' if posted > 0 else 'debit'} of {money.format_amount(abs(posted))} "
            f"{journal.currency} at {journal.created_at.isoformat(timespec='seconds')}; this "
            f"run differs in its {', '.join(differs)}: nothing changed."
        )
    return True


def _adjustment_audit(
    *,
    merchant: Merchant,
    journal: Journal,
    action: str,
    amount: Decimal,
    discrepancy: ProviderDiscrepancy | None = None,
    reference: str | None = None,
) -> None:
    """The merchant's audit-log entry of a manual adjustment (ops, as "system"); one that
    settled a discrepancy names it and its payment; one with a reference (an ops ticket or run
    id) keeps it, for support."""
    detail = {
        "action": action,
        "currency": journal.currency,
        "amount": money.format_amount(amount),
        "reason": journal.memo,
        "journal_id": str(journal.id),
        "discrepancy_id": str(discrepancy.id) if discrepancy else None,
        "settled": (
            f"{discrepancy.resource_type} {discrepancy.resource_id}" if discrepancy else None
        ),
    }
    if reference is not None:
        detail["reference"] = reference
    merchant_services.audit_record(
        merchant=merchant,
        actor=None,
        action=AuditAction.WALLET_ADJUSTED,
        target=str(discrepancy.resource_id if discrepancy else journal.resource_id),
        detail=detail,
    )


def _discrepancy_to_settle(
    *,
    adjustment: _Adjustment,
    merchant: Merchant,
    currency: str,
    amount: Decimal,
    discrepancy_id: UUID,
) -> ProviderDiscrepancy:
    """The discrepancy an adjustment settles, locked: an unresolved "completed" answer about
    one of the merchant's resources of a kind the adjustment settles (_Settles), in the state
    that leaves it to settle, in its currency, for no more than its limit. A credit: a payin we
    failed (at most its receive_amount), or a transfer whose collection we failed (its
    payin_amount, as a return). A debit: a payout we failed (its debit_amount), or a transfer
    disbursement after its collected funds were returned to the wallet (the payin_amount the
    return credited). Those states are final, so the resource is read without a lock, except
    where it is settled once whichever of its discrepancies (_Settles.once: a returned
    transfer, whose attempts may each have paid): its row is locked first, before the
    discrepancy's as every transfer action does, so of two settling two of its discrepancies at
    once, the second sees the first. The adjustment's refusal (DiscrepancyNotCreditable,
    DiscrepancyNotDebitable) otherwise."""
    refused = adjustment.refused
    # resource_type and resource_id never change: read without a lock, to lock the resource
    # first where it is settled once
    about = (
        ProviderDiscrepancy.objects.filter(pk=discrepancy_id, merchant=merchant)
        .values_list("resource_type", "resource_id")
        .first()
    )
    settles = next((s for s in adjustment.settles if about and s.resource_type == about[0]), None)
    if settles is not None and settles.once:
        settles.model.objects.select_for_update().filter(pk=about[1]).values_list("pk").first()
    discrepancy = (
        ProviderDiscrepancy.objects.select_for_update()
        .filter(pk=discrepancy_id, merchant=merchant)
        .first()
    )
    if discrepancy is None:
        raise refused(f"The merchant has no provider discrepancy {discrepancy_id}.")
    if discrepancy.resolved_at is not None:
        raise refused(
            f"This discrepancy was already resolved by {discrepancy.resolved_by or 'support'} "
            f"at {discrepancy.resolved_at.isoformat(timespec='seconds')}."
        )
    if settles is None:
        kinds = " or a ".join(s.resource_type.replace("_", " ") for s in adjustment.settles)
        hint = discrepancy_settlement_hint(discrepancy.resource_type, discrepancy.provider_outcome)
        raise refused(
            f"This discrepancy is about a {discrepancy.resource_type.replace('_', ' ')}, not a "
            f"{kinds}: {hint}."
        )
    if discrepancy.provider_outcome != provider.COMPLETED:
        raise refused(
            f'The provider answered "{discrepancy.provider_outcome}", not "completed": '
            f"{adjustment.nothing}."
        )
    shown = list(dict.fromkeys(["status", *settles.state]))
    resource = (
        settles.model.objects.filter(pk=discrepancy.resource_id, merchant=merchant)
        .values(*shown, settles.currency_field, settles.amount_field)
        .first()
    )
    if resource is None:
        raise refused(f"Only {settles.only} can be settled; this one does not exist.")
    if any(resource[field] != value for field, value in settles.state.items()):
        state = " and ".join(f"{field} {resource[field]}" for field in shown[1:])
        raise refused(
            f"Only {settles.only} can be settled; this one is {resource['status']}"
            + (f" with {state}." if state else ".")
            + settles.otherwise
        )
    settled = settles.once and (
        ProviderDiscrepancy.objects.filter(
            resource_type=discrepancy.resource_type,
            resource_id=discrepancy.resource_id,
            resolved_by=adjustment.command,
        )
        .exclude(pk=discrepancy.pk)
        .values("id", "reference")
        .first()
    )
    if settled:
        raise refused(settles.once.format(command=adjustment.command, **settled))
    resource_currency, most = resource[settles.currency_field], resource[settles.amount_field]
    if resource_currency != currency:
        raise refused(f"The {settles.what} was in {resource_currency}, not {currency}.")
    if amount > most:
        raise refused(
            f"{money.format_amount(amount)} {currency} is more than {settles.at_most} "
            f"({money.format_amount(most)} {currency})."
        )
    return discrepancy


def _payment_breaches() -> list[str]:
    """Every payin, payout and transfer has exactly the journals its status implies."""
    transfer_done = Q(status=TransferStatus.COMPLETED)
    expected = [
        (Payin, "payin", "payin_completed", Q(status=PayinStatus.COMPLETED)),
        (Payout, "payout", "payout_reserved", None),
        (Payout, "payout", "payout_completed", Q(status=PayoutStatus.COMPLETED)),
        (Payout, "payout", "payout_released", Q(status=PayoutStatus.FAILED)),
        (Transfer, "transfer", "transfer_collected", Q(payin_status=LegStatus.COMPLETED)),
        (Transfer, "transfer", "transfer_disbursed", transfer_done),
        # across two currencies the suspense is emptied in the payin currency by its own journal
        (
            Transfer,
            "transfer",
            "transfer_settled",
            transfer_done & ~Q(payin_currency=F("payout_currency")),
        ),
        # support gave the disbursement up: the collected money went back to the wallet
        (
            Transfer,
            "transfer",
            "transfer_returned",
            Q(payin_status=LegStatus.COMPLETED, payout_status=LegStatus.CANCELLED),
        ),
    ]
    breaches = []
    for model, resource_type, kind, should_have in expected:
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


def _transfer_suspense_breaches() -> list[str]:
    """Every transfer holds in transfer_suspense, in its payin currency, what its state implies:
    its payin_amount from its collection's completion until its disbursement completes or
    support returns the funds (disbursing, or a failed disbursement waiting for a relaunch or a
    return), nothing otherwise (not collected yet, failed at collection, completed, returned).
    And every transfer_suspense line is in a journal of a transfer, in that transfer's payin
    currency: one elsewhere would be money in suspense that no transfer accounts for."""
    suspense = JournalLine.objects.filter(account__code=ledger.TRANSFER_SUSPENSE)
    held = (
        suspense.filter(
            journal__resource_type="transfer",
            journal__resource_id=OuterRef("pk"),
            journal__currency=OuterRef("payin_currency"),
        )
        .order_by()
        .values("journal__resource_id")
        .annotate(total=Sum("amount"))
        .values("total")
    )
    amount = models.DecimalField(max_digits=20, decimal_places=2)  # as JournalLine.amount
    holding = Q(payin_status=LegStatus.COMPLETED) & ~Q(
        payout_status__in=[LegStatus.COMPLETED, LegStatus.CANCELLED]
    )
    wrong = (
        Transfer.objects.annotate(
            held=Coalesce(
                Subquery(held, output_field=amount), Value(Decimal(0)), output_field=amount
            ),
            expected=Case(
                When(holding, then=F("payin_amount")),
                default=Value(Decimal(0)),
                output_field=amount,
            ),
        )
        .exclude(held=F("expected"))
        .values_list(
            "id", "status", "payin_status", "payout_status", "payin_currency", "held", "expected"
        )
    )
    breaches = []
    for transfer_id, status, payin_status, payout_status, currency, held_now, expected in wrong:
        breaches.append(
            f"transfer {transfer_id} ({status}, payin {payin_status}, payout {payout_status}) "
            f"holds {money.format_amount(held_now)} {currency} in transfer_suspense, not "
            f"{money.format_amount(expected)}"
        )
    transfer_currency = Transfer.objects.filter(pk=OuterRef("journal__resource_id")).values(
        "payin_currency"
    )
    stray = (
        suspense.annotate(transfer_currency=Subquery(transfer_currency))
        .filter(
            ~Q(journal__resource_type="transfer")
            | Q(transfer_currency__isnull=True)
            | ~Q(journal__currency=F("transfer_currency"))
        )
        .values_list("journal_id", "journal__kind", "journal__resource_type", "journal__currency")
        .order_by("journal_id")
        .distinct()
    )
    for journal_id, kind, resource_type, currency in stray:
        breaches.append(
            f"journal {journal_id} ({kind}, {resource_type}, {currency}) posts to "
            "transfer_suspense for no transfer in that currency"
        )
    return breaches


def ledger_check() -> dict:
    """Run every ledger invariant; {"ok", "breaches", "journals", "wallets"}. Its statements
    read one snapshot (see _one_snapshot), so a posting committed while it runs is seen whole
    or not at all."""
    with _one_snapshot():
        breaches = ledger.ledger_breaches() + _payment_breaches() + _transfer_suspense_breaches()
        return {
            "ok": not breaches,
            "breaches": breaches,
            "journals": Journal.objects.count(),
            "wallets": Wallet.objects.count(),
        }


@contextmanager
def _one_snapshot() -> Iterator[None]:
    """A read-only REPEATABLE READ transaction on PostgreSQL: every statement inside sees the
    database as of the first. Under the default READ COMMITTED each statement sees what has
    committed when it starts, so a check that sums the wallets' lines in one statement and
    reads the wallets in the next reports a breach for a payment that completed in between.
    Inside a caller's transaction (or on SQLite, whose transactions are serializable) the
    caller's isolation stands."""
    if connection.vendor != "postgresql" or connection.in_atomic_block:
        yield
        return
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        yield


# --- payins and payouts ------------------------------------------------------------------------

PAYIN_CALLBACK = "payments.services.payin_apply_provider_result"
PAYOUT_CALLBACK = "payments.services.payout_apply_provider_result"

REASON_PROVIDER_TIMEOUT = "provider_timeout"
REASON_SUBMITTED = "submitted_to_provider"
REASON_MARKED_FAILED = "marked_failed_by_support"

MOBILE_MONEY_FIELDS = ("phone",)
BANK_FIELDS = ("bank_name", "bank_code", "account_name", "account_number")
RAIL_FIELDS = {
    RailType.MOBILE_MONEY: MOBILE_MONEY_FIELDS,
    RailType.BANK_TRANSFER: BANK_FIELDS,
}

PAYIN_ALLOWED = {
    PayinStatus.CREATED: {PayinStatus.PENDING, PayinStatus.FAILED},
    PayinStatus.PENDING: {PayinStatus.COMPLETED, PayinStatus.FAILED},
}
PAYOUT_ALLOWED = {
    PayoutStatus.PENDING: {PayoutStatus.COMPLETED, PayoutStatus.FAILED},
}
TERMINAL = {"completed", "failed"}


class InvalidTransition(DomainError):
    status = 409
    reason = "invalid_transition"
    message = "The resource cannot move to that status."


class PartyInvalid(DomainError):
    """A source/recipient field is missing, or belongs to the other rail."""

    status = 400
    reason = "invalid_request"
    message = "The request is invalid."


class CustomerNotFound(DomainError):
    status = 400
    reason = "customer_not_found"
    message = "The customer does not exist."


def _customer(*, merchant: Merchant, customer_id: UUID) -> Customer:
    try:
        return customer_selectors.customer_get_active(merchant=merchant, customer_id=customer_id)
    except customer_selectors.CustomerNotFound:
        raise CustomerNotFound(fields={"customer_id": [CustomerNotFound.message]}) from None


class PartyRoutingMismatch(DomainError):
    status = 400
    reason = "party_routing_mismatch"
    message = "The party's country, rail or operator does not match the quote."


def routing_mismatches(
    party: dict[str, Any], expected: dict[str, str], *, what: str
) -> dict[str, list[str]]:
    """The routing fields a party states that differ from `expected` (the quote's), each with
    its error; those it leaves out are not checked."""
    return {
        name: [f"Must be {value!r} for this {what}; got {party[name]!r}."]
        for name, value in expected.items()
        if party.get(name) not in (None, value)
    }


def _party_for_quote(
    *, quote: Quote, party: dict[str, Any], field: str, required: tuple[str, ...] = ()
) -> dict[str, Any]:
    """_party_for_rail for the quote's rail, after the routing the party states (if any) is
    checked against the quote's: routing comes from the quote, and a request that names another
    country, rail or operator does not match it (400 party_routing_mismatch)."""
    routing = _routing(quote)
    mismatches = routing_mismatches(party, routing, what="quote")
    if mismatches:
        first = next(iter(mismatches))
        raise PartyRoutingMismatch(
            f"{field}.{first}: {mismatches[first][0]}", fields={field: mismatches}
        )
    party = {name: value for name, value in party.items() if name not in routing}
    return _party_for_rail(rail_type=quote.rail_type, party=party, field=field, required=required)


def _party_for_rail(
    *, rail_type: str, party: dict[str, Any], field: str, required: tuple[str, ...] = ()
) -> dict[str, Any]:
    """The party's fields for this rail: the rail's own fields are required, the other rail's
    fields are refused; each error names `field.<name>`."""
    own = RAIL_FIELDS.get(rail_type)
    if own is None:
        raise PartyInvalid(f"Unsupported rail {rail_type!r}.")
    foreign = [name for fields in RAIL_FIELDS.values() if fields is not own for name in fields]
    errors: dict[str, list[str]] = {}
    for name in (*own, *required):
        if not party.get(name):
            errors[name] = [f"This field is required for a {rail_type} quote."]
    for name in foreign:
        if name in party:
            errors[name] = [f"This field belongs to another rail; the quote is {rail_type}."]
    if errors:
        first = next(iter(errors))
        raise PartyInvalid(f"{field}.{first}: {errors[first][0]}", fields={field: errors})
    return {key: value for key, value in party.items() if value not in (None, "")}


def _routing(quote: Quote) -> dict[str, str]:
    return {
        "country_code": quote.country_code,
        "rail_type": quote.rail_type,
        "operator_code": quote.operator_code,
    }


def _quote_amounts(quote: Quote) -> dict[str, Any]:
    return {
        "send_amount": quote.send_amount,
        "send_currency": quote.send_currency,
        "receive_amount": quote.receive_amount,
        "receive_currency": quote.receive_currency,
        "total_fee": quote.total_fee,
        **_routing(quote),
        "pricing": quote.pricing,
    }


def _timeout_at(now: datetime) -> datetime:
    return now + timedelta(seconds=settings.PROVIDER_TIMEOUT_SECONDS)


def payin_create(
    *,
    merchant: Merchant,
    quote_id: UUID,
    customer_id: UUID,
    source: dict[str, Any],
    now: datetime,
) -> Payin:
    """Consume the merchant's active payin quote and create the payin (`created`); the provider
    submission is enqueued when the transaction commits."""
    payer: dict[str, Any] = {}

    def validate(quote: Quote) -> None:
        quote_selectors.quote_operator_check_enabled(quote, field="quote_id")
        payer.update(_party_for_quote(quote=quote, party=source, field="source"))

    def payin_rows(quote: Quote) -> list[Payin | PayinHistory]:  # quote_consume calls it last
        payin = Payin(
            merchant=merchant,
            customer_id=customer_id,
            quote=quote,
            status=PayinStatus.CREATED,
            **_quote_amounts(quote),
            wallet_impact={
                "credit_amount": money.format_amount(quote.receive_amount),
                "currency": quote.receive_currency,
            },
            source=payer,
            provider_timeout_at=_timeout_at(now),
            created_at=now,
            updated_at=now,
        )
        rows[:] = [payin, PayinHistory(payin=payin, status=PayinStatus.CREATED, created_at=now)]
        return rows

    rows: list[Payin | PayinHistory] = []
    # Every check raises before the first write, so this joins the caller's transaction (the
    # Idempotency-Key's) rather than costing a savepoint; the payin and its first history row
    # are written in the quote's own statement. A caller holding its writes needs none: that
    # statement is a compare-and-set on the quote (quote_consume).
    with nullcontext() if rawsql.held_now() is not None else joined_atomic():
        quote_services.quote_consume(
            merchant=merchant,
            quote_id=quote_id,
            flow_type=FlowType.PAYIN,
            customer_id=customer_id,
            now=now,
            validate=validate,
            written_with=payin_rows,
            customer_check=lambda: _customer(merchant=merchant, customer_id=customer_id),
        )
        payin, created = rows
        payin.history_entries = [created]
        # robust: a broker hiccup must not turn a committed payin into a 500; the sweep resubmits.
        rawsql.after_write(_submitter_wake, robust=True)
    return payin


def payin_snapshot(payin: Payin) -> dict[str, Any]:
    """data.object of the payin.* events (docs/webhooks.md)."""
    return {
        "id": payin.id,
        "status": payin.status,
        "send_amount": money.format_amount(payin.send_amount),
        "send_currency": payin.send_currency,
        "receive_amount": money.format_amount(payin.receive_amount),
        "receive_currency": payin.receive_currency,
        "country_code": payin.country_code,
        "operator_code": payin.operator_code,
        "rail_type": payin.rail_type,
        "provider_reference": payin.provider_reference or None,
        "wallet_impact": payin.wallet_impact,
        "completed_at": payin.completed_at,
        "failed_at": payin.failed_at,
        "failure_reason": payin.failure_reason or None,
    }


# The row locks of the transitions, without the ORM's compilation (they run on every answer).
_PAYIN_LOCKED = RowReader(Payin, where=("id",), for_update=True)
_PAYOUT_LOCKED = RowReader(Payout, where=("id",), for_update=True)


def payin_transition(
    *,
    payin_id: UUID,
    to: str,
    reason: str = "",
    at: datetime,
    provider_reference: str = "",
) -> Payin:
    """The one way a payin changes status: checks the move, writes history, posts the ledger
    and records the event, in one transaction. Moving to the current status changes nothing."""
    with transaction.atomic():
        # Only the payin's row: locking its merchant's too would deadlock with the deferred
        # foreign-key checks of concurrent inserts (wallet lock, then merchant key share).
        payin = _PAYIN_LOCKED.first(payin_id)
        if payin is None:
            raise Payin.DoesNotExist(f"No payin {payin_id}.")
        return _payin_move(
            payin, to=to, reason=reason, at=at, provider_reference=provider_reference
        )


def _payin_move(
    payin: Payin, *, to: str, reason: str = "", at: datetime, provider_reference: str = ""
) -> Payin:
    """payin_transition's move of a payin whose row the caller's transaction has locked."""
    if payin.status == to:
        if provider_reference and not payin.provider_reference:
            payin.provider_reference = provider_reference
            rawsql.update(payin, ["provider_reference"])
        return payin
    if to not in PAYIN_ALLOWED.get(payin.status, ()):
        raise InvalidTransition(f"A {payin.status} payin cannot become {to}.")
    fields = _payin_moved(payin, to=to, reason=reason, at=at, provider_reference=provider_reference)
    rawsql.save_together(
        updates=[(payin, fields)],
        inserts=[PayinHistory(payin=payin, status=to, reason=reason, created_at=at)],
    )
    if to == PayinStatus.COMPLETED:
        ledger.post_journal(**_payin_posting(payin, at=at))
    if to in TERMINAL:
        webhook_services.event_record(**_payin_event(payin, at=at))
    return payin


def _payin_moved(
    payin: Payin, *, to: str, reason: str, at: datetime, provider_reference: str
) -> list[str]:
    """Set what a move of the payin to `to` changes on the instance; returns those fields."""
    fields = ["status", "updated_at"]
    if provider_reference and not payin.provider_reference:
        payin.provider_reference = provider_reference
        fields.append("provider_reference")
    payin.status = to
    payin.updated_at = at
    if to == PayinStatus.PENDING:
        payin.submitted_at = at
        fields.append("submitted_at")
    elif to == PayinStatus.COMPLETED:
        payin.completed_at = at
        fields.append("completed_at")
    elif to == PayinStatus.FAILED:
        payin.failed_at = at
        payin.failure_reason = reason
        fields += ["failed_at", "failure_reason"]
    return fields


def _payin_posting(payin: Payin, *, at: datetime) -> dict[str, Any]:
    """The journal of a completed payin, as post_journal's arguments."""
    return {
        "merchant_id": payin.merchant_id,
        "currency": payin.receive_currency,
        "kind": "payin_completed",
        "resource_type": "payin",
        "resource_id": payin.id,
        "lines": [
            (ledger.provider_clearing(payin.operator_code), -payin.send_amount),
            (ledger.MERCHANT_AVAILABLE, payin.receive_amount),
            (ledger.FEE_REVENUE, payin.total_fee),
        ],
        "at": at,
    }


def _payin_event(payin: Payin, *, at: datetime) -> dict[str, Any]:
    """The event of a payin's final status, as event_record's arguments."""
    return {
        "merchant_id": payin.merchant_id,
        "event_type": f"payin.{payin.status}",
        "data_type": "payin",
        "data_id": payin.id,
        "data_object": payin_snapshot(payin),
        "at": at,
    }


def _wallet_of(payin: str) -> str:
    """The id of the wallet the payin row `payin` (a table or alias) credits, as SQL."""
    return (
        f"SELECT w.id FROM {Wallet._meta.db_table} w"  # noqa: S608 (model metadata)
        f" WHERE w.merchant_id = {payin}.merchant_id AND w.currency = {payin}.receive_currency"
    )


# A payin and the id of its merchant's wallet in the payin's currency (None before its first
# posting): the answer's compare-and-set reads both at once.
_PAYIN_AND_WALLET = RowReader(
    Payin, where=("id",), annotations={"wallet_id": (_wallet_of(Payin._meta.db_table), [])}
)


def _payin_finished_at_once(
    *, payin_id: UUID, to: str, reason: str, at: datetime, provider_reference: str
) -> bool:
    """payin_transition's move of a pending payin to its final status (PostgreSQL), without
    its lock and transaction: the payin is read, then its status, history row, journal, wallet
    credit, event and deliveries are written in one statement, only while the payin still has
    the status and provider reference it was read with (a compare-and-set: a concurrent answer,
    timeout or receipt makes it write nothing). The wallet's columns are added to in the
    database, so the postings of other payments need not wait for this one's read. False when
    nothing was written (the payin was not pending, has no wallet yet, or changed in between):
    payin_transition then decides under its lock."""
    payin = _PAYIN_AND_WALLET.first(payin_id)
    return payin is not None and _payin_finished_as_read(
        payin, to=to, reason=reason, at=at, provider_reference=provider_reference
    )


def _payin_finished_as_read(
    payin: Payin, *, to: str, reason: str, at: datetime, provider_reference: str
) -> bool:
    """_payin_finished_at_once's statement for a payin as read (`wallet_id` annotated)."""
    if payin.status != PayinStatus.PENDING:
        return False
    if to not in PAYIN_ALLOWED[payin.status] or (
        to == PayinStatus.COMPLETED and payin.wallet_id is None
    ):
        return False
    read_as = {"status": payin.status, "provider_reference": payin.provider_reference}
    fields = _payin_moved(payin, to=to, reason=reason, at=at, provider_reference=provider_reference)
    inserts: list[models.Model] = [
        PayinHistory(payin=payin, status=to, reason=reason, created_at=at)
    ]
    increments = []
    if to == PayinStatus.COMPLETED:
        posting = ledger.credit_rows(**_payin_posting(payin, at=at))
        if posting is None:  # a payin never takes from the wallet; post_journal would refuse
            return False
        journal, lines, deltas = posting
        inserts += [journal, *lines]
        increments.append((Wallet(pk=payin.wallet_id), deltas, ["updated_at"]))
    event = webhook_services.event_new(**_payin_event(payin, at=at))
    deliveries = _deliveries_part(event)
    if not rawsql.save_together(
        only_if=(payin, fields, read_as),
        inserts=[*inserts, event],
        increments=increments,
        also=[deliveries],
    ):
        return False
    if deliveries.rows:
        webhook_services.event_deliveries_enqueue_after_commit(event_id=event.pk)
    return True


# The event's deliveries (webhooks.services.DELIVERIES_FAN_OUT) as a part of the answer's one
# statement, so a worker killed mid-statement leaves all of it or none.
_DELIVERIES_PART = """
INSERT INTO webhooks_delivery
    (id, event_id, endpoint_id, status, attempts, next_attempt_at, dispatched_at, last_error,
     created_at, updated_at)
SELECT gen_random_uuid(), %s, e.id, 'pending', 0, %s, %s, '', %s, %s
FROM webhooks_webhookendpoint e
WHERE e.merchant_id = %s AND e.enabled
    AND (e.event_types = '[]'::jsonb OR e.event_types @> jsonb_build_array(%s::text)){condition}
RETURNING 1
"""


def _deliveries_part(event) -> rawsql.Part:
    at = event.created_at
    params = [event.id, at, at, at, at, event.merchant_id, event.event_type]
    return rawsql.Part(name="deliveries", sql=_DELIVERIES_PART, params=params)


def _party_identifier(party: dict[str, Any]) -> dict[str, str]:
    return {
        "phone": party.get("phone", ""),
        "account_number": party.get("account_number", ""),
    }


def provider_reference_store(
    payment: models.Model, field: str, reference: str, *, refresh: bool = True, **still: object
) -> None:
    """Store the provider's receipt reference in `field` of a submitted payment (a payin, a
    payout, a transfer leg) unless the provider's answer got there first and set it, and only
    while the row still matches `still`; `payment` is then up to date either way (with
    `refresh=False`, for a caller done with it, only when it was stored here)."""
    stored = rawsql.update_where(
        type(payment), {field: reference}, {"pk": payment.pk, field: "", **still}
    )
    if stored:
        setattr(payment, field, reference)
    elif refresh:
        payment.refresh_from_db()


def payin_submit(*, payin_id: UUID, now: datetime) -> None:
    """Send the collection to the provider (idempotent: a retried task resubmits the same
    reference). The payin is `pending` before the provider is called, so an answer can never
    arrive for a payin that is not waiting for one. No lock is held during the call."""
    with transaction.atomic():
        payin = _PAYIN_LOCKED.first(payin_id)
        if payin is None:
            raise Payin.DoesNotExist(f"No payin {payin_id}.")
        # Each call's start is recorded first (submitted_at), and none starts once the payin is
        # final, received or past its timeout, as for a payout: the timeout sweep leaves a payin
        # whose last call started recently, and fails one only while no call has started since
        # it looked, so a payer is not charged for a payin the merchant is told failed.
        waiting = payin.status in (PayinStatus.CREATED, PayinStatus.PENDING)
        if not waiting or payin.provider_reference or payin.provider_timeout_at <= now:
            return
        if payin.status == PayinStatus.CREATED:
            _payin_move(payin, to=PayinStatus.PENDING, reason=REASON_SUBMITTED, at=now)
        else:
            payin.submitted_at = now
            rawsql.update(payin, ["submitted_at"])
    _payin_send(payin, now=now)


def _payin_send(payin: Payin, *, now: datetime) -> None:
    """The provider call of a pending payin (none when it already has its receipt)."""
    if payin.provider_reference:
        return
    try:
        receipt = provider.gateway().submit_collection(
            reference=str(payin.id),
            amount=payin.send_amount,
            currency=payin.send_currency,
            operator_code=payin.operator_code,
            callback=PAYIN_CALLBACK,
            **_party_identifier(payin.source),
        )
    except provider.ProviderRejected as rejected:
        payin_transition(payin_id=payin.id, to=PayinStatus.FAILED, reason=rejected.reason, at=now)
        return
    if receipt.outcome is not None and _payin_answered_as_claimed(payin, receipt):
        return
    provider.receipt_answer_deliver(receipt, callback=PAYIN_CALLBACK, reference=str(payin.id))
    provider_reference_store(payin, "provider_reference", receipt.provider_reference, refresh=False)


def _payin_answered_as_claimed(payin: Payin, receipt: provider.ProviderReceipt) -> bool:
    """The answer a receipt carries, for a payin as its submitter's claim read it (pending, no
    provider reference, its wallet's id): written in one compare-and-set statement, as
    payin_apply_provider_result would, without reading the payin again. False when nothing was
    written (PostgreSQL only; not read by a claim; no wallet yet; changed since the claim): the
    answer then takes the callback's way. The instance is not to be used after a refusal."""
    if connection.vendor != "postgresql" or not hasattr(payin, "wallet_id"):
        return False
    return _payin_finished_as_read(
        payin,
        **_payin_answer_move(receipt.outcome, receipt.reason),
        at=timezone.now(),
        provider_reference=receipt.provider_reference,
    )


def provider_discrepancy_resolve(*, discrepancy_id: UUID, actor: Any, now: datetime) -> bool:
    """Support marks a discrepancy reconciled, recorded with who did it, once: of two racing
    clicks, the second waits for the row lock and finds it resolved. False when it was."""
    with transaction.atomic():
        discrepancy = (
            ProviderDiscrepancy.objects.select_for_update(of=("self",))
            .select_related("merchant")
            .filter(pk=discrepancy_id, resolved_at__isnull=True)
            .first()
        )
        if discrepancy is None:
            return False
        discrepancy.mark_resolved(by=actor.get_username(), at=now)
        merchant_services.audit_record(
            merchant=discrepancy.merchant,
            actor=actor,
            action="support.action",
            target=str(discrepancy.resource_id),
            detail={"action": "provider_discrepancy_resolved", "id": str(discrepancy.id)},
        )
    return True


def provider_discrepancy_record(
    *,
    merchant: Merchant,
    resource_type: str,
    resource_id: UUID,
    reference: str,
    provider_reference: str,
    outcome: str,
    reason: str,
    our_status: str,
    at: datetime,
) -> ProviderDiscrepancy:
    """Keep, once per answer, a provider answer that contradicts our final state, for support
    to reconcile. Money may have moved without a journal: this is logged as an error."""
    discrepancy, created = ProviderDiscrepancy.objects.get_or_create(
        resource_type=resource_type,
        reference=reference,
        provider_outcome=outcome,
        defaults={
            "merchant": merchant,
            "resource_id": resource_id,
            "provider_reference": provider_reference,
            "provider_reason": reason,
            "our_status": our_status,
            "received_at": at,
        },
    )
    if created:
        logger.error(
            "Provider discrepancy on %s %s: provider says %s, our status is %s",
            resource_type,
            resource_id,
            outcome,
            our_status,
        )
    return discrepancy


def _late_answer_ignored(
    *,
    payment: Payin | Payout,
    resource_type: str,
    provider_reference: str,
    outcome: str,
    reason: str,
    at: datetime,
) -> None:
    """An answer for a payment already final: kept for reconciliation when it contradicts."""
    final = payment.status in (provider.COMPLETED, provider.FAILED)
    if final and outcome != payment.status:
        provider_discrepancy_record(
            merchant=payment.merchant,
            resource_type=resource_type,
            resource_id=payment.id,
            reference=str(payment.id),
            provider_reference=provider_reference,
            outcome=outcome,
            reason=reason,
            our_status=payment.status,
            at=at,
        )
    logger.warning(
        "Late provider answer %s for %s %s ignored (%s)", outcome, resource_type, payment.id, reason
    )


def _payin_answer_move(outcome: str, reason: str) -> dict[str, str]:
    """The move a provider's answer makes: `to` and its `reason`."""
    to = PayinStatus.COMPLETED if outcome == provider.COMPLETED else PayinStatus.FAILED
    return {"to": to, "reason": reason if to == PayinStatus.FAILED else ""}


def payin_apply_provider_result(
    *, reference: str, provider_reference: str, outcome: str, reason: str, at: datetime
) -> None:
    """The provider's answer for a collection (gateway callback). Repeated answers change
    nothing; an answer for a payin already final otherwise (e.g. failed by the timeout sweep)
    is logged and ignored."""
    move = {
        "payin_id": UUID(reference),
        **_payin_answer_move(outcome, reason),
        "at": at,
        "provider_reference": provider_reference,
    }
    if connection.vendor == "postgresql" and _payin_finished_at_once(**move):
        return
    try:
        payin_transition(**move)
    except InvalidTransition:
        _late_answer_ignored(
            payment=Payin.objects.get(pk=UUID(reference)),
            resource_type="payin",
            provider_reference=provider_reference,
            outcome=outcome,
            reason=reason,
            at=at,
        )


def payout_create(
    *,
    merchant: Merchant,
    quote_id: UUID,
    customer_id: UUID,
    recipient: dict[str, Any],
    payment_reason_code: str = "",
    payment_reason_text: str = "",
    now: datetime,
) -> Payout:
    """Consume the merchant's active payout quote, reserve send_amount + total_fee from the
    wallet (400 insufficient_balance, nothing changed, when it is short) and create the payout
    (`pending`); the provider submission is enqueued when the transaction commits."""

    party: dict[str, Any] = {}
    rows: list[Payout | PayoutHistory] = []

    def validate(quote: Quote) -> None:
        quote_selectors.quote_operator_check_enabled(quote, field="quote_id")
        names = (
            ("business_name",)
            if recipient.get("recipient_type") == "business"
            else ("first_name", "last_name")
        )
        party.update(
            _party_for_quote(quote=quote, party=recipient, field="recipient", required=names)
        )

    def payout_rows(quote: Quote) -> list[Payout | PayoutHistory]:  # quote_consume calls it last
        debit = quote.send_amount + quote.total_fee
        payout = Payout(
            merchant=merchant,
            customer_id=customer_id,
            quote=quote,
            status=PayoutStatus.PENDING,
            **_quote_amounts(quote),
            debit_amount=debit,
            wallet_impact={
                "debit_amount": money.format_amount(debit),
                "currency": quote.send_currency,
            },
            recipient=party,
            payment_reason_code=payment_reason_code,
            payment_reason_text=payment_reason_text,
            provider_timeout_at=_timeout_at(now),
            created_at=now,
            updated_at=now,
        )
        pending = PayoutHistory(payout=payout, status=PayoutStatus.PENDING, created_at=now)
        rows[:] = [payout, pending]
        return rows

    with transaction.atomic():
        quote = quote_services.quote_consume(
            merchant=merchant,
            quote_id=quote_id,
            flow_type=FlowType.PAYOUT,
            customer_id=customer_id,
            now=now,
            validate=validate,
            written_with=payout_rows,
            customer_check=lambda: _customer(merchant=merchant, customer_id=customer_id),
        )
        payout, pending = rows
        debit = payout.debit_amount
        payout.history_entries = [pending]
        ledger.post_journal(
            merchant_id=merchant.pk,
            currency=quote.send_currency,
            kind="payout_reserved",
            resource_type="payout",
            resource_id=payout.id,
            lines=[(ledger.MERCHANT_AVAILABLE, -debit), (ledger.MERCHANT_RESERVED, debit)],
            at=None,  # when the wallet is locked: after any credit this debit relies on
        )
        transaction.on_commit(_submitter_wake, robust=True)
    return payout


def payout_snapshot(payout: Payout) -> dict[str, Any]:
    """data.object of the payout.* events (docs/webhooks.md)."""
    return {
        "id": payout.id,
        "status": payout.status,
        "send_amount": money.format_amount(payout.send_amount),
        "send_currency": payout.send_currency,
        "receive_amount": money.format_amount(payout.receive_amount),
        "receive_currency": payout.receive_currency,
        "operator_code": payout.operator_code,
        "provider_reference": payout.provider_reference or None,
        "wallet_impact": payout.wallet_impact,
        "completed_at": payout.completed_at,
        "failed_at": payout.failed_at,
        "failure_reason": payout.failure_reason or None,
    }


def payout_transition(
    *,
    payout_id: UUID,
    to: str,
    reason: str = "",
    at: datetime,
    provider_reference: str = "",
) -> Payout:
    """The one way a payout changes status: checks the move, writes history, settles or
    releases the reservation and records the event, in one transaction."""
    with transaction.atomic():
        payout = _PAYOUT_LOCKED.first(payout_id)
        if payout is None:
            raise Payout.DoesNotExist(f"No payout {payout_id}.")
        fields = ["status", "updated_at"]
        if provider_reference and not payout.provider_reference:
            payout.provider_reference = provider_reference
            fields.append("provider_reference")
        if payout.status == to:
            if len(fields) > 2:
                rawsql.update(payout, fields[2:])
            return payout
        if to not in PAYOUT_ALLOWED.get(payout.status, ()):
            raise InvalidTransition(f"A {payout.status} payout cannot become {to}.")
        payout.status = to
        payout.updated_at = at
        if to == PayoutStatus.COMPLETED:
            payout.completed_at = at
            fields.append("completed_at")
            kind = "payout_completed"
            lines = [
                (ledger.MERCHANT_RESERVED, -payout.debit_amount),
                (ledger.provider_clearing(payout.operator_code), payout.send_amount),
                (ledger.FEE_REVENUE, payout.total_fee),
            ]
        else:
            payout.failed_at = at
            payout.failure_reason = reason
            fields += ["failed_at", "failure_reason"]
            kind = "payout_released"
            lines = [
                (ledger.MERCHANT_RESERVED, -payout.debit_amount),
                (ledger.MERCHANT_AVAILABLE, payout.debit_amount),
            ]
        rawsql.save_together(
            updates=[(payout, fields)],
            inserts=[PayoutHistory(payout=payout, status=to, reason=reason, created_at=at)],
        )
        ledger.post_journal(
            merchant_id=payout.merchant_id,
            currency=payout.send_currency,
            kind=kind,
            resource_type="payout",
            resource_id=payout.id,
            lines=lines,
            at=at,
        )
        webhook_services.event_record(
            merchant_id=payout.merchant_id,
            event_type=f"payout.{to}",
            data_type="payout",
            data_id=payout.id,
            data_object=payout_snapshot(payout),
            at=at,
        )
        return payout


def payout_submit(*, payout_id: UUID, now: datetime) -> None:
    """Send the disbursement to the provider (idempotent by reference; no lock held)."""
    payout = Payout.objects.get(pk=payout_id)
    # Each call's start is recorded first (submitted_at), and none starts once the payout is
    # final, received or past its timeout: the timeout sweep leaves a payout whose last call
    # started recently, and fails one only while no call has started since it looked.
    started = Payout.objects.filter(
        pk=payout.id,
        status=PayoutStatus.PENDING,
        provider_reference="",
        provider_timeout_at__gt=now,
    ).update(submitted_at=now)
    if not started:
        return
    _payout_send(payout, now=now)


def _payout_send(payout: Payout, *, now: datetime) -> None:
    """The provider call of a pending payout without its receipt yet."""
    try:
        receipt = provider.gateway().submit_disbursement(
            reference=str(payout.id),
            amount=payout.receive_amount,
            currency=payout.receive_currency,
            operator_code=payout.operator_code,
            callback=PAYOUT_CALLBACK,
            **_party_identifier(payout.recipient),
        )
    except provider.ProviderRejected as rejected:
        payout_transition(
            payout_id=payout.id, to=PayoutStatus.FAILED, reason=rejected.reason, at=now
        )
        return
    provider.receipt_answer_deliver(receipt, callback=PAYOUT_CALLBACK, reference=str(payout.id))
    provider_reference_store(
        payout, "provider_reference", receipt.provider_reference, refresh=False
    )


# New payins and payouts wake a submitter (config.shared_cache.wake) instead of each getting a
# task of their own; a submitter whose claim came back full wakes one more. The
# per-payment tasks stay for the sweep of lost submissions and for provider outages.
SUBMITTER_WAKE_KEY = "payments:submitter-wake"
SUBMITTER_CLAIM_SIZE = 10  # payments made a submitter's in one transaction
SUBMITTER_BATCH_LIMIT = 20  # claims; then the task hands over to a fresh one


def _submitter_wake() -> None:
    from payments import tasks

    shared_cache.wake(SUBMITTER_WAKE_KEY, tasks.submit_payments)


# Whether a payout may be waiting for its submission (a timed-out one not failed yet too): a
# payins' claim that says no spares the payouts' claim.
_PAYOUTS_MAY_WAIT = (
    f"EXISTS (SELECT 1 FROM {Payout._meta.db_table} w"  # noqa: S608 (model metadata)
    f" WHERE w.status = '{PayoutStatus.PENDING}' AND w.submitted_at IS NULL"
    " AND w.provider_reference = '')"
)

# The claims of the submitters, oldest first, passing over what another submitter holds; a
# payin with its wallet's id, for an answer that comes with the receipt (_payin_send).
_PAYINS_WAITING = RowReader(
    Payin,
    where=("status",),
    greater_than=("provider_timeout_at",),
    order_by=("created_at",),
    for_update=True,
    skip_locked=True,
    annotations={
        "wallet_id": (_wallet_of(Payin._meta.db_table), []),
        "payouts_may_wait": (_PAYOUTS_MAY_WAIT, []),
    },
)
_PAYOUTS_WAITING = RowReader(
    Payout,
    where=("status", "provider_reference"),
    greater_than=("provider_timeout_at",),
    is_null=("submitted_at",),
    order_by=("created_at",),
    for_update=True,
    skip_locked=True,
)


# The claims on PostgreSQL, one statement each and a transaction of its own. The payins' is
# payin_transition's move created -> pending (status, submitted_at, the history row; the move
# posts nothing and records no event) for every payin it takes, as the ORM path below makes it
# through _payin_move. Built once: the column lists come from the models. The statuses each
# claim looks for are written into the text, not passed: a prepared statement's generic plan
# can then use the partial index of those waiting (a parameter could be any status), and
# PostgreSQL stops planning the statement afresh at every claim.
_CLAIM_STATEMENTS: dict[str, str] = {}


def _claim_statements() -> dict[str, str]:
    if not _CLAIM_STATEMENTS:
        payin, history, payout = (
            Payin._meta.db_table,
            PayinHistory._meta.db_table,
            Payout._meta.db_table,
        )
        _CLAIM_STATEMENTS["payins"] = f"""
WITH waiting AS (
    SELECT id FROM {payin}
    WHERE status = '{PayinStatus.CREATED}' AND provider_timeout_at > %(now)s
    ORDER BY created_at LIMIT %(size)s
    FOR UPDATE SKIP LOCKED
), moved AS (
    UPDATE {payin} p SET status = %(pending)s, updated_at = %(now)s, submitted_at = %(now)s
    FROM waiting WHERE p.id = waiting.id
    RETURNING {_PAYINS_WAITING.columns("p")}, ({_wallet_of("p")}) AS wallet_id
), history AS (
    INSERT INTO {history} (payin_id, status, reason, created_at)
    SELECT id, %(pending)s, %(reason)s, %(now)s FROM moved
)
SELECT *, {_PAYOUTS_MAY_WAIT} FROM moved ORDER BY created_at, id"""  # noqa: S608 (model metadata)
        _CLAIM_STATEMENTS["payouts"] = f"""
WITH waiting AS (
    SELECT id FROM {payout}
    WHERE status = '{PayoutStatus.PENDING}' AND provider_reference = ''
        AND provider_timeout_at > %(now)s
        AND submitted_at IS NULL
    ORDER BY created_at LIMIT %(size)s
    FOR UPDATE SKIP LOCKED
), claimed AS (
    UPDATE {payout} p SET submitted_at = %(now)s
    FROM waiting WHERE p.id = waiting.id
    RETURNING {_PAYOUTS_WAITING.columns("p")}
)
SELECT * FROM claimed ORDER BY created_at, id"""  # noqa: S608 (model metadata)
    return _CLAIM_STATEMENTS


def _submission_claim(*, now: datetime, size: int = SUBMITTER_CLAIM_SIZE) -> list[Payin | Payout]:
    """Up to `size` of the oldest payments waiting for their provider submission, made this
    submitter's: a created payin becomes pending (its history and all), a payout gets its
    submitted_at. SKIP LOCKED, so concurrent submitters never claim the same payment. On
    PostgreSQL one statement for the payins and, when they leave room and a payout may be
    waiting, one for the payouts (no BEGIN/COMMIT round trips); elsewhere one transaction
    through the ORM. A payout committed while the payins' statement ran is left to the next
    claim, which its creation's wake brings (as for a payin committed then)."""
    if connection.vendor == "postgresql":
        statements = _claim_statements()
        claimed: list[Payin | Payout] = _PAYINS_WAITING.read(
            statements["payins"],
            {
                "pending": PayinStatus.PENDING,
                "reason": REASON_SUBMITTED,
                "now": now,
                "size": size,
            },
        )
        # room left, and no payin claimed to say whether a payout may be waiting, or one said so
        if len(claimed) < size and (not claimed or claimed[0].payouts_may_wait):
            claimed += _PAYOUTS_WAITING.read(
                statements["payouts"],
                {"now": now, "size": size - len(claimed)},
            )
        return claimed
    with transaction.atomic():
        claimed: list[Payin | Payout] = [
            _payin_move(payin, to=PayinStatus.PENDING, reason=REASON_SUBMITTED, at=now)
            for payin in _PAYINS_WAITING.all(PayinStatus.CREATED, now, limit=size)
        ]
        if len(claimed) < size:
            for payout in _PAYOUTS_WAITING.all(
                PayoutStatus.PENDING, "", now, limit=size - len(claimed)
            ):
                payout.submitted_at = now
                rawsql.update(payout, ["submitted_at"])
                claimed.append(payout)
        return claimed


# A claimed payment's provider call starts within milliseconds of its claim, whose time is the
# call's recorded start (submitted_at) as the timeout sweep reads it. One that would start later
# (the calls before it in its claim were slow: ten calls in turn, each within the gateway's
# timeouts, can outlast SUBMISSION_IN_FLIGHT_SECONDS) records its start again first.
CLAIM_CALL_SLACK_SECONDS = 1.0


def _claimed_call_start(payment: Payin | Payout, *, now: datetime) -> bool:
    """Record `now` as the start of a claimed payment's provider call, only while it still waits
    for one: pending, without a provider reference, not past its timeout (payout_submit's guard).
    False when it no longer does (the timeout sweep failed it since the claim, say): no call is
    made, as the sweep, which fails a payment only while no call has started since it read it,
    decided without this one."""
    pending = PayinStatus.PENDING if isinstance(payment, Payin) else PayoutStatus.PENDING
    started = (
        type(payment)
        .objects.filter(
            pk=payment.pk, status=pending, provider_reference="", provider_timeout_at__gt=now
        )
        .update(submitted_at=now)
    )
    if started:
        payment.submitted_at = now
    return bool(started)


def payments_submit_waiting(
    *,
    limit: int = SUBMITTER_BATCH_LIMIT,
    linger: float = 0,
    gather: float = 0,
    helper: bool = False,
) -> int:
    """One submitter (the `submit_payments` task): claim the oldest payments waiting for their
    provider submission (up to SUBMITTER_CLAIM_SIZE; a full claim wakes one more submitter),
    submit them one by one; until none is waiting (shared_cache.drain: `linger`, `gather`,
    `helper`).
    Returns how many claims it made. A provider outage hands the payment to its own task,
    which retries with backoff; a payment whose submission failed otherwise is left to the
    sweep of lost submissions, and the others of its claim go on."""
    from payments import tasks

    def claim() -> tuple[datetime, list[Payin | Payout]] | None:
        now = timezone.now()
        payments = _submission_claim(now=now)
        return (now, payments) if payments else None

    def submit_one(payment: Payin | Payout, now: datetime) -> None:
        started = timezone.now()
        if started - now > timedelta(seconds=CLAIM_CALL_SLACK_SECONDS) and not _claimed_call_start(
            payment, now=started
        ):
            return  # failed by the timeout sweep, answered or past its timeout since the claim
        try:
            if isinstance(payment, Payin):
                _payin_send(payment, now=now)
            else:
                _payout_send(payment, now=now)
        except provider.ProviderUnavailable:
            retry = tasks.submit_payin if isinstance(payment, Payin) else tasks.submit_payout
            kwargs = {f"{type(payment).__name__.lower()}_id": str(payment.id)}
            try:
                retry.delay(**kwargs)  # it retries with backoff
            except BrokerError:  # the sweep of lost submissions resubmits it
                logger.warning("Provider down and broker unreachable; %s left to the sweep", kwargs)

    def submit(claimed: tuple[datetime, list[Payin | Payout]]) -> None:
        now, payments = claimed
        with shared_cache.wakes_deferred():  # the webhook sender, once for the claim
            for payment in payments:
                try:
                    submit_one(payment, now)
                except Exception:
                    logger.exception(
                        "Submission of %s %s failed; left to the sweep of lost submissions",
                        type(payment).__name__.lower(),
                        payment.id,
                    )

    def full(claimed: tuple[datetime, list[Payin | Payout]]) -> bool:
        """A full claim may have left payments waiting (for another submitter, or this one's
        next claim); a short one left none."""
        return len(claimed[1]) >= SUBMITTER_CLAIM_SIZE

    return shared_cache.drain(
        SUBMITTER_WAKE_KEY,
        tasks.submit_payments,
        claim=claim,
        more=full,
        rest=full,
        handle=submit,
        limit=limit,
        linger=linger,
        gather=gather,
        helper=helper,
    )


class PayoutNotStuck(DomainError):
    status = 409
    reason = "invalid_transition"
    message = (
        "Only a payout stuck at the provider can be marked failed: pending, received by the "
        "provider (it has a provider reference) and past its provider timeout."
    )


def payout_mark_failed(*, payout_id: UUID, actor: Any, now: datetime) -> Payout:
    """Support: fail a payout stuck at the provider (reason marked_failed_by_support) once the
    provider has confirmed out of band that it did not pay: the reservation is released and
    payout.failed sent, as for a provider's decline, and the audit log records who did it, in
    the same transaction. A later answer from the provider becomes a ProviderDiscrepancy.
    Stuck means pending, past its provider timeout and received by the provider: one without
    a provider reference may be on its way to the provider right now (the submitter calls it
    without a lock), and releasing its reservation then would let it be paid unfunded."""
    with transaction.atomic():
        # locked first: of two racing clicks the second sees the payout failed and is refused
        stuck = Payout.objects.select_for_update().filter(
            pk=payout_id, status=PayoutStatus.PENDING, provider_timeout_at__lte=now
        )
        if not stuck.exclude(provider_reference="").exists():
            raise PayoutNotStuck()
        payout = payout_transition(
            payout_id=payout_id, to=PayoutStatus.FAILED, reason=REASON_MARKED_FAILED, at=now
        )
        merchant_services.audit_record(
            merchant=payout.merchant,
            actor=actor,
            action="support.action",
            target=str(payout.id),
            detail={"action": "payout.mark_failed"},
        )
    return payout


def payout_apply_provider_result(
    *, reference: str, provider_reference: str, outcome: str, reason: str, at: datetime
) -> None:
    """The provider's answer for a disbursement (gateway callback)."""
    to = PayoutStatus.COMPLETED if outcome == provider.COMPLETED else PayoutStatus.FAILED
    try:
        payout_transition(
            payout_id=UUID(reference),
            to=to,
            reason=reason if to == PayoutStatus.FAILED else "",
            at=at,
            provider_reference=provider_reference,
        )
    except InvalidTransition:
        _late_answer_ignored(
            payment=Payout.objects.get(pk=UUID(reference)),
            resource_type="payout",
            provider_reference=provider_reference,
            outcome=outcome,
            reason=reason,
            at=at,
        )


# Longer than any provider call takes (the gateway's own timeouts are far shorter): a payment
# whose last call started this recently and has no receipt yet may still be on its way.
SUBMISSION_IN_FLIGHT_SECONDS = 300


def call_may_be_in_flight(last_call: datetime | None, *, now: datetime) -> bool:
    """Whether a provider call started at `last_call` (None: none started) may not have ended
    yet."""
    window = timedelta(seconds=SUBMISSION_IN_FLIGHT_SECONDS)
    return last_call is not None and now - last_call < window


def same_time(field: str, value: datetime | None) -> dict[str, Any]:
    """A filter that `field` still holds `value` (NULL included)."""
    return {f"{field}__isnull": True} if value is None else {field: value}


def payments_fail_timed_out(*, now: datetime) -> int:
    """Fail every payin/payout leg still waiting for the provider past provider_timeout_at,
    with reason provider_timeout, unless the provider, asked first about a leg it received
    (its reference), has an answer for it (then that answer is applied), or it is a payout the
    provider cannot be asked about, or a leg without a receipt whose last call started too
    recently to have ended (left pending). Each one in its own transaction; returns how many
    failed."""
    payins = Payin.objects.filter(
        status__in=[PayinStatus.CREATED, PayinStatus.PENDING], provider_timeout_at__lte=now
    ).values_list("id", "provider_reference", "submitted_at", "source")
    payouts = Payout.objects.filter(
        status=PayoutStatus.PENDING, provider_timeout_at__lte=now
    ).values_list("id", "provider_reference", "submitted_at", "recipient")
    legs = (
        (
            Payin,
            payins,
            provider.COLLECTION,
            PAYIN_CALLBACK,
            lambda payment_id: payin_transition(
                payin_id=payment_id, to=PayinStatus.FAILED, reason=REASON_PROVIDER_TIMEOUT, at=now
            ),
        ),
        (
            Payout,
            payouts,
            provider.DISBURSEMENT,
            PAYOUT_CALLBACK,
            lambda payment_id: payout_transition(
                payout_id=payment_id, to=PayoutStatus.FAILED, reason=REASON_PROVIDER_TIMEOUT, at=now
            ),
        ),
    )
    failed = 0
    for model, rows, kind, callback, fail in legs:
        for payment_id, provider_reference, submitted_at, party in list(rows):
            failed += _timed_out(
                model,
                payment_id,
                provider_reference,
                submitted_at,
                party,
                kind=kind,
                callback=callback,
                fail=fail,
                now=now,
            )
    return failed


def _timed_out(
    model: type[Payin] | type[Payout],
    payment_id: UUID,
    provider_reference: str,
    submitted_at: datetime | None,
    party: dict[str, Any],
    *,
    kind: str,
    callback: str,
    fail: Callable[[UUID], Any],
    now: datetime,
) -> int:
    """1 when the payment's leg was failed for its timeout; 0 when the provider's answer was
    applied instead, someone answered in between, or the leg is left for the next run."""
    try:
        if provider_reference:  # received: the provider knows it by our reference
            if provider.answer_before_timeout(
                kind=kind,
                reference=str(payment_id),
                callback=callback,
                party=_party_identifier(party),
                at=now,
            ):
                return 0
            fail(payment_id)
            return 1
        if call_may_be_in_flight(submitted_at, now=now):
            # its last call may still reach the provider: failing it would free a payout's
            # money, or tell the merchant a payin failed that the payer is charged for
            return 0
        with transaction.atomic():  # unless a call started, or its receipt came, since read
            unchanged = model.objects.select_for_update().filter(
                pk=payment_id, provider_reference="", **same_time("submitted_at", submitted_at)
            )
            if not unchanged.exists():
                return 0  # the next run decides
            fail(payment_id)
            return 1
    except InvalidTransition:
        return 0  # answered in between
    except provider.DisbursementOutcomeUnknown as unknown:
        logger.error("Timeout sweep: %s (%r); left pending", unknown, unknown.__cause__)
        return 0
    except Exception:  # one leg's trouble must not hold up every other leg's timeout
        logger.exception("Timeout sweep: %s %s left for the next run", kind, payment_id)
        return 0


RESUBMIT_AFTER_SECONDS = 60


def payments_stale_submissions(*, now: datetime) -> tuple[list[UUID], list[UUID]]:
    """(payin ids, payout ids) whose provider submission should have happened by now but has
    not (the enqueue after commit was lost): created payins, and legs without a provider
    reference, older than RESUBMIT_AFTER_SECONDS and not yet due for the timeout."""
    before = now - timedelta(seconds=RESUBMIT_AFTER_SECONDS)
    payins = Payin.objects.filter(
        Q(status=PayinStatus.CREATED) | Q(status=PayinStatus.PENDING, provider_reference=""),
        created_at__lte=before,
        provider_timeout_at__gt=now,
    ).values_list("id", flat=True)
    payouts = Payout.objects.filter(
        status=PayoutStatus.PENDING,
        provider_reference="",
        created_at__lte=before,
        provider_timeout_at__gt=now,
    ).values_list("id", flat=True)
    return list(payins), list(payouts)
