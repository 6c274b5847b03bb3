from django.core.management.base import CommandError

from core.ops import OpsCommand
from webhooks.services.endpoints import endpoint_secrets_reencrypt


class Command(OpsCommand):
    help = (
        "Encrypt every webhook signing secret afresh under the first key of"
        " WEBHOOK_SECRETS_KEYS (key rotation); exits non-zero if a secret cannot be decrypted."
    )

    def run(self, **_) -> None:
        summary = endpoint_secrets_reencrypt()
        text = (
            f"Re-encrypted {summary['reencrypted']} of {summary['endpoints']} webhook signing"
            f" secret(s) under the first key; {summary['already_current']} already were."
        )
        if summary["unreadable"]:
            text += "\nNo key decrypts the secret of endpoint(s): " + ", ".join(
                summary["unreadable"]
            )
        self.emit(summary, text)
        if summary["unreadable"]:
            raise CommandError(
                f"{len(summary['unreadable'])} signing secret(s) could not be decrypted."
            )
