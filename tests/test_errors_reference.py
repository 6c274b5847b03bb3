"""The error reference (docs/errors.md, /schema) covers every reason the code can answer."""

import ast
import gc
import importlib
import inspect
import json
import pkgutil
import textwrap
import uuid

from django.test import Client

from config import errors_reference
from config.errors_guidance import GUIDANCE
from core.exceptions import CODE_BY_STATUS, DomainError
from core.serializers import IDEMPOTENCY_KEY_MAX_LENGTH
from merchants import idempotency
from tests.catalog import PAYIN_QUOTE


def _import_every_module() -> None:
    for package in ["core", *errors_reference.SOURCES, "config"]:
        for info in pkgutil.walk_packages(importlib.import_module(package).__path__, f"{package}."):
            if ".migrations" in info.name or ".management" in info.name:
                continue
            if info.name.startswith("config.settings") or info.name in (
                "config.wsgi",
                "config.asgi",
            ):
                continue
            importlib.import_module(info.name)


def _subclasses(cls: type) -> list[type]:
    return [found for sub in cls.__subclasses__() for found in (sub, *_subclasses(sub))]


def _missing_from_registry() -> list[str]:
    _import_every_module()
    defined = {DomainError, *_subclasses(DomainError)} - set(errors_reference.error_classes())
    return sorted(f"{cls.__module__}.{cls.__qualname__}" for cls in defined)


def test_every_error_class_is_in_the_registry():
    """The reference reads error_classes(): an error class defined anywhere must be listed there."""
    assert _missing_from_registry() == []


def test_every_reason_in_the_code_has_its_meaning_and_what_to_do():
    found = errors_reference.reasons()
    assert len(found) > 70
    assert sorted(found - set(GUIDANCE)) == []
    assert sorted(set(GUIDANCE) - found) == []  # nothing documented that cannot happen
    assert all(meaning and todo for meaning, todo in GUIDANCE.values())


def test_docs_errors_md_is_the_generated_reference():
    assert errors_reference.DOC.read_text() == errors_reference.render_markdown(), (
        "docs/errors.md is stale: run `python -m config.errors_reference --write`"
    )


def test_a_new_error_class_must_be_registered_and_then_lacks_guidance(monkeypatch):
    class BrandNewRefusal(DomainError):
        status = 409
        reason = "brand_new_refusal"
        message = "Refused for a brand new reason."

    try:
        assert any(name.endswith("BrandNewRefusal") for name in _missing_from_registry())
        registered = (*errors_reference.error_classes(), BrandNewRefusal)
        monkeypatch.setattr(errors_reference, "error_classes", lambda: registered)
        found = errors_reference.discover()
        assert found[409, "brand_new_refusal"].code == "conflict"
        assert "brand_new_refusal" not in GUIDANCE  # the first test would fail on it
    finally:
        monkeypatch.undo()
        del BrandNewRefusal
        gc.collect()
    assert "brand_new_refusal" not in errors_reference.reasons()


def test_ad_hoc_and_http_level_reasons_are_found():
    found = errors_reference.discover()
    assert (400, "invalid_label") in found  # through merchants' length helper
    assert (400, "api_key_not_active") in found  # DomainError(..., reason=...)
    assert (400, "malformed_json") in found  # core.exceptions
    assert (429, "rate_limited") in found
    assert found[409, "idempotency_key_reused"].code == "conflict"


def test_the_schema_publishes_the_reference_and_describes_every_response(db):
    schema = json.loads(
        Client().get("/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json").content
    )
    tags = [tag["name"] for tag in schema["tags"]]
    assert tags[-3:] == ["Webhooks", "Errors", "Merchant guide"]  # after the endpoints'
    description = next(tag["description"] for tag in schema["tags"] if tag["name"] == "Errors")
    assert "insufficient_balance" not in schema["info"]["description"]
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


def _listed(status: int, reason: str) -> bool:
    """docs/errors.md has the row for this status and reason."""
    row = f"| {status} | `{CODE_BY_STATUS[status]}` | `{reason}` |"
    return row in errors_reference.DOC.read_text()


def test_a_reason_answered_with_two_statuses_is_listed_under_each(enabled_api):
    """An unknown id in the path is a 404, in a body a 400: both rows are in the reference."""
    unknown = str(uuid.uuid4())
    customer = enabled_api.post("/customers", {"first_name": "Awa"}).json()["id"]
    answers = [
        enabled_api.get(f"/customers/{unknown}"),
        enabled_api.post("/quotes/payin", {**PAYIN_QUOTE, "customer_id": unknown}),
        enabled_api.get(f"/quotes/{unknown}"),
        enabled_api.post(
            "/payins",
            {"quote_id": unknown, "customer_id": customer, "source": {"phone": "+237670001234"}},
        ),
    ]
    seen = [(r.status_code, r.json()["error"]["reason"]) for r in answers]
    assert seen == [
        (404, "customer_not_found"),
        (400, "customer_not_found"),
        (404, "quote_not_found"),
        (400, "quote_not_found"),
    ]
    assert all(_listed(status, reason) for status, reason in seen)


def test_no_error_class_changes_its_status_at_runtime():
    """The reference reads each class's declared status: an error that is a 404 here and a 400
    there is two classes (CustomerNotFound, CustomerNotFoundForPayment)."""
    for cls in errors_reference.error_classes():
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
        assigned = [
            target
            for node in ast.walk(tree)
            if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign)
            for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
            if isinstance(target, ast.Attribute) and target.attr == "status"
        ]
        assert assigned == [], cls
