from django.contrib.auth import get_user_model
from django.core.management.base import CommandError
from django.utils import timezone

from core.ops import OpsCommand
from merchants import invites, services, two_factor
from merchants.models import InvitePurpose


class Command(OpsCommand):
    help = (
        "Create a dashboard login: merchant staff (--merchant and --role), --support or --ops."
        " Without --password, prints the invite link on which they choose one."
    )

    def add_command_arguments(self, parser) -> None:
        parser.add_argument(
            "--password",
            help="the password, or - to read it from standard input; without it, an invite link",
        )
        parser.add_argument("--merchant", dest="merchant_id")
        parser.add_argument("--role", choices=["owner", "developer", "viewer"])
        parser.add_argument("--support", action="store_true")
        parser.add_argument("--ops", action="store_true", help="an ops login (a superuser)")
        parser.add_argument("username")

    def run(self, *, username, password, merchant_id, role, support, ops, **options) -> None:
        password = self.secret_read(password, options)
        if ((support or ops) and (merchant_id or role)) or (support and ops):
            raise CommandError("--support and --ops take no --merchant or --role, nor each other.")
        if not (support or ops) and not (merchant_id and role):
            raise CommandError("Give --merchant MERCHANT_ID --role ROLE, --support or --ops.")
        merchant = None
        if merchant_id:
            try:
                merchant = services.merchant_get(merchant_id=merchant_id)
            except (ValueError, services.NotFound) as exc:
                raise CommandError(f"No merchant {merchant_id}.") from exc
        existing = get_user_model().objects.filter(username=username).first()
        if password is None and existing is not None and existing.has_usable_password():
            raise CommandError(f"{username} has a password already; give --password to change it.")
        user = services.staff_user_create(
            username=username,
            password=password,
            merchant=merchant,
            role=role,
            support=support,
            ops=ops,
        )
        kind = "ops" if ops else "support"
        role_name = role if merchant else kind
        data = {"username": username, "merchant_id": str(merchant.id) if merchant else None}
        data["role"] = role_name
        where = f"{merchant.name} as {role}" if merchant else f"{kind} staff"
        text = f"Dashboard user {username}: {where}. Log in at /admin/."
        purpose = None
        if password is None:
            purpose = InvitePurpose.INVITE
        elif two_factor.enrols_by_link_only(user) and not two_factor.has_second_factor(user):
            purpose = InvitePurpose.ENROLMENT
        if purpose is not None:
            link = invites.link_issue(
                user=user,
                purpose=purpose,
                role=role_name,
                merchant=merchant,
                by="ops (create_staff_user)",
                now=timezone.now(),
            )
            data[f"{purpose}_path"] = link.path
            what = "choose a password" if purpose == InvitePurpose.INVITE else "set up two-factor"
            text += f"\nSend them this link to {what} (works once): {link.path}"
        self.emit(data, text)
