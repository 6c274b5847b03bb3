from django.contrib.auth import get_user_model
from django.core.management.base import CommandError
from django.utils import timezone

from core.ops import OpsCommand
from merchants import dashboard, invites, two_factor
from merchants.models import InvitePurpose


class Command(OpsCommand):
    help = (
        "Remove a dashboard user's second factor (a lost phone): they set up a new one, through"
        " the enrolment link printed where the settings require it (support and ops)."
    )

    def add_command_arguments(self, parser) -> None:
        parser.add_argument("username")

    def run(self, *, username: str, **_) -> None:
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"No dashboard user {username!r}.")
        removed = two_factor.reset(user, by="ops (reset_two_factor)")
        data = {"username": username, "devices_removed": removed}
        text = f"{username}: {removed} second-factor device(s) removed."
        if two_factor.enrols_by_link_only(user):
            link = invites.link_issue(
                user=user,
                purpose=InvitePurpose.ENROLMENT,
                role="ops" if user.is_superuser else "support",
                merchant=dashboard.merchant_of(user),
                by="ops (reset_two_factor)",
                now=timezone.now(),
            )
            data["enrolment_path"] = link.path
            text += f"\nSend them this link to set up a new one (works once): {link.path}"
        self.emit(data, text)
