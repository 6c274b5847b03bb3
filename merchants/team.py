"""A merchant's owners manage their own team: invite, change a role, remove.

An invitation is a user with no password yet and a single-use link of its own (merchants.invites,
valid STAFF_INVITE_TTL_SECONDS) on which the teammate chooses one; the owner passes the link on.
Every change is in the merchant's audit log."""

from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from core.exceptions import DomainError
from merchants import invites
from merchants.models import (
    AuditAction,
    AuditLogEntry,
    InvitePurpose,
    MembershipRole,
    Merchant,
    MerchantMembership,
)


class TeamChangeRefused(DomainError):
    status = 400
    reason = "team_change_refused"
    message = "That change to the team is not allowed."


@dataclass(frozen=True)
class Invitation:
    membership: MerchantMembership
    path: str  # where the teammate chooses a password, without scheme and host


def teammate_invite(
    *, merchant: Merchant, by: AbstractBaseUser, username: str, email: str, role: str
) -> Invitation:
    """A new dashboard login for the merchant, with no password until the link is used."""
    user_model = get_user_model()
    if role not in MembershipRole.values:
        raise TeamChangeRefused(f"role must be one of {', '.join(MembershipRole.values)}.")
    with transaction.atomic():
        if user_model.objects.filter(username__iexact=username).exists():
            raise TeamChangeRefused(f"The username {username} is taken; choose another.")
        user = user_model(username=username, email=email, is_staff=True, is_active=True)
        user.set_unusable_password()
        user.save()
        membership = MerchantMembership.objects.create(user=user, merchant=merchant, role=role)
        _audit(merchant, by, username, {"change": "invited", "role": role, "email": email})
        link = invites.link_issue(
            user=user,
            purpose=InvitePurpose.INVITE,
            role=role,
            merchant=merchant,
            by=by.get_username(),
            now=timezone.now(),
        )
    return Invitation(membership=membership, path=link.path)


def teammate_change_role(
    *, membership: MerchantMembership, by: AbstractBaseUser, role: str
) -> MerchantMembership:
    with transaction.atomic():
        membership = MerchantMembership.objects.select_for_update().get(pk=membership.pk)
        if role not in MembershipRole.values:
            raise TeamChangeRefused(f"role must be one of {', '.join(MembershipRole.values)}.")
        if membership.role == MembershipRole.OWNER and role != MembershipRole.OWNER:
            _keep_an_owner(membership)
        before, membership.role = membership.role, role
        membership.save(update_fields=["role"])
        _audit(
            membership.merchant,
            by,
            membership.user.get_username(),
            {"change": "role", "from": before, "to": role},
        )
    return membership


def teammate_remove(*, membership: MerchantMembership, by: AbstractBaseUser) -> None:
    """The login stops working at once; the audit log keeps its name."""
    with transaction.atomic():
        membership = MerchantMembership.objects.select_for_update().get(pk=membership.pk)
        if membership.user_id == by.pk:
            raise TeamChangeRefused("You cannot remove yourself; ask another owner.")
        if membership.role == MembershipRole.OWNER:
            _keep_an_owner(membership)
        user = membership.user
        user.is_active = False
        user.set_unusable_password()
        user.save(update_fields=["is_active", "password"])
        membership.delete()
        _audit(membership.merchant, by, user.get_username(), {"change": "removed"})


def audit_two_factor_rule(*, merchant: Merchant, by: AbstractBaseUser) -> None:
    _audit(
        merchant,
        by,
        "(every teammate)",
        {"change": "require_two_factor", "to": merchant.require_two_factor},
    )


def _keep_an_owner(membership: MerchantMembership) -> None:
    owners = MerchantMembership.objects.select_for_update().filter(
        merchant_id=membership.merchant_id, role=MembershipRole.OWNER
    )
    if owners.count() <= 1:
        raise TeamChangeRefused("A merchant keeps at least one owner.")


def _audit(merchant: Merchant, by: AbstractBaseUser, username: str, detail: dict) -> None:
    AuditLogEntry.objects.create(
        merchant=merchant,
        actor=by,
        actor_label=by.get_username(),
        action=AuditAction.STAFF_CHANGED,
        target=f"user {username}",
        detail=detail,
    )
