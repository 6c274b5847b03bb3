"""Serializer base classes shared by the apps."""

from rest_framework import serializers
from rest_framework.utils.serializer_helpers import BindingDict


class OutputSerializer(serializers.Serializer):
    """A response serializer whose fields are built and bound once per class, not deep-copied
    for every instance as DRF does (a fifth of the CPU of GET /payins/{id}). For output only:
    no field of it may read the serializer's context or hold per-request state."""

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
