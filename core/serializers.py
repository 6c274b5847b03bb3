"""Serializer base classes shared by the apps. They say what they are in comments, not
docstrings: drf-spectacular describes a serializer with no docstring by its bases' docstring."""

from collections.abc import Mapping

from rest_framework import serializers
from rest_framework.utils.serializer_helpers import BindingDict


# Fields built and bound once per class, not deep-copied for every instance as DRF does (a
# fifth of the CPU of GET /payins/{id}, a twentieth of POST /payins). Only for serializers none
# of whose fields reads the serializer's context or instance, or keeps per-request state: every
# instance shares them, and so do concurrent requests.
class _FieldsBoundOnce(serializers.Serializer):
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


# Renders an empty string as null in the fields `null_for_blank` names (None: in every field):
# an optional text that was not given reads null in a response.
class NullForBlank:
    null_for_blank: tuple[str, ...] | None = None

    def to_representation(self, instance):
        data = super().to_representation(instance)
        for name in list(data) if self.null_for_blank is None else self.null_for_blank:
            if data[name] == "":
                data[name] = None
        return data


# A request body (or an object in one) refuses a field it does not know, naming it: a misspelt
# optional field would otherwise be dropped without a word (`amout` refunding the whole payin).
class RejectUnknownFields(serializers.Serializer):
    def to_internal_value(self, data):
        if isinstance(data, Mapping):
            unknown = sorted(str(name) for name in data if name not in self.fields)
            if unknown:
                message = f"Unknown field: this takes {', '.join(self.fields)}."
                raise serializers.ValidationError({name: [message] for name in unknown})
        return super().to_internal_value(data)


# A response serializer (see _FieldsBoundOnce).
class OutputSerializer(_FieldsBoundOnce):
    pass


# A request body serializer of plain fields (see _FieldsBoundOnce): validation state lives on
# the serializer instance (errors, validated data), never on the shared fields. Not for partial
# updates: the shared fields see the first instance as their root.
class InputSerializer(RejectUnknownFields, _FieldsBoundOnce):
    pass


class ErrorDetailSerializer(serializers.Serializer):
    code = serializers.CharField()
    message = serializers.CharField()
    reason = serializers.CharField(required=False)
    fields = serializers.DictField(required=False)
    details = serializers.DictField(
        child=serializers.CharField(),
        required=False,
        help_text="The figures of a refusal about an amount (amounts as strings, currency).",
    )


class ErrorResponseSerializer(serializers.Serializer):
    error = ErrorDetailSerializer()


class IdempotencyMetaSerializer(OutputSerializer):
    idempotency_key = serializers.CharField()
    idempotency_replayed = serializers.BooleanField()


IDEMPOTENCY_KEY_MAX_LENGTH = 255  # merchants.idempotency.MAX_KEY_LENGTH (a test holds them equal)
