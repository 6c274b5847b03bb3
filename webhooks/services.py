"""Webhook endpoints, the event outbox and signed, retried delivery (spec 6, DESIGN §9).

A delivery is claimed in a short transaction (status `delivering`, attempt number taken, a
lease stored in `next_attempt_at`), the HTTP request is made with no lock held, and the answer
is recorded in a new transaction. Retries are due times in the database picked up by the beat
sweep; a worker that dies mid-attempt loses its lease and the delivery is claimed again.
"""

import ipaddress
import json
import logging
import secrets
import threading
import time
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from functools import partial
from typing import Any
from urllib.parse import urlsplit
from uuid import UUID

import urllib3
from django.conf import settings
from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.serializers.json import DjangoJSONEncoder
from django.core.validators import URLValidator
from django.db import connection, transaction
from django.db.models import Exists, F, OuterRef, Q
from django.utils import timezone
from kombu.exceptions import OperationalError as BrokerError

from config import netguard, rawsql, shared_cache
from config.exceptions import DomainError, NotFound
from config.fields import format_timestamp
from config.rawsql import RowReader
from config.transactions import joined_atomic
from merchants import services as merchant_services
from merchants.models import AuditAction, Merchant
from webhooks import secrets_at_rest, selectors, signing
from webhooks.models import (
    TEST_EVENT_TYPE,
    Delivery,
    DeliveryAttempt,
    DeliveryStatus,
    EndpointDisabledReason,
    Event,
    WebhookEndpoint,
)

logger = logging.getLogger("cowry.webhooks")

SECRET_PREFIX = "whsec_"
MIN_SECRET_LENGTH = 16
MAX_URL_LENGTH = 2048
RESPONSE_PREFIX_BYTES = 1024
MAX_ENDPOINTS_PER_MERCHANT = 5
FAILING_DISABLE_AFTER = timedelta(days=5)
# Spec 6.3: the names an endpoint can subscribe to (plus the dashboard's test event).
EVENT_TYPES = (
    "payin.completed",
    "payin.failed",
    "payout.completed",
    "payout.failed",
    "refund.completed",
    "refund.failed",
    "transfer.payin.completed",
    "transfer.payin.failed",
    "transfer.payout.completed",
    "transfer.payout.failed",
    "transfer.completed",
    "transfer.failed",
    TEST_EVENT_TYPE,
)


class InvalidWebhookUrl(DomainError):
    status = 400
    reason = "invalid_webhook_url"
    message = "The webhook URL is not acceptable."


class InvalidSigningSecret(DomainError):
    status = 400
    reason = "invalid_signing_secret"
    message = f"A signing secret must be at least {MIN_SECRET_LENGTH} printable characters."


class WebhookNotConfigured(DomainError):
    status = 400
    reason = "webhook_not_configured"
    message = "The merchant has no enabled webhook endpoint."


class TooManyWebhookEndpoints(DomainError):
    status = 409
    reason = "too_many_webhook_endpoints"
    message = f"A merchant has at most {MAX_ENDPOINTS_PER_MERCHANT} webhook endpoints."


class InvalidEventTypes(DomainError):
    status = 400
    reason = "invalid_event_types"
    message = "Unknown event type."


class NoWebhookEndpoint(DomainError):
    status = 409
    reason = "no_webhook_endpoint"
    message = "The merchant has no enabled webhook endpoint subscribed to this event."


def max_attempts() -> int:
    """The first attempt plus one per retry of WEBHOOK_RETRY_SCHEDULE (7 by default)."""
    return len(settings.WEBHOOK_RETRY_SCHEDULE) + 1


def lease_seconds() -> int:
    """How long a claimed attempt belongs to its worker: well beyond the requests a sender's
    claim may make before it (SENDER_CLAIM_SIZE, each up to a connect and a read timeout)."""
    return int(settings.WEBHOOK_TIMEOUT_SECONDS * (3 + 2 * (SENDER_CLAIM_SIZE - 1))) + 60


def _serialize(payload: dict[str, Any]) -> str:
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False)


class _ApiJSONEncoder(DjangoJSONEncoder):
    """DjangoJSONEncoder, but datetimes keep their microseconds, as the REST API renders them
    (DRF): a webhook's snapshot reconciles exactly with GET, and two events stamped 1 µs apart
    (a leg event and its transfer's aggregate event) do not show the same `created_at`."""

    def default(self, o: Any) -> Any:
        if isinstance(o, datetime):
            return format_timestamp(o)
        return super().default(o)


def _json_safe(value: Any) -> Any:
    """Decimals, UUIDs and datetimes as the API renders them (strings)."""
    return json.loads(json.dumps(value, cls=_ApiJSONEncoder))


# Endpoints ----------------------------------------------------------------------------------


def webhook_url_validate(url: str) -> str:
    """The URL, stripped, or InvalidWebhookUrl: https (http only with WEBHOOK_ALLOW_HTTP), no
    credentials or fragment, no literal private address unless ALLOW_PRIVATE_NETWORK_URLS.
    Hostnames are checked again on the connected address at every attempt."""
    url = url.strip()

    def refuse(message: str) -> InvalidWebhookUrl:
        return InvalidWebhookUrl(message, fields={"url": [message]})

    if not url or len(url) > MAX_URL_LENGTH:
        raise refuse(f"Give a URL of at most {MAX_URL_LENGTH} characters.")
    if not netguard.url_scheme_allowed(url, allow_http=settings.WEBHOOK_ALLOW_HTTP):
        raise refuse("The webhook URL must use https.")
    try:
        URLValidator(schemes=["http", "https"])(url)
    except DjangoValidationError as exc:
        raise refuse("This is not a valid URL.") from exc
    if not netguard.url_port_valid(url):
        raise refuse("The webhook URL's port must be between 1 and 65535.")
    parts = urlsplit(url)
    if parts.username or parts.password:
        raise refuse("The webhook URL must not contain credentials.")
    if parts.fragment:
        raise refuse("The webhook URL must not contain a fragment.")
    host = (parts.hostname or "").strip("[]")
    try:
        literal = ipaddress.ip_address(host)
    except ValueError:
        literal = None
    if (
        literal is not None
        and not settings.ALLOW_PRIVATE_NETWORK_URLS
        and not netguard.address_is_public(str(literal))
    ):
        raise refuse("The webhook URL must point to a public address.")
    return url


def _validated_secret(secret: str | None) -> str:
    if secret is None:
        return SECRET_PREFIX + secrets.token_urlsafe(32)
    if len(secret) < MIN_SECRET_LENGTH or len(secret) > 200 or not secret.isprintable():
        raise InvalidSigningSecret(fields={"secret": [InvalidSigningSecret.message]})
    return secret


def event_types_validate(event_types: list[str] | tuple[str, ...]) -> list[str]:
    """Known event names, deduplicated, in order; empty means every event."""
    unknown = [name for name in event_types if name not in EVENT_TYPES]
    if unknown:
        message = f"Unknown event type(s): {', '.join(map(str, unknown))}."
        raise InvalidEventTypes(message, fields={"event_types": [message]})
    return list(dict.fromkeys(event_types))


# An endpoint's row lock, its own only: WebhookEndpoint's default ordering starts with its
# merchant, so a plain select_for_update() that orders (first()) joins the merchant's row and
# locks it FOR UPDATE too, after the endpoint's. Against set_webhook or a re-send of failed
# deliveries, which lock the merchant first and then write the endpoint, that is a deadlock;
# and a merchant row held FOR UPDATE stalls every payment of the merchant at its commit (their
# inserts' foreign keys lock its key). FOR NO KEY UPDATE for the same reason: a payment's
# delivery to the endpoint locks the endpoint's key at insert and need not wait for a save.
_ENDPOINT_LOCKED = WebhookEndpoint.objects.select_for_update(of=("self",), no_key=True)


def endpoint_set(
    *, merchant: Merchant, url: str, secret: str | None = None, now: datetime, actor=None
) -> tuple[WebhookEndpoint, str]:
    """Create or replace the merchant's primary (oldest) endpoint, enabled, and set its signing
    secret: the given one, or a new random one. Other endpoints and the primary's subscription
    are kept; the audit log records the change and who made it (no actor: ops, "system").
    Returns the endpoint and the secret, to show once (`set_webhook`)."""
    url = webhook_url_validate(url)
    secret = _validated_secret(secret)
    with transaction.atomic():
        merchant_services.merchant_turn(merchant.pk)
        endpoint = (
            WebhookEndpoint.objects.filter(merchant=merchant).order_by("created_at", "id").first()
        )
        if endpoint is None:
            endpoint = WebhookEndpoint.objects.create(
                merchant=merchant,
                url=url,
                signing_secret=secrets_at_rest.encrypt(secret),
                enabled=True,
                delivery_settings_changed_at=now,
                created_at=now,
                updated_at=now,
            )
        else:
            endpoint.url = url
            endpoint.signing_secret = secrets_at_rest.encrypt(secret)
            endpoint.enabled = True
            endpoint.disabled_reason = ""
            endpoint.disabled_at = None
            endpoint.delivery_settings_changed_at = now  # a new secret, at least
            endpoint.updated_at = now
            endpoint.save(
                update_fields=[
                    "url",
                    "signing_secret",
                    "enabled",
                    "disabled_reason",
                    "disabled_at",
                    "delivery_settings_changed_at",
                    "updated_at",
                ]
            )
        merchant_services.audit_record(
            merchant=merchant,
            actor=actor,
            action=AuditAction.WEBHOOK_UPDATED,
            target=endpoint.url,
            detail={"enabled": True, "signing_secret": "set"},
        )
    return endpoint, secret


def endpoint_add(
    *,
    merchant: Merchant,
    url: str,
    event_types: list[str] | tuple[str, ...] = (),
    secret: str | None = None,
    now: datetime,
) -> tuple[WebhookEndpoint, str]:
    """One more endpoint (at most MAX_ENDPOINTS_PER_MERCHANT), enabled, with its own signing
    secret and subscription (empty: every event). Returns it and the secret, to show once."""
    url = webhook_url_validate(url)
    event_types = event_types_validate(event_types)
    secret = _validated_secret(secret)
    with transaction.atomic():
        merchant_services.merchant_turn(merchant.pk)
        if WebhookEndpoint.objects.filter(merchant=merchant).count() >= MAX_ENDPOINTS_PER_MERCHANT:
            raise TooManyWebhookEndpoints()
        endpoint = WebhookEndpoint.objects.create(
            merchant=merchant,
            url=url,
            signing_secret=secrets_at_rest.encrypt(secret),
            event_types=event_types,
            enabled=True,
            delivery_settings_changed_at=now,
            created_at=now,
            updated_at=now,
        )
    return endpoint, secret


def endpoint_rotate_secret(*, endpoint_id: UUID, now: datetime) -> str:
    """A new random signing secret; attempts made from now on are signed with it."""
    secret = _validated_secret(None)
    with transaction.atomic():
        endpoint = _ENDPOINT_LOCKED.filter(pk=endpoint_id).first()
        if endpoint is None:
            raise NotFound()
        endpoint.signing_secret = secrets_at_rest.encrypt(secret)
        endpoint.delivery_settings_changed_at = now  # a receiver refusing the old one may pass
        endpoint.updated_at = now
        endpoint.save(
            update_fields=["signing_secret", "delivery_settings_changed_at", "updated_at"]
        )
    return secret


def endpoint_secrets_reencrypt() -> dict[str, Any]:
    """Encrypt every stored signing secret afresh under the first key of WEBHOOK_SECRETS_KEYS
    (the `reencrypt_webhook_secrets` command, after a new key was put first), so the old keys
    can then be removed. Each endpoint under its row lock, in a transaction of its own; one
    already under the first key is left alone, so a second run changes nothing. The secrets
    themselves do not change; one still in clear (set by a process on the code before the
    encryption, after the migration ran) is encrypted. Returns the counts and the ids of the
    endpoints whose secret no key decrypts (left as they are)."""
    endpoints = reencrypted = already_current = 0
    unreadable: list[str] = []
    for endpoint_id in list(WebhookEndpoint.objects.order_by("pk").values_list("pk", flat=True)):
        with transaction.atomic():
            endpoint = _ENDPOINT_LOCKED.only("pk", "signing_secret").filter(pk=endpoint_id).first()
            if endpoint is None:  # deleted meanwhile
                continue
            endpoints += 1
            if secrets_at_rest.under_first_key(endpoint.signing_secret):
                already_current += 1
                continue
            try:
                endpoint.signing_secret = secrets_at_rest.reencrypt(endpoint.signing_secret)
            except secrets_at_rest.UnreadableSecret:
                if not secrets_at_rest.in_clear(endpoint.signing_secret):
                    unreadable.append(str(endpoint_id))
                    continue
                # set by a process still on the code before the encryption, after 0006 ran
                endpoint.signing_secret = secrets_at_rest.encrypt(endpoint.signing_secret)
            endpoint.save(update_fields=["signing_secret"])
            reencrypted += 1
    return {
        "endpoints": endpoints,
        "reencrypted": reencrypted,
        "already_current": already_current,
        "unreadable": unreadable,
    }


def endpoint_update(
    *,
    endpoint_id: UUID,
    url: str,
    enabled: bool,
    now: datetime,
    event_types: list[str] | tuple[str, ...] | None = None,
) -> WebhookEndpoint:
    """Change the URL, the subscription (None: kept) or switch the endpoint on or off; the
    signing secret is kept. A disabled endpoint gets no new deliveries; its open ones wait
    until it is enabled again. Enabling clears the reason it was disabled for. A new URL or
    switching it back on restarts the failing-endpoint clock (endpoints_disable_failing); a
    new subscription, or the same settings saved again, does not."""
    url = webhook_url_validate(url)
    if event_types is not None:
        event_types = event_types_validate(event_types)
    with transaction.atomic():
        endpoint = _ENDPOINT_LOCKED.filter(pk=endpoint_id).first()
        if endpoint is None:
            raise NotFound()
        if url != endpoint.url or (enabled and not endpoint.enabled):
            endpoint.delivery_settings_changed_at = now
        endpoint.url = url
        if enabled and not endpoint.enabled:
            endpoint.disabled_reason = ""
            endpoint.disabled_at = None
        elif not enabled and endpoint.enabled:
            endpoint.disabled_at = now
        endpoint.enabled = enabled
        if event_types is not None:
            endpoint.event_types = event_types
        endpoint.updated_at = now
        endpoint.save(
            update_fields=[
                "url",
                "enabled",
                "disabled_reason",
                "disabled_at",
                "event_types",
                "delivery_settings_changed_at",
                "updated_at",
            ]
        )
    return endpoint


def endpoints_disable_failing(*, now: datetime) -> int:
    """The sweep: disable every enabled endpoint whose every delivery attempt has failed for
    FAILING_DISABLE_AFTER (no success since a failure at least that old, and still failing
    inside the window). Its open deliveries wait; the merchant re-enables it in the dashboard.
    Only attempts since a change that could make them succeed count (created, moved, a new
    signing secret, re-enabled: `delivery_settings_changed_at`): a merchant who fixed the
    receiver and re-enabled it is not disabled again for what failed before, but changing
    what an endpoint that keeps failing subscribes to, or saving it unchanged, does not keep
    it enabled. Returns the number of endpoints disabled."""
    cutoff = now - FAILING_DISABLE_AFTER
    ok = Q(response_status__gte=200, response_status__lt=300)
    attempts = DeliveryAttempt.objects.filter(
        delivery__endpoint=OuterRef("pk"),
        finished_at__isnull=False,
        started_at__gt=OuterRef("delivery_settings_changed_at"),
    )
    candidates = WebhookEndpoint.objects.filter(enabled=True).filter(
        Exists(attempts.filter(started_at__gt=cutoff).exclude(ok)),
        ~Exists(attempts.filter(started_at__gt=cutoff).filter(ok)),
        Exists(attempts.filter(started_at__lte=cutoff).exclude(ok)),
    )
    disabled = 0
    for endpoint_id in candidates.values_list("pk", flat=True):
        with transaction.atomic():
            endpoint = _ENDPOINT_LOCKED.filter(pk=endpoint_id, enabled=True).first()
            if endpoint is None:
                continue
            mine = DeliveryAttempt.objects.filter(
                delivery__endpoint=endpoint,
                finished_at__isnull=False,
                started_at__gt=endpoint.delivery_settings_changed_at,
            )
            last_success = mine.filter(ok).order_by("-started_at").first()
            streak = mine.exclude(ok).filter(started_at__lte=cutoff)
            if last_success is not None:
                if last_success.started_at > cutoff:
                    continue
                streak = streak.filter(started_at__gt=last_success.started_at)
            if not streak.exists():
                continue
            endpoint.enabled = False
            endpoint.disabled_reason = EndpointDisabledReason.FAILING
            endpoint.disabled_at = now
            endpoint.updated_at = now
            endpoint.save(update_fields=["enabled", "disabled_reason", "disabled_at", "updated_at"])
            logger.warning("Webhook endpoint %s disabled: failing for 5 days", endpoint.pk)
            disabled += 1
    return disabled


# Events and deliveries ----------------------------------------------------------------------


def _enqueue_delivery(delivery_id: UUID) -> None:
    from webhooks import tasks

    try:
        tasks.deliver_webhook.delay(delivery_id=str(delivery_id))
    except BrokerError:
        # The delivery is in the database; the beat sweep sends it once the broker is back.
        logger.warning("Broker unavailable; delivery %s left to the sweep", delivery_id)


# New deliveries wake a sender (config.shared_cache.wake) instead of each getting a task of
# their own; a sender whose claim finds a backlog due behind it wakes one more.
SENDER_WAKE_KEY = "webhooks:sender-wake"
SENDER_CLAIM_SIZE = 4  # due deliveries a sender claims at once, sends in turn, records at once
SENDER_BATCH_LIMIT = 50  # claims; then the task hands over to a fresh one


def _sender_wake() -> None:
    from webhooks import tasks

    shared_cache.wake(SENDER_WAKE_KEY, tasks.send_webhooks)


def _due_now(now: datetime) -> dict[str, Any]:
    """The values of a new delivery, due now."""
    return {
        "status": DeliveryStatus.PENDING,
        "next_attempt_at": now,
        "dispatched_at": now,
        "created_at": now,
        "updated_at": now,
    }


def _delivery_new(*, event: Event, endpoint: WebhookEndpoint, now: datetime) -> Delivery:
    """A delivery of the event to the endpoint, due now, for the caller to insert; inserting it
    must also wake a sender after commit."""
    return Delivery(event=event, endpoint=endpoint, **_due_now(now))


def _delivery_create(*, event: Event, endpoint: WebhookEndpoint, now: datetime) -> Delivery:
    delivery = rawsql.insert(_delivery_new(event=event, endpoint=endpoint, now=now))
    transaction.on_commit(_sender_wake)
    return delivery


# Read for every event: a plain read, without the ORM's compilation.
_ENABLED_ENDPOINTS = RowReader(
    WebhookEndpoint, where=("merchant", "enabled"), order_by=("created_at", "id")
)


def _subscribed_endpoints(*, merchant_id: UUID, event_type: str) -> list[WebhookEndpoint]:
    return [
        endpoint
        for endpoint in _ENABLED_ENDPOINTS.all(merchant_id, True)
        if endpoint.subscribed_to(event_type)
    ]


def event_record(
    *,
    merchant_id: UUID,
    event_type: str,
    data_type: str,
    data_id: UUID,
    data_object: dict[str, Any],
    at: datetime,
    fan_out: bool = True,
) -> Event:
    """Record one event. Call it inside the transaction that makes the state change, so the
    event exists if and only if the change committed. data_object is the snapshot at `at`.
    A delivery is created for each enabled endpoint subscribed to the event type, and sent
    after commit (`fan_out=False`: none)."""
    with joined_atomic():
        event = event_new(
            merchant_id=merchant_id,
            event_type=event_type,
            data_type=data_type,
            data_id=data_id,
            data_object=data_object,
            at=at,
        )
        if not fan_out:
            rawsql.insert(event)
        elif connection.vendor == "postgresql":  # no read of the endpoints first
            deliveries = deliveries_part(event)
            rawsql.save_together(inserts=[event], also=[deliveries])
            deliveries_sent_after_commit(deliveries)
        else:
            deliveries = [
                _delivery_new(event=event, endpoint=endpoint, now=at)
                for endpoint in _subscribed_endpoints(
                    merchant_id=merchant_id, event_type=event_type
                )
            ]
            rawsql.save_together(inserts=[event, *deliveries])
            if deliveries:
                transaction.on_commit(_sender_wake)
    return event


def event_new(
    *,
    merchant_id: UUID,
    event_type: str,
    data_type: str,
    data_id: UUID,
    data_object: dict[str, Any],
    at: datetime,
) -> Event:
    """The event (unsaved) that event_record would record: its envelope and body built."""
    event = Event(
        merchant_id=merchant_id,
        event_type=event_type,
        data_type=data_type,
        data_id=data_id,
        created_at=at,
    )
    event.payload = _json_safe(
        {
            "id": event.id,
            "event": event_type,
            "created_at": at,
            "data": {"type": data_type, "id": data_id, "object": data_object},
        }
    )
    event.body = _serialize(event.payload)
    return event


# One delivery of an event per enabled endpoint subscribed to its type (as
# WebhookEndpoint.subscribed_to decides: no types, or this one), with the values _delivery_new
# gives: a part of the statement that inserts the event, so no read of the endpoints first.
_FAN_OUT_SQL = """
INSERT INTO webhooks_delivery
    (id, event_id, endpoint_id, status, attempts, next_attempt_at, dispatched_at, last_error,
     delivered_at, created_at, updated_at)
SELECT gen_random_uuid(), %s, e.id, %s, 0, %s, %s, '', NULL, %s, %s
FROM webhooks_webhookendpoint e
WHERE e.merchant_id = %s AND e.enabled
    AND (e.event_types = '[]'::jsonb OR e.event_types @> jsonb_build_array(%s::text)){condition}
RETURNING 1
"""


def _fan_out_params(event: Event) -> list[Any]:
    now, pending = event.created_at, DeliveryStatus.PENDING
    return [event.id, pending, now, now, now, now, event.merchant_id, event.event_type]


def deliveries_part(event: Event) -> rawsql.Part:
    """The deliveries event_record makes for an event, as a part of a caller's statement that
    inserts the event too (PostgreSQL): once it ran, `deliveries_sent_after_commit(part)`."""
    return rawsql.Part(
        name="deliveries",
        sql=_FAN_OUT_SQL,
        params=_fan_out_params(event),
    )


def deliveries_sent_after_commit(part: rawsql.Part) -> None:
    """Wake the sender once the transaction commits, if the part made deliveries."""
    if part.rows:
        transaction.on_commit(_sender_wake)


def event_resend(
    *, event_id: UUID, now: datetime, merchant: Merchant | None = None
) -> list[Delivery]:
    """Send an event again now, same event id and body, to every enabled endpoint subscribed
    to it. An endpoint with a delivery of the event still open gets no second one: that
    delivery is the re-send, made due now if it was waiting for a retry (it keeps its attempt
    count), so the receiver does not get the event now and once more at that retry. Any other
    endpoint gets a new delivery (fresh attempt count). `merchant`: only that merchant's event
    (the API); another's is NotFound. NoWebhookEndpoint (409) when no endpoint would get it.
    Returns the deliveries that make the re-send, open ones first. Re-sends of a merchant's
    events (and events_resend_failed) take turns on its row, so two at once (a double click,
    a retry under a new Idempotency-Key) see each other's delivery and make one."""
    with transaction.atomic():
        events = Event.objects.filter(pk=event_id)
        if merchant is not None:
            events = events.filter(merchant=merchant)
        event = events.first()
        if event is None:
            raise selectors.EventNotFound()
        merchant_services.merchant_turn(event.merchant_id)
        if event.event_type == TEST_EVENT_TYPE:  # a test is of one endpoint, its data id
            endpoints = [
                endpoint
                for endpoint in _ENABLED_ENDPOINTS.all(event.merchant_id, True)
                if endpoint.pk == event.data_id
            ]
        else:
            endpoints = _subscribed_endpoints(
                merchant_id=event.merchant_id, event_type=event.event_type
            )
        if not endpoints:
            raise NoWebhookEndpoint()
        still_open = _deliveries_due_now(event=event, endpoints=endpoints, now=now)
        covered = {delivery.endpoint_id for delivery in still_open}
        return still_open + [
            _delivery_create(event=event, endpoint=e, now=now)
            for e in endpoints
            if e.pk not in covered
        ]


def _deliveries_due_now(
    *, event: Event, endpoints: list[WebhookEndpoint], now: datetime
) -> list[Delivery]:
    """The open deliveries of the event to these endpoints, those waiting for a retry made due
    now (a sender is woken for them). One whose attempt is under way is left to it: that
    attempt is the re-send. Only pending rows are written, never a delivering one, so this
    waits on no sender's record of an outcome."""
    targets = Delivery.objects.filter(event=event, endpoint__in=[e.pk for e in endpoints])
    pulled = targets.filter(status=DeliveryStatus.PENDING, next_attempt_at__gt=now).update(
        next_attempt_at=now, dispatched_at=now, updated_at=now
    )
    if pulled:
        transaction.on_commit(_sender_wake)
    return list(targets.filter(status__in=selectors.OPEN_STATUSES).order_by("created_at", "id"))


def endpoint_recovery_since(*, disabled_at: datetime, disabled_reason: str) -> datetime:
    """The `since` that recovers, with events_resend_failed, what an endpoint disabled at
    `disabled_at` did not get: the events of the time it was off and, when the sweep disabled
    it for failing, the deliveries that failed over the days before (their first failure at
    least FAILING_DISABLE_AFTER old then, each created up to its retries' span before it, the
    hourly sweep up to an hour late)."""
    if disabled_reason != EndpointDisabledReason.FAILING:
        return disabled_at
    retries = timedelta(seconds=sum(settings.WEBHOOK_RETRY_SCHEDULE))
    return disabled_at - FAILING_DISABLE_AFTER - retries - timedelta(hours=1)


RESEND_INSERT_ROWS = 1000  # deliveries per INSERT of a recovery (PostgreSQL takes 65535 values)


def events_resend_failed(*, merchant: Merchant, since: datetime, now: datetime) -> int:
    """Recover, for each of the merchant's enabled endpoints, what it did not get of the events
    since `since` (POST /events/resend-failed), each event once per endpoint:
    - a failed delivery created at or after `since` is re-sent (a new delivery of the same
      event, fresh attempts) unless a later delivery of its event to its endpoint exists;
    - an event recorded at or after `since`, after the endpoint was created, that it is
      subscribed to and never got a delivery of (it was disabled then: an event fans out to
      the enabled endpoints only) is sent to it (selectors.events_missed). Test events never.
    A delivery still open is left to its retry. Every delivery made is a later delivery of its
    event to its endpoint, so repeating the call sends nothing twice; calls take turns on the
    merchant's row with each other and with event_resend, so two at once send once. A bounded
    number of statements: a read per endpoint (five at most), an insert per
    RESEND_INSERT_ROWS deliveries. Returns the number of deliveries made."""
    with transaction.atomic():
        merchant_services.merchant_turn(merchant.pk)
        endpoints = _ENABLED_ENDPOINTS.all(merchant.pk, True)
        targets = selectors.deliveries_failed_not_resent(
            merchant=merchant, since=since, endpoint_ids=[e.pk for e in endpoints]
        )
        for endpoint in endpoints:
            targets += [
                (event_id, endpoint.pk)
                for event_id in selectors.events_missed(endpoint=endpoint, since=since)
            ]
        deliveries = [
            Delivery(event_id=event_id, endpoint_id=endpoint_id, **_due_now(now))
            for event_id, endpoint_id in targets
        ]
        for start in range(0, len(deliveries), RESEND_INSERT_ROWS):
            rawsql.insert_many(deliveries[start : start + RESEND_INSERT_ROWS])
        if deliveries:
            transaction.on_commit(_sender_wake)
    return len(deliveries)


def endpoint_send_test_event(*, endpoint_id: UUID, now: datetime) -> Delivery:
    """Record a `webhook.test` event for the endpoint's merchant and deliver it like any other."""
    with transaction.atomic():
        endpoint = WebhookEndpoint.objects.filter(pk=endpoint_id).first()
        if endpoint is None:
            raise NotFound()
        if not endpoint.enabled:
            raise WebhookNotConfigured("The webhook endpoint is disabled.")
        event = event_record(
            fan_out=False,
            merchant_id=endpoint.merchant_id,
            event_type=TEST_EVENT_TYPE,
            data_type="test",
            data_id=endpoint.id,
            data_object={
                "id": endpoint.id,
                "message": "Test event from Cowry: your endpoint is reachable.",
                "created_at": now,
            },
            at=now,
        )
        return _delivery_create(event=event, endpoint=endpoint, now=now)


@dataclass(frozen=True)
class _Claim:
    delivery_id: UUID
    attempt_id: int
    number: int
    endpoint_id: UUID
    url: str
    secret: str | None  # decrypted; None: no key of WEBHOOK_SECRETS_KEYS opens it (never sent)
    body: bytes
    event_id: UUID
    event_type: str
    due_behind: int = 0  # due behind this one when it was claimed, counted to SENDER_BACKLOG


@dataclass(frozen=True)
class _Outcome:
    response_status: int | None
    duration_ms: int
    error: str
    response_body: str

    @property
    def acknowledged(self) -> bool:
        return self.response_status is not None and 200 <= self.response_status < 300


# The hot path of a delivery in one statement each on PostgreSQL (claim: lock, take the attempt
# number and the lease, log the attempt, read what to send; record: close the attempt, move the
# delivery on if we still own it), instead of a transaction of four ORM round trips each. A
# sender claims up to SENDER_CLAIM_SIZE due deliveries in one statement and records their
# outcomes in one. The ORM versions below stay the reference: SQLite (embedded mode) and the
# rare claim of a delivery whose previous worker was lost run them.
_CLAIM_SQL = """
WITH target AS (
    SELECT d.id, d.attempts + 1 AS number, d.next_attempt_at AS due_at
    FROM webhooks_delivery d
    JOIN webhooks_webhookendpoint e ON e.id = d.endpoint_id
    WHERE d.status = 'pending' AND d.next_attempt_at <= %(now)s AND e.enabled {which}
    FOR UPDATE OF d SKIP LOCKED
), claimed AS (
    UPDATE webhooks_delivery d
    SET status = 'delivering', attempts = t.number, next_attempt_at = %(lease_end)s,
        updated_at = %(now)s
    FROM target t
    WHERE d.id = t.id
    RETURNING d.id, d.attempts, d.event_id, d.endpoint_id, t.due_at
), attempt AS (
    INSERT INTO webhooks_deliveryattempt
        (delivery_id, number, url, started_at, error, response_body)
    SELECT c.id, c.attempts, e.url, %(now)s, '', ''
    FROM claimed c JOIN webhooks_webhookendpoint e ON e.id = c.endpoint_id
    RETURNING id, delivery_id
)
SELECT c.id, a.id, c.attempts, e.id, e.url, e.signing_secret, ev.body,
       CASE WHEN ev.body = '' THEN ev.payload END, ev.id, ev.event_type, {more}
FROM claimed c
JOIN attempt a ON a.delivery_id = c.id
JOIN webhooks_webhookendpoint e ON e.id = c.endpoint_id
JOIN webhooks_event ev ON ev.id = c.event_id
ORDER BY c.due_at, c.id
"""
_CLAIM_ONE_SQL = _CLAIM_SQL.format(which="AND d.id = %(delivery_id)s", more="0")
# the oldest due (the partial index `delivery_due` serves it), and how many are due behind
# them, up to SENDER_BACKLOG, a backlog (the statement's snapshot still sees the claimed ones as
# pending: they are left out by their ids)
SENDER_BACKLOG = 10
_CLAIM_NEXT_SQL = _CLAIM_SQL.format(
    which="ORDER BY d.next_attempt_at LIMIT %(size)s",
    more="(SELECT count(*) FROM (SELECT 1 FROM webhooks_delivery o"  # noqa: S608 (constants)
    " JOIN webhooks_webhookendpoint oe ON oe.id = o.endpoint_id AND oe.enabled"
    " WHERE o.status = 'pending' AND o.next_attempt_at <= %(now)s"
    f" AND o.id NOT IN (SELECT id FROM claimed) LIMIT {SENDER_BACKLOG}) AS behind)",
)

# One row of outcome per attempt: (attempt, delivery, number, started_at, finished_at,
# response_status, duration_ms, error, response_body, status, next_attempt_at, delivered_at,
# last_error), typed in each row so a NULL keeps its column's type.
_OUTCOME_ROW = (
    "(%s::bigint, %s::uuid, %s::integer, %s::timestamptz, %s::timestamptz, %s::integer,"
    " %s::integer, %s::text, %s::text, %s::text, %s::timestamptz, %s::timestamptz, %s::text)"
)
_RECORD_SQL = """
WITH outcome (attempt_id, delivery_id, number, started_at, finished_at, response_status,
              duration_ms, error, response_body, status, next_attempt_at, delivered_at,
              last_error) AS (VALUES {rows}),
attempt AS (
    UPDATE webhooks_deliveryattempt a
    SET started_at = o.started_at, finished_at = o.finished_at,
        response_status = o.response_status, duration_ms = o.duration_ms, error = o.error,
        response_body = o.response_body
    FROM outcome o
    WHERE a.id = o.attempt_id
), moved AS (
    UPDATE webhooks_delivery d
    SET status = o.status, next_attempt_at = o.next_attempt_at,
        delivered_at = COALESCE(o.delivered_at, d.delivered_at), last_error = o.last_error,
        updated_at = o.finished_at
    FROM outcome o
    WHERE d.id = o.delivery_id AND d.status = 'delivering' AND d.attempts = o.number
    RETURNING d.id, d.status
)
SELECT d.id, COALESCE(m.status, d.status)
FROM outcome o
JOIN webhooks_delivery d ON d.id = o.delivery_id
LEFT JOIN moved m ON m.id = o.delivery_id
"""


def _claim_from_row(row: tuple) -> _Claim:
    claimed_id, attempt_id, number, endpoint_id, url, stored_secret = row[:6]
    body, payload, event_id, event_type, more = row[6:]
    if not body:  # an event stored before bodies were kept: its payload, serialized
        body = _serialize(payload if isinstance(payload, dict) else json.loads(payload))
    return _Claim(
        delivery_id=claimed_id,
        attempt_id=attempt_id,
        number=number,
        endpoint_id=endpoint_id,
        url=url,
        secret=_signing_secret(stored_secret),
        body=body.encode("utf-8"),
        event_id=event_id,
        event_type=event_type,
        due_behind=more,
    )


def _signing_secret(stored: str) -> str | None:
    """The endpoint's signing secret in clear, or None when no key decrypts it."""
    try:
        return secrets_at_rest.decrypt(stored)
    except secrets_at_rest.UnreadableSecret:
        return None


def _lease_end(now: datetime) -> datetime:
    return now + timedelta(seconds=lease_seconds())


def _delivery_claim_sql(*, now: datetime, delivery_id: UUID) -> _Claim | None:
    """The due pending delivery `delivery_id`, claimed."""
    params = {"now": now, "lease_end": _lease_end(now), "delivery_id": delivery_id}
    with connection.cursor() as cursor:
        cursor.execute(_CLAIM_ONE_SQL, params)
        row = cursor.fetchone()
    return None if row is None else _claim_from_row(row)


def _deliveries_claim_sql(*, now: datetime, size: int = SENDER_CLAIM_SIZE) -> list[_Claim]:
    """Up to `size` of the oldest due pending deliveries, claimed, oldest first; each says how
    many were due behind them (`due_behind`)."""
    params = {"now": now, "lease_end": _lease_end(now), "size": size}
    with connection.cursor() as cursor:
        cursor.execute(_CLAIM_NEXT_SQL, params)
        return [_claim_from_row(row) for row in cursor.fetchall()]


LOST_ATTEMPT_ERROR = "No result recorded: the worker was lost or ran past its lease."


def _lost_attempt_close(delivery: Delivery, *, now: datetime) -> str:
    """A delivering delivery whose lease is over (its sender died mid-attempt), locked by the
    caller: its attempt is closed as lost, and counted (it may have reached the receiver). The
    seventh marks the delivery failed; before it the delivery is pending again, due at once (no
    retry delay: the fault was ours). Returns the delivery's new status."""
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
    return delivery.status


def deliveries_release_lost_leases(*, now: datetime, limit: int = 500) -> int:
    """Close the lost attempts of deliveries to disabled endpoints (part of the beat sweep).
    The claim that closes a lost attempt takes enabled endpoints only, so a delivery whose
    sender died while its endpoint was off read `delivering` as long as it stayed off, though
    nothing was sending it. Once its lease is over it is pending (or failed, after its
    seventh), as that claim would leave it; switched back on, the endpoint gets it like any
    pending delivery. Returns the number of deliveries released."""
    with transaction.atomic():
        lost = list(
            Delivery.objects.select_for_update(skip_locked=True, of=("self",))
            .filter(
                status=DeliveryStatus.DELIVERING,
                next_attempt_at__lte=now,
                endpoint__enabled=False,
            )
            .order_by("next_attempt_at")[:limit]
        )
        for delivery in lost:
            _lost_attempt_close(delivery, now=now)
    return len(lost)


def _delivery_claim(*, delivery_id: UUID, now: datetime) -> _Claim | None:
    """Take the next attempt of a due delivery, or None when it is not due, is being sent by
    another worker, is finished, or its endpoint is disabled."""
    if connection.vendor == "postgresql":
        claim = _delivery_claim_sql(delivery_id=delivery_id, now=now)
        if claim is not None:
            return claim
        # not pending and due: finished, not due, held, or a lost worker's (handled below)
    with transaction.atomic():
        delivery = (
            Delivery.objects.select_for_update(skip_locked=True, of=("self",))
            .select_related("event", "endpoint")
            .defer("event__payload")  # the stored body is what is sent
            .filter(
                pk=delivery_id,
                status__in=selectors.OPEN_STATUSES,
                next_attempt_at__lte=now,
                endpoint__enabled=True,
            )
            .first()
        )
        if delivery is None:
            return None
        if (
            delivery.status == DeliveryStatus.DELIVERING
            and _lost_attempt_close(delivery, now=now) == DeliveryStatus.FAILED
        ):
            return None
        number = delivery.attempts + 1
        delivery.status = DeliveryStatus.DELIVERING
        delivery.attempts = number
        delivery.next_attempt_at = now + timedelta(seconds=lease_seconds())
        delivery.updated_at = now
        delivery.save(update_fields=["status", "attempts", "next_attempt_at", "updated_at"])
        endpoint, event = delivery.endpoint, delivery.event
        attempt = DeliveryAttempt.objects.create(
            delivery=delivery, number=number, url=endpoint.url, started_at=now
        )
        return _Claim(
            delivery_id=delivery.id,
            attempt_id=attempt.id,
            number=number,
            endpoint_id=endpoint.id,
            url=endpoint.url,
            secret=_signing_secret(endpoint.signing_secret),
            body=(event.body or _serialize(event.payload)).encode("utf-8"),
            event_id=event.id,
            event_type=event.event_type,
        )


_pools = threading.local()


def _delivery_pool() -> urllib3.PoolManager:
    """A guarded pool manager per thread and per private-address setting, reused across
    deliveries so a busy receiver is reached over kept-alive connections. Every new connection
    is still checked by the SSRF guard when it is opened. urllib3 rather than a requests
    session: requests' per-call preparation and cookie handling were a quarter of a payment's
    worker CPU, for nothing a webhook uses."""
    key = bool(settings.ALLOW_PRIVATE_NETWORK_URLS)
    cached = getattr(_pools, "by_setting", None)
    if cached is None:
        cached = _pools.by_setting = {}
    if key not in cached:
        cached[key] = netguard.guarded_pool_manager()
    return cached[key]


def _post(*, claim: _Claim, now: datetime) -> _Outcome:
    """One signed POST (spec 6.1). Never follows a redirect; never raises."""
    timestamp = int(now.timestamp())
    headers = {
        "Content-Type": "application/json",
        "User-Agent": netguard.USER_AGENT,
        signing.SIGNATURE_HEADER: signing.sign(
            secret=claim.secret, timestamp=timestamp, body=claim.body
        ),
        signing.TIMESTAMP_HEADER: str(timestamp),
        signing.EVENT_HEADER: claim.event_type,
        signing.WEBHOOK_ID_HEADER: str(claim.event_id),
    }
    timeout = settings.WEBHOOK_TIMEOUT_SECONDS
    status: int | None = None
    error = ""
    answer = ""
    started = time.monotonic()
    try:
        with netguard.deadline(timeout):  # the whole answer, not each read of it
            response = _delivery_pool().urlopen(
                "POST",
                claim.url,
                body=claim.body,
                headers=headers,
                timeout=urllib3.Timeout(connect=timeout, read=timeout),
                redirect=False,
                retries=False,
                preload_content=False,
            )
            status = response.status
            try:
                answer = response.read(RESPONSE_PREFIX_BYTES).decode("utf-8", errors="replace")
            except urllib3.exceptions.HTTPError:
                pass  # the status is the answer; what the body said is only for support
            finally:
                # A body read to the end has already given its connection back to the pool;
                # one read in part cannot be reused (its rest would be read as the next one).
                response.close()
                response.release_conn()
        if 300 <= status < 400:
            location = repr(response.headers.get("Location", ""))
            if len(location) > 900:  # the receiver's text, kept short like its answer
                location = location[:900] + "..."
            error = f"HTTP {status}: redirect to {location} not followed"
        elif not 200 <= status < 300:
            error = f"HTTP {status}"
    except urllib3.exceptions.NewConnectionError as exc:  # a TimeoutError subclass in urllib3 2
        error = f"Could not connect: {exc}"[:1000]
    except netguard.NameResolutionTimeout:
        error = f"Timed out after {timeout:g} s: the host name did not resolve in time"
    except urllib3.exceptions.TimeoutError:  # connect, TLS handshake or the answer
        error = f"Timed out after {timeout:g} s"
    except urllib3.exceptions.HTTPError as exc:
        if netguard.is_refusal(exc):
            error = f"Blocked: {netguard.refusal_message(claim.url)}"
        elif isinstance(exc, urllib3.exceptions.ProtocolError) and _timed_out(exc):
            error = f"Timed out after {timeout:g} s"  # sending the request
        else:
            error = f"{type(exc).__name__}: {exc}"[:1000]
    duration_ms = int((time.monotonic() - started) * 1000)
    return _Outcome(
        response_status=status,
        duration_ms=duration_ms,
        error=_storable(error),
        response_body=_storable(answer),
    )


def _timed_out(exc: urllib3.exceptions.ProtocolError) -> bool:
    """Whether urllib3 reports as a broken connection a socket timeout (the request could not
    be sent before the deadline: urllib3 calls any OSError while sending "Connection aborted")."""
    return any(isinstance(arg, TimeoutError) for arg in exc.args)


def _storable(text: str) -> str:
    """The receiver's text as PostgreSQL can store it: a NUL character cannot be (the whole
    record would fail, and with it the outcomes of the deliveries claimed with this one)."""
    return text.replace("\x00", "\ufffd")


def _outcome_changes(claim: _Claim, outcome: _Outcome, finished_at: datetime) -> dict:
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
    return {
        "status": DeliveryStatus.PENDING,
        "next_attempt_at": finished_at + timedelta(seconds=delay),
        "last_error": outcome.error,
    }


def _deliveries_record(attempts: list[tuple[_Claim, _Outcome, datetime]]) -> dict[UUID, str]:
    """Record each attempt (claim, outcome, when it was sent) and move its delivery on, in one
    statement on PostgreSQL; returns each delivery's status. A delivery whose lease ran out and
    that a later attempt owns now is left alone."""
    if connection.vendor != "postgresql":
        return {
            claim.delivery_id: _delivery_record_orm(claim=claim, outcome=outcome, now=sent_at)
            for claim, outcome, sent_at in attempts
        }
    params: list = []
    for claim, outcome, sent_at in attempts:
        finished_at = sent_at + timedelta(milliseconds=outcome.duration_ms)
        changes = _outcome_changes(claim, outcome, finished_at)
        params += [
            claim.attempt_id,
            claim.delivery_id,
            claim.number,
            sent_at,
            finished_at,
            outcome.response_status,
            outcome.duration_ms,
            outcome.error,
            outcome.response_body,
            changes["status"],
            changes["next_attempt_at"],
            changes.get("delivered_at"),
            changes["last_error"],
        ]
    sql = _RECORD_SQL.format(rows=", ".join([_OUTCOME_ROW] * len(attempts)))
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return dict(cursor.fetchall())


# A claim reads each delivery's endpoint (URL, signing secret, enabled) once; a receiver slow to
# answer the first of a claim's deliveries must not have the rest sent to an endpoint the
# merchant has since disabled, moved or re-keyed: after this long they are given back unsent.
CLAIM_FRESH_SECONDS = 2.0

_GIVE_BACK_SQL = """
WITH back AS (
    UPDATE webhooks_delivery d
    SET status = 'pending', attempts = d.attempts - 1, next_attempt_at = %(due_at)s,
        last_error = COALESCE(%(last_error)s, d.last_error), updated_at = %(now)s
    FROM unnest(%(ids)s::uuid[], %(numbers)s::integer[]) AS g(id, number)
    WHERE d.id = g.id AND d.status = 'delivering' AND d.attempts = g.number
    RETURNING d.id
)
DELETE FROM webhooks_deliveryattempt a
WHERE a.id = ANY(%(attempt_ids)s::bigint[]) AND a.delivery_id IN (SELECT id FROM back)
"""


def _deliveries_give_back(
    claims: list[_Claim],
    *,
    now: datetime,
    due_at: datetime | None = None,
    last_error: str | None = None,
) -> None:
    """Claimed deliveries not sent after all: pending and due again (at `due_at`, else at
    once), their attempt neither counted nor logged (the next claim reads their endpoint
    afresh); `last_error`, if given, says why."""
    due_at = due_at or now
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                _GIVE_BACK_SQL,
                {
                    "now": now,
                    "due_at": due_at,
                    "last_error": last_error,
                    "ids": [claim.delivery_id for claim in claims],
                    "numbers": [claim.number for claim in claims],
                    "attempt_ids": [claim.attempt_id for claim in claims],
                },
            )
        return
    with transaction.atomic():  # embedded SQLite: one claim at a time
        for claim in claims:
            changes = {"last_error": last_error} if last_error is not None else {}
            back = Delivery.objects.filter(
                pk=claim.delivery_id, status=DeliveryStatus.DELIVERING, attempts=claim.number
            ).update(
                status=DeliveryStatus.PENDING,
                attempts=claim.number - 1,
                next_attempt_at=due_at,
                updated_at=now,
                **changes,
            )
            if back:
                DeliveryAttempt.objects.filter(pk=claim.attempt_id).delete()


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


def _deliveries_hold(claims: list[_Claim], *, now: datetime) -> None:
    """Claimed deliveries whose signing secret cannot be decrypted: given back unsent, due
    again after UNREADABLE_SECRET_RETRY_SECONDS with the reason as their last error; each is
    logged as an error (ids only, never the secret)."""
    _deliveries_give_back(
        claims,
        now=now,
        due_at=now + timedelta(seconds=UNREADABLE_SECRET_RETRY_SECONDS),
        last_error=UNREADABLE_SECRET_ERROR,
    )
    for claim in claims:
        logger.error(
            "Webhook delivery %s not sent: the signing secret of endpoint %s cannot be decrypted"
            " with any key of WEBHOOK_SECRETS_KEYS; retried in %d s",
            claim.delivery_id,
            claim.endpoint_id,
            UNREADABLE_SECRET_RETRY_SECONDS,
        )


def _delivery_record(*, claim: _Claim, outcome: _Outcome, now: datetime) -> str:
    """Record the attempt sent at `now` and move the delivery on; returns its status."""
    return _deliveries_record([(claim, outcome, now)])[claim.delivery_id]


def _delivery_record_orm(*, claim: _Claim, outcome: _Outcome, now: datetime) -> str:
    """_deliveries_record's reference, through the ORM, for one attempt."""
    finished_at = now + timedelta(milliseconds=outcome.duration_ms)
    changes = _outcome_changes(claim, outcome, finished_at)
    with transaction.atomic():
        DeliveryAttempt.objects.filter(pk=claim.attempt_id).update(
            started_at=now,
            finished_at=finished_at,
            response_status=outcome.response_status,
            duration_ms=outcome.duration_ms,
            error=outcome.error,
            response_body=outcome.response_body,
        )
        owned = Delivery.objects.filter(
            pk=claim.delivery_id, status=DeliveryStatus.DELIVERING, attempts=claim.number
        ).update(**changes, updated_at=finished_at)
        if owned:
            return changes["status"]
        return Delivery.objects.values_list("status", flat=True).get(pk=claim.delivery_id)


def delivery_attempt(*, delivery_id: UUID, now: datetime | None = None) -> str | None:
    """Make the next attempt of a delivery if it is due at `now` and nobody else holds it.
    Claim, send (no lock held), record. Returns the delivery's status after the attempt, or
    None when nothing was sent."""
    now = now or timezone.now()
    claim = _delivery_claim(delivery_id=delivery_id, now=now)
    if claim is None:
        return None
    if claim.secret is None:
        _deliveries_hold([claim], now=now)
        return None
    outcome = _post(claim=claim, now=now)
    return _delivery_record(claim=claim, outcome=outcome, now=now)


def deliveries_send(
    *,
    limit: int = SENDER_BATCH_LIMIT,
    linger: float = 0,
    gather: float = 0,
    helper: bool = False,
) -> int:
    """One sender (the `send_webhooks` task): claim the oldest due deliveries (up to
    SENDER_CLAIM_SIZE), send each in turn, record them; until nothing is due (the first claim
    that finds a backlog behind it wakes one more sender), waiting up to `linger` seconds for
    new deliveries and, once one comes, `gather` seconds for the ones after it
    (shared_cache.drain). Returns the number of attempts made. Each attempt reads the clock
    when it is sent, so its signature timestamp is fresh."""
    from webhooks import tasks

    made = 0

    def claim() -> list[_Claim] | None:
        """The oldest due deliveries, claimed, each with how many were due behind them."""
        now = timezone.now()
        if connection.vendor == "postgresql":
            claimed = _deliveries_claim_sql(now=now)
        else:
            due = selectors.deliveries_due(now=now, limit=1 + SENDER_BACKLOG)
            one = _delivery_claim(delivery_id=due[0], now=now) if due else None
            claimed = [] if one is None else [replace(one, due_behind=len(due) - 1)]
        return claimed or None

    def send(claims: list[_Claim]) -> None:
        nonlocal made
        attempts, given_back, unreadable = [], [], []
        claimed_at = time.monotonic()
        for claim in claims:
            if claim.secret is None:
                unreadable.append(claim)
                continue
            if attempts and time.monotonic() - claimed_at > CLAIM_FRESH_SECONDS:
                given_back.append(claim)  # its endpoint was read too long ago
                continue
            sent_at = timezone.now()
            attempts.append((claim, _post(claim=claim, now=sent_at), sent_at))
        if unreadable:
            _deliveries_hold(unreadable, now=timezone.now())
        if given_back:  # first: a crash before the record then loses no unsent attempt
            _deliveries_give_back(given_back, now=timezone.now())
        if attempts:
            _deliveries_record(attempts)
        made += len(attempts)
        if given_back:
            _sender_wake()

    shared_cache.drain(
        SENDER_WAKE_KEY,
        tasks.send_webhooks,
        claim=claim,
        more=lambda claims: claims[-1].due_behind >= SENDER_BACKLOG,
        rest=lambda claims: claims[-1].due_behind > 0,
        handle=send,
        limit=limit,
        linger=linger,
        gather=gather,
        helper=helper,
    )
    return made


def deliveries_send_due(*, now: datetime | None = None, limit: int = 100) -> int:
    """Attempt every due delivery once, in this process (the `deliver_webhooks` command).
    Returns the number of attempts made. Without `now`, each attempt reads the clock, so its
    signature timestamp is fresh. Lost attempts to disabled endpoints are closed first, as
    the beat sweep closes them."""
    deliveries_release_lost_leases(now=now or timezone.now())
    due_ids = selectors.deliveries_due(now=now or timezone.now(), limit=limit)
    made = 0
    for delivery_id in due_ids:
        if delivery_attempt(delivery_id=delivery_id, now=now) is not None:
            made += 1
    return made


def deliveries_dispatch_due(*, now: datetime, limit: int = 500) -> int:
    """The beat sweep: enqueue a `deliver_webhook` task for each due delivery that has not been
    handed to the broker for its current due time (or whose hand-off is older than a lease, so
    a lost message is sent again); first, a lost attempt to a disabled endpoint is closed
    (deliveries_release_lost_leases). Returns the number of tasks enqueued."""
    deliveries_release_lost_leases(now=now)
    stale = now - timedelta(seconds=lease_seconds())
    with transaction.atomic():
        ids = list(
            Delivery.objects.select_for_update(skip_locked=True, of=("self",))
            .filter(status__in=selectors.OPEN_STATUSES, next_attempt_at__lte=now)
            .filter(endpoint__enabled=True)
            .filter(
                Q(dispatched_at__isnull=True)
                | Q(dispatched_at__lt=F("next_attempt_at"))
                | Q(dispatched_at__lte=stale)
            )
            .order_by("next_attempt_at")
            .values_list("id", flat=True)[:limit]
        )
        Delivery.objects.filter(pk__in=ids).update(dispatched_at=now, updated_at=now)
        for delivery_id in ids:
            transaction.on_commit(partial(_enqueue_delivery, delivery_id))
    return len(ids)


def event_resend_for_merchant(*, merchant: Merchant, event_id: UUID, now: datetime) -> Event:
    """POST /events/{id}/resend: event_resend() scoped to the merchant; returns the event
    with its delivery_status (pending now)."""
    with transaction.atomic():
        event_resend(event_id=event_id, now=now, merchant=merchant)
        return selectors.event_get(merchant=merchant, event_id=event_id)
