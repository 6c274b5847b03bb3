import argparse

from core.ops import OpsCommand
from webhooks.services.sweeps import deliveries_send_due


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1, not {text!r}")
    return value


class Command(OpsCommand):
    help = (
        "Attempt every due webhook delivery once, in this process (no broker needed), and say"
        " how many were delivered and how many failed (exits 0 either way)."
    )

    def add_command_arguments(self, parser) -> None:
        parser.add_argument(
            "--limit", type=positive_int, default=100, help="at most this many attempts"
        )

    def run(self, *, limit: int, **_) -> None:
        # Exit 0 whatever the receivers answered: a receiver down is its merchant's matter, and
        # each failed attempt is logged and retried on the schedule.
        sent = deliveries_send_due(limit=limit)
        self.emit(
            {"attempted": sent.attempted, "delivered": sent.delivered, "failed": sent.failed},
            f"Attempted {sent.attempted} due webhook delivery(ies): {sent.delivered} delivered,"
            f" {sent.failed} failed.",
        )
