"""The beat sweeps of payins, payouts and refunds: payments the provider never answered in time,
answers lost on their way (asked of the provider), submissions lost before they were sent."""

import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from django.conf import settings
from django.db import transaction
from django.db.models import Q

from core.log_limits import OncePer
from core.transitions import InvalidTransition
from payments import provider
from payments.models import Payin, PayinStatus, Payout, PayoutStatus, Refund, RefundStatus
from payments.services import parties, payins, payouts, refunds
from payments.services.transitions import (
    PAYIN_CALLBACK,
    PAYOUT_CALLBACK,
    REASON_PROVIDER_TIMEOUT,
    REFUND_CALLBACK,
)

logger = logging.getLogger("cowry.payments")


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
    """Fail every payin/payout/refund leg still waiting for the provider past provider_timeout_at,
    with reason provider_timeout, unless the provider, asked first about a leg it received
    (its reference), has an answer for it (then that answer is applied), or it is a payout the
    provider cannot be asked about, or a leg without a receipt whose last call started too
    recently to have ended (left pending). Each one in its own transaction; returns how many
    failed."""
    failed = 0
    for model, rows, kind, callback, fail in _timed_out_legs(now=now):
        for payment_id, provider_reference, submitted_at, party, connection, merchant_id in list(
            rows
        ):
            if _timed_out(
                model,
                payment_id,
                provider_reference,
                submitted_at,
                party,
                connection=connection,
                kind=kind,
                callback=callback,
                fail=fail,
                now=now,
            ):
                failed += 1
                logger.warning(
                    "%s %s of merchant %s failed: no provider answer by its timeout"
                    " (provider_timeout)",
                    model.__name__,
                    payment_id,
                    merchant_id,
                )
    return failed


def _timed_out_legs(*, now: datetime) -> tuple:
    """Per kind of payment: its rows past provider_timeout_at, the provider's kind of leg, its
    callback, and the transition that fails one."""
    payin_rows = Payin.objects.filter(
        status__in=[PayinStatus.CREATED, PayinStatus.PENDING], provider_timeout_at__lte=now
    ).values_list(
        "id", "provider_reference", "submitted_at", "source", "provider_connection", "merchant_id"
    )
    payout_rows = Payout.objects.filter(
        status=PayoutStatus.PENDING, provider_timeout_at__lte=now
    ).values_list(
        "id",
        "provider_reference",
        "submitted_at",
        "recipient",
        "provider_connection",
        "merchant_id",
    )
    refund_rows = Refund.objects.filter(
        status=RefundStatus.PENDING, provider_timeout_at__lte=now
    ).values_list(
        "id",
        "provider_reference",
        "submitted_at",
        "recipient",
        "provider_connection",
        "merchant_id",
    )
    return (
        (
            Payin,
            payin_rows,
            provider.COLLECTION,
            PAYIN_CALLBACK,
            lambda payment_id: payins.payin_transition(
                payin_id=payment_id, to=PayinStatus.FAILED, reason=REASON_PROVIDER_TIMEOUT, at=now
            ),
        ),
        (
            Payout,
            payout_rows,
            provider.DISBURSEMENT,
            PAYOUT_CALLBACK,
            lambda payment_id: payouts.payout_transition(
                payout_id=payment_id, to=PayoutStatus.FAILED, reason=REASON_PROVIDER_TIMEOUT, at=now
            ),
        ),
        (
            Refund,
            refund_rows,
            provider.DISBURSEMENT,
            REFUND_CALLBACK,
            lambda payment_id: refunds.refund_transition(
                refund_id=payment_id, to=RefundStatus.FAILED, reason=REASON_PROVIDER_TIMEOUT, at=now
            ),
        ),
    )


def _timed_out(
    model: type[Payin] | type[Payout] | type[Refund],
    payment_id: UUID,
    provider_reference: str,
    submitted_at: datetime | None,
    party: dict[str, Any],
    *,
    connection: str,
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
                party=parties.party_identifier(party),
                at=now,
                connection=connection,
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
# A lost submission is sent again on every sweep run (three a minute) until it is taken: its
# line comes when it is found, then every RESUBMISSION_LOG_SECONDS while it stays lost.
RESUBMISSION_LOG_SECONDS = 600
_RESUBMISSIONS_LOGGED = OncePer(RESUBMISSION_LOG_SECONDS)


def payments_stale_submissions(*, now: datetime) -> tuple[list[UUID], list[UUID]]:
    """(payin ids, payout ids) whose provider submission should have happened by now but has
    not (the enqueue after commit was lost): created payins, and legs without a provider
    reference, older than RESUBMIT_AFTER_SECONDS and not yet due for the timeout."""
    before = now - timedelta(seconds=RESUBMIT_AFTER_SECONDS)
    payins = Payin.objects.filter(
        Q(status=PayinStatus.CREATED) | Q(status=PayinStatus.PENDING, provider_reference=""),
        created_at__lte=before,
        provider_timeout_at__gt=now,
    ).values_list("id", "merchant_id")
    return (
        _resubmitted(Payin, list(payins), now=now),
        _resubmitted(Payout, _stale_disbursements(Payout, before=before, now=now), now=now),
    )


def refunds_stale_submissions(*, now: datetime) -> list[UUID]:
    """The refunds whose provider submission was lost, as payments_stale_submissions's payouts."""
    before = now - timedelta(seconds=RESUBMIT_AFTER_SECONDS)
    return _resubmitted(Refund, _stale_disbursements(Refund, before=before, now=now), now=now)


def _resubmitted(
    model: type[Payin] | type[Payout] | type[Refund],
    rows: list[tuple[UUID, UUID]],
    *,
    now: datetime,
) -> list[UUID]:
    """The ids of `rows` (id, merchant id), the payments a sweep sends again, each logged when
    it is found and then once every RESUBMISSION_LOG_SECONDS while it stays lost."""
    for payment_id, merchant_id in rows:
        if _RESUBMISSIONS_LOGGED.due(payment_id, at=now.timestamp()):
            logger.warning(
                "Resubmitting %s %s of merchant %s: its provider submission was lost (logged"
                " again every %d min while it stays lost)",
                model.__name__,
                payment_id,
                merchant_id,
                RESUBMISSION_LOG_SECONDS // 60,
            )
    return [payment_id for payment_id, _ in rows]


def _stale_disbursements(
    model: type[Payout] | type[Refund], *, before: datetime, now: datetime
) -> list[tuple[UUID, UUID]]:
    """(id, merchant id) of the payouts or refunds whose submission was lost."""
    return list(
        model.objects.filter(
            status="pending",
            provider_reference="",
            created_at__lte=before,
            provider_timeout_at__gt=now,
        ).values_list("id", "merchant_id")
    )


# The sandbox answers within PROVIDER_SIMULATION_DELAY_SECONDS, a real provider within seconds:
# a payment it received and has not answered this long after the call is asked about.
ANSWER_EXPECTED_SECONDS = 30


def poll_first_at(*, connection: str, now: datetime) -> datetime | None:
    """When a leg submitted through `connection` at `now` is first asked about: a real operator's
    PROVIDER_POLL_AFTER_SECONDS later (its due time stored at submission); None for the
    simulator's, asked once its answer is overdue (ANSWER_EXPECTED_SECONDS)."""
    if connection == provider.SIMULATOR:
        return None
    return now + timedelta(seconds=settings.PROVIDER_POLL_AFTER_SECONDS)


def poll_next_at(*, since: datetime, now: datetime) -> datetime:
    """When a leg asked about at `now` without an answer is asked again: PROVIDER_POLL_AFTER_SECONDS
    later, or as long as it has waited since `since` if longer (the interval grows)."""
    return now + max(timedelta(seconds=settings.PROVIDER_POLL_AFTER_SECONDS), now - since)


def payments_ask_provider(*, now: datetime) -> int:
    """Ask the provider (each leg through its own connection) about every payin, payout and
    refund it received (its reference) whose answer is overdue (a simulator leg whose call
    started more than ANSWER_EXPECTED_SECONDS ago) or whose poll is due (provider_poll_at: a
    real operator's leg's first one is set at submission, poll_first_at), not yet past its
    timeout: an answer lost on its way (a worker killed holding it, a callback never sent) is
    applied through the state machine, exactly as if it had arrived. Returns how many answers
    were applied; a leg without one, or whose provider cannot be asked, gets its next poll due
    at growing intervals (poll_next_at; the timeout sweep decides at the timeout)."""
    overdue = now - timedelta(seconds=ANSWER_EXPECTED_SECONDS)
    due = Q(provider_poll_at__lte=now) | Q(provider_poll_at__isnull=True, submitted_at__lte=overdue)
    legs = (
        (Payin, PayinStatus.PENDING, "source", provider.COLLECTION, PAYIN_CALLBACK),
        (Payout, PayoutStatus.PENDING, "recipient", provider.DISBURSEMENT, PAYOUT_CALLBACK),
        (Refund, RefundStatus.PENDING, "recipient", provider.DISBURSEMENT, REFUND_CALLBACK),
    )
    applied, unavailable = 0, []
    for model, pending, party_field, kind, callback in legs:
        rows = (
            model.objects.filter(due, status=pending, provider_timeout_at__gt=now)
            .exclude(provider_reference="")
            .values_list("id", party_field, "provider_connection", "submitted_at")
        )
        for payment_id, party, connection, submitted_at in list(rows):
            answered = False
            try:
                answered = _status_apply(
                    payment_id, party, connection=connection, kind=kind, callback=callback
                )
                applied += answered
            except provider.ProviderUnavailable as exc:  # an outage: expected, no traceback
                unavailable.append((payment_id, exc))
            except Exception:  # one payment's trouble must not hold up the others
                logger.warning(
                    "Provider status of %s %s not applied", kind, payment_id, exc_info=True
                )
            if not answered:
                model.objects.filter(pk=payment_id, status=pending).update(
                    provider_poll_at=poll_next_at(since=submitted_at or now, now=now)
                )
    if unavailable:
        _unavailable_log(unavailable)
    return applied


def _status_apply(
    payment_id: UUID, party: dict[str, Any], *, connection: str, kind: str, callback: str
) -> bool:
    """Ask the provider the status of one payment and apply its answer: True when it had one."""
    receipt = provider.gateway(connection).transaction_status(
        kind=kind, reference=str(payment_id), **parties.party_identifier(party)
    )
    if receipt.outcome is None:
        return False
    provider.receipt_answer_deliver(receipt, callback=callback, reference=str(payment_id))
    return True


UNAVAILABLE_IDS_LOGGED = 10


def _ids_shown(ids: list[Any]) -> str:
    """The first UNAVAILABLE_IDS_LOGGED ids, and how many more: a line stays a line."""
    more = len(ids) - UNAVAILABLE_IDS_LOGGED
    shown = ", ".join(str(each) for each in ids[:UNAVAILABLE_IDS_LOGGED])
    return f"{shown} and {more} more" if more > 0 else shown


def _unavailable_log(unavailable: list[tuple[UUID, Exception]]) -> None:
    """One line a run for a provider that cannot give statuses (every 30 s while it is down),
    not a traceback per overdue payment."""
    logger.warning(
        "Provider status unavailable (%s) for %d overdue payment(s): %s; asked again next run",
        unavailable[0][1],
        len(unavailable),
        _ids_shown([payment_id for payment_id, _ in unavailable]),
    )


def unfinished_legs_on(connection: str) -> int:
    """How many payins, payouts and refunds still waiting for the provider name `connection`."""
    waiting = {"status__in": ["created", "pending"], "provider_connection": connection}
    return sum(model.objects.filter(**waiting).count() for model in (Payin, Payout, Refund))
