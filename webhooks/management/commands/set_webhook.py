from uuid import UUID

from django.core.management.base import CommandError
from django.utils import timezone

from core.ops import OpsCommand
from merchants import services as merchant_services
from webhooks.services.endpoints import endpoint_set


class Command(OpsCommand):
    help = "Set a merchant's webhook URL; generates a signing secret unless --secret is given."

    def add_command_arguments(self, parser) -> None:
        parser.add_argument("merchant_id")
        parser.add_argument("url")
        parser.add_argument(
            "--secret",
            help="use this signing secret instead of a new one, or - to read it from stdin",
        )

    def run(self, *, merchant_id: str, url: str, secret: str | None, **options) -> None:
        try:
            merchant = merchant_services.merchant_get(merchant_id=UUID(merchant_id))
        except (ValueError, merchant_services.NotFound) as exc:
            raise CommandError(f"No merchant {merchant_id}.") from exc
        secret = self.secret_read(secret, options)
        endpoint, signing_secret = endpoint_set(
            merchant=merchant, url=url, secret=secret, now=timezone.now()
        )
        self.emit(
            {"url": endpoint.url, "signing_secret": signing_secret},
            f"Webhook URL:    {endpoint.url}\nSigning secret: {signing_secret}  (keep it safe)",
        )
