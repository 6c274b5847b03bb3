"""The schema says what the server enforces: request bodies take no field they do not declare,
`cursor` has the pattern every valid cursor matches, query parameters are given once, and the
request line's limit (gunicorn's 414) is on every operation."""

import json
import re
import uuid
from datetime import UTC, datetime

import pytest
from django.test import Client
from hypothesis import given, settings
from hypothesis import strategies as st

from core.pagination import CURSOR_PATTERN, cursor_decode, cursor_encode
from tests.payments.conftest import SN_PHONE, create_customer

METHODS = ("get", "post", "put", "patch", "delete")


@pytest.fixture(scope="module")
def schema(django_db_blocker):
    with django_db_blocker.unblock():
        response = Client().get("/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    return json.loads(response.content)


def _operations(schema):
    for path, item in schema["paths"].items():
        for method in METHODS:
            if method in item:
                yield path, method, item[method]


def _objects_under(node, components, seen):
    """Every object schema a request body holds, through $refs and nesting."""
    if isinstance(node, list):
        for item in node:
            yield from _objects_under(item, components, seen)
        return
    if not isinstance(node, dict):
        return
    ref = node.get("$ref")
    if ref:
        name = ref.rsplit("/", 1)[1]
        if name not in seen:
            seen.add(name)
            yield from _objects_under(components[name], components, seen)
        return
    if "properties" in node:
        yield node
    for value in node.values():
        yield from _objects_under(value, components, seen)


def test_every_request_body_refuses_undeclared_fields(schema):
    components = schema["components"]["schemas"]
    checked = 0
    for path, method, operation in _operations(schema):
        body = operation.get("requestBody", {}).get("content", {}).get("application/json")
        if body is None:
            continue
        for obj in _objects_under(body["schema"], components, set()):
            assert obj.get("additionalProperties") is False, (method, path, obj)
            checked += 1
    assert checked > 15


def test_unknown_body_fields_are_refused_as_the_schema_says(api):
    body = {"first_name": "Awa", "last_name": "Diallo", "phone": SN_PHONE, "x": 1}
    response = api.post("/customers", body)
    assert response.status_code == 400
    assert "x" in response.json()["error"]["fields"]


def test_cursor_declares_the_pattern_every_cursor_matches(schema, api):
    cursors = [
        parameter["schema"]
        for _, _, operation in _operations(schema)
        for parameter in operation.get("parameters", [])
        if parameter["in"] == "query" and parameter["name"] == "cursor"
    ]
    assert len(cursors) >= 6
    assert all(cursor["pattern"] == CURSOR_PATTERN for cursor in cursors)
    for _ in range(3):
        create_customer(api)
    page = api.get("/customers", limit="1").json()
    assert re.fullmatch(CURSOR_PATTERN, page["next_cursor"])
    after = api.get("/customers", limit="1", cursor=page["next_cursor"])
    assert after.status_code == 200 and after.json()["data"][0]["id"] != page["data"][0]["id"]


@given(st.from_regex(CURSOR_PATTERN, fullmatch=True))
@settings(max_examples=200, deadline=None)
def test_any_string_the_pattern_takes_is_a_cursor(token):
    """A request schemathesis builds from the schema is never refused for its cursor."""
    decoded = cursor_decode(token)
    again = cursor_encode(created_at=decoded[0], id=decoded[1])
    assert re.fullmatch(CURSOR_PATTERN, again) and cursor_decode(again) == decoded


def test_a_cursor_keeps_the_microsecond_and_the_id():
    created_at = datetime(2026, 11, 29, 1, 2, 3, 456789, tzinfo=UTC)
    row_id = uuid.uuid4()
    assert cursor_decode(cursor_encode(created_at=created_at, id=row_id)) == (created_at, row_id)


def test_query_parameters_say_they_are_given_once(schema, api):
    params = [
        parameter
        for _, _, operation in _operations(schema)
        for parameter in operation.get("parameters", [])
        if parameter["in"] == "query"
    ]
    assert params and all("at most once" in p["description"] for p in params)
    response = api.get("/customers?limit=1&limit=2")
    assert response.status_code == 400 and "limit" in response.json()["error"]["fields"]


def test_every_operation_documents_the_request_line_limit(schema):
    for path, method, operation in _operations(schema):
        assert "414" in operation["responses"], (method, path)
        assert "4094 bytes" in operation["responses"]["414"]["description"]
