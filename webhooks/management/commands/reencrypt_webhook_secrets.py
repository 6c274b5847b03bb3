from django.core.management.base import CommandError

from core.ops import OpsCommand
from merchants import services as merchant_services
from webhooks.services.endpoints import endpoint_secrets_reencrypt


class Command(OpsCommand):
    help = (
        "Encrypt every webhook signing secret, and every dashboard login's authenticator key and"
        " recovery codes, afresh under the first key of WEBHOOK_SECRETS_KEYS (key rotation);"
        " exits non-zero if one cannot be decrypted."
    )

    def run(self, **_) -> None:
        summary = endpoint_secrets_reencrypt()
        factors = merchant_services.second_factors_reencrypt()
        text = (
            f"Re-encrypted {summary['reencrypted']} of {summary['endpoints']} webhook signing"
            f" secret(s) under the first key; {summary['already_current']} already were."
            f"\nRe-encrypted {factors['reencrypted']} of {factors['devices']} second factor(s)"
            f" (authenticators, recovery codes); {factors['already_current']} already were."
        )
        if summary["unreadable"]:
            text += "\nNo key decrypts the secret of endpoint(s): " + ", ".join(
                summary["unreadable"]
            )
        if factors["unreadable"]:
            text += "\nNo key decrypts: " + ", ".join(factors["unreadable"])
        self.emit({**summary, "second_factors": factors}, text)
        if summary["unreadable"]:
            raise CommandError(
                f"{len(summary['unreadable'])} signing secret(s) could not be decrypted."
            )
        if factors["unreadable"]:
            raise CommandError(
                f"{len(factors['unreadable'])} second factor(s) could not be decrypted."
            )
