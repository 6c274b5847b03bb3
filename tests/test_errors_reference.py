"""The error reference (docs/errors.md, /schema) covers every reason the code can answer."""

import gc
import json

from django.test import Client

from config import errors_reference
from config.errors_guidance import GUIDANCE
from config.exceptions import DomainError
from config.schema import IDEMPOTENCY_KEY_MAX_LENGTH
from merchants import idempotency


def test_every_reason_in_the_code_has_its_meaning_and_what_to_do():
    found = errors_reference.discover()
    assert len(found) > 70
    assert sorted(set(found) - set(GUIDANCE)) == []
    assert sorted(set(GUIDANCE) - set(found)) == []  # nothing documented that cannot happen
    assert all(meaning and todo for meaning, todo in GUIDANCE.values())


def test_docs_errors_md_is_the_generated_reference():
    assert errors_reference.DOC.read_text() == errors_reference.render_markdown(), (
        "docs/errors.md is stale: run `python -m config.errors_reference --write`"
    )


def test_a_new_reason_is_found_wherever_its_class_lives_and_lacks_guidance():
    class BrandNewRefusal(DomainError):
        status = 409
        reason = "brand_new_refusal"
        message = "Refused for a brand new reason."

    try:
        found = errors_reference.discover()
        assert found["brand_new_refusal"].status == 409
        assert found["brand_new_refusal"].code == "conflict"
        assert "brand_new_refusal" not in GUIDANCE  # the first test would fail on it
    finally:
        del BrandNewRefusal
        gc.collect()
    assert "brand_new_refusal" not in errors_reference.discover()


def test_ad_hoc_and_http_level_reasons_are_found():
    found = errors_reference.discover()
    assert found["invalid_label"].status == 400  # through merchants' length helper
    assert found["api_key_not_active"].status == 400  # DomainError(..., reason=...)
    assert found["malformed_json"].status == 400  # config.exceptions
    assert found["rate_limited"].status == 429
    assert found["idempotency_key_reused"].code == "conflict"


def test_the_schema_publishes_the_reference_and_describes_every_response(db):
    schema = json.loads(
        Client().get("/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json").content
    )
    description = schema["info"]["description"]
    for reason, (_meaning, todo) in GUIDANCE.items():
        assert todo in description
        assert f"`{reason}`" in description
    operations = [
        op for item in schema["paths"].values() for op in item.values() if "responses" in op
    ]
    assert operations
    for operation in operations:
        assert operation.get("description"), operation["operationId"]
        for status, response in operation["responses"].items():
            assert response.get("description"), (operation["operationId"], status)


def test_the_idempotency_key_limits_in_the_schema_are_the_servers():
    assert IDEMPOTENCY_KEY_MAX_LENGTH == idempotency.MAX_KEY_LENGTH
