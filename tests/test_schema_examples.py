"""The examples in /schema are what the API really sends and takes: each validates against the
schema of its request or response, and every POST and every 2xx of the session carries one."""

import json

import jsonschema
import pytest
from django.test import Client
from referencing import Registry, Resource

from config.schema import ERROR_EXAMPLES, EXAMPLES_FILE

pytestmark = pytest.mark.django_db


def _json_schema(node):
    """OpenAPI 3.0's `nullable` as JSON Schema (the rest of what we emit is the same)."""
    if isinstance(node, list):
        return [_json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    node = {key: _json_schema(value) for key, value in node.items()}
    if node.pop("nullable", False):
        return {"anyOf": [node, {"type": "null"}]}
    return node


@pytest.fixture(scope="module")
def schema(django_db_blocker):
    with django_db_blocker.unblock():
        response = Client().get("/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    return json.loads(response.content)


def _examples(schema):
    for item in schema["paths"].values():
        for operation in item.values():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            bodies = [("request", operation.get("requestBody", {}))]
            bodies += list(operation["responses"].items())
            for where, body in bodies:
                media = body.get("content", {}).get("application/json", {})
                for example in media.get("examples", {}).values():
                    yield operation["operationId"], where, media["schema"], example["value"]


def test_every_example_validates_against_its_schema(schema):
    components = _json_schema(schema["components"])
    root = Resource.from_contents(
        {"$schema": "https://json-schema.org/draft/2020-12/schema", "components": components}
    )
    registry = Registry().with_resource("urn:cowry", root)
    checked = 0
    for operation_id, where, body_schema, value in _examples(schema):
        rewritten = json.loads(json.dumps(_json_schema(body_schema)).replace('"#/', '"urn:cowry#/'))
        validator = jsonschema.Draft202012Validator(rewritten, registry=registry)
        errors = [error.message for error in validator.iter_errors(value)]
        assert errors == [], (operation_id, where, errors[:3])
        checked += 1
    assert checked > 100


def test_the_session_examples_cover_the_main_flow(schema):
    own = json.loads(EXAMPLES_FILE.read_text())
    operations = {
        op["operationId"]: op for item in schema["paths"].values() for op in item.values()
    }
    assert set(own) <= set(operations)
    for name in ("createCustomer", "createPayinQuote", "createPayin", "createPayout"):
        media = operations[name]["requestBody"]["content"]["application/json"]
        assert media["examples"]["example"]["value"] == own[name]["request"]
        assert "201" in own[name]["responses"]
    assert set(ERROR_EXAMPLES) == {"400", "401", "404", "409", "414", "415", "429"}


def test_a_wrong_example_is_caught(schema):
    """The validation above can fail: a payin example with a number for a string is refused."""
    components = _json_schema(schema["components"])
    registry = Registry().with_resource(
        "urn:cowry",
        Resource.from_contents(
            {"$schema": "https://json-schema.org/draft/2020-12/schema", "components": components}
        ),
    )
    validator = jsonschema.Draft202012Validator(
        {"$ref": "urn:cowry#/components/schemas/PayinOutput"}, registry=registry
    )
    good = json.loads(EXAMPLES_FILE.read_text())["createPayin"]["responses"]["201"]
    assert list(validator.iter_errors(good)) == []
    assert list(validator.iter_errors({**good, "send_amount": 10000}))


def test_the_schema_carries_the_limits_the_server_enforces(schema):
    from kyc.serializers import MAX_DOCUMENTS_PER_SUBMISSION
    from merchants.idempotency import MAX_KEY_LENGTH
    from payments.statements import MAX_DAYS

    create_payin = schema["paths"]["/payins"]["post"]
    key = next(p for p in create_payin["parameters"] if p["name"] == "Idempotency-Key")
    assert key["required"] is True
    assert key["schema"] == {
        "type": "string",
        "minLength": 1,
        "maxLength": MAX_KEY_LENGTH,
        "pattern": "^[ -~]+$",
    }
    components = schema["components"]["schemas"]
    documents = components["KycSubmitInputRequest"]["properties"]["documents"]
    assert (documents["minItems"], documents["maxItems"]) == (1, MAX_DOCUMENTS_PER_SUBMISSION)
    assert components["RailParty"]["properties"]["country_code"]["pattern"] == "^[A-Z]{2}$"
    statement = {p["name"]: p for p in schema["paths"]["/statements"]["get"]["parameters"]}
    assert f"at most {MAX_DAYS} days" in statement["to"]["description"]
    cursor = {p["name"]: p for p in schema["paths"]["/payins"]["get"]["parameters"]}["cursor"]
    assert cursor["schema"]["minLength"] == 1 and cursor["schema"]["maxLength"]


def test_the_schema_refers_to_nothing_outside_the_repository(schema):
    import re

    from tests.test_docs import OUTSIDE

    text = json.dumps(schema)
    assert re.findall("|".join(OUTSIDE), text) == []
