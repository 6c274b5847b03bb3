from django.core.management.base import BaseCommand

from rails import fake_mtn


class Command(BaseCommand):
    help = "Serve the contract fake of the MTN MoMo Open API (for running Cowry against by hand)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8090)
        parser.add_argument("--target-environment", default="sandbox")

    def handle(self, *, host: str, port: int, target_environment: str, **_) -> None:
        fake_mtn.main(
            ["--host", host, "--port", str(port), "--target-environment", target_environment]
        )
