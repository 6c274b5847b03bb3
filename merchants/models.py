import uuid
from binascii import unhexlify

from django.conf import settings
from django.core.validators import MinValueValidator
from django.db import models, transaction
from django.utils.crypto import constant_time_compare
from django_otp.models import Device, ThrottlingMixin, TimestampMixin
from django_otp.plugins.otp_totp.models import TOTPDevice
from django_otp.util import random_hex

from core import secrets_at_rest


class MerchantStatus(models.TextChoices):
    ACTIVE = "active"
    SUSPENDED = "suspended"


class Merchant(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    name = models.CharField(max_length=200)
    status = models.CharField(
        max_length=16, choices=MerchantStatus.choices, default=MerchantStatus.ACTIVE
    )
    rate_limit_per_minute = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text=(
            "Requests per minute per API key, at least 1; empty means the platform default. "
            "To stop a merchant's API traffic, suspend the merchant."
        ),
    )
    require_two_factor = models.BooleanField(
        default=False,
        help_text="The merchant's dashboard users must log in with a second factor (TOTP).",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(status__in=MerchantStatus.values), name="merchant_status_valid"
            ),
            # 0 read as "no limit of its own" would lift the limit of whoever meant to stop it
            models.CheckConstraint(
                condition=models.Q(rate_limit_per_minute__gte=1), name="rate_limit_at_least_one"
            ),
        ]

    def __str__(self) -> str:
        return self.name

    # DRF treats the authenticated principal as request.user: the merchant is that principal.
    @property
    def is_authenticated(self) -> bool:
        return True


class ApiKey(models.Model):
    """A merchant credential. The public key is stored in clear; the secret only as a hash."""

    merchant = models.ForeignKey(Merchant, on_delete=models.CASCADE, related_name="api_keys")
    key = models.CharField(max_length=64, unique=True)
    secret_hash = models.CharField(max_length=128)
    label = models.CharField(max_length=100, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    rotated_at = models.DateTimeField(null=True, blank=True)  # replaced; expires after a grace

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "API key"

    def __str__(self) -> str:
        return self.key


class MembershipRole(models.TextChoices):
    OWNER = "owner"
    DEVELOPER = "developer"
    VIEWER = "viewer"


class MerchantMembership(models.Model):
    """Links a dashboard user to the one merchant they work for."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="merchant_membership"
    )
    merchant = models.ForeignKey(Merchant, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=MembershipRole.choices)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=models.Q(role__in=MembershipRole.values), name="membership_role_valid"
            )
        ]

    def __str__(self) -> str:
        return f"{self.user} @ {self.merchant} ({self.role})"


class IdempotencyStatus(models.TextChoices):
    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"


class IdempotencyRecord(models.Model):
    """One merchant + Idempotency-Key: the first request's fingerprint and, once it succeeded,
    its response, replayed to every retry until the key expires."""

    # idempotency_key_per_merchant leads with it
    merchant = models.ForeignKey(Merchant, on_delete=models.CASCADE, db_index=False)
    key = models.CharField(max_length=255)
    method = models.CharField(max_length=8)
    path = models.CharField(max_length=500)
    fingerprint = models.CharField(max_length=64)
    status = models.CharField(max_length=16, choices=IdempotencyStatus.choices)
    response_status = models.PositiveSmallIntegerField(null=True, blank=True)
    response_body = models.JSONField(null=True, blank=True)
    locked_at = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(db_index=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["merchant", "key"], name="idempotency_key_per_merchant")
        ]

    def __str__(self) -> str:
        return f"{self.merchant_id}:{self.key}"


class AuditAction(models.TextChoices):
    API_KEY_CREATED = "api_key.created"
    API_KEY_ROTATED = "api_key.rotated"
    API_KEY_REVOKED = "api_key.revoked"
    WEBHOOK_UPDATED = "webhook.updated"
    WEBHOOK_SECRET_REVEALED = "webhook.secret_revealed"
    WEBHOOK_SECRET_ROTATED = "webhook.secret_rotated"
    EVENT_RESENT = "event.resent"
    SUPPORT_ACTION = "support.action"
    WALLET_ADJUSTED = "wallet.adjusted"  # credit_wallet / debit_wallet (ops)
    STAFF_CHANGED = "staff.changed"  # a teammate invited, re-roled, removed; two-factor changes


class AuditLogEntry(models.Model):
    """Who did what to a merchant's credentials or money, and when. Append-only."""

    merchant = models.ForeignKey(
        Merchant, on_delete=models.CASCADE, related_name="audit_log", db_index=False
    )  # a composite index leads with it
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    actor_label = models.CharField(max_length=150)
    action = models.CharField(max_length=40, choices=AuditAction.choices)
    target = models.CharField(max_length=200)
    detail = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "audit log entry"
        verbose_name_plural = "audit log"
        indexes = [models.Index(fields=["merchant", "-created_at"], name="audit_merchant_recent")]

    def __str__(self) -> str:
        return f"{self.created_at:%Y-%m-%d %H:%M} {self.actor_label} {self.action} {self.target}"


class InvitePurpose(models.TextChoices):
    INVITE = "invite"  # a new login chooses its password (and its second factor where required)
    ENROLMENT = "enrolment"  # a login that has a password sets up its second factor


class StaffInvite(models.Model):
    """A single-use, expiring link for one dashboard login: an invite lets the login it created
    choose its password; an enrolment link lets a login set up its second factor. Only the
    token's SHA-256 is stored; issuing a new link for a login deletes its open ones."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="staff_invites"
    )
    purpose = models.CharField(max_length=16, choices=InvitePurpose.choices)
    merchant = models.ForeignKey(Merchant, null=True, blank=True, on_delete=models.CASCADE)
    role = models.CharField(max_length=16)  # owner, developer, viewer, support or ops
    token_hash = models.CharField(max_length=64, unique=True)
    created_by = models.CharField(max_length=150)
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=models.Q(purpose__in=InvitePurpose.values), name="invite_purpose_valid"
            )
        ]

    def __str__(self) -> str:
        return f"{self.purpose} for {self.user} ({self.role})"


class Authenticator(TimestampMixin, ThrottlingMixin, Device):
    """A dashboard login's TOTP authenticator: django-otp's TOTPDevice, its key stored
    encrypted with the keyring of the webhook signing secrets (core.secrets_at_rest), so a
    copy of the database alone lets nobody compute a login's codes."""

    encrypted_key = models.TextField()  # a Fernet token of the hex key
    step = models.PositiveSmallIntegerField(default=30)
    t0 = models.BigIntegerField(default=0)
    digits = models.PositiveSmallIntegerField(default=6)
    tolerance = models.PositiveSmallIntegerField(default=1)
    drift = models.SmallIntegerField(default=0)
    last_t = models.BigIntegerField(default=-1)  # a code is good once: the next must be later

    class Meta(Device.Meta):
        verbose_name = "authenticator"

    @classmethod
    def new(cls, *, user, name: str) -> "Authenticator":
        """An unconfirmed authenticator with a new random key (20 bytes, as TOTPDevice's)."""
        return cls.objects.create(
            user=user,
            name=name,
            confirmed=False,
            encrypted_key=secrets_at_rest.encrypt(random_hex(20)),
        )

    @property
    def bin_key(self) -> bytes:
        return unhexlify(secrets_at_rest.decrypt(self.encrypted_key))

    # django-otp's TOTP checks, drift, throttling and otpauth:// URL, on our key
    verify_token = TOTPDevice.verify_token
    get_throttle_factor = TOTPDevice.get_throttle_factor
    config_url = TOTPDevice.config_url
    _read_str_from_settings = TOTPDevice._read_str_from_settings


class RecoveryCodes(ThrottlingMixin, Device):
    """A login's unused single-use recovery codes (django-otp's StaticDevice and its tokens),
    stored as one Fernet token of the codes, like the authenticator's key."""

    encrypted_codes = models.TextField()  # the unused codes, space-separated, encrypted

    class Meta(Device.Meta):
        verbose_name = "recovery codes"

    def codes(self) -> list[str]:
        return secrets_at_rest.decrypt(self.encrypted_codes).split()

    def verify_token(self, token) -> bool:
        """A code not used yet: used up (under the row's lock, so twice at once is once)."""
        allowed, _ = self.verify_is_allowed()
        if not allowed:
            return False
        token = str(token).strip()
        with transaction.atomic():
            locked = type(self).objects.select_for_update().filter(pk=self.pk).first()
            left = locked.codes() if locked is not None else []
            match = next((code for code in left if constant_time_compare(code, token)), None)
            if match is not None:
                left.remove(match)
                locked.encrypted_codes = secrets_at_rest.encrypt(" ".join(left))
                locked.throttle_reset(commit=False)
                locked.save(update_fields=["encrypted_codes", *_THROTTLE_FIELDS])
                self.encrypted_codes = locked.encrypted_codes
                return True
        self.throttle_increment(commit=True)
        return False

    def get_throttle_factor(self) -> int:
        return getattr(settings, "OTP_STATIC_THROTTLE_FACTOR", 1)


_THROTTLE_FIELDS = ["throttling_failure_timestamp", "throttling_failure_count"]
