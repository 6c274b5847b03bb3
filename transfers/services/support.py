"""Support actions on a transfer, each audited in the transaction of its transition: mark a
stuck disbursement failed, apply a provider's late "completed", return the collected funds."""

from datetime import datetime
from typing import Any
from uuid import UUID

from django.db import transaction

from core import money
from core.exceptions import DomainError
from core.transitions import InvalidTransition
from merchants import services as merchant_services
from payments import provider
from payments import selectors as payment_selectors
from payments.ledger.adjustments import discrepancy_settlement_hint
from payments.ledger.discrepancies import (
    provider_discrepancy_lock,
    provider_discrepancy_mark_resolved,
)
from payments.models import ProviderDiscrepancy
from transfers.models import Transfer
from transfers.services.relaunch import unreconciled_provider_answer
from transfers.services.submission import disbursement_reference
from transfers.services.transitions import (
    COLLECTED_FUNDS_RETURNED,
    DISBURSEMENT_FAILED,
    DISBURSING,
    FUNDS_RETURNED,
    PROVIDER_COMPLETION_APPLIED,
    REASON_COLLECTED_FUNDS_RETURNED,
    REASON_MARKED_FAILED,
    REASON_PROVIDER_COMPLETION_APPLIED,
    is_relaunchable,
    state_of,
    transfer_transition,
)


class ProviderCompletionNotApplicable(DomainError):
    status = 409
    reason = "provider_completion_not_applicable"
    message = (
        'Only an unresolved "completed" answer for the current disbursement attempt of a '
        "transfer whose disbursement leg failed can be applied."
    )


class CollectedFundsNotReturnable(DomainError):
    status = 409
    reason = "collected_funds_not_returnable"
    message = (
        "Only the collected funds of a transfer whose disbursement leg failed (status failed, "
        "payin_status completed, payout_status failed) can be returned to the merchant's wallet."
    )


def _completion_refusal(transfer: Transfer | None, discrepancy: ProviderDiscrepancy) -> str:
    """Why the provider's "completed" of this discrepancy cannot complete the transfer, as a
    refusal's message ("" when it can), checked under both rows' locks."""
    if discrepancy.resolved_at is not None:
        return (
            f"This discrepancy was already resolved by {discrepancy.resolved_by or 'support'}"
            f" at {discrepancy.resolved_at.isoformat(timespec='seconds')}."
        )
    if discrepancy.provider_outcome != provider.COMPLETED:
        return (
            f'The provider answered "{discrepancy.provider_outcome}", not "completed": '
            "there is no completion to apply."
        )
    if transfer is None:
        return "The discrepancy's transfer does not exist."
    if state_of(transfer) == FUNDS_RETURNED:
        return (
            "This transfer's collected funds were returned to the merchant's wallet: it can "
            "no longer complete. If the provider did pay the recipient, the merchant holds "
            "that money twice: ops take it back with debit_wallet --discrepancy, which "
            "resolves the discrepancy (mark it resolved if the provider did not pay)."
        )
    if not is_relaunchable(transfer):
        return (
            "Only a transfer whose disbursement leg failed (status failed, payin_status "
            f"completed, payout_status failed) can complete; this one is {transfer.status} "
            f"with payin_status {transfer.payin_status} and payout_status "
            f"{transfer.payout_status}."
        )
    current = disbursement_reference(transfer.id, transfer.disbursement_attempt)
    if discrepancy.reference != current:
        return (
            f"The answer is for disbursement attempt {discrepancy.reference}, not the "
            f"current one ({current}): that attempt's recipient, amount or operator may not "
            "be the transfer's now. Reconcile it by hand, then mark it resolved."
        )
    return ""


def _audit(transfer: Transfer, *, actor: Any, detail: dict[str, Any]) -> None:
    merchant_services.audit_record(
        merchant=transfer.merchant,
        actor=actor,
        action="support.action",
        target=str(transfer.id),
        detail=detail,
    )


def disbursement_stuck(transfer: Transfer, *, now: datetime) -> bool:
    """In flight, received by the provider (it has a disbursement reference) and past its leg
    timeout: what support may mark failed."""
    return (
        state_of(transfer) == DISBURSING
        and bool(transfer.disbursement_reference)
        and transfer.leg_timeout_at <= now
    )


def transfer_mark_disbursement_failed(*, transfer_id: UUID, actor: Any, now: datetime) -> Transfer:
    """Support: fail a disbursement leg stuck at the provider (reason marked_failed_by_support),
    recorded in the audit log with who did it. The money stays in transfer_suspense until a
    relaunch, or until support returns it to the merchant's wallet. Stuck means: the provider
    received the attempt (it has a disbursement reference) and it is past its leg timeout; an
    attempt without a reference may be on its way to the provider right now, and one relaunched
    after a leg failed too early may be paid twice. 409 otherwise."""
    with transaction.atomic():
        transfer = Transfer.objects.select_for_update().get(pk=transfer_id)
        if state_of(transfer) != DISBURSING:
            raise InvalidTransition(
                "Only a transfer whose disbursement leg is in flight (disbursing) can have it "
                f"marked failed; this one is {transfer.status}."
            )
        if not disbursement_stuck(transfer, now=now):
            raise InvalidTransition(
                "Only a disbursement stuck at the provider can be marked failed: received by "
                "the provider (it has a disbursement reference) and past its leg timeout."
            )
        transfer = transfer_transition(
            transfer_id=transfer_id, to=DISBURSEMENT_FAILED, reason=REASON_MARKED_FAILED, at=now
        )
        _audit(
            transfer,
            actor=actor,
            detail={
                "action": "transfer.mark_disbursement_failed",
                "disbursement_attempt": transfer.disbursement_attempt,
            },
        )
    return transfer


def transfer_apply_provider_completion(
    *, discrepancy_id: UUID, actor: Any, now: datetime
) -> Transfer:
    """Support: the provider's "completed" for a disbursement attempt we had failed (timeout
    sweep, or marked failed by support) is true, so the transfer completes as that answer would
    have (the move provider_completion_applied: its journals and events); the discrepancy is
    resolved by the actor and the action audited, all in one transaction.

    Only an unresolved "completed" transfer_disbursement discrepancy for the transfer's
    current attempt, with the transfer failed / payin completed / payout failed; 409
    provider_completion_not_applicable otherwise, changing nothing. The transfer is locked
    first, then the discrepancy, and both are checked under the locks: of two clicks, or a
    click and a relaunch, a provider answer or a "Mark resolved", one wins."""
    refused = ProviderCompletionNotApplicable
    with transaction.atomic():
        # resource_type, resource_id and merchant never change: read without a lock, so the
        # transfer's row is locked before the discrepancy's, as every transfer action does.
        found = payment_selectors.provider_discrepancy_subject(discrepancy_id=discrepancy_id)
        if found is None:
            raise refused("The discrepancy does not exist.")
        resource_type, transfer_id, merchant_id, outcome = found
        if resource_type != "transfer_disbursement":
            raise refused(
                "Only a transfer disbursement's discrepancy can be applied; this one is about "
                f"a {resource_type.replace('_', ' ')}: "
                f"{discrepancy_settlement_hint(resource_type, outcome)}."
            )
        transfer = (
            Transfer.objects.select_for_update(of=("self",))
            .filter(pk=transfer_id, merchant_id=merchant_id)
            .first()
        )
        discrepancy = provider_discrepancy_lock(discrepancy_id=discrepancy_id)
        if refusal := _completion_refusal(transfer, discrepancy):
            raise refused(refusal)
        transfer = transfer_transition(
            transfer_id=transfer.id,
            to=PROVIDER_COMPLETION_APPLIED,
            reason=REASON_PROVIDER_COMPLETION_APPLIED,
            at=now,
            provider_reference=discrepancy.provider_reference,
            attempt=transfer.disbursement_attempt,
        )
        provider_discrepancy_mark_resolved(discrepancy=discrepancy, by=actor.get_username(), at=now)
        _audit(
            transfer,
            actor=actor,
            detail={
                "action": "transfer.provider_completion_applied",
                "discrepancy": str(discrepancy.id),
                "disbursement_attempt": transfer.disbursement_attempt,
                "provider_reference": discrepancy.provider_reference,
            },
        )
    return transfer


def _already_returned(transfer: Transfer) -> str:
    returned_at = (
        transfer.history.filter(reason=REASON_COLLECTED_FUNDS_RETURNED)
        .values_list("created_at", flat=True)
        .first()
    )
    when = f" at {returned_at.isoformat(timespec='seconds')}" if returned_at else ""
    return f"This transfer's collected funds were already returned to the merchant's wallet{when}."


def transfer_return_collected_funds(*, transfer_id: UUID, actor: Any, now: datetime) -> Transfer:
    """Support: give up a failed disbursement and return the money collected for it, held in
    transfer_suspense, to the merchant's available balance in the payin currency, in full (no
    fee: the transfer never completed). The move collected_funds_returned of the one transition
    function (failed / completed / failed -> failed / completed / cancelled, history reason
    collected_funds_returned_by_support) posts the journal transfer_returned and records
    transfer.failed; the action is audited, all in one transaction. The transfer can then never
    be relaunched nor returned again.

    Only for a transfer failed / payin completed / payout failed whose failed disbursement the
    provider has not reported paid (an unresolved "completed" ProviderDiscrepancy: the recipient
    may have the money, as for a relaunch) and whose completed collection it has not reported
    failed (an unresolved "failed" one: the money may never have been collected); 409
    collected_funds_not_returnable otherwise, changing nothing. The transfer is locked first and
    checked under the lock, so of a return racing a relaunch, another return or a provider
    answer, one wins."""
    refused = CollectedFundsNotReturnable
    with transaction.atomic():
        transfer = (
            Transfer.objects.select_for_update(of=("self",))
            .select_related("merchant")
            .filter(pk=transfer_id)
            .first()
        )
        if transfer is None:
            raise refused("The transfer does not exist.")
        if state_of(transfer) == FUNDS_RETURNED:
            raise refused(_already_returned(transfer))
        if not is_relaunchable(transfer):
            raise refused(
                f"{refused.message} This one is {transfer.status} with payin_status "
                f"{transfer.payin_status} and payout_status {transfer.payout_status}."
            )
        if unreconciled := unreconciled_provider_answer(
            transfer, moving="returning it to the merchant's wallet"
        ):
            raise refused(unreconciled)
        transfer = transfer_transition(
            transfer_id=transfer.id,
            to=COLLECTED_FUNDS_RETURNED,
            reason=REASON_COLLECTED_FUNDS_RETURNED,
            at=now,
        )
        _audit(
            transfer,
            actor=actor,
            detail={
                "action": "transfer.collected_funds_returned",
                "amount": money.format_amount(transfer.payin_amount),
                "currency": transfer.payin_currency,
                "disbursement_attempt": transfer.disbursement_attempt,
            },
        )
    return transfer
