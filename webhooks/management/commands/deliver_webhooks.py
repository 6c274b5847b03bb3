import argparse

from config.ops import OpsCommand
from webhooks import services


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1, not {text!r}")
    return value


class Command(OpsCommand):
    help = "Attempt every due webhook delivery once, in this process (no broker needed)."

    def add_command_arguments(self, parser) -> None:
        parser.add_argument(
            "--limit", type=positive_int, default=100, help="at most this many attempts"
        )

    def run(self, *, limit: int, **_) -> None:
        attempted = services.deliveries_send_due(limit=limit)
        self.emit({"attempted": attempted}, f"Attempted {attempted} due webhook delivery(ies).")
