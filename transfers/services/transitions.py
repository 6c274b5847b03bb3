"""The transfer state machine on core.transitions: TRANSFER_ALLOWED, the table of allowed
moves, and transfer_transition, the one function that applies a move.

A state is (status, payin_status, payout_status), so the two legs move through the transfer's
own transition: each move is named, leads to its TARGETS state, sets its leg's COLUMNS, and
has its named TRANSFER_EFFECTS (the attempt answered, postings, webhook events, the next leg
enqueued). Every move writes a history row, records its events and posts its journals in the
transaction that makes it.
"""

import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any
from uuid import UUID

from django.db import transaction

from core import jobs
from core.exceptions import DomainError
from core.transactions import log_on_commit
from core.transitions import Effect, InvalidTransition, StateMachine, transition_locked
from payments.services.parties import provider_timeout_at
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


# --- the table: the moves each state allows, and where each move leads ---------------------

TRANSFER_ALLOWED: dict[State, set[str]] = {
    CREATED: {COLLECTION_SUBMITTED, COLLECTION_FAILED},
    COLLECTING: {COLLECTION_COMPLETED, COLLECTION_FAILED},
    DISBURSING: {DISBURSEMENT_COMPLETED, DISBURSEMENT_FAILED},
    # Support's moves: relaunch the disbursement, apply a "completed" answer that came after we
    # had failed the attempt (never a provider answer on its own: see
    # transfer_apply_provider_completion), or give it up and return the collected money.
    PAYOUT_FAILED: {PAYOUT_RELAUNCHED, PROVIDER_COMPLETION_APPLIED, COLLECTED_FUNDS_RETURNED},
}
TARGETS: dict[str, State] = {
    COLLECTION_SUBMITTED: COLLECTING,
    COLLECTION_COMPLETED: DISBURSING,
    COLLECTION_FAILED: COLLECTION_FAILED_STATE,
    DISBURSEMENT_COMPLETED: COMPLETED_STATE,
    DISBURSEMENT_FAILED: PAYOUT_FAILED,
    PAYOUT_RELAUNCHED: DISBURSING,
    PROVIDER_COMPLETION_APPLIED: COMPLETED_STATE,
    COLLECTED_FUNDS_RETURNED: FUNDS_RETURNED,
}
# The provider's answers: a repeated one finds the transfer at the move's target, and changes
# nothing (support's moves are refused there).
PROVIDER_ANSWERS = {
    COLLECTION_SUBMITTED,
    COLLECTION_COMPLETED,
    COLLECTION_FAILED,
    DISBURSEMENT_COMPLETED,
    DISBURSEMENT_FAILED,
}
# The moves that answer the current disbursement attempt (an answer may be for an older one).
ANSWERS_ATTEMPT = {DISBURSEMENT_COMPLETED, DISBURSEMENT_FAILED, PROVIDER_COMPLETION_APPLIED}


def state_of(transfer: Transfer) -> State:
    return (transfer.status, transfer.payin_status, transfer.payout_status)


def is_relaunchable(transfer: Transfer) -> bool:
    return state_of(transfer) == PAYOUT_FAILED


# --- the columns each move sets beside the state --------------------------------------------


def _collection_submitted(transfer: Transfer, *, at: datetime, **_: Any) -> dict[str, Any]:
    return {"collection_submitted_at": at, "leg_timeout_at": provider_timeout_at(at)}


def _collection_completed(transfer: Transfer, *, at: datetime, **_: Any) -> dict[str, Any]:
    return {
        "collection_completed_at": at,
        "disbursement_attempt": 1,
        "leg_timeout_at": provider_timeout_at(at),
    }


def _collection_failed(
    transfer: Transfer, *, at: datetime, reason: str, **_: Any
) -> dict[str, Any]:
    return {
        "collection_failed_at": at,
        "collection_failure_reason": reason,
        "leg_timeout_at": None,
    }


def _disbursement_completed(transfer: Transfer, *, at: datetime, **_: Any) -> dict[str, Any]:
    return {"disbursement_completed_at": at, "leg_timeout_at": None}


def _provider_completion_applied(transfer: Transfer, *, at: datetime, **_: Any) -> dict[str, Any]:
    # the attempt did not fail after all
    return {
        **_disbursement_completed(transfer, at=at),
        "disbursement_failed_at": None,
        "disbursement_failure_reason": "",
    }


def _disbursement_failed(
    transfer: Transfer, *, at: datetime, reason: str, **_: Any
) -> dict[str, Any]:
    return {
        "disbursement_failed_at": at,
        "disbursement_failure_reason": reason,
        "leg_timeout_at": None,
    }


def _payout_relaunched(
    transfer: Transfer, *, at: datetime, relaunch: dict[str, Any], **_: Any
) -> dict[str, Any]:
    return {
        **relaunch,
        "disbursement_attempt": transfer.disbursement_attempt + 1,
        "disbursement_reference": "",
        "disbursement_submitted_at": None,
        "disbursement_failed_at": None,
        "disbursement_failure_reason": "",
        "leg_timeout_at": provider_timeout_at(at),
    }


def _nothing(transfer: Transfer, **_: Any) -> dict[str, Any]:
    return {}


COLUMNS: dict[str, Callable[..., dict[str, Any]]] = {
    COLLECTION_SUBMITTED: _collection_submitted,
    COLLECTION_COMPLETED: _collection_completed,
    COLLECTION_FAILED: _collection_failed,
    DISBURSEMENT_COMPLETED: _disbursement_completed,
    DISBURSEMENT_FAILED: _disbursement_failed,
    PAYOUT_RELAUNCHED: _payout_relaunched,
    PROVIDER_COMPLETION_APPLIED: _provider_completion_applied,
    COLLECTED_FUNDS_RETURNED: _nothing,
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
    transfer: Transfer,
    *,
    was: State,
    reason: str,
    at: datetime,
    attempt: TransferDisbursementAttempt | None,
) -> None:
    """Insert the history row of a move, and the disbursement attempt a relaunch replaced."""
    TransferHistory.objects.create(
        transfer=transfer,
        status=transfer.status,
        payin_status=transfer.payin_status,
        payout_status=transfer.payout_status,
        reason=reason,
        created_at=at,
    )
    if attempt is not None:
        _attempt_write(attempt)


def _attempt_write(attempt: TransferDisbursementAttempt) -> None:
    """Insert or update a disbursement attempt: a relaunch writes again the attempt its answer
    wrote, a provider's completion applied by support the attempt that failed."""
    TransferDisbursementAttempt.objects.bulk_create(
        [attempt],
        update_conflicts=True,
        unique_fields=["transfer", "attempt"],
        update_fields=_ATTEMPT_COLUMNS,
    )


# --- the effects: each applied after the move's columns and history row are written -------


def _collected_post(transfer: Transfer, *, at: datetime, **_: Any) -> None:
    postings.post_collected(transfer, at)


def _disbursed_post(transfer: Transfer, *, at: datetime, **_: Any) -> None:
    postings.post_disbursed(transfer, at)


def _returned_post(transfer: Transfer, *, at: datetime, **_: Any) -> None:
    postings.post_returned(transfer, at)


def _attempt_answered(transfer: Transfer, **_: Any) -> None:
    """Write the disbursement attempt the move answered, as the transfer's columns now hold it."""
    _attempt_write(_attempt_ended(transfer))


def _disbursement_submit_on_commit(transfer: Transfer, **_: Any) -> None:
    jobs.enqueue_on_commit(
        "transfers.tasks.submit_transfer_disbursement",
        transfer_id=str(transfer.id),
        attempt=transfer.disbursement_attempt,
    )


def _decline_log(transfer: Transfer, *, leg: str, reason: str) -> None:
    """A leg the provider declined, logged once the move commits (the timeout and support's
    failures are logged where they are decided)."""
    if reason not in (REASON_PROVIDER_TIMEOUT, REASON_MARKED_FAILED):
        log_on_commit(
            logger,
            logging.INFO,
            "Transfer %s of merchant %s: %s failed, declined by the provider (%s)",
            transfer.id,
            transfer.merchant_id,
            leg,
            reason or "no reason given",
        )


def _collection_decline_log(transfer: Transfer, *, reason: str, **_: Any) -> None:
    _decline_log(transfer, leg="collection", reason=reason)


def _disbursement_decline_log(transfer: Transfer, *, reason: str, **_: Any) -> None:
    _decline_log(transfer, leg="disbursement", reason=reason)


def _events(*event_types: str) -> Effect:
    """The effect recording a move's webhook events (a leg's, then the transfer's)."""

    def events_record(transfer: Transfer, *, at: datetime, reason: str, **_: Any) -> None:
        events.events_record(transfer, event_types, at=at, reason=reason)

    return events_record


TRANSFER_EFFECTS: dict[str, tuple[Effect, ...]] = {
    COLLECTION_COMPLETED: (
        _collected_post,
        _events("transfer.payin.completed"),
        _disbursement_submit_on_commit,
    ),
    COLLECTION_FAILED: (
        _collection_decline_log,
        _events("transfer.payin.failed", "transfer.failed"),
    ),
    DISBURSEMENT_COMPLETED: (
        _attempt_answered,
        _disbursed_post,
        _events("transfer.payout.completed", "transfer.completed"),
    ),
    # Only the leg event: a transfer whose payout failed may still be relaunched and complete,
    # so it is not final and gets no aggregate event.
    DISBURSEMENT_FAILED: (
        _attempt_answered,
        _disbursement_decline_log,
        _events("transfer.payout.failed"),
    ),
    PAYOUT_RELAUNCHED: (_disbursement_submit_on_commit,),
    PROVIDER_COMPLETION_APPLIED: (
        _attempt_answered,
        _disbursed_post,
        _events("transfer.payout.completed", "transfer.completed"),
    ),
    # The transfer is now final, failed, so it gets its aggregate event.
    COLLECTED_FUNDS_RETURNED: (_returned_post, _events("transfer.failed")),
}


def _transfer_refused(transfer: Transfer, was: State, move: str) -> DomainError:
    if move == PAYOUT_RELAUNCHED:
        return TransferNotRelaunchable()
    return InvalidTransition(f"A transfer in {was} cannot make the move {move}.")


TRANSFER_MACHINE = StateMachine(
    allowed=TRANSFER_ALLOWED,
    refused=_transfer_refused,
    history=_history_write,
    effects=TRANSFER_EFFECTS,
    state=state_of,
)


# --- the transition ------------------------------------------------------------------------


def _reference_record(
    transfer: Transfer, *, answers_attempt: bool, provider_reference: str, completes: bool
) -> set[str]:
    """Keep the provider's reference of the leg answered, when it is the first we hear of it or
    the one its completion names (MTN's transaction id replaces its request's id)."""
    column = "disbursement_reference" if answers_attempt else "collection_reference"
    current = getattr(transfer, column)
    if provider_reference and (not current or (completes and current != provider_reference)):
        setattr(transfer, column, provider_reference)
        return {column}
    return set()


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
    """The one way a transfer and its legs change state: lock the transfer and make the move
    `to` through core.transitions (TRANSFER_ALLOWED; a repeated provider answer returns it
    unchanged, a disallowed move raises): its columns, its history row (with the disbursement
    attempt a relaunch replaces), then its effects (the attempt answered, postings, events,
    the next leg enqueued after commit), in one transaction.

    `attempt` (disbursement answers): the answer is for this disbursement attempt; an older
    attempt's answer raises StaleDisbursementAnswer and changes nothing. `changes`
    (relaunch): new payout_amount / recipient / recipient_operator_code."""
    target = TARGETS[to]
    answers_attempt = to in ANSWERS_ATTEMPT
    with transaction.atomic():
        transfer = (
            Transfer.objects.select_for_update(of=("self",))
            .select_related("merchant")
            .get(pk=transfer_id)
        )
        if answers_attempt and attempt not in (None, transfer.disbursement_attempt):
            raise StaleDisbursementAnswer(
                f"answer for attempt {attempt}, transfer is on attempt "
                f"{transfer.disbursement_attempt}"
            )
        state = state_of(transfer)
        kept = _reference_record(
            transfer,
            answers_attempt=answers_attempt,
            provider_reference=provider_reference,
            completes=to in (COLLECTION_COMPLETED, DISBURSEMENT_COMPLETED) and state != target,
        )
        if to in PROVIDER_ANSWERS and state == target:
            if kept:
                transfer.save(update_fields=sorted(kept))
            return transfer
        # a relaunch keeps the attempt it replaces as it ended, before its columns reset
        replaced = _attempt_ended(transfer) if to == PAYOUT_RELAUNCHED else None
        status, payin_status, payout_status = target
        columns = COLUMNS[to](transfer, at=at, reason=reason, relaunch=changes or {})
        return transition_locked(
            transfer,
            machine=TRANSFER_MACHINE,
            move=to,
            changes={
                "status": status,
                "payin_status": payin_status,
                "payout_status": payout_status,
                "updated_at": at,
                "leg_poll_at": None,  # the next leg's polls start from its own move
                **columns,
            },
            at=at,
            reason=reason,
            kept=kept,
            context={"attempt": replaced},
        )
