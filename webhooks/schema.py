"""The webhooks in the OpenAPI document (its 3.1 `webhooks` section): each event's envelope and
`data.object`, an example, the delivery headers and the signing recipe (docs/webhooks.md)."""

from typing import Any

from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from drf_spectacular.utils import OpenApiExample, OpenApiResponse, OpenApiWebhook, extend_schema
from rest_framework import serializers

from core.serializers import OutputSerializer
from webhooks import signing
from webhooks.models import TEST_EVENT_TYPE

TAG = "Webhooks"

TAG_DESCRIPTION = f"""\
Cowry POSTs one signed event per request to each of your webhook endpoints subscribed to it
(`POST /webhooks`), `Content-Type: application/json`. The body is the event's envelope
(`id`, `event`, `created_at`, `data.type`, `data.id`, `data.object`), serialized once and
sent byte for byte on every attempt; `data.object` is the resource as it was at that moment.

| Header | Value |
|---|---|
| `{signing.SIGNATURE_HEADER}` | `sha256=` and the hex HMAC-SHA256 below |
| `{signing.TIMESTAMP_HEADER}` | Unix time in seconds of this attempt |
| `{signing.EVENT_HEADER}` | the event name |
| `{signing.WEBHOOK_ID_HEADER}` | the event id, the body's `id` |

**Signing recipe.** `{signing.SIGNATURE_HEADER}` is
`"sha256=" + hex(HMAC-SHA256(signing_secret, timestamp + "." + raw_body))`, with `timestamp`
the `{signing.TIMESTAMP_HEADER}` header and `raw_body` the bytes received. To verify: compute
it over the raw body before parsing any JSON, compare in constant time, and refuse a timestamp
more than 5 minutes from now. `webhooks/verify.py` in the repository does exactly that.

**Acknowledgement.** Any 2xx acknowledges the event. Anything else, a redirect, a timeout or a
connection error is retried after 1 min, 5 min, 15 min, 1 h, 4 h and 12 h; delivery is at
least once: deduplicate by `{signing.WEBHOOK_ID_HEADER}`."""


class ConstantField(serializers.CharField):
    """A string that is always `value`: an event's name, its `data.type`."""

    def __init__(self, value: str, **kwargs: Any) -> None:
        self.value = value
        super().__init__(**kwargs)


class ConstantFieldSchema(OpenApiSerializerFieldExtension):
    target_class = ConstantField

    def map_serializer_field(self, auto_schema, direction):
        return {"type": "string", "const": self.target.value}


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.replace("_", ".").split("."))


def event_webhook(
    *,
    event: str,
    data_type: str,
    data_object: type[serializers.Serializer],
    example_object: dict[str, Any],
    when: str,
) -> OpenApiWebhook:
    """The webhook of one event name: its envelope (a component named after the event, e.g.
    PayinCompletedEvent), with `data.object` the `data_object` serializer's schema."""
    name = _camel(event)
    data = type(
        f"{name}EventData",
        (OutputSerializer,),
        {
            "type": ConstantField(data_type),
            "id": serializers.UUIDField(help_text=f"The {data_type}'s id."),
            "object": data_object(help_text=f"The {data_type} as it was at `created_at`."),
        },
    )
    envelope = type(
        f"{name}Event",
        (OutputSerializer,),
        {
            "__doc__": f"The body of a `{event}` delivery.",
            "id": serializers.UUIDField(help_text="The event id (deduplicate by it)."),
            "event": ConstantField(event),
            "created_at": serializers.DateTimeField(help_text="When the event was recorded."),
            "data": data(),
        },
    )
    example = {
        "id": "0b5d3c9e-7f7a-4c51-9d1e-2f7d3c1a9b10",
        "event": event,
        "created_at": example_object.get("completed_at")
        or example_object.get("failed_at")
        or example_object.get("created_at")
        or "2026-11-28T10:15:32.482913Z",
        "data": {"type": data_type, "id": example_object["id"], "object": example_object},
    }
    return OpenApiWebhook(
        name=event,
        decorator=extend_schema(
            summary=event,
            description=f"{when}\n\nHeaders, signature and retries: see the {TAG} tag.",
            tags=[TAG],
            request=envelope,
            responses={
                "2XX": OpenApiResponse(description="Acknowledged: the event is not sent again."),
                "default": OpenApiResponse(
                    description="Any other answer, a redirect, a timeout or a connection error:"
                    " the attempt failed and is retried."
                ),
            },
            examples=[OpenApiExample(event, value=example)],
        ),
    )


class TestEventObject(OutputSerializer):
    id = serializers.UUIDField(help_text="The endpoint's id.")
    message = serializers.CharField()
    created_at = serializers.DateTimeField()


TEST_WEBHOOK = event_webhook(
    event=TEST_EVENT_TYPE,
    data_type="test",
    data_object=TestEventObject,
    example_object={
        "id": "5f0c2a41-3e8b-4b0e-8a55-7a3f6c2d9e01",
        "message": "Test event from Cowry: your endpoint is reachable.",
        "created_at": "2026-11-28T10:15:32.482913Z",
    },
    when='Sent to one endpoint by the dashboard\'s "Send test event"; never retried by a '
    "re-send of failed deliveries.",
)


def _header(name: str, description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": name,
        "in": "header",
        "required": True,
        "description": description,
        "schema": schema,
    }


def webhook_headers(result, generator, request, public):
    """Every webhook gets the delivery headers (drf-spectacular builds a webhook's body and
    answers only), and their tag, after the endpoints', describes them all."""
    result.setdefault("tags", []).append({"name": TAG, "description": TAG_DESCRIPTION})
    for event, item in result.get("webhooks", {}).items():
        operation = item["post"]
        operation["parameters"] = [
            _header(
                signing.SIGNATURE_HEADER,
                '"sha256=" + hex HMAC-SHA256(signing secret, timestamp + "." + raw body).',
                {"type": "string", "pattern": "^sha256=[0-9a-f]{64}$"},
            ),
            _header(
                signing.TIMESTAMP_HEADER,
                "Unix time in seconds of this attempt: refuse one more than 5 minutes away.",
                {"type": "string", "pattern": "^[0-9]+$"},
            ),
            _header(signing.EVENT_HEADER, "The event name.", {"type": "string", "const": event}),
            _header(
                signing.WEBHOOK_ID_HEADER,
                "The event id (the body's `id`), the same on every attempt.",
                {"type": "string", "format": "uuid"},
            ),
        ]
    return result
