"""Base for the ops commands of docs/operations.md: human text, or one JSON object with --json."""

import json
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from core.exceptions import DomainError

# A secret given as this is read from standard input: kept out of the shell's history and the
# process list.
READ_STDIN = "-"


class OpsCommand(BaseCommand):
    stealth_options = ("stdin",)  # call_command(..., stdin=...) in the tests

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

    def secret_read(self, value: str | None, options: dict[str, Any]) -> str | None:
        """`value`, or the first line of standard input when it is READ_STDIN."""
        if value != READ_STDIN:
            return value
        return options.get("stdin", sys.stdin).readline().rstrip("\r\n")

    def emit(self, data: dict[str, Any], text: str) -> None:
        if self.as_json:
            self.stdout.write(json.dumps(data, default=str))
        else:
            self.stdout.write(text)
