from django.contrib.auth import get_user_model
from django.core.management.base import CommandError

from core.ops import OpsCommand
from merchants import two_factor


class Command(OpsCommand):
    help = "Remove a dashboard user's second factor (a lost phone): they set up a new one."

    def add_command_arguments(self, parser) -> None:
        parser.add_argument("username")

    def run(self, *, username: str, **_) -> None:
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"No dashboard user {username!r}.")
        removed = two_factor.reset(user, by="ops (reset_two_factor)")
        self.emit(
            {"username": username, "devices_removed": removed},
            f"{username}: {removed} second-factor device(s) removed.",
        )
