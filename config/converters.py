"""Path converters: ids in URLs are UUIDs in either case (Django's `uuid` takes lower case)."""

import uuid

from django.urls import register_converter


class UUIDAnyCaseConverter:
    regex = "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"

    def to_python(self, value: str) -> uuid.UUID:
        return uuid.UUID(value)

    def to_url(self, value: uuid.UUID | str) -> str:
        return str(value).lower()


def register() -> None:
    register_converter(UUIDAnyCaseConverter, "id")
