import argparse
import sys

from django.core.management.base import CommandError
from django.utils import timezone

from core.ops import OpsCommand
from rails import services
from rails.models import ProviderConnection


def _shown(connection: ProviderConnection, routes: list[str]) -> dict:
    """A connection as ops see it: never its credentials nor its callback secret."""
    return {
        "name": connection.name,
        "kind": connection.kind,
        "base_url": connection.base_url,
        "target_environment": connection.target_environment,
        "callback_base": connection.callback_base,
        "operators": routes,
        "last_success_at": connection.last_success_at,
    }


class Command(OpsCommand):
    help = (
        "Add, update, list or remove a provider connection (credentials as one JSON object on"
        " standard input; never printed back)."
    )

    def add_command_arguments(self, parser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        add = actions.add_parser("add", help="add a connection; credentials on standard input")
        update = actions.add_parser("update", help="change a connection's settings")
        for each in (add, update):
            each.add_argument("name")
            each.add_argument("--base-url")
            each.add_argument("--target-environment")
            each.add_argument("--callback-base")
        add.add_argument("--kind", required=True)
        update.add_argument(
            "--credentials", choices=["-"], help="read new credentials on standard input"
        )
        listing = actions.add_parser("list", help="each connection, without secrets")
        remove = actions.add_parser("remove", help="remove an unused connection")
        remove.add_argument("name")
        for each in (add, update, listing, remove):  # --json after the action too
            each.add_argument(
                "--json", action="store_true", default=argparse.SUPPRESS, help="one JSON object"
            )

    def run(self, *, action: str, **options) -> None:
        try:
            getattr(self, f"_{action}")(**options)
        except services.ConnectionRefused as refused:
            raise CommandError(str(refused)) from None

    def _credentials(self) -> dict:
        if sys.stdin.isatty():
            self.stderr.write("Credentials (one JSON object), then Ctrl-D:")
        return services.credentials_parse(sys.stdin.read())

    def _add(self, *, name: str, kind: str, base_url, target_environment, callback_base, **_):
        if not (base_url and target_environment and callback_base):
            raise CommandError("--base-url, --target-environment and --callback-base are required.")
        connection = services.connection_add(
            name=name,
            kind=kind,
            base_url=base_url,
            target_environment=target_environment,
            callback_base=callback_base,
            credentials=self._credentials(),
            at=timezone.now(),
        )
        self.emit(
            _shown(connection, []), f"Connection {name} added (credentials stored encrypted)."
        )

    def _update(self, *, name: str, base_url, target_environment, callback_base, credentials, **_):
        connection = services.connection_update(
            name=name,
            base_url=base_url,
            target_environment=target_environment,
            callback_base=callback_base,
            credentials=self._credentials() if credentials == "-" else None,
            at=timezone.now(),
        )
        self.emit(
            _shown(connection, services.selectors.connections_in_use(name)),
            f"Connection {name} updated (its cached tokens dropped).",
        )

    def _list(self, **_) -> None:
        shown = [
            _shown(each, services.selectors.connections_in_use(each.name))
            for each in ProviderConnection.objects.order_by("name")
        ]
        lines = ["simulator  kind=simulator  (built in)"] + [
            f"{each['name']}  kind={each['kind']}  base_url={each['base_url']}"
            f"  target_environment={each['target_environment']}"
            f"  callback_base={each['callback_base']}"
            f"  operators={','.join(each['operators']) or '-'}"
            for each in shown
        ]
        self.emit({"connections": shown}, "\n".join(lines))

    def _remove(self, *, name: str, **_) -> None:
        services.connection_remove(name=name)
        self.emit({"name": name, "removed": True}, f"Connection {name} removed.")
