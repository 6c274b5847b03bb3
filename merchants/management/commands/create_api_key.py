from datetime import UTC, datetime

from django.core.management.base import CommandError
from django.utils import timezone

from core.ops import OpsCommand
from merchants import services


class Command(OpsCommand):
    help = "Create an API key for a merchant; the secret is printed once."

    def add_command_arguments(self, parser) -> None:
        parser.add_argument("merchant_id")
        parser.add_argument("--expires-at", help="ISO 8601 date-time")
        parser.add_argument("--label", default="created by create_api_key")

    def run(self, *, merchant_id: str, expires_at: str | None, label: str, **_) -> None:
        expiry = None
        if expires_at:
            try:
                expiry = datetime.fromisoformat(expires_at)
            except ValueError as exc:
                raise CommandError(f"--expires-at is not ISO 8601: {expires_at}") from exc
            if timezone.is_naive(expiry):
                expiry = expiry.replace(tzinfo=UTC)  # a date-time without offset is UTC
        try:
            merchant = services.merchant_get(merchant_id=merchant_id)
        except (ValueError, services.NotFound) as exc:
            raise CommandError(f"No merchant {merchant_id}.") from exc
        issued = services.api_key_create_by(
            merchant=merchant, actor=None, label=label, expires_at=expiry
        )
        self.emit(
            {
                "api_key": issued.api_key.key,
                "api_secret": issued.secret,
                "expires_at": expiry.isoformat() if expiry else None,
            },
            f"API key:    {issued.api_key.key}\nAPI secret: {issued.secret}  (shown once)"
            + (f"\nExpires:    {expiry.isoformat()}" if expiry else ""),
        )
