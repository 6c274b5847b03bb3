"""Two-factor dashboard logins: TOTP (django-otp) with single-use recovery codes.

A user with a confirmed authenticator is asked for a code after the password; one who must have
a second factor (support and ops when DASHBOARD_REQUIRE_2FA_FOR_STAFF, merchant staff whose
owner requires it) and has none is sent to set one up before anything else."""

import io
import logging
from base64 import b32encode, b64encode

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.http import HttpRequest
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django_otp import login as otp_login
from django_otp import match_token
from django_otp.plugins.otp_static.models import StaticToken
from django_otp.qr import write_qrcode_image

from core import secrets_at_rest
from merchants import dashboard
from merchants.models import AuditAction, AuditLogEntry, Authenticator, RecoveryCodes

logger = logging.getLogger("cowry")

RECOVERY_CODES = 10
DEVICE_NAME = "authenticator"
ISSUER = "Cowry"


def is_required(user: AbstractBaseUser) -> bool:
    """Whether this user may not use the dashboard without a second factor."""
    if user.is_superuser or dashboard.is_support(user):
        return settings.DASHBOARD_REQUIRE_2FA_FOR_STAFF
    merchant = dashboard.merchant_of(user)
    return merchant is not None and merchant.require_two_factor


def enrols_by_link_only(user: AbstractBaseUser) -> bool:
    """Whether the settings require this login's second factor (support and ops under
    DASHBOARD_REQUIRE_2FA_FOR_STAFF): then it is set up only through the login's invite or
    enrolment link (merchants.invites), never after a password alone."""
    return settings.DASHBOARD_REQUIRE_2FA_FOR_STAFF and (
        user.is_superuser or dashboard.is_support(user)
    )


def has_second_factor(user: AbstractBaseUser) -> bool:
    """Recovery codes come with an authenticator, so the authenticator alone says it."""
    return Authenticator.objects.filter(user=user, confirmed=True).exists()


def pending_device(user: AbstractBaseUser) -> Authenticator:
    """The authenticator being set up: made once, shown until confirmed."""
    device = Authenticator.objects.filter(user=user, confirmed=False).first()
    return device or Authenticator.new(user=user, name=DEVICE_NAME)


def secret_text(device: Authenticator) -> str:
    """The key as authenticator apps take it typed in (base32)."""
    return b32encode(device.bin_key).decode()


def qr_image_src(device: Authenticator) -> str:
    """The key's QR code as an image URL: django-otp writes a standalone SVG document, whose
    prefixed elements a browser draws only as an image, not inlined in HTML."""
    out = io.BytesIO()
    write_qrcode_image(device.config_url, out)
    return "data:image/svg+xml;base64," + b64encode(out.getvalue()).decode()


def enrol(user: AbstractBaseUser, *, device: Authenticator, token: str) -> list[str] | None:
    """Confirm the authenticator with its first code; returns new recovery codes, None when
    the code is wrong."""
    if not device.verify_token(token.strip()):
        return None
    with transaction.atomic():
        device.confirmed = True
        device.save(update_fields=["confirmed"])
        codes = _new_recovery_codes(user)
        _audit(user, "two_factor.enabled")
    return codes


def confirm(request: HttpRequest, *, device: Authenticator, token: str) -> list[str] | None:
    """enrol() for the logged-in user, whose session is then verified."""
    codes = enrol(request.user, device=device, token=token)
    if codes is not None:
        otp_login(request, device)
    return codes


def verify(request: HttpRequest, *, token: str) -> bool:
    """A code from the authenticator, or a recovery code (used up), marks the session verified."""
    device = match_token(request.user, token.strip().replace(" ", ""))
    if device is None:
        return False
    otp_login(request, device)
    return True


def reset(user: AbstractBaseUser, *, by: str) -> int:
    """Remove every second factor of the user (a lost phone): they set one up again."""
    with transaction.atomic():
        removed = 0
        for model in (Authenticator, RecoveryCodes):
            devices = model.objects.filter(user=user)
            removed += devices.count()
            devices.delete()
        _audit(user, "two_factor.reset", by=by)
    return removed


def _new_recovery_codes(user: AbstractBaseUser) -> list[str]:
    RecoveryCodes.objects.filter(user=user).delete()
    codes = [StaticToken.random_token() for _ in range(RECOVERY_CODES)]
    RecoveryCodes.objects.create(
        user=user,
        name="recovery codes",
        confirmed=True,
        encrypted_codes=secrets_at_rest.encrypt(" ".join(codes)),
    )
    return codes


def _audit(user: AbstractBaseUser, what: str, *, by: str = "") -> None:
    """In the merchant's audit log; support's and ops' own in the log (they have no merchant)."""
    merchant = dashboard.merchant_of(user)
    if merchant is None:
        logger.warning("Audit: %s for %s by %s", what, user.get_username(), by or "themselves")
        return
    AuditLogEntry.objects.create(
        merchant=merchant,
        actor=None if by else user,
        actor_label=by or user.get_username(),
        action=AuditAction.SUPPORT_ACTION if by else AuditAction.STAFF_CHANGED,
        target=f"user {user.get_username()}",
        detail={"change": what, "at": timezone.now().isoformat()},
    )


EXEMPT_NAMES = ("two_factor_setup", "two_factor_verify", "logout", "login", "jsi18n")
ENROLMENT_LINK_NEEDED = "admin/two_factor/enrolment_link_needed.html"


class TwoFactorMiddleware:
    """Sends a dashboard user to the code page, or to set up a second factor, before any other
    dashboard page. A login whose second factor the settings require and which has none gets no
    page but logout: it enrols only through its invite or enrolment link (merchants.invites)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest):
        user = getattr(request, "user", None)
        if (
            user is None
            or not user.is_authenticated
            or not request.path.startswith("/admin/")
            or request.path.startswith("/admin/invite/")
            or user.is_verified()
        ):
            return self.get_response(request)
        if has_second_factor(user):
            if not _exempt(request.path):
                return redirect(f"{_path('two_factor_verify')}?next={request.path}")
        elif enrols_by_link_only(user):
            if request.path != _path("logout"):
                return render(request, ENROLMENT_LINK_NEEDED, status=403)
        elif is_required(user) and not _exempt(request.path):
            return redirect(_path("two_factor_setup"))
        return self.get_response(request)


def _exempt(path: str) -> bool:
    return any(path == _path(name) for name in EXEMPT_NAMES)


def _path(name: str) -> str:
    return reverse(f"admin:{name}")
