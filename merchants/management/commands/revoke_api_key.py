from core.ops import OpsCommand
from merchants import services


class Command(OpsCommand):
    help = "Revoke an API key: it stops working at once."

    def add_command_arguments(self, parser) -> None:
        parser.add_argument("api_key")

    def run(self, *, api_key: str, **_) -> None:
        revoked = services.api_key_revoke(key=api_key)
        self.emit({"api_key": revoked.key, "revoked": True}, f"Revoked {revoked.key}.")
