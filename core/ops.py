"""Base for the ops commands of docs/operations.md: human text, or one JSON object with --json."""

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from core.exceptions import DomainError


class OpsCommand(BaseCommand):
    def add_arguments(self, parser) -> None:
        parser.add_argument("--json", action="store_true", help="print one JSON object")
        self.add_command_arguments(parser)

    def add_command_arguments(self, parser) -> None:
        pass

    def handle(self, *args, **options) -> None:
        self.as_json = options["json"]
        try:
            self.run(**options)
        except DomainError as exc:
            raise CommandError(exc.message) from exc

    def run(self, **options) -> None:
        raise NotImplementedError

    def emit(self, data: dict[str, Any], text: str) -> None:
        if self.as_json:
            self.stdout.write(json.dumps(data, default=str))
        else:
            self.stdout.write(text)
