"""Manual adjustments of a wallet (ops: credit_wallet, debit_wallet), and the provider
discrepancies they settle. Apps above payments add the discrepancies of their own resources
they settle with settlement_register() from their AppConfig.ready()."""

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from uuid import UUID

from django.db import models, transaction

from core import money
from core.exceptions import DomainError
from merchants import selectors as merchant_selectors
from merchants import services as merchant_services
from merchants.models import AuditAction, Merchant
from payments import provider
from payments.ledger.accounts import ADJUSTMENTS, MERCHANT_AVAILABLE
from payments.ledger.journals import post_journal
from payments.models import (
    Journal,
    Payin,
    PayinStatus,
    Payout,
    PayoutStatus,
    ProviderDiscrepancy,
    Refund,
    RefundStatus,
    Wallet,
)


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
class Settles:
    """A provider discrepancy an adjustment settles: an unresolved "completed" answer about one
    of the merchant's `resource_type`s, the resource (of `model`) in `state`, which is final, in
    its `currency_field`, for no more than its `amount_field`."""

    resource_type: str
    model: type[models.Model]
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


@dataclass
class _Adjustment:
    """A manual adjustment's direction, and the provider discrepancies it may settle."""

    command: str  # the ops command; a settled discrepancy's resolved_by
    action: str  # the audit entry's detail action
    sign: int  # +1 into the available balance, -1 out of it
    nothing: str  # why another provider outcome leaves nothing to settle
    refused: type[DomainError]
    settles: list[Settles] = field(default_factory=list)


_CREDIT = _Adjustment(
    command="credit_wallet",
    action="wallet_credited",
    sign=1,
    settles=[
        Settles(
            resource_type="payin",
            model=Payin,
            state={"status": PayinStatus.FAILED},
            only="a payin we failed",
            what="payin",
            currency_field="receive_currency",  # as its payin_completed journal
            amount_field="receive_amount",
            at_most="the payin would have credited the wallet, net of its fee",
        ),
    ],
    nothing="it collected nothing to credit",
    refused=DiscrepancyNotCreditable,
)


# The resolved_by of a discrepancy a debit settled: the provider did pay (a refund's payer has
# the money, so the refund still counts against its payin).
DEBIT_COMMAND = "debit_wallet"

_DEBIT = _Adjustment(
    command=DEBIT_COMMAND,
    action="wallet_debited",
    sign=-1,
    settles=[
        Settles(
            resource_type="payout",
            model=Payout,
            state={"status": PayoutStatus.FAILED},
            only="a payout we failed",
            what="payout",
            currency_field="send_currency",
            amount_field="debit_amount",
            at_most="the payout took from the wallet",
        ),
        Settles(
            resource_type="refund",
            model=Refund,
            state={"status": RefundStatus.FAILED},
            only="a refund we failed",
            what="refund",
            currency_field="currency",
            amount_field="amount",
            at_most="the refund took from the wallet",
        ),
    ],
    nothing="it paid nothing to take back",
    refused=DiscrepancyNotDebitable,
)


_ADJUSTMENTS = {"credit": _CREDIT, "debit": _DEBIT}


def settlement_register(*, direction: str, settles: Settles) -> None:
    """An app above payments adds a discrepancy of its own resources that a credit or a debit
    (`direction`) settles."""
    adjustment = _ADJUSTMENTS[direction]
    if all(known.resource_type != settles.resource_type for known in adjustment.settles):
        adjustment.settles.append(settles)


def _settled_by(resource_type: str) -> tuple[_Adjustment, Settles] | None:
    for adjustment in (_CREDIT, _DEBIT):
        for settles in adjustment.settles:
            if settles.resource_type == resource_type:
                return adjustment, settles
    return None


def discrepancy_settlement_hint(resource_type: str, outcome: str) -> str:
    """What settles a discrepancy about a `resource_type` whose provider answered `outcome`,
    for a refusal's message."""
    found = _settled_by(resource_type)
    if outcome == provider.COMPLETED and found is not None:
        adjustment, settles = found
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
    return post_journal(
        merchant_id=merchant.pk,
        currency=currency,
        kind="adjustment",
        resource_type="adjustment",
        resource_id=resource_id,
        lines=[(ADJUSTMENTS, -amount), (MERCHANT_AVAILABLE, amount)],
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
    settles, and audit it, in one transaction. With a reference (an ops ticket or run id) the
    journal's resource_id derives from it: one adjustment per merchant and reference; a rerun
    changes nothing (already applied, or AdjustmentReferenceUsed when it asks otherwise), and
    racing runs take turns on the merchant's row, before the discrepancy and the wallet."""
    reason = _adjustment_reason(currency=currency, amount=amount, reason=reason)
    resource_id = uuid.uuid4()
    if reference is not None:
        reference = _adjustment_reference(reference)
        resource_id = adjustment_resource_id(merchant_id=merchant.pk, reference=reference)
    asked = {
        "adjustment": adjustment,
        "merchant": merchant,
        "currency": currency,
        "amount": amount,
        "discrepancy_id": discrepancy_id,
    }
    with transaction.atomic():
        if reference is not None:
            merchant_services.merchant_turn(merchant.pk)
            applied = _applied_before(
                **asked, reason=reason, reference=reference, resource_id=resource_id
            )
            if applied:
                wallet = Wallet.objects.get(merchant=merchant, currency=currency)
                return Adjusted(wallet=wallet, already_applied=True)
        discrepancy = None
        if discrepancy_id is not None:  # locked before the wallet, as a transfer action does
            discrepancy = _discrepancy_to_settle(**asked)
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
    posted = journal.lines.get(account__code=MERCHANT_AVAILABLE).amount
    detail = merchant_selectors.wallet_adjustment_audit_detail(
        merchant=merchant, journal_id=journal.id
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
    one of the merchant's resources of a kind the adjustment settles (Settles), checked by
    _check_settleable. Those states are final, so the resource is read without a lock, except
    where it is settled once whichever of its discrepancies (Settles.once): its row is locked
    first, before the discrepancy's, so of two settling two of its discrepancies at once, the
    second sees the first. The adjustment's refusal otherwise."""
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
        names = [s.resource_type.replace("_", " ") for s in adjustment.settles]
        kinds = " or a ".join([", a ".join(names[:-1]), names[-1]] if len(names) > 1 else names)
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
    _check_settleable(
        adjustment=adjustment,
        settles=settles,
        discrepancy=discrepancy,
        merchant=merchant,
        currency=currency,
        amount=amount,
    )
    return discrepancy


def _check_settleable(
    *,
    adjustment: _Adjustment,
    settles: Settles,
    discrepancy: ProviderDiscrepancy,
    merchant: Merchant,
    currency: str,
    amount: Decimal,
) -> None:
    """The discrepancy's resource is in the state that leaves it to settle, not settled yet
    (Settles.once), in this currency, for no more than its limit; the refusal otherwise."""
    refused = adjustment.refused
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
