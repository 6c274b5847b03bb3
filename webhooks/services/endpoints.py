"""Webhook endpoints: their URL, subscription and signing secret, and the sweep that disables
an endpoint failing for days."""

import logging
import secrets
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit
from uuid import UUID

from django.conf import settings
from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.validators import URLValidator
from django.db import transaction
from django.db.models import Exists, OuterRef, Q

from core import netguard, secrets_at_rest
from core.exceptions import DomainError, NotFound
from merchants import services as merchant_services
from merchants.models import AuditAction, Merchant
from webhooks.models import (
    TEST_EVENT_TYPE,
    DeliveryAttempt,
    EndpointDisabledReason,
    WebhookEndpoint,
)

logger = logging.getLogger("cowry.webhooks")

SECRET_PREFIX = "whsec_"
MIN_SECRET_LENGTH = 16
MAX_URL_LENGTH = 2048
MAX_ENDPOINTS_PER_MERCHANT = 5
FAILING_DISABLE_AFTER = timedelta(days=5)
# The names an endpoint can subscribe to (plus the dashboard's test event).
EVENT_TYPES = (
    "payin.completed",
    "payin.failed",
    "payout.completed",
    "payout.failed",
    "transfer.payin.completed",
    "transfer.payin.failed",
    "transfer.payout.completed",
    "transfer.payout.failed",
    "transfer.completed",
    "transfer.failed",
    "refund.completed",
    "refund.failed",
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
        allowed = "http or https" if settings.WEBHOOK_ALLOW_HTTP else "https"
        raise refuse(f"The webhook URL must use {allowed}.")
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
    if netguard.url_has_private_literal(url):
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


def endpoints_enabled(*, merchant_id: UUID) -> list[WebhookEndpoint]:
    """The merchant's enabled endpoints, oldest first."""
    return list(
        WebhookEndpoint.objects.filter(merchant_id=merchant_id, enabled=True).order_by(
            "created_at", "id"
        )
    )


def endpoints_subscribed(*, merchant_id: UUID, event_type: str) -> list[WebhookEndpoint]:
    """The merchant's enabled endpoints subscribed to `event_type`, oldest first."""
    return [
        endpoint
        for endpoint in endpoints_enabled(merchant_id=merchant_id)
        if endpoint.subscribed_to(event_type)
    ]
