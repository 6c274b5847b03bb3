"""The two legs at the provider: submit a collection or a disbursement attempt (no lock held
during the call) and apply the provider's answers through transfer_transition."""

import logging
from datetime import datetime
from typing import Any
from uuid import UUID

from django.db import transaction

from core.transitions import InvalidTransition
from payments import provider
from payments.ledger.discrepancies import provider_discrepancy_record
from payments.services.parties import party_identifier
from payments.services.submission import provider_reference_store
from payments.services.sweeps import poll_first_at
from transfers.models import Transfer, TransferStatus
from transfers.services.transitions import (
    COLLECTING,
    COLLECTION_COMPLETED,
    COLLECTION_FAILED,
    COLLECTION_SUBMITTED,
    CREATED,
    DISBURSEMENT_COMPLETED,
    DISBURSEMENT_FAILED,
    DISBURSING,
    REASON_COLLECTION_COMPLETED,
    REASON_COLLECTION_SUBMITTED,
    REASON_DISBURSEMENT_COMPLETED,
    StaleDisbursementAnswer,
    state_of,
    transfer_transition,
)

logger = logging.getLogger("cowry.transfers")

# The legs whose answers the provider brings back (payments.provider.ANSWER_APPLIERS).
COLLECTION_CALLBACK = "transfer_collection"
DISBURSEMENT_CALLBACK = "transfer_disbursement"


def disbursement_reference(transfer_id: UUID, attempt: int) -> str:
    """Our reference of one disbursement attempt: a relaunch is a new provider transaction."""
    return f"{transfer_id}:{attempt}"


def transfer_submit_collection(*, transfer_id: UUID, now: datetime) -> Transfer:
    """Send the collection leg to the provider (idempotent: a retried task resubmits the same
    reference). The transfer is `collecting` before the call; no lock is held during it."""
    transfer = Transfer.objects.get(pk=transfer_id)
    # Each call's start is recorded first (collection_submitted_at), and none starts once the
    # leg is answered, received or past its timeout, as for a disbursement: the timeout sweep
    # leaves a collection whose last call started recently, and fails one only while no call
    # has started since it looked, so a payer is not charged for a transfer.failed.
    started = False
    if state_of(transfer) == CREATED:
        if transfer.leg_timeout_at <= now:  # never sent in time: the timeout sweep fails it
            return transfer
        try:
            transfer = transfer_transition(  # records the start, with a fresh leg timeout
                transfer_id=transfer.id,
                to=COLLECTION_SUBMITTED,
                reason=REASON_COLLECTION_SUBMITTED,
                at=now,
            )
        except InvalidTransition:  # the timeout sweep failed it since it was read
            return Transfer.objects.get(pk=transfer_id)
        started = transfer.collection_submitted_at == now  # not another submission's move
    if state_of(transfer) != COLLECTING or transfer.collection_reference:
        return transfer
    # A real operator's leg is first polled PROVIDER_POLL_AFTER_SECONDS after its call.
    first_poll = poll_first_at(connection=transfer.collection_connection, now=now)
    if started and first_poll is not None:
        Transfer.objects.filter(
            pk=transfer.id, status=TransferStatus.COLLECTING, collection_reference=""
        ).update(leg_poll_at=first_poll)
    if not started and not (
        Transfer.objects.filter(
            pk=transfer.id,
            status=TransferStatus.COLLECTING,
            collection_reference="",
            leg_timeout_at__gt=now,
        ).update(collection_submitted_at=now, leg_poll_at=first_poll)
    ):
        return transfer
    try:
        receipt = provider.gateway(transfer.collection_connection).submit_collection(
            reference=str(transfer.id),
            amount=transfer.payin_amount,
            currency=transfer.payin_currency,
            operator_code=transfer.payer_operator_code,
            callback=COLLECTION_CALLBACK,
            **party_identifier(transfer.payer),
        )
    except provider.ProviderRejected as rejected:
        return apply_quietly(
            transfer_id=transfer.id, to=COLLECTION_FAILED, reason=rejected.reason, at=now
        )
    provider.receipt_answer_deliver(
        receipt, callback=COLLECTION_CALLBACK, reference=str(transfer.id)
    )
    provider_reference_store(transfer, "collection_reference", receipt.provider_reference)
    return transfer


def transfer_submit_disbursement(*, transfer_id: UUID, attempt: int, now: datetime) -> Transfer:
    """Send disbursement attempt `attempt` to the provider. Does nothing when the transfer is
    not waiting for that attempt (a replaced attempt, an answer already in)."""
    transfer = Transfer.objects.get(pk=transfer_id)
    if (
        state_of(transfer) != DISBURSING
        or transfer.disbursement_attempt != attempt
        or transfer.disbursement_reference
    ):
        return transfer
    # Each call's start is recorded first, and none starts once this attempt is answered,
    # received, replaced or past its timeout: the timeout sweep leaves an attempt whose last call
    # started recently, and fails one only while no call has started since it looked.
    started = Transfer.objects.filter(
        pk=transfer.id,
        status=TransferStatus.DISBURSING,
        disbursement_attempt=attempt,
        disbursement_reference="",
        leg_timeout_at__gt=now,
    ).update(
        disbursement_submitted_at=now,
        leg_poll_at=poll_first_at(connection=transfer.disbursement_connection, now=now),
    )
    if not started:
        return transfer
    try:
        receipt = provider.gateway(transfer.disbursement_connection).submit_disbursement(
            reference=disbursement_reference(transfer.id, attempt),
            amount=transfer.payout_amount,
            currency=transfer.payout_currency,
            operator_code=transfer.recipient_operator_code,
            callback=DISBURSEMENT_CALLBACK,
            **party_identifier(transfer.recipient),
        )
    except provider.ProviderRejected as rejected:
        return apply_quietly(
            transfer_id=transfer.id,
            to=DISBURSEMENT_FAILED,
            reason=rejected.reason,
            at=now,
            attempt=attempt,
        )
    provider.receipt_answer_deliver(
        receipt,
        callback=DISBURSEMENT_CALLBACK,
        reference=disbursement_reference(transfer.id, attempt),
    )
    provider_reference_store(
        transfer,
        "disbursement_reference",
        receipt.provider_reference,
        disbursement_attempt=attempt,
    )
    return transfer


def apply_quietly(**kwargs) -> Transfer | None:
    """A provider answer that no longer fits (late, stale) is logged and changes nothing."""
    try:
        return transfer_transition(**kwargs)
    except (InvalidTransition, StaleDisbursementAnswer) as exc:
        logger.warning("Provider answer ignored for transfer %s: %s", kwargs["transfer_id"], exc)
        return None


def _apply_answer(
    *, leg: str, reference: str, outcome: str, provider_reason: str, **transition: Any
) -> None:
    """Apply a provider answer; one that no longer fits changes nothing, and one that
    contradicts what we recorded (money moved that our books do not show, or the reverse, or a
    superseded disbursement attempt that paid after all) is kept for support to reconcile, in
    the same transaction and under the transfer's row lock: a relaunch waiting for that lock
    then sees a "paid after all" and is refused."""
    with transaction.atomic():
        # Taken before the transition's savepoint, whose rollback would release it.
        list(
            Transfer.objects.select_for_update()
            .filter(pk=transition["transfer_id"])
            .values_list("pk", flat=True)
        )
        try:
            transfer_transition(**transition)
            return
        except (InvalidTransition, StaleDisbursementAnswer) as exc:
            logger.warning(
                "Provider answer ignored for transfer %s: %s", transition["transfer_id"], exc
            )
            stale = isinstance(exc, StaleDisbursementAnswer)
        transfer = Transfer.objects.select_related("merchant").get(pk=transition["transfer_id"])
        ours = transfer.payin_status if leg == "collection" else transfer.payout_status
        if stale:
            ours = "superseded"
        contradicts = (outcome == provider.COMPLETED and ours != provider.COMPLETED) or (
            outcome == provider.FAILED and ours == provider.COMPLETED
        )
        if contradicts:
            provider_discrepancy_record(
                merchant=transfer.merchant,
                resource_type=f"transfer_{leg}",
                resource_id=transfer.id,
                reference=reference,
                provider_reference=transition.get("provider_reference", ""),
                outcome=outcome,
                reason=provider_reason,
                our_status=ours,
                at=transition["at"],
            )


@provider.answer_applier(COLLECTION_CALLBACK)
def transfer_apply_collection_result(
    *, reference: str, provider_reference: str, outcome: str, reason: str, at: datetime
) -> None:
    """Gateway callback for the collection leg."""
    completed = outcome == provider.COMPLETED
    _apply_answer(
        leg="collection",
        reference=reference,
        outcome=outcome,
        provider_reason=reason,
        transfer_id=UUID(reference),
        to=COLLECTION_COMPLETED if completed else COLLECTION_FAILED,
        reason=REASON_COLLECTION_COMPLETED if completed else reason,
        at=at,
        provider_reference=provider_reference,
    )


@provider.answer_applier(DISBURSEMENT_CALLBACK)
def transfer_apply_disbursement_result(
    *, reference: str, provider_reference: str, outcome: str, reason: str, at: datetime
) -> None:
    """Gateway callback for a disbursement attempt (reference `<transfer_id>:<attempt>`)."""
    transfer_id, _, attempt = reference.partition(":")
    completed = outcome == provider.COMPLETED
    _apply_answer(
        leg="disbursement",
        reference=reference,
        outcome=outcome,
        provider_reason=reason,
        transfer_id=UUID(transfer_id),
        to=DISBURSEMENT_COMPLETED if completed else DISBURSEMENT_FAILED,
        reason=REASON_DISBURSEMENT_COMPLETED if completed else reason,
        at=at,
        provider_reference=provider_reference,
        attempt=int(attempt),
    )
