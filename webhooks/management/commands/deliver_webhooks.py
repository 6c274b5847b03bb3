from config.ops import OpsCommand
from webhooks import services


class Command(OpsCommand):
    help = "Attempt every due webhook delivery once, in this process (no broker needed)."

    def add_command_arguments(self, parser) -> None:
        parser.add_argument("--limit", type=int, default=100, help="at most this many attempts")

    def run(self, *, limit: int, **_) -> None:
        attempted = services.deliveries_send_due(limit=limit)
        self.emit({"attempted": attempted}, f"Attempted {attempted} due webhook delivery(ies).")
