"""Serializer base classes shared by the apps."""

from rest_framework import serializers
from rest_framework.utils.serializer_helpers import BindingDict


class _FieldsBoundOnce(serializers.Serializer):
    """Fields built and bound once per class, not deep-copied for every instance as DRF does
    (a fifth of the CPU of GET /payins/{id}, a twentieth of POST /payins). Only for
    serializers none of whose fields reads the serializer's context or instance, or keeps
    per-request state: every instance shares them, and so do concurrent requests."""

    @property
    def fields(self) -> BindingDict:
        cls = type(self)
        fields = cls.__dict__.get("_fields_bound_once")
        if fields is None:
            fields = BindingDict(self)
            for name, field in self.get_fields().items():
                fields[name] = field
            cls._fields_bound_once = fields
        return fields


class OutputSerializer(_FieldsBoundOnce):
    """A response serializer (see _FieldsBoundOnce)."""


class InputSerializer(_FieldsBoundOnce):
    """A request body serializer of plain fields (see _FieldsBoundOnce): validation state lives
    on the serializer instance (errors, validated data), never on the shared fields. Not for
    partial updates: the shared fields see the first instance as their root."""
