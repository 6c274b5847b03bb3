from django.utils import timezone

from core.ops import OpsCommand
from quotes import services


class Command(OpsCommand):
    help = "Mark every active quote past its expires_at as expired (what beat runs every minute)."

    def run(self, **_) -> None:
        expired = services.quotes_expire(now=timezone.now())
        self.emit({"expired": expired}, f"Expired {expired} quote(s).")
