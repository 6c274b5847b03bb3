"""Staff invites and second-factor enrolment links (merchants.models.StaffInvite).

A link is /admin/invite/<uid>/<token>/: the token is random, stored only as its SHA-256, works
once and until it expires, and only for the login it names. An invite sets the password of the
login it created (one with no usable password yet); an enrolment link sets up the second factor
of a login that must have one and has none (support and ops under the production settings),
which a password alone never can. No other URL sets a password or enrols a device without being
logged in and verified."""

import hashlib
import logging
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.urls import reverse
from django.utils.encoding import force_bytes, force_str
from django.utils.http import urlsafe_base64_decode, urlsafe_base64_encode

from merchants import two_factor
from merchants.models import Authenticator, InvitePurpose, Merchant, StaffInvite

logger = logging.getLogger("cowry")

# The second segment of the page a link leads to, once its token is held by the session.
ACCEPT_SEGMENT = "choose-password"


@dataclass(frozen=True)
class IssuedLink:
    invite: StaffInvite
    path: str  # without scheme and host; holds the token, shown once


def _token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def uid_segment(user: AbstractBaseUser) -> str:
    return urlsafe_base64_encode(force_bytes(user.pk))


def link_issue(
    *,
    user: AbstractBaseUser,
    purpose: str,
    role: str,
    merchant: Merchant | None,
    by: str,
    now: datetime,
) -> IssuedLink:
    """A new link for `user`; any open link of theirs stops working."""
    token = secrets.token_urlsafe(32)
    with transaction.atomic():
        StaffInvite.objects.filter(user=user, used_at__isnull=True).delete()
        invite = StaffInvite.objects.create(
            user=user,
            purpose=purpose,
            merchant=merchant,
            role=role,
            token_hash=_token_hash(token),
            created_by=by,
            created_at=now,
            expires_at=now + timedelta(seconds=settings.STAFF_INVITE_TTL_SECONDS),
        )
    logger.info("Dashboard %s link issued for %s by %s", purpose, user.get_username(), by)
    path = reverse("dashboard-invite", kwargs={"uidb64": uid_segment(user), "token": token})
    return IssuedLink(invite=invite, path=path)


def _open(now: datetime):
    return StaffInvite.objects.select_related("user").filter(
        used_at__isnull=True, expires_at__gt=now, user__is_active=True
    )


def _user_id(uidb64: str) -> str | None:
    try:
        return force_str(urlsafe_base64_decode(uidb64))
    except (ValueError, TypeError, UnicodeDecodeError):
        return None


def link_open(*, uidb64: str, token: str, now: datetime) -> StaffInvite | None:
    """The open link these URL segments name, or None (unknown, used, expired, another login's,
    or a Django password-reset token: none is ever a link)."""
    user_id = _user_id(uidb64)
    if user_id is None or not user_id.isdigit() or token == ACCEPT_SEGMENT:
        return None
    invite = _open(now).filter(user_id=int(user_id), token_hash=_token_hash(token)).first()
    return invite if invite is not None and _still_applies(invite) else None


def link_get(*, invite_id: int, uidb64: str, now: datetime) -> StaffInvite | None:
    """The open link a session holds (by its id), for the login in the URL; else None."""
    user_id = _user_id(uidb64)
    if user_id is None or not user_id.isdigit():
        return None
    invite = _open(now).filter(pk=invite_id, user_id=int(user_id)).first()
    return invite if invite is not None and _still_applies(invite) else None


def _still_applies(invite: StaffInvite) -> bool:
    """An invite only ever sets the first password of the login it created."""
    return invite.purpose != InvitePurpose.INVITE or not invite.user.has_usable_password()


def link_use(*, invite: StaffInvite, now: datetime) -> bool:
    """Mark the link used, inside the caller's transaction; False when it was used meanwhile."""
    locked = StaffInvite.objects.select_for_update().filter(pk=invite.pk).first()
    if locked is None or locked.used_at is not None or locked.expires_at <= now:
        return False
    locked.used_at = now
    locked.save(update_fields=["used_at"])
    return True


class WrongCode(Exception):
    """The authenticator's code did not match: nothing was changed."""


def link_accept(
    *,
    invite: StaffInvite,
    new_password: str | None,
    device: Authenticator | None,
    code: str,
    now: datetime,
) -> list[str] | None:
    """Use the link: set the password (an invite) and confirm the authenticator (when one is
    set up); the recovery codes (none without an authenticator), or None when the link was used
    or expired meanwhile. WrongCode leaves everything as it was, the link open."""
    user = invite.user
    with transaction.atomic():
        if not link_use(invite=invite, now=now):
            return None
        codes: list[str] = []
        if device is not None:
            codes = two_factor.enrol(user, device=device, token=code)
            if codes is None:
                raise WrongCode
        if new_password is not None:
            user.set_password(new_password)
            user.save(update_fields=["password"])
    logger.info("Dashboard %s link used by %s", invite.purpose, user.get_username())
    return codes
