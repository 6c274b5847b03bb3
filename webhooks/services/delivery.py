"""One attempt of a delivery: claimed in a short transaction (status `delivering`, attempt
number taken, a lease stored in `next_attempt_at`), sent with no lock held, and recorded in a
new transaction. A retry due soon is handed to the broker for its due time after commit; a
longer one is a due time in the database that the beat sweep picks up. A worker that dies
mid-attempt loses its lease and the delivery is claimed again."""

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from functools import partial
from uuid import UUID

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from core import secrets_at_rest
from core.log_limits import OncePer
from webhooks import selectors
from webhooks.models import Delivery, DeliveryAttempt, DeliveryStatus
from webhooks.services.events import SENT_HERE, delivery_enqueue, serialize
from webhooks.services.sending import Claim, Outcome, post

logger = logging.getLogger("cowry.webhooks")

LOST_ATTEMPT_ERROR = "No result recorded: the worker was lost or ran past its lease."
# A delivery whose endpoint's signing secret no key of WEBHOOK_SECRETS_KEYS decrypts (a key
# missing from the setting, a corrupt value) is never sent: it waits, pending, and is tried again
# after this long, until the keys are fixed. Cowry's fault, not the receiver's: no attempt is
# counted (the delivery never fails for it) or logged (it never counts toward disabling the
# endpoint).
UNREADABLE_SECRET_RETRY_SECONDS = 60
UNREADABLE_SECRET_ERROR = (
    "Not sent: Cowry could not decrypt this endpoint's signing secret (a problem on Cowry's"
    " side); retried every minute, it is sent once it can be signed."
)


def max_attempts() -> int:
    """The first attempt plus one per retry of WEBHOOK_RETRY_SCHEDULE (7 by default)."""
    return len(settings.WEBHOOK_RETRY_SCHEDULE) + 1


def lease_seconds() -> int:
    """How long a claimed attempt belongs to its worker: well beyond one request (a connect
    and a read timeout, a name resolution)."""
    return int(settings.WEBHOOK_TIMEOUT_SECONDS * 3) + 60


def retry_eta_limit_seconds() -> float:
    """The longest retry delay handed to the broker as an ETA: half the broker's visibility
    timeout (at most half the least one production accepts), so a waiting message is never
    handed to a second worker; a longer delay is left to the beat sweep."""
    floor = settings.VISIBILITY_TIMEOUT_FLOOR
    options = getattr(settings, "CELERY_BROKER_TRANSPORT_OPTIONS", {})
    return min(options.get("visibility_timeout", floor), floor) / 2


def _signing_secret(stored: str) -> str | None:
    """The endpoint's signing secret in clear, or None when no key decrypts it."""
    try:
        return secrets_at_rest.decrypt(stored)
    except secrets_at_rest.UnreadableSecret:
        return None


def _lost_attempt_close(delivery: Delivery, *, now: datetime) -> str:
    """A delivering delivery whose lease is over (its sender died mid-attempt), locked by the
    caller and read with its endpoint's `merchant_id`: its attempt is closed as lost, and
    counted (it may have reached the receiver). The seventh marks the delivery failed; before
    it the delivery is pending again, due at once (no retry delay: the fault was ours).
    Returns the delivery's new status."""
    DeliveryAttempt.objects.filter(delivery=delivery, finished_at__isnull=True).update(
        finished_at=now, error=LOST_ATTEMPT_ERROR
    )
    if delivery.attempts >= max_attempts():
        delivery.status = DeliveryStatus.FAILED
        delivery.next_attempt_at = None
    else:
        delivery.status = DeliveryStatus.PENDING  # next_attempt_at, its lease's end, is past
    delivery.last_error = LOST_ATTEMPT_ERROR
    delivery.updated_at = now
    delivery.save(update_fields=["status", "next_attempt_at", "last_error", "updated_at"])
    logger.warning(
        "Webhook delivery %s (event %s, merchant %s, endpoint %s) attempt %d of %d closed as lost:"
        " no result recorded (worker lost or past its lease); %s",
        delivery.pk,
        delivery.event_id,
        delivery.merchant_id,
        delivery.endpoint_id,
        delivery.attempts,
        max_attempts(),
        "failed for good" if delivery.status == DeliveryStatus.FAILED else "due again at once",
    )
    return delivery.status


# An endpoint whose secret cannot be decrypted: its waiting deliveries are a line a minute,
# not one per delivery per minute.
_UNREADABLE_LOGGED = OncePer(UNREADABLE_SECRET_RETRY_SECONDS)


def _delivery_hold(delivery: Delivery, *, now: datetime) -> None:
    """A claimed delivery whose signing secret cannot be decrypted: pending, due again after
    UNREADABLE_SECRET_RETRY_SECONDS with the reason as its last error; logged as an error once
    a minute per endpoint, with how many deliveries wait (ids only, never the secret)."""
    delivery.status = DeliveryStatus.PENDING
    delivery.next_attempt_at = now + timedelta(seconds=UNREADABLE_SECRET_RETRY_SECONDS)
    delivery.last_error = UNREADABLE_SECRET_ERROR
    delivery.updated_at = now
    delivery.save(update_fields=["status", "next_attempt_at", "last_error", "updated_at"])
    if not _UNREADABLE_LOGGED.due(delivery.endpoint_id, at=now.timestamp()):
        return
    waiting = Delivery.objects.filter(
        endpoint_id=delivery.endpoint_id, status__in=selectors.OPEN_STATUSES
    ).count()
    logger.error(
        "Webhook endpoint %s (merchant %s): %d delivery(ies) not sent, its signing secret cannot"
        " be decrypted with any key of WEBHOOK_SECRETS_KEYS; retried every %d s (logged once a"
        " minute per endpoint)",
        delivery.endpoint_id,
        delivery.merchant_id,
        waiting,
        UNREADABLE_SECRET_RETRY_SECONDS,
    )


DELIVERY_CLAIM_READ = """
SELECT d.*, ep.merchant_id, ep.url AS endpoint_url, ep.signing_secret AS endpoint_signing_secret,
    e.event_type, e.body AS event_body,
    CASE WHEN e.body = '' THEN e.payload END AS event_payload
FROM webhooks_delivery d
JOIN webhooks_webhookendpoint ep ON ep.id = d.endpoint_id AND ep.enabled
JOIN webhooks_event e ON e.id = d.event_id
WHERE d.id = %s AND d.status = ANY(%s) AND d.next_attempt_at <= %s
FOR UPDATE OF d SKIP LOCKED
"""
"""A due delivery of an enabled endpoint, locked unless another worker holds it, with what its
attempt sends: the endpoint's URL, merchant and secret, the event's type and stored body (its
payload only for an event stored before bodies were kept). Its ORM form cost 3x its CPU
(docs/decisions.md), on every attempt."""


DELIVERY_LEASE = """
WITH leased AS (
    UPDATE webhooks_delivery
    SET status = 'delivering', attempts = %(number)s, next_attempt_at = %(lease_ends_at)s,
        updated_at = %(now)s
    WHERE id = %(delivery_id)s
    RETURNING id
)
INSERT INTO webhooks_deliveryattempt (delivery_id, number, url, started_at, error, response_body)
SELECT id, %(number)s, %(url)s, %(now)s, '', '' FROM leased
RETURNING id
"""
"""The claim's writes, on the row DELIVERY_CLAIM_READ locked: the delivery `delivering` under
a lease with its attempt number taken, and the attempt's row (the ORM sent two statements)."""


def delivery_claim(*, delivery_id: UUID, now: datetime) -> Claim | None:
    """Take the next attempt of a due delivery, or None when it is not due, is being sent by
    another worker, is finished, its endpoint is disabled, or its secret cannot be read."""
    with transaction.atomic():
        params = [delivery_id, list(selectors.OPEN_STATUSES), now]
        delivery = next(iter(Delivery.objects.raw(DELIVERY_CLAIM_READ, params)), None)
        if delivery is None:
            return None
        if (
            delivery.status == DeliveryStatus.DELIVERING
            and _lost_attempt_close(delivery, now=now) == DeliveryStatus.FAILED
        ):
            return None
        secret = _signing_secret(delivery.endpoint_signing_secret)
        if secret is None:
            _delivery_hold(delivery, now=now)
            return None
        number = delivery.attempts + 1
        lease = {
            "delivery_id": delivery.id,
            "number": number,
            "lease_ends_at": now + timedelta(seconds=lease_seconds()),
            "url": delivery.endpoint_url,
            "now": now,
        }
        with connection.cursor() as cursor:
            cursor.execute(DELIVERY_LEASE, lease)
            (attempt_id,) = cursor.fetchone()
    return Claim(
        delivery_id=delivery.id,
        attempt_id=attempt_id,
        number=number,
        endpoint_id=delivery.endpoint_id,
        merchant_id=delivery.merchant_id,
        url=delivery.endpoint_url,
        secret=secret,
        body=(delivery.event_body or serialize(_payload(delivery.event_payload))).encode("utf-8"),
        event_id=delivery.event_id,
        event_type=delivery.event_type,
    )


def _payload(payload: dict | str) -> dict:
    """An event's stored payload (one stored before bodies were kept may come back as text)."""
    return payload if isinstance(payload, dict) else json.loads(payload)


def _outcome_changes(claim: Claim, outcome: Outcome, finished_at: datetime) -> dict:
    """What an attempt's outcome makes of its delivery: delivered, failed for good, or due
    again after the retry schedule's next delay."""
    if outcome.acknowledged:
        return {
            "status": DeliveryStatus.SUCCEEDED,
            "delivered_at": finished_at,
            "next_attempt_at": None,
            "last_error": "",
        }
    if claim.number >= max_attempts():
        return {
            "status": DeliveryStatus.FAILED,
            "next_attempt_at": None,
            "last_error": outcome.error,
        }
    delay = settings.WEBHOOK_RETRY_SCHEDULE[claim.number - 1]
    changes = {
        "status": DeliveryStatus.PENDING,
        "next_attempt_at": finished_at + timedelta(seconds=delay),
        "last_error": outcome.error,
    }
    if delay <= retry_eta_limit_seconds():  # handed to the broker for its due time
        changes["dispatched_at"] = changes["next_attempt_at"]
    return changes


def _failed_attempt_log(claim: Claim, changes: dict) -> None:
    """A receiver that did not acknowledge: which delivery, event, merchant and endpoint, what
    went wrong and what happens next (ids only: never the URL, the body or the answer)."""
    where = (
        f"Webhook delivery {claim.delivery_id} (event {claim.event_id} {claim.event_type},"
        f" merchant {claim.merchant_id}, endpoint {claim.endpoint_id})"
        f" attempt {claim.number} of {max_attempts()} failed: {changes['last_error']}"
    )
    if changes["status"] == DeliveryStatus.FAILED:
        logger.warning("%s; failed for good: no retry left, the merchant may resend it", where)
    else:
        logger.warning("%s; retried at %s", where, changes["next_attempt_at"].isoformat())


DELIVERY_RECORD = """
WITH attempt AS (
    UPDATE webhooks_deliveryattempt
    SET started_at = %(started_at)s, finished_at = %(finished_at)s,
        response_status = %(response_status)s, duration_ms = %(duration_ms)s, error = %(error)s,
        response_body = %(response_body)s
    WHERE id = %(attempt_id)s
)
UPDATE webhooks_delivery
SET status = %(status)s, next_attempt_at = %(next_attempt_at)s, last_error = %(last_error)s,
    delivered_at = COALESCE(%(delivered_at)s, delivered_at),
    dispatched_at = COALESCE(%(dispatched_at)s, dispatched_at), updated_at = %(finished_at)s
WHERE id = %(delivery_id)s AND status = 'delivering' AND attempts = %(number)s
"""
"""An attempt's outcome: its row, and the delivery moved on (delivered, failed for good or due
again, as _outcome_changes says) while this attempt still owns it (the ORM sent two)."""


def delivery_record(*, claim: Claim, outcome: Outcome, now: datetime) -> str:
    """Record the attempt sent at `now` and move the delivery on, unless its lease ran out and
    a later attempt owns it now; returns the delivery's status. A retry due soon is handed to
    the broker, for its due time, after commit."""
    finished_at = now + timedelta(milliseconds=outcome.duration_ms)
    changes = _outcome_changes(claim, outcome, finished_at)
    params = {
        "attempt_id": claim.attempt_id,
        "started_at": now,
        "finished_at": finished_at,
        "response_status": outcome.response_status,
        "duration_ms": outcome.duration_ms,
        "error": outcome.error,
        "response_body": outcome.response_body,
        "delivery_id": claim.delivery_id,
        "number": claim.number,
        "delivered_at": None,
        "dispatched_at": None,
        **changes,
    }
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(DELIVERY_RECORD, params)
            owned = cursor.rowcount
        if not owned:
            return Delivery.objects.values_list("status", flat=True).get(pk=claim.delivery_id)
        if changes["status"] != DeliveryStatus.SUCCEEDED:
            _failed_attempt_log(claim, changes)
        if "dispatched_at" in changes:
            eta = changes["next_attempt_at"]
            transaction.on_commit(partial(delivery_enqueue, claim.delivery_id, eta=eta))
        return changes["status"]


def delivery_attempt(*, delivery_id: UUID, now: datetime | None = None) -> str | None:
    """Make the next attempt of a delivery if it is due at `now` and nobody else holds it.
    Claim, send (no lock held), record. Returns the delivery's status after the attempt, or
    None when nothing was sent (not due yet, finished, or held: the task may run twice)."""
    now = now or timezone.now()
    claim = delivery_claim(delivery_id=delivery_id, now=now)
    if claim is None:
        return None
    outcome = post(claim=claim, now=now)
    return delivery_record(claim=claim, outcome=outcome, now=now)


@contextmanager
def deliveries_sent_here() -> Iterator[None]:
    """The first attempt of every delivery made due by what commits inside the block is made by
    this process once the block is done, not by a `deliver_webhook` task each: the worker that
    applied a payment's answer sends its webhook itself (a task fewer a payment). If the block
    or an attempt raises, what is left goes to the broker as usual."""
    collected: list[UUID] = []
    token = SENT_HERE.set(collected)
    try:
        yield
    except BaseException:
        for delivery_id in collected:
            delivery_enqueue(delivery_id)
        raise
    finally:
        SENT_HERE.reset(token)
    for sent, delivery_id in enumerate(collected):
        try:
            delivery_attempt(delivery_id=delivery_id)
        except BaseException:
            for left in collected[sent:]:
                delivery_enqueue(left)
            raise
