"""The transfer state machine: MOVES, the table of allowed moves, and transfer_transition, the
one function that applies a move.

A state is (status, payin_status, payout_status), so the two legs move through the transfer's
own transition: each move names its sources, its target, the small effect that sets the leg's
columns, and the webhook events it records. Every move writes a history row, records its
events and posts its journals in the transaction that makes it.
"""

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from django.db import transaction

from core import jobs
from core.exceptions import DomainError
from core.transactions import log_on_commit
from payments.services.parties import provider_timeout_at
from payments.services.transitions import InvalidTransition
from transfers.models import (
    LegStatus,
    Transfer,
    TransferDisbursementAttempt,
    TransferHistory,
    TransferStatus,
)
from transfers.services import events, postings

logger = logging.getLogger("cowry.transfers")

REASON_CREATED = "created"
REASON_COLLECTION_SUBMITTED = "collection_submitted"
REASON_COLLECTION_COMPLETED = "collection_completed"
REASON_DISBURSEMENT_COMPLETED = "disbursement_completed"
REASON_PAYOUT_RELAUNCHED = "payout_relaunched"
REASON_PROVIDER_TIMEOUT = "provider_timeout"
REASON_MARKED_FAILED = "marked_failed_by_support"
REASON_PROVIDER_COMPLETION_APPLIED = "provider_completion_applied_by_support"
REASON_COLLECTED_FUNDS_RETURNED = "collected_funds_returned_by_support"


class TransferNotRelaunchable(DomainError):
    status = 409
    reason = "transfer_not_relaunchable"
    message = (
        "Only a transfer whose disbursement leg failed (status failed, payin_status completed, "
        "payout_status failed) can be relaunched."
    )


class StaleDisbursementAnswer(Exception):
    """A provider answer for a disbursement attempt that a relaunch has replaced."""


State = tuple[str, str, str]
S, L = TransferStatus, LegStatus

CREATED: State = (S.PENDING, L.PENDING, L.NOT_STARTED)
COLLECTING: State = (S.COLLECTING, L.PENDING, L.NOT_STARTED)
DISBURSING: State = (S.DISBURSING, L.COMPLETED, L.PENDING)
PAYOUT_FAILED: State = (S.FAILED, L.COMPLETED, L.FAILED)
# The disbursement was given up and the collected money returned to the merchant's wallet.
FUNDS_RETURNED: State = (S.FAILED, L.COMPLETED, L.CANCELLED)
COLLECTION_FAILED_STATE: State = (S.FAILED, L.FAILED, L.CANCELLED)
COMPLETED_STATE: State = (S.COMPLETED, L.COMPLETED, L.COMPLETED)

# The moves, by name: the name is what callers pass as `to`.
COLLECTION_SUBMITTED = "collection_submitted"
COLLECTION_COMPLETED = "collection_completed"
COLLECTION_FAILED = "collection_failed"
DISBURSEMENT_COMPLETED = "disbursement_completed"
DISBURSEMENT_FAILED = "disbursement_failed"
PAYOUT_RELAUNCHED = "payout_relaunched"
PROVIDER_COMPLETION_APPLIED = "provider_completion_applied"
COLLECTED_FUNDS_RETURNED = "collected_funds_returned"


def state_of(transfer: Transfer) -> State:
    return (transfer.status, transfer.payin_status, transfer.payout_status)


def is_relaunchable(transfer: Transfer) -> bool:
    return state_of(transfer) == PAYOUT_FAILED


# --- the effects: each sets its leg's columns and returns their names ----------------------

Effect = Callable[..., set[str]]


def _collection_submitted(transfer: Transfer, *, at: datetime, **_: Any) -> set[str]:
    transfer.collection_submitted_at = at
    transfer.leg_timeout_at = provider_timeout_at(at)
    return {"collection_submitted_at", "leg_timeout_at"}


def _collection_completed(transfer: Transfer, *, at: datetime, **_: Any) -> set[str]:
    transfer.collection_completed_at = at
    transfer.disbursement_attempt = 1
    transfer.leg_timeout_at = provider_timeout_at(at)
    postings.post_collected(transfer, at)
    return {"collection_completed_at", "disbursement_attempt", "leg_timeout_at"}


def _collection_failed(transfer: Transfer, *, at: datetime, reason: str, **_: Any) -> set[str]:
    transfer.collection_failed_at = at
    transfer.collection_failure_reason = reason
    transfer.leg_timeout_at = None
    return {"collection_failed_at", "collection_failure_reason", "leg_timeout_at"}


def _disbursement_completed(transfer: Transfer, *, at: datetime, **_: Any) -> set[str]:
    transfer.disbursement_completed_at = at
    transfer.leg_timeout_at = None
    postings.post_disbursed(transfer, at)
    return {"disbursement_completed_at", "leg_timeout_at"}


def _provider_completion_applied(transfer: Transfer, *, at: datetime, **_: Any) -> set[str]:
    # the attempt did not fail after all
    transfer.disbursement_failed_at = None
    transfer.disbursement_failure_reason = ""
    fields = _disbursement_completed(transfer, at=at)
    return fields | {"disbursement_failed_at", "disbursement_failure_reason"}


def _disbursement_failed(transfer: Transfer, *, at: datetime, reason: str, **_: Any) -> set[str]:
    transfer.disbursement_failed_at = at
    transfer.disbursement_failure_reason = reason
    transfer.leg_timeout_at = None
    return {"disbursement_failed_at", "disbursement_failure_reason", "leg_timeout_at"}


def _payout_relaunched(
    transfer: Transfer, *, at: datetime, changes: dict[str, Any], **_: Any
) -> set[str]:
    for name, value in changes.items():
        setattr(transfer, name, value)
    transfer.disbursement_attempt += 1
    transfer.disbursement_reference = ""
    transfer.disbursement_submitted_at = None
    transfer.disbursement_failed_at = None
    transfer.disbursement_failure_reason = ""
    transfer.leg_timeout_at = provider_timeout_at(at)
    return set(changes) | {
        "disbursement_attempt",
        "disbursement_reference",
        "disbursement_submitted_at",
        "disbursement_failed_at",
        "disbursement_failure_reason",
        "leg_timeout_at",
    }


def _collected_funds_returned(transfer: Transfer, *, at: datetime, **_: Any) -> set[str]:
    postings.post_returned(transfer, at)
    return set()


@dataclass(frozen=True)
class Move:
    sources: frozenset[State]
    target: State
    effect: Effect
    events: tuple[str, ...] = ()
    # A repeated provider answer finds the transfer already at the target: nothing changes.
    repeat_is_noop: bool = True
    # The move answers the current disbursement attempt (its answer may be for an older one).
    answers_attempt: bool = False
    # The move replaces the disbursement attempt, kept as it ended before its columns reset.
    replaces_attempt: bool = False
    # The move starts a disbursement attempt: it is submitted after commit.
    submits_disbursement: bool = False


MOVES: dict[str, Move] = {
    COLLECTION_SUBMITTED: Move(frozenset({CREATED}), COLLECTING, _collection_submitted),
    COLLECTION_COMPLETED: Move(
        frozenset({COLLECTING}),
        DISBURSING,
        _collection_completed,
        events=("transfer.payin.completed",),
        submits_disbursement=True,
    ),
    COLLECTION_FAILED: Move(
        frozenset({CREATED, COLLECTING}),
        COLLECTION_FAILED_STATE,
        _collection_failed,
        events=("transfer.payin.failed", "transfer.failed"),
    ),
    DISBURSEMENT_COMPLETED: Move(
        frozenset({DISBURSING}),
        COMPLETED_STATE,
        _disbursement_completed,
        events=("transfer.payout.completed", "transfer.completed"),
        answers_attempt=True,
    ),
    # Only the leg event: a transfer whose payout failed may still be relaunched and complete,
    # so it is not final and gets no aggregate event.
    DISBURSEMENT_FAILED: Move(
        frozenset({DISBURSING}),
        PAYOUT_FAILED,
        _disbursement_failed,
        events=("transfer.payout.failed",),
        answers_attempt=True,
    ),
    PAYOUT_RELAUNCHED: Move(
        frozenset({PAYOUT_FAILED}),
        DISBURSING,
        _payout_relaunched,
        repeat_is_noop=False,
        replaces_attempt=True,
        submits_disbursement=True,
    ),
    # Support applies a "completed" answer that came after we had failed the attempt: the
    # disbursement completes as it would have, from the failed state (never by a provider
    # answer on its own: see transfer_apply_provider_completion).
    PROVIDER_COMPLETION_APPLIED: Move(
        frozenset({PAYOUT_FAILED}),
        COMPLETED_STATE,
        _provider_completion_applied,
        events=("transfer.payout.completed", "transfer.completed"),
        repeat_is_noop=False,
        answers_attempt=True,
    ),
    # Support gives the disbursement up and returns the collected money to the merchant's
    # wallet: the transfer is now final, failed, so it gets its aggregate event.
    COLLECTED_FUNDS_RETURNED: Move(
        frozenset({PAYOUT_FAILED}),
        FUNDS_RETURNED,
        _collected_funds_returned,
        events=("transfer.failed",),
        repeat_is_noop=False,
    ),
}


# --- the history and the disbursement attempts ---------------------------------------------


def _attempt_ended(transfer: Transfer) -> TransferDisbursementAttempt:
    """The current disbursement attempt, answered, as the transfer's columns hold it."""
    completed = transfer.payout_status == LegStatus.COMPLETED
    return TransferDisbursementAttempt(
        transfer=transfer,
        attempt=transfer.disbursement_attempt,
        provider_reference=transfer.disbursement_reference,
        payout_amount=transfer.payout_amount,
        payout_currency=transfer.payout_currency,
        recipient_operator_code=transfer.recipient_operator_code,
        submitted_at=transfer.disbursement_submitted_at,
        answered_at=(
            transfer.disbursement_completed_at if completed else transfer.disbursement_failed_at
        ),
        outcome=LegStatus.COMPLETED if completed else LegStatus.FAILED,
        failure_reason=transfer.disbursement_failure_reason,
    )


_ATTEMPT_COLUMNS = [
    "provider_reference",
    "payout_amount",
    "payout_currency",
    "recipient_operator_code",
    "submitted_at",
    "answered_at",
    "outcome",
    "failure_reason",
]


def _history_write(
    transfer: Transfer, *, reason: str, at: datetime, attempt: TransferDisbursementAttempt | None
) -> None:
    """Insert the history row of a move and write the disbursement attempt it ended (insert,
    or update: a relaunch writes again the attempt its answer wrote, a provider's completion
    applied by support the attempt that failed)."""
    TransferHistory.objects.create(
        transfer=transfer,
        status=transfer.status,
        payin_status=transfer.payin_status,
        payout_status=transfer.payout_status,
        reason=reason,
        created_at=at,
    )
    if attempt is not None:
        TransferDisbursementAttempt.objects.bulk_create(
            [attempt],
            update_conflicts=True,
            unique_fields=["transfer", "attempt"],
            update_fields=_ATTEMPT_COLUMNS,
        )


def _disbursement_submit_on_commit(transfer: Transfer) -> None:
    jobs.enqueue_on_commit(
        "transfers.tasks.submit_transfer_disbursement",
        transfer_id=str(transfer.id),
        attempt=transfer.disbursement_attempt,
    )


# --- the transition ------------------------------------------------------------------------


def _reference_record(
    transfer: Transfer, *, spec: Move, provider_reference: str, completes: bool
) -> set[str]:
    """Keep the provider's reference of the leg answered, when it is the first we hear of it or
    the one its completion names (MTN's transaction id replaces its request's id)."""
    column = "disbursement_reference" if spec.answers_attempt else "collection_reference"
    current = getattr(transfer, column)
    if provider_reference and (not current or (completes and current != provider_reference)):
        setattr(transfer, column, provider_reference)
        return {column}
    return set()


def _decline_log(transfer: Transfer, *, to: str, reason: str) -> None:
    """A leg the provider declined, logged once the move commits (the timeout and support's
    failures are logged where they are decided)."""
    if to in (COLLECTION_FAILED, DISBURSEMENT_FAILED) and reason not in (
        REASON_PROVIDER_TIMEOUT,
        REASON_MARKED_FAILED,
    ):
        log_on_commit(
            logger,
            logging.INFO,
            "Transfer %s of merchant %s: %s failed, declined by the provider (%s)",
            transfer.id,
            transfer.merchant_id,
            "collection" if to == COLLECTION_FAILED else "disbursement",
            reason or "no reason given",
        )


def transfer_transition(
    *,
    transfer_id: UUID,
    to: str,
    reason: str = "",
    at: datetime,
    provider_reference: str = "",
    attempt: int | None = None,
    changes: dict[str, Any] | None = None,
) -> Transfer:
    """The one way a transfer and its legs change state: lock the transfer, check the move `to`
    against MOVES (a repeated answer returns it unchanged; a disallowed move raises), apply the
    move's effect, write the history row (with the disbursement attempt the move answered or
    replaced), record the events and enqueue the next leg after commit, in one transaction.

    `attempt` (disbursement answers): the answer is for this disbursement attempt; an older
    attempt's answer raises StaleDisbursementAnswer and changes nothing. `changes`
    (relaunch): new payout_amount / recipient / recipient_operator_code."""
    spec = MOVES[to]
    with transaction.atomic():
        transfer = (
            Transfer.objects.select_for_update(of=("self",))
            .select_related("merchant")
            .get(pk=transfer_id)
        )
        if spec.answers_attempt and attempt not in (None, transfer.disbursement_attempt):
            raise StaleDisbursementAnswer(
                f"answer for attempt {attempt}, transfer is on attempt "
                f"{transfer.disbursement_attempt}"
            )
        state = state_of(transfer)
        fields = _reference_record(
            transfer,
            spec=spec,
            provider_reference=provider_reference,
            completes=to in (COLLECTION_COMPLETED, DISBURSEMENT_COMPLETED) and state != spec.target,
        )
        if state not in spec.sources:
            if spec.repeat_is_noop and state == spec.target:
                if fields:
                    transfer.save(update_fields=sorted(fields))
                return transfer
            if to == PAYOUT_RELAUNCHED:
                raise TransferNotRelaunchable()
            raise InvalidTransition(f"A transfer in {state} cannot make the move {to}.")
        ended = _attempt_ended(transfer) if spec.replaces_attempt else None
        transfer.status, transfer.payin_status, transfer.payout_status = spec.target
        transfer.updated_at = at
        transfer.leg_poll_at = None  # the next leg's polls start from its own move
        fields |= {"status", "payin_status", "payout_status", "updated_at", "leg_poll_at"}
        fields |= spec.effect(transfer, at=at, reason=reason, changes=changes or {})
        transfer.save(update_fields=sorted(fields))
        if spec.answers_attempt:
            ended = _attempt_ended(transfer)
        _history_write(transfer, reason=reason, at=at, attempt=ended)
        _decline_log(transfer, to=to, reason=reason)
        events.events_record(transfer, spec.events, at=at, reason=reason)
        if spec.submits_disbursement:
            _disbursement_submit_on_commit(transfer)
        return transfer
