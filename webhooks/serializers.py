from rest_framework import serializers

from core import pagination
from core.serializers import IdempotencyMetaSerializer, RejectUnknownFields
from webhooks.selectors import EventDeliveryStatus
from webhooks.services.endpoints import EVENT_TYPES


class EventDataOutput(serializers.Serializer):
    type = serializers.CharField(help_text="payin, payout or transfer")
    id = serializers.UUIDField()
    object = serializers.DictField(help_text="Snapshot of the resource at event time.")


class EventOutput(serializers.Serializer):
    """The webhook envelope of docs/webhooks.md, exactly as it was sent, plus a delivery summary."""

    id = serializers.UUIDField()
    event = serializers.CharField()
    created_at = serializers.DateTimeField()
    data = EventDataOutput()
    delivery_status = serializers.ChoiceField(choices=EventDeliveryStatus.choices)
    _meta = IdempotencyMetaSerializer(read_only=True, required=False)

    def to_representation(self, instance):
        return {**instance.payload, "delivery_status": instance.delivery_status}


class EventListQuery(pagination.ListQueryInput):
    type = serializers.ChoiceField(
        choices=EVENT_TYPES, required=False, help_text="An event name (see the webhook events)."
    )
    data_id = serializers.UUIDField(required=False, help_text="The id of the resource.")
    delivery_status = serializers.ChoiceField(choices=EventDeliveryStatus.choices, required=False)


EventPageOutput = pagination.page_serializer("EventPageOutput", EventOutput)


class EventResendInput(RejectUnknownFields):
    """No fields: a body, when sent, is an empty object."""


class EventResendFailedInput(RejectUnknownFields):
    since = serializers.DateTimeField(
        help_text=(
            "ISO 8601 time: re-send the failed deliveries created at or after it, and send the "
            "events recorded at or after it that an enabled endpoint never got (it was "
            "disabled then)."
        )
    )


class EventResendFailedOutput(serializers.Serializer):
    resent = serializers.IntegerField(
        help_text=(
            "Deliveries made: failed deliveries re-sent plus missed events sent, one per event "
            "and endpoint."
        ),
    )
    _meta = IdempotencyMetaSerializer(read_only=True, required=False)
