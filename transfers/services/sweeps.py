"""The beat's safety net for the two legs: ask the provider about answers that are overdue,
fail legs it never answered by their timeout, and find submissions whose enqueue was lost."""

import logging
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from django.db import transaction
from django.db.models import Q

from core.log_limits import OncePer
from payments import provider
from payments.services.parties import party_identifier
from payments.services.sweeps import (
    RESUBMISSION_LOG_SECONDS,
    call_may_be_in_flight,
    poll_next_at,
    same_time,
)
from transfers.models import Transfer, TransferStatus
from transfers.services.submission import (
    COLLECTION_CALLBACK,
    DISBURSEMENT_CALLBACK,
    apply_quietly,
    disbursement_reference,
)
from transfers.services.transitions import (
    COLLECTION_FAILED,
    DISBURSEMENT_FAILED,
    REASON_PROVIDER_TIMEOUT,
)

logger = logging.getLogger("cowry.transfers")

RESUBMIT_AFTER_SECONDS = 60
# A leg resubmitted on every run while its submission stays lost: a line when it is found,
# then one every RESUBMISSION_LOG_SECONDS (a new disbursement attempt is a leg of its own).
_RESUBMISSIONS_LOGGED = OncePer(RESUBMISSION_LOG_SECONDS)
# A leg the provider received and has not answered this long after it moved there is asked
# about: its answer may have been lost on its way (a worker killed while holding it).
ASK_PROVIDER_AFTER_SECONDS = 30


def _ask(
    *,
    transfer_id: UUID,
    status: str,
    attempt: int,
    payer: dict,
    recipient: dict,
    connections: tuple[str, str],
    at: datetime,
) -> bool:
    """Ask the provider (through the leg's own connection, of `connections`: the collection's
    and the disbursement's) about the transfer's leg in flight; its answer, if it has one, is
    applied through the transition as its callback would apply it. True when there was one."""
    if status == TransferStatus.DISBURSING:
        return provider.answer_before_timeout(
            kind=provider.DISBURSEMENT,
            reference=disbursement_reference(transfer_id, attempt),
            callback=DISBURSEMENT_CALLBACK,
            party=party_identifier(recipient),
            at=at,
            connection=connections[1],
        )
    return provider.answer_before_timeout(
        kind=provider.COLLECTION,
        reference=str(transfer_id),
        callback=COLLECTION_CALLBACK,
        party=party_identifier(payer),
        at=at,
        connection=connections[0],
    )


def transfers_ask_overdue_answers(*, now: datetime) -> int:
    """Ask the provider about every leg it received (it has the leg's reference) and has not
    answered ASK_PROVIDER_AFTER_SECONDS after the leg moved there (a simulator leg) or by its
    poll's due time (leg_poll_at: a real operator's leg's first one is set at submission,
    poll_first_at), not yet timed out; an answer it has is applied through the transition (a
    repeated one changes nothing), so a leg whose answer was lost with a killed worker still
    ends, once. Returns how many it applied."""
    before = now - timedelta(seconds=ASK_PROVIDER_AFTER_SECONDS)
    rows = (
        Transfer.objects.filter(
            (Q(status=TransferStatus.COLLECTING) & ~Q(collection_reference=""))
            | (Q(status=TransferStatus.DISBURSING) & ~Q(disbursement_reference="")),
            Q(leg_poll_at__lte=now) | Q(leg_poll_at__isnull=True, updated_at__lte=before),
            leg_timeout_at__gt=now,
        )
        .order_by("pk")
        .values_list(
            "id",
            "status",
            "disbursement_attempt",
            "payer",
            "recipient",
            "collection_connection",
            "disbursement_connection",
            "updated_at",
        )
    )
    applied = 0
    for transfer_id, status, attempt, payer, recipient, *connections, moved_at in list(rows):
        answered = False
        try:
            answered = _ask(
                transfer_id=transfer_id,
                status=status,
                attempt=attempt,
                payer=payer,
                recipient=recipient,
                connections=tuple(connections),
                at=now,
            )
            applied += answered
        except provider.DisbursementOutcomeUnknown as unknown:
            logger.warning("Overdue answer: %s (%r); asked again later", unknown, unknown.__cause__)
        except Exception:  # one leg's trouble must not hold up every other leg's answer
            logger.exception("Overdue answer: transfer %s left for the next run", transfer_id)
        if not answered:  # asked again at growing intervals, while the leg is where it was
            Transfer.objects.filter(pk=transfer_id, status=status, updated_at=moved_at).update(
                leg_poll_at=poll_next_at(since=moved_at, now=now)
            )
    return applied


def _collection_unchanged(
    transfer_id: UUID, *, status: str, reference: str, last_call: datetime | None
) -> bool:
    """Whether the collection leg is as the sweep read it (not submitted since, for a transfer
    read pending: the submission renews the leg timeout and calls the provider; no call started
    and no receipt stored since), locking the transfer until the caller's transaction ends."""
    return (
        Transfer.objects.select_for_update()
        .filter(
            pk=transfer_id,
            status=status,
            collection_reference=reference,
            **same_time("collection_submitted_at", last_call),
        )
        .exists()
    )


def _disbursement_unchanged(
    transfer_id: UUID, *, attempt: int, reference: str, last_call: datetime | None
) -> bool:
    """Whether the disbursement attempt is as the sweep read it (no call started, no receipt
    stored since), locking the transfer until the caller's transaction ends."""
    return (
        Transfer.objects.select_for_update()
        .filter(
            pk=transfer_id,
            disbursement_attempt=attempt,
            disbursement_reference=reference,
            **same_time("disbursement_submitted_at", last_call),
        )
        .exists()
    )


def _fail_if_unanswered(row: tuple[Any, ...], *, now: datetime) -> bool:
    """Fail one timed-out leg (reason provider_timeout) unless its last call may still be in
    flight, the provider has an answer for it (applied instead), or it changed since it was
    read (the next run decides). True when it failed."""
    transfer_id, status, attempt, collected_as, disbursed_as, last_call = row[:6]
    last_collection_call, payer, recipient, *connections = row[6:11]
    disbursing = status == TransferStatus.DISBURSING
    received, call = (
        (disbursed_as, last_call) if disbursing else (collected_as, last_collection_call)
    )
    if not received and call_may_be_in_flight(call, now=now):
        return False  # its last call may still reach the provider: the next run decides
    if received and _ask(
        transfer_id=transfer_id,
        status=status,
        attempt=attempt,
        payer=payer,
        recipient=recipient,
        connections=tuple(connections),
        at=now,
    ):
        return False
    with transaction.atomic():
        if disbursing:
            unchanged = _disbursement_unchanged(
                transfer_id, attempt=attempt, reference=disbursed_as, last_call=last_call
            )
            kwargs = {"to": DISBURSEMENT_FAILED, "attempt": attempt}
        else:
            unchanged = _collection_unchanged(
                transfer_id, status=status, reference=collected_as, last_call=last_collection_call
            )
            kwargs = {"to": COLLECTION_FAILED}
        if not unchanged:
            return False  # a call started, or its receipt came, since: the next run decides
        return bool(
            apply_quietly(transfer_id=transfer_id, reason=REASON_PROVIDER_TIMEOUT, at=now, **kwargs)
        )


def transfers_fail_timed_out(*, now: datetime) -> int:
    """Fail every leg the provider has not answered by leg_timeout_at (reason
    provider_timeout), each transfer in its own transaction, unless the provider, asked first
    about a leg it received (its reference), has an answer for it (then that answer is
    applied), or it is a disbursement the provider cannot be asked about, or a leg without a
    receipt whose last call started too recently to have ended (left as it is), or the leg
    changed since it was read (submitted, a call started, its receipt stored: the next run
    decides). Returns how many failed."""
    failed = 0
    due = Transfer.objects.filter(
        status__in=[TransferStatus.PENDING, TransferStatus.COLLECTING, TransferStatus.DISBURSING],
        leg_timeout_at__lte=now,
    ).values_list(
        "id",
        "status",
        "disbursement_attempt",
        "collection_reference",
        "disbursement_reference",
        "disbursement_submitted_at",
        "collection_submitted_at",
        "payer",
        "recipient",
        "collection_connection",
        "disbursement_connection",
        "merchant_id",
    )
    for row in list(due):
        try:
            if _fail_if_unanswered(row, now=now):
                failed += 1
                leg = "disbursement" if row[1] == TransferStatus.DISBURSING else "collection"
                logger.warning(
                    "Transfer %s of merchant %s: %s failed, no provider answer by its timeout"
                    " (provider_timeout)",
                    row[0],
                    row[-1],
                    leg,
                )
        except provider.DisbursementOutcomeUnknown as unknown:
            logger.error("Timeout sweep: %s (%r); left disbursing", unknown, unknown.__cause__)
        except Exception:  # one leg's trouble must not hold up every other leg's timeout
            logger.exception("Timeout sweep: transfer %s left for the next run", row[0])
    return failed


def transfers_stale_submissions(*, now: datetime) -> list[tuple[UUID, int | None]]:
    """(transfer id, disbursement attempt or None for the collection) of every leg whose
    provider submission should have happened by now but has no provider reference (the
    enqueue after commit was lost), older than RESUBMIT_AFTER_SECONDS and not yet timed out.
    Submitting is idempotent, so resubmitting one that is merely slow is harmless. Each leg is
    logged when it is found, then every RESUBMISSION_LOG_SECONDS while it stays lost."""
    before = now - timedelta(seconds=RESUBMIT_AFTER_SECONDS)
    rows = Transfer.objects.filter(
        Q(status=TransferStatus.PENDING)
        | Q(status=TransferStatus.COLLECTING, collection_reference="")
        | Q(status=TransferStatus.DISBURSING, disbursement_reference=""),
        updated_at__lte=before,
        leg_timeout_at__gt=now,
    ).values_list("id", "status", "disbursement_attempt", "merchant_id")
    stale = []
    for transfer_id, status, attempt, merchant_id in rows:
        leg = (transfer_id, attempt if status == TransferStatus.DISBURSING else None)
        stale.append(leg)
        if _RESUBMISSIONS_LOGGED.due(leg, at=now.timestamp()):
            logger.warning(
                "Resubmitting the %s of transfer %s of merchant %s: its provider submission was"
                " lost (logged again every %d min while it stays lost)",
                "collection" if leg[1] is None else f"disbursement (attempt {attempt})",
                transfer_id,
                merchant_id,
                RESUBMISSION_LOG_SECONDS // 60,
            )
    return stale


def unfinished_legs_on(connection: str) -> int:
    """How many transfers still waiting for a leg name `connection`."""
    return Transfer.objects.filter(
        Q(collection_connection=connection) | Q(disbursement_connection=connection),
        status__in=[TransferStatus.PENDING, TransferStatus.COLLECTING, TransferStatus.DISBURSING],
    ).count()
