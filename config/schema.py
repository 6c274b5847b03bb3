"""drf-spectacular wiring: the Idempotency-Key header and the error shape on every operation."""

import json
from pathlib import Path

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.plumbing import is_list_serializer
from drf_spectacular.utils import OpenApiParameter

from core.fields import CountryCodeField
from core.pagination import CURSOR_PATTERN, CursorField
from core.serializers import (
    IDEMPOTENCY_KEY_MAX_LENGTH,
    ErrorResponseSerializer,
    RejectUnknownFields,
)

IDEMPOTENCY_HEADER = OpenApiParameter(
    name="Idempotency-Key",
    type={
        "type": "string",
        "minLength": 1,
        "maxLength": IDEMPOTENCY_KEY_MAX_LENGTH,
        "pattern": "^[ -~]+$",  # printable ASCII
    },
    location=OpenApiParameter.HEADER,
    required=True,
    description=(
        "Unique per business intent; reuse only to retry the exact same request. 1 to 255"
        " printable ASCII characters (a UUID is a good choice). The first answer is kept for"
        " 24 hours and replayed to a retry with the same key and body (`_meta`"
        ".idempotency_replayed true); the same key with another body is a 409."
    ),
)


class CowryAutoSchema(AutoSchema):
    def _is_idempotent(self) -> bool:
        handler = getattr(self.view, self.method.lower(), None)
        return bool(getattr(handler, "idempotent", False))

    def get_override_parameters(self):
        params = list(super().get_override_parameters())
        if self._is_idempotent():
            params.append(IDEMPOTENCY_HEADER)
        return params

    def _map_serializer(self, serializer, direction, bypass_extensions=False):
        schema = super()._map_serializer(serializer, direction, bypass_extensions)
        # A body (or an object in one) refuses a field it does not know: a 400 naming it.
        if direction == "request" and isinstance(serializer, RejectUnknownFields):
            schema["additionalProperties"] = False
        return schema

    def _map_serializer_field(self, field, direction, bypass_extensions=False):
        schema = super()._map_serializer_field(field, direction, bypass_extensions)
        if isinstance(field, CursorField) and schema is not None:
            schema["pattern"] = CURSOR_PATTERN
        # drf-spectacular drops a nested list's allow_empty=False and max_length, which the API
        # enforces (KYC documents: 1 to 10).
        if is_list_serializer(field) and not field.allow_empty and schema is not None:
            schema["minItems"] = max(1, field.min_length or 1)
        if is_list_serializer(field) and field.max_length and schema is not None:
            schema["maxItems"] = field.max_length
        if isinstance(field, CountryCodeField) and schema is not None:
            schema["pattern"] = "^[A-Z]{2}$"
            schema.setdefault("description", "ISO 3166-1 alpha-2 country code, upper case.")
        return schema

    def _get_response_bodies(self, direction="response"):
        responses = super()._get_response_bodies(direction)
        if direction == "request":  # a webhook's answers, given by the merchant's receiver
            return responses
        error_statuses = ["401", "414", "429"]
        if self.method in ("POST", "PUT", "PATCH"):
            error_statuses += ["400", "415"]
        if "{" in self.path:
            error_statuses.append("404")
        if self._is_idempotent():
            error_statuses.append("409")
        error_statuses += getattr(self.view, "extra_error_statuses", [])
        for status in error_statuses:
            if status not in responses:
                responses[status] = self._get_response_for_code(
                    ErrorResponseSerializer, status, direction=direction
                )
        return responses


def meta_is_optional(result, generator, request, public):
    """`_meta` only appears on the answers of idempotent POSTs, never on GETs."""
    for component in result.get("components", {}).get("schemas", {}).values():
        meta = component.get("properties", {}).get("_meta")
        if meta is not None:
            meta.pop("title", None)  # drf-spectacular's label of "_meta" is " meta"
        required = component.get("required")
        if required and "_meta" in required:
            required.remove("_meta")
            if not required:
                del component["required"]
    return result


# Request components under the names docs/api.md gives them, so a merchant's generated
# client has those type names; the rest keep drf-spectacular's names.
SPEC_COMPONENT_NAMES = {
    "CustomerCreateInputRequest": "CreateCustomerRequest",
    "KycDocumentInputRequest": "KycDocumentInput",
    "PayinSourceInputRequest": "PayinSourceRequest",
    "TransferPayerInputRequest": "RailParty",
}


def spec_component_names(result, generator, request, public):
    """Rename the components docs/api.md names, and every reference to them."""
    schemas = result.get("components", {}).get("schemas", {})
    for ours, spec_name in SPEC_COMPONENT_NAMES.items():
        if ours in schemas:
            schemas[spec_name] = schemas.pop(ours)
    refs = {
        f"#/components/schemas/{ours}": f"#/components/schemas/{spec_name}"
        for ours, spec_name in SPEC_COMPONENT_NAMES.items()
    }

    def rewrite(node):
        if isinstance(node, dict):
            return {
                key: refs.get(value, value) if key == "$ref" else rewrite(value)
                for key, value in node.items()
            }
        if isinstance(node, list):
            return [rewrite(item) for item in node]
        return node

    result = rewrite(result)
    result["components"]["schemas"] = dict(sorted(result["components"]["schemas"].items()))
    return result


# The description of each status a response can have, where drf-spectacular leaves it empty.
STATUS_DESCRIPTIONS = {
    "200": "OK.",
    "201": "Created. An idempotent POST retried with the same key and body answers the same.",
    "202": "Accepted: the work continues in the background.",
    "400": (
        "Refused: invalid input (`reason` invalid_request, with `fields`) or a business rule"
        " (`reason` names it; see the Errors section after the endpoints)."
    ),
    "401": "Missing or invalid X-Api-Key / X-Api-Secret (`reason` invalid_credentials).",
    "404": "No such resource for this merchant (`reason` names the resource, or not_found).",
    "409": (
        "The Idempotency-Key was used with another request (idempotency_key_reused) or its"
        " first request is still running (request_in_progress), or the resource's state"
        " forbids the move."
    ),
    "414": (
        "The request line (method, path and query) is over 4094 bytes: refused before it is"
        " read (`reason` uri_too_long). Every request of this API fits far within it."
    ),
    "415": "The body is not `application/json`.",
    "429": "Too many requests for this API key: wait `Retry-After` seconds.",
}


ONCE = "Give it at most once: a repeated query parameter is a 400."

# One typical error body per status, shown on every operation's error responses.
ERROR_EXAMPLES = {
    "400": {
        "error": {
            "code": "bad_request",
            "message": "send_amount: This field is required.",
            "reason": "invalid_request",
            "fields": {"send_amount": ["This field is required."]},
        }
    },
    "401": {
        "error": {
            "code": "unauthorized",
            "message": "Invalid API credentials.",
            "reason": "invalid_credentials",
        }
    },
    "404": {
        "error": {
            "code": "not_found",
            "message": "The resource does not exist.",
            "reason": "not_found",
        }
    },
    "409": {
        "error": {
            "code": "conflict",
            "message": "This Idempotency-Key was already used with a different request.",
            "reason": "idempotency_key_reused",
        }
    },
    "414": {
        "error": {
            "code": "uri_too_long",
            "message": "Request Line is too large (5000 > 4094)",
            "reason": "uri_too_long",
        }
    },
    "415": {
        "error": {
            "code": "unsupported_media_type",
            "message": 'Unsupported media type "text/plain" in request.',
            "reason": "unsupported_media_type",
        }
    },
    "429": {
        "error": {"code": "rate_limited", "message": "Too many requests.", "reason": "rate_limited"}
    },
}
# Request and response bodies of a real session (the README's), by operationId.
EXAMPLES_FILE = Path(__file__).with_name("schema_examples.json")


def _set_example(content: dict | None, value) -> None:
    if content and "application/json" in content:
        content["application/json"]["examples"] = {"example": {"value": value}}


ERRORS_TAG = "Errors"
GUIDE_TAG = "Merchant guide"


def describe_responses(result, generator, request, public):
    """Every response gets a description and the usual error an example; the operations of a
    real session get its bodies; the document lists the operations' tags in order."""
    examples = json.loads(EXAMPLES_FILE.read_text())
    for item in result.get("paths", {}).values():
        for operation in item.values():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            own = examples.get(operation["operationId"], {})
            for parameter in operation.get("parameters", []):
                if parameter.get("in") == "query":  # core.pagination.parse_query
                    said = parameter.get("description", "")
                    parameter["description"] = f"{said} {ONCE}".strip()
            if "request" in own:
                _set_example(operation.get("requestBody", {}).get("content"), own["request"])
            for status, response in operation["responses"].items():
                if not response.get("description"):
                    response["description"] = STATUS_DESCRIPTIONS.get(status, "")
                value = own.get("responses", {}).get(status, ERROR_EXAMPLES.get(status))
                if value is not None:
                    _set_example(response.get("content"), value)
    operation_tags = [
        tag
        for item in result.get("paths", {}).values()
        for operation in item.values()
        if isinstance(operation, dict)
        for tag in operation.get("tags", [])
    ]
    result["tags"] = [{"name": tag} for tag in dict.fromkeys(operation_tags)]
    return result


MERCHANT_GUIDE = Path(__file__).resolve().parent.parent / "docs" / "merchant-guide.md"


def reference_sections_last(result, generator, request, public):
    """The error reference and the merchant guide as sections of their own after the endpoints
    (and the webhooks): tags without operations (`x-traitTag` makes Redoc show them)."""
    from config.errors_reference import render_reasons_table

    tags = result.setdefault("tags", [])
    tags.append({"name": ERRORS_TAG, "description": render_reasons_table(), "x-traitTag": True})
    if MERCHANT_GUIDE.is_file():  # a deployment may ship the code without docs/
        guide = MERCHANT_GUIDE.read_text().split("\n", 1)[1].strip()  # its title: the tag's
        tags.append({"name": GUIDE_TAG, "description": guide, "x-traitTag": True})
    return result
