import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from django.core.cache import cache
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone
from redis.exceptions import RedisError

from core import secrets_at_rest, shared_cache
from core.exceptions import DomainError, NotFound
from core.log_limits import OncePer
from merchants import secrets as key_secrets
from merchants.models import (
    ApiKey,
    AuditAction,
    AuditLogEntry,
    Authenticator,
    Merchant,
    MerchantStatus,
    RecoveryCodes,
)

logger = logging.getLogger("cowry")

LAST_USED_WRITE_INTERVAL = timedelta(seconds=60)
# A request's API key, with its merchant, is kept in the shared cache (Redis): its read was
# 11-18% of a request's CPU. A save or delete of the key or its merchant drops it when it
# commits (api_key_cache_drop); a request racing that commit, or a change made by hand in SQL,
# is seen within this many seconds.
API_KEY_CACHE_SECONDS = 30


class InvalidCredentials(DomainError):
    status = 401
    reason = "invalid_credentials"
    message = "Invalid API credentials."


@dataclass(frozen=True)
class IssuedApiKey:
    """A freshly created key; the only moment the clear secret exists."""

    api_key: ApiKey
    secret: str


class DuplicateMerchantName(DomainError):
    status = 409
    reason = "duplicate_merchant_name"

    def __init__(self, *, name: str, existing: list[Merchant]) -> None:
        ids = ", ".join(str(merchant.pk) for merchant in existing)
        super().__init__(f"A merchant named {name!r} already exists: {ids}.")
        self.existing = existing


# pg_advisory_xact_lock's key for "a merchant is being created"; no other lock uses it.
MERCHANT_CREATION_LOCK = 0x436F_7772_794D_6352  # "CowryMcR"


def merchant_creations_turn() -> None:
    """Take turns, until commit, with every other merchant creation (a transaction-level
    advisory lock): the check for a merchant of the same name and the insert happen for one
    creator at a time, and the next one's check sees the merchant the first committed. A lock
    and not a unique index: existing data may hold duplicate names, and two businesses may
    share one."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [MERCHANT_CREATION_LOCK])


def merchant_name_key(name: str) -> str:
    """A name as two names compare: trimmed, inner whitespace collapsed, case folded."""
    return " ".join(name.split()).casefold()


def merchants_named(*, name: str) -> list[Merchant]:
    """The merchants whose name is `name` as merchant_name_key compares, oldest first. The
    database narrows to names containing its longest word, then the names are compared here."""
    key = merchant_name_key(name)
    if not key:
        return []
    longest_word = max(name.split(), key=len)
    candidates = Merchant.objects.filter(name__icontains=longest_word).order_by("created_at")
    return [merchant for merchant in candidates if merchant_name_key(merchant.name) == key]


def merchant_create(*, name: str, allow_duplicate_name: bool = False) -> Merchant:
    """A new merchant. A name another merchant already has (as merchant_name_key compares) is
    refused unless `allow_duplicate_name`: a provisioning script re-run, or retried after a
    timeout, would otherwise make a second merchant. Creations take turns
    (merchant_creations_turn), so two racing runs cannot both pass the check."""
    name = name.strip()
    if not name:
        raise DomainError("A merchant needs a name.", reason="invalid_name")
    _within_length(Merchant, "name", name, "A merchant's name", reason="invalid_name")
    with transaction.atomic():
        merchant_creations_turn()
        if not allow_duplicate_name:
            existing = merchants_named(name=name)
            if existing:
                raise DuplicateMerchantName(name=name, existing=existing)
        return Merchant.objects.create(name=name)


def _within_length(model, field: str, value: str, what: str, *, reason: str) -> None:
    """A refusal that names the limit, where the column would otherwise raise a DataError."""
    max_length = model._meta.get_field(field).max_length
    if len(value) > max_length:
        raise DomainError(f"{what} has at most {max_length} characters.", reason=reason)


def api_key_create(
    *, merchant: Merchant, label: str = "", expires_at: datetime | None = None
) -> IssuedApiKey:
    secret = key_secrets.new_secret()
    api_key = ApiKey.objects.create(
        merchant=merchant,
        key=key_secrets.new_public_key(),
        secret_hash=key_secrets.hash_secret(secret),
        label=label,
        expires_at=expires_at,
    )
    return IssuedApiKey(api_key=api_key, secret=secret)


def api_key_revoke(*, key: str, actor=None, now: datetime | None = None) -> ApiKey:
    """The key stops working at once; the audit log records who revoked it (no actor: ops,
    "system"). Revoking a revoked key changes and records nothing."""
    now = now or timezone.now()
    with transaction.atomic():
        api_key = ApiKey.objects.select_for_update().filter(key=key).first()
        if api_key is None:
            raise NotFound(f"No API key {key}.")
        if api_key.revoked_at is None:
            api_key.revoked_at = now
            api_key.save(update_fields=["revoked_at"])
            audit_record(
                merchant=api_key.merchant,
                actor=actor,
                action=AuditAction.API_KEY_REVOKED,
                target=api_key.key,
            )
    return api_key


_KEY_MAX_LENGTH = ApiKey._meta.get_field("key").max_length


def _may_be_a_key(key: str) -> bool:
    """Whether a key could be stored: no read for one that could not (PostgreSQL refuses a NUL,
    the driver a character UTF-8 cannot encode), so it is a miss like any other."""
    return len(key) <= _KEY_MAX_LENGTH and key.isascii() and key.isprintable()


# A merchant's integration retrying with a revoked key is a line a minute, not one a request.
_REFUSALS_LOGGED = OncePer(60)


def _refused(api_key: ApiKey, message: str) -> InvalidCredentials:
    """The refusal of a key whose secret is right (revoked, expired, merchant not active),
    logged with the key's id and merchant. A wrong secret is not logged: it would tell a
    known key from an unknown one by its timing."""
    if _REFUSALS_LOGGED.due(api_key.pk, at=time.monotonic()):
        logger.warning(
            "API key %s of merchant %s refused: %s (logged once a minute per key)",
            api_key.pk,
            api_key.merchant_id,
            message,
        )
    return InvalidCredentials(message)


def api_key_authenticate(*, key: str, secret: str, now: datetime | None = None) -> ApiKey:
    """The ApiKey for these credentials, or InvalidCredentials. Every failure looks the same."""
    now = now or timezone.now()
    api_key = _api_key_read(key) if _may_be_a_key(key) else None
    # a miss checks a hash too: the same cost as a hit
    expected_hash = api_key.secret_hash if api_key is not None else key_secrets.UNKNOWN_KEY_HASH
    secret_ok = key_secrets.secret_matches(secret, expected_hash)
    if api_key is None or not secret_ok:
        raise InvalidCredentials()
    if api_key.revoked_at is not None and api_key.revoked_at <= now:
        raise _refused(api_key, "This API key has been revoked.")
    if api_key.expires_at is not None and api_key.expires_at <= now:
        raise _refused(api_key, "This API key has expired.")
    if api_key.merchant.status != MerchantStatus.ACTIVE:
        raise _refused(api_key, "This merchant account is not active.")
    if api_key.last_used_at is None or now - api_key.last_used_at > LAST_USED_WRITE_INTERVAL:
        # Written at most once a minute per key so reads stay reads; of racing requests, one.
        ApiKey.objects.filter(
            Q(last_used_at__isnull=True) | Q(last_used_at__lt=now - LAST_USED_WRITE_INTERVAL),
            pk=api_key.pk,
        ).update(last_used_at=now)
        api_key.last_used_at = now
        _api_key_cache_set(api_key)
    return api_key


def _api_key_cache_name(key: str) -> str:
    return f"api-key:{key}"


def _api_key_read(key: str) -> ApiKey | None:
    """The key with its merchant: from the shared cache, else the database (then cached)."""
    shared = shared_cache.redis_client() is not None and not shared_cache.redis_paused()
    if shared:  # not in embedded mode: a process's own memory would miss other processes' drops
        try:
            api_key = cache.get(_api_key_cache_name(key))
        except RedisError:
            shared_cache.redis_failed()
            api_key = shared = None
        if api_key is not None:
            return api_key
    api_key = ApiKey.objects.select_related("merchant").filter(key=key).first()
    if api_key is not None and shared:
        _api_key_cache_set(api_key)
    return api_key


def _api_key_cache_set(api_key: ApiKey) -> None:
    if shared_cache.redis_client() is None or shared_cache.redis_paused():
        return
    try:
        cache.set(_api_key_cache_name(api_key.key), api_key, API_KEY_CACHE_SECONDS)
    except RedisError:
        shared_cache.redis_failed()


def api_key_cache_drop(*, keys: Iterable[str]) -> None:
    """Drop these keys from the shared cache, now and when the caller's transaction commits
    (a request reading the row before the commit may have put the old one back)."""
    names = [_api_key_cache_name(key) for key in keys]
    if not names or shared_cache.redis_client() is None:
        return

    def drop() -> None:
        try:
            cache.delete_many(names)
        except RedisError:  # then its entry lives out API_KEY_CACHE_SECONDS
            logger.warning("API keys not dropped from the cache: Redis is unreachable")

    drop()
    transaction.on_commit(drop, robust=True)


def merchant_turn(merchant_id: UUID) -> None:
    """Take turns on the merchant's row, until commit, with the other writers that serialize
    per merchant (webhook settings, re-sends, manual adjustments with a reference): FOR NO KEY
    UPDATE. FOR UPDATE would also hold off every insert referring to the merchant (a payment,
    an audit entry) at its commit, which locks the merchant's key: a dashboard save of an
    endpoint, holding the endpoint such a writer then wrote, waited there for it, a deadlock."""
    Merchant.objects.select_for_update(no_key=True).only("pk").get(pk=merchant_id)


def merchant_get(*, merchant_id: UUID | str) -> Merchant:
    try:
        merchant_id = UUID(str(merchant_id))
    except ValueError:
        raise NotFound(f"No merchant {merchant_id}.") from None
    merchant = Merchant.objects.filter(pk=merchant_id).first()
    if merchant is None:
        raise NotFound(f"No merchant {merchant_id}.")
    return merchant


DEFAULT_ROTATION_GRACE = timedelta(hours=24)


def audit_record(
    *, merchant: Merchant, actor, action: str, target: str, detail: dict | None = None
) -> AuditLogEntry:
    label = getattr(actor, "get_username", lambda: "system")() if actor is not None else "system"
    return AuditLogEntry.objects.create(
        merchant=merchant,
        actor=actor if getattr(actor, "pk", None) else None,
        actor_label=label,
        action=action,
        target=target,
        detail=detail or {},
    )


def api_key_create_by(
    *, merchant: Merchant, actor, label: str = "", expires_at: datetime | None = None
) -> IssuedApiKey:
    """A new key, recorded in the audit log with who made it (None: ops, "system"). An expiry
    must be in the future: a key born dead would only hand out a secret."""
    _within_length(ApiKey, "label", label, "A key's label", reason="invalid_label")
    if expires_at is not None and expires_at <= timezone.now():
        raise DomainError("The expiry must be in the future.", reason="invalid_expiry")
    with transaction.atomic():
        issued = api_key_create(merchant=merchant, label=label, expires_at=expires_at)
        audit_record(
            merchant=merchant,
            actor=actor,
            action=AuditAction.API_KEY_CREATED,
            target=issued.api_key.key,
            detail={"label": label, "expires_at": expires_at.isoformat() if expires_at else None},
        )
    return issued


def api_key_rotate(
    *,
    api_key_id: int,
    actor,
    grace: timedelta = DEFAULT_ROTATION_GRACE,
    now: datetime | None = None,
) -> IssuedApiKey:
    """A new key replaces the old one, with the old one's lifetime if it had an expiry; the old
    one keeps working for `grace`, then expires."""
    now = now or timezone.now()
    with transaction.atomic():
        old = ApiKey.objects.select_for_update().get(pk=api_key_id)
        if old.revoked_at is not None or (old.expires_at is not None and old.expires_at <= now):
            raise DomainError("Only a working key can be rotated.", reason="api_key_not_active")
        if old.rotated_at is not None:  # a second click, or a rotation racing this one
            raise DomainError(
                "This key was already rotated: rotate its replacement instead.",
                reason="api_key_already_rotated",
            )
        # A key minted with an expiry is replaced by one with the same lifetime, not for ever.
        lifetime = old.expires_at - old.created_at if old.expires_at is not None else None
        issued = api_key_create(
            merchant=old.merchant,
            label=old.label,
            expires_at=now + lifetime if lifetime is not None else None,
        )
        grace_end = now + grace
        old.rotated_at = now
        if old.expires_at is None or old.expires_at > grace_end:
            old.expires_at = grace_end
        old.save(update_fields=["rotated_at", "expires_at"])
        audit_record(
            merchant=old.merchant,
            actor=actor,
            action=AuditAction.API_KEY_ROTATED,
            target=old.key,
            detail={
                "new_key": issued.api_key.key,
                "old_key_expires_at": old.expires_at.isoformat(),
            },
        )
    return issued


def api_key_revoke_by(*, api_key_id: int, actor, now: datetime | None = None) -> ApiKey:
    """A staff member revokes a key, once: revoking it again is refused, not recorded again."""
    with transaction.atomic():
        key = ApiKey.objects.select_for_update().get(pk=api_key_id)
        if key.revoked_at is not None:
            raise DomainError("This key was already revoked.", reason="api_key_not_active")
        return api_key_revoke(key=key.key, actor=actor, now=now)


def staff_user_create(
    *,
    username: str,
    password: str | None,
    merchant: Merchant | None = None,
    role: str | None = None,
    support: bool = False,
    ops: bool = False,
):
    """A dashboard login: staff of one merchant (with a role), support, or ops (a superuser).
    Re-run, it updates the password and the assignment; an ops login never becomes another kind
    (it would keep seeing every merchant). Username and password pass Django's validators.
    Without a password a new login has none until its invite is used (merchants.invites)."""
    from django.contrib.auth import get_user_model, password_validation
    from django.contrib.auth.models import Group
    from django.core.exceptions import ValidationError

    from merchants.dashboard import SUPPORT_GROUP
    from merchants.models import MembershipRole, MerchantMembership

    if [support, ops, merchant is not None].count(True) != 1:
        message = "Give either a merchant and a role, or support, or ops."
        raise DomainError(message, reason="invalid_staff")
    if merchant is not None and role not in MembershipRole.values:
        raise DomainError(
            f"role must be one of {', '.join(MembershipRole.values)}.", reason="invalid_role"
        )
    user_model = get_user_model()
    _within_length(
        user_model, user_model.USERNAME_FIELD, username, "A username", reason="invalid_staff"
    )
    with transaction.atomic():
        user = user_model.objects.select_for_update().filter(username=username).first()
        if user is not None and user.is_superuser and not ops:
            raise DomainError(
                f"{username} is an ops login; give merchant or support staff their own.",
                reason="invalid_staff",
            )
        user = user or user_model(username=username)
        try:
            user_model.username_validator(username)
            if password is not None:
                password_validation.validate_password(password, user)
        except ValidationError as error:
            raise DomainError(" ".join(error.messages), reason="invalid_staff") from error
        user.is_staff = True
        user.is_active = True
        user.is_superuser = ops
        if password is not None:
            user.set_password(password)
        elif user.pk is None:
            user.set_unusable_password()
        user.save()
        if ops or support:
            MerchantMembership.objects.filter(user=user).delete()
        if ops:
            user.groups.remove(*Group.objects.filter(name=SUPPORT_GROUP))
        elif support:
            user.groups.add(Group.objects.get_or_create(name=SUPPORT_GROUP)[0])
        else:
            user.groups.remove(*Group.objects.filter(name=SUPPORT_GROUP))
            MerchantMembership.objects.update_or_create(
                user=user, defaults={"merchant": merchant, "role": role}
            )
    return user


def second_factors_reencrypt() -> dict[str, Any]:
    """Encrypt every authenticator key and recovery-code set afresh under the first key of
    WEBHOOK_SECRETS_KEYS (the `reencrypt_webhook_secrets` command, after a new key was put
    first). Each under its row lock, in a transaction of its own; one already under the first
    key is left alone. Returns the counts and the ids ("authenticator:ID", "recovery-codes:ID")
    of those no key decrypts (left as they are)."""
    devices = reencrypted = already_current = 0
    unreadable: list[str] = []
    for model, field, label in (
        (Authenticator, "encrypted_key", "authenticator"),
        (RecoveryCodes, "encrypted_codes", "recovery-codes"),
    ):
        for device_id in list(model.objects.order_by("pk").values_list("pk", flat=True)):
            with transaction.atomic():
                device = model.objects.select_for_update().only("pk", field).filter(pk=device_id)
                device = device.first()
                if device is None:  # removed meanwhile
                    continue
                devices += 1
                stored = getattr(device, field)
                if secrets_at_rest.under_first_key(stored):
                    already_current += 1
                    continue
                try:
                    setattr(device, field, secrets_at_rest.reencrypt(stored))
                except secrets_at_rest.UnreadableSecret:
                    unreadable.append(f"{label}:{device_id}")
                    continue
                device.save(update_fields=[field])
                reencrypted += 1
    return {
        "devices": devices,
        "reencrypted": reencrypted,
        "already_current": already_current,
        "unreadable": unreadable,
    }
