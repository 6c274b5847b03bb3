"""Every event the code can emit is in the OpenAPI document's `webhooks`, and what a receiver
really gets (real payins, payouts, refunds and transfers delivered over a socket) validates
against the documented envelope, `data.object`, headers and signature."""

import ast
import json
from pathlib import Path

import jsonschema
import pytest
from django.test import Client
from django.utils import timezone
from referencing import Registry, Resource

from payments.services import payins, payouts, refunds
from tests.payments import conftest as payment_helpers
from tests.transfers import conftest as transfer_helpers
from webhooks import selectors
from webhooks.models import TEST_EVENT_TYPE
from webhooks.services.endpoints import EVENT_TYPES, endpoint_set
from webhooks.services.events import endpoint_send_test_event
from webhooks.verify import verify_signature

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]
# A name built as f"payin.{payin.status}": the statuses whose move records the event.
BUILT_NAMES = {
    "payin.": (payins._PAYIN_EFFECTS, payins._payin_event_record),
    "payout.": (payouts._PAYOUT_EFFECTS, payouts._payout_event_record),
    "refund.": (refunds._REFUND_EFFECTS, refunds._refund_event_record),
}


def emitted_event_names() -> set[str]:
    """The event names the apps' code records: the `event_type=` and `events=` arguments
    (literal names), the names given to a transfer move's `_events(...)` effect, and the
    f-string names of the payment state machines (the statuses whose effects record one)."""
    names: set[str] = set()
    prefixes: set[str] = set()
    for app in ("payments", "transfers", "webhooks"):
        for path in (ROOT / app).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            for call in ast.walk(ast.parse(path.read_text())):
                if not isinstance(call, ast.Call):
                    continue
                if isinstance(call.func, ast.Name) and call.func.id == "_events":
                    # a state machine's named effect: _events("transfer.payout.failed", ...)
                    names |= {arg.value for arg in call.args if isinstance(arg, ast.Constant)}
                for keyword in call.keywords:
                    if keyword.arg not in ("event_type", "events"):
                        continue
                    built = [n for n in ast.walk(keyword.value) if isinstance(n, ast.JoinedStr)]
                    prefixes |= {node.values[0].value for node in built}
                    parts = {id(part) for node in built for part in node.values}
                    for node in ast.walk(keyword.value):
                        if isinstance(node, ast.Constant) and id(node) not in parts:
                            names.add(node.value)
    assert prefixes == set(BUILT_NAMES), "a new built event name: teach this test its statuses"
    for prefix, (effects, record) in BUILT_NAMES.items():
        names |= {f"{prefix}{status}" for status, moves in effects.items() if record in moves}
    names.add(TEST_EVENT_TYPE)  # recorded as event_type=TEST_EVENT_TYPE
    return names


@pytest.fixture(scope="module")
def schema(django_db_blocker):
    with django_db_blocker.unblock():
        response = Client().get("/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    return json.loads(response.content)


def _validator(schema, node) -> jsonschema.Draft202012Validator:
    registry = Registry().with_resource(
        "urn:cowry",
        Resource.from_contents(
            {
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "components": schema["components"],
            }
        ),
    )
    rewritten = json.loads(json.dumps(node).replace('"#/', '"urn:cowry#/'))
    return jsonschema.Draft202012Validator(rewritten, registry=registry)


def _resolve(schema, node) -> dict:
    while "$ref" in node:
        node = schema["components"]["schemas"][node["$ref"].rsplit("/", 1)[1]]
    return node


def _body_schema(schema, event: str) -> dict:
    return schema["webhooks"][event]["post"]["requestBody"]["content"]["application/json"]


def test_every_event_the_code_emits_is_documented(schema):
    emitted = emitted_event_names()
    assert {"payin.completed", "transfer.payout.failed", "refund.failed"} <= emitted
    assert emitted <= set(EVENT_TYPES)  # what an endpoint can subscribe to
    assert set(schema["webhooks"]) == set(EVENT_TYPES)
    for event, item in schema["webhooks"].items():
        operation = item["post"]
        headers = {p["name"]: p["schema"] for p in operation["parameters"]}
        assert headers["X-Cowry-Event"] == {"type": "string", "const": event}
        assert {"X-Cowry-Signature", "X-Cowry-Timestamp", "X-Cowry-Webhook-Id"} <= set(headers)
        assert "2XX" in operation["responses"]
    tag = next(t for t in schema["tags"] if t["name"] == "Webhooks")
    assert 'HMAC-SHA256(signing_secret, timestamp + "." + raw_body)' in tag["description"]


def test_every_documented_example_validates_against_its_schema(schema):
    for event in schema["webhooks"]:
        media = _body_schema(schema, event)
        validator = _validator(schema, media["schema"])
        (example,) = media["examples"].values()
        assert list(validator.iter_errors(example["value"])) == [], event
        assert example["value"]["event"] == event
        wrong = {**example["value"], "event": "payin.refunded"}
        assert list(validator.iter_errors(wrong)), event  # the check can fail


def _keys_match(schema, node_schema, value, where: str) -> None:
    """The payload has exactly the documented properties, at every object level."""
    node_schema = _resolve(schema, node_schema)
    if "properties" not in node_schema or not isinstance(value, dict):
        return
    assert set(value) == set(node_schema["properties"]), where
    for key, item in value.items():
        _keys_match(schema, node_schema["properties"][key], item, f"{where}.{key}")


@pytest.fixture
def run(django_capture_on_commit_callbacks):
    """run(fn, ...): call fn, then what it enqueued after commit (provider calls, deliveries)."""

    def call(fn, *args, **kwargs):
        with django_capture_on_commit_callbacks(execute=True):
            return fn(*args, **kwargs)

    return call


def _deliver_every_event(api, merchant, run) -> None:
    """Real payins, payouts, refunds and transfers, completed and failed, each delivered."""
    ph = payment_helpers
    customer = ph.create_customer(api)
    for phone in (ph.SN_PHONE, ph.DECLINED_PHONE):
        body = ph.payin_body(ph.create_quote(api, "payin"), customer, phone)
        assert run(api.post, "/payins", body).status_code == 201
    ph.fund(merchant, "50000")
    for phone in (ph.SN_PHONE, ph.DECLINED_PHONE):
        body = ph.payout_body(ph.create_quote(api, "payout"), customer, phone)
        assert run(api.post, "/payouts", body).status_code == 201
    for phone in (ph.SN_PHONE, "+221770001998"):  # 998: pays, cannot be paid (refund fails)
        body = ph.payin_body(ph.create_quote(api, "payin"), customer, phone)
        payin = run(api.post, "/payins", body).json()
        assert run(api.post, f"/payins/{payin['id']}/refunds").status_code == 201

    th = transfer_helpers
    sender = th.create_customer(api, **th.SENDER_DETAILS)
    for payer, recipient in (
        (th.CM_PHONE, th.SN_PHONE),
        (th.CM_DECLINED, th.SN_PHONE),
        (th.CM_PHONE, th.SN_DECLINED),
    ):
        quote = th.create_quote(api, customer_id=sender["id"])
        body = th.transfer_body(quote, sender, payer_phone=payer, recipient_phone=recipient)
        assert run(api.post, "/transfers", body).status_code == 201


def test_what_a_receiver_gets_is_what_the_document_says(
    schema, enabled_api, enabled_merchant, receiver, webhook_settings, run
):
    endpoint, _ = endpoint_set(merchant=enabled_merchant, url=receiver.url, now=timezone.now())
    secret = selectors.endpoint_signing_secret(endpoint=endpoint)
    _deliver_every_event(enabled_api, enabled_merchant, run)
    run(endpoint_send_test_event, endpoint_id=endpoint.id, now=timezone.now())

    seen = set()
    for request in receiver.requests:
        payload = json.loads(request.body)
        event = payload["event"]
        media = _body_schema(schema, event)
        errors = [e.message for e in _validator(schema, media["schema"]).iter_errors(payload)]
        assert errors == [], (event, errors[:3])
        _keys_match(schema, media["schema"], payload, event)
        headers = {name.lower(): value for name, value in request.headers.items()}
        for parameter in schema["webhooks"][event]["post"]["parameters"]:
            value = headers[parameter["name"].lower()]
            assert list(_validator(schema, parameter["schema"]).iter_errors(value)) == []
        assert headers["x-cowry-webhook-id"] == payload["id"]
        assert verify_signature(payload=request.body, headers=request.headers, secret=secret)
        seen.add(event)
    assert seen == set(EVENT_TYPES), sorted(set(EVENT_TYPES) - seen)
    assert TEST_EVENT_TYPE in seen
