import json

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from merchants import two_factor


class Command(BaseCommand):
    help = "Remove a dashboard user's second factor (a lost phone): they set up a new one."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args, username: str, json: bool = False, **options):
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"No dashboard user {username!r}.")
        removed = two_factor.reset(user, by="ops (reset_two_factor)")
        result = {"username": username, "devices_removed": removed}
        self.stdout.write(_dumps(result) if json else f"{username}: {removed} device(s) removed.")


def _dumps(value: object) -> str:
    return json.dumps(value)
