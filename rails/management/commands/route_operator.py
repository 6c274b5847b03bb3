from django.core.management.base import CommandError
from django.utils import timezone

from core.ops import OpsCommand
from quotes.models import Operator
from rails import services
from rails.models import SIMULATOR, OperatorRoute


class Command(OpsCommand):
    help = (
        "Route a catalog operator's new legs through a provider connection (`simulator` routes"
        " back); --list prints each operator and its connection."
    )

    def add_command_arguments(self, parser) -> None:
        parser.add_argument("operator_code", nargs="?")
        parser.add_argument("name", nargs="?")
        parser.add_argument("--list", action="store_true")

    def run(self, *, operator_code, name, list: bool, **_) -> None:
        if list:
            routes = dict(OperatorRoute.objects.values_list("operator_code", "connection__name"))
            shown = {
                code: routes.get(code, SIMULATOR)
                for code in Operator.objects.order_by("code").values_list("code", flat=True)
            }
            self.emit(
                {"routes": shown}, "\n".join(f"{code}  {each}" for code, each in shown.items())
            )
            return
        if not (operator_code and name):
            raise CommandError("Give OPERATOR_CODE NAME, or --list.")
        try:
            services.operator_route_set(operator_code=operator_code, name=name, at=timezone.now())
        except services.ConnectionRefused as refused:
            raise CommandError(str(refused)) from None
        self.emit(
            {"operator_code": operator_code, "connection": name},
            f"{operator_code} now routes to {name} (new legs within 5 seconds).",
        )
