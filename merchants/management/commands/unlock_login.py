from core.ops import OpsCommand
from merchants import logins


class Command(OpsCommand):
    help = (
        "Lift a dashboard login lock: forget the failed logins counted for USERNAME (any case) "
        "and, with --address, for that client address."
    )

    def add_command_arguments(self, parser) -> None:
        parser.add_argument("username")
        parser.add_argument("--address", default="", help="also the address's failures")

    def run(self, *, username: str, address: str, **_) -> None:
        cleared = logins.login_unlock(username=username, address=address)
        counted = ", ".join(f"{what} {count}" for what, count in cleared.items())
        self.emit(
            {"username": username, "failures_cleared": cleared},
            f"Unlocked {username!r}: failures forgotten ({counted}).",
        )
