"""The merchant contract of docs/api.md and docs/webhooks.md against the real API. Rules the
area modules already pin one endpoint at a time (credentials, Idempotency-Key, scoping,
formats) are pinned here for every endpoint."""

import json
import os
import re
import subprocess
import sys
import uuid
from datetime import date, datetime, timedelta
from pathlib import Path

import pytest
from django.db import transaction
from django.utils import timezone
from rest_framework.test import APIClient

from core.pagination import PageRequest
from customers.models import Customer
from kyc.models import KycDocument
from merchants import idempotency
from merchants.models import IdempotencyRecord, IdempotencyStatus
from payments.models import Payin, Payout
from quotes import selectors as quote_selectors
from quotes import services as quote_services
from quotes.models import Quote
from tests.catalog import enable_everything
from tests.payments.conftest import create_quote, fund, payin_body, payout_body
from tests.transfers.conftest import (
    SENDER_DETAILS,
    SN_DECLINED,
    create_customer,
    transfer_body,
)
from tests.transfers.conftest import create_quote as create_transfer_quote
from transfers.models import Transfer
from webhooks.models import Event

pytestmark = pytest.mark.django_db

AMOUNT = re.compile(r"^[0-9]+(\.[0-9]+)?$")  # 2.1 DecimalString
OPERATOR = re.compile(r"^(?P<country>[A-Z]{2})_[A-Z]+_(MOMO|BANK)$")  # operator_code
CORRIDOR = re.compile(r"^([A-Z]{2})-([A-Z]{2})-(XAF|XOF)-(XAF|XOF)$")  # corridor_code
CURRENCIES = {"XAF", "XOF"}
ERROR_CODES = {400: "bad_request", 401: "unauthorized", 404: "not_found", 409: "conflict"}
KYC_DOCUMENT = {"document_type": "passport", "front_file_url": "https://example.com/front.png"}


def assert_error(response, status: int) -> dict:
    """Section 7: the status, and the body {"error": {"code", "message"}} with strings."""
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith("application/json")
    error = response.json()["error"]
    assert error["code"] == ERROR_CODES[status]
    assert isinstance(error["message"], str) and error["message"]
    return error


def is_uuid(value) -> bool:
    return isinstance(value, str) and str(uuid.UUID(value)) == value


def is_timestamp(value) -> bool:
    parsed = datetime.fromisoformat(value)
    return parsed.tzinfo is not None and "T" in value


def check_formats(body, path: str = "") -> None:
    """2.1 conventions on every field of a response, however deep (the free-form `pricing`
    aside): ids are UUIDs, amounts DecimalStrings, currencies XAF/XOF, timestamps ISO 8601
    date-times, dates full-dates, country codes 2 letters, operator and corridor codes in
    their forms."""
    if isinstance(body, list):
        for index, item in enumerate(body):
            check_formats(item, f"{path}[{index}]")
        return
    if not isinstance(body, dict):
        return
    for key, value in body.items():
        where = f"{path}.{key}"
        if key == "pricing":
            continue
        if isinstance(value, dict | list):
            check_formats(value, where)
            continue
        if value is None:
            continue
        if key == "id" or key.endswith("_id"):
            assert is_uuid(value), where
        elif key.endswith("_amount") or key == "total_fee":
            assert isinstance(value, str) and AMOUNT.fullmatch(value), (where, value)
        elif key.endswith("currency"):
            assert value in CURRENCIES, (where, value)
        elif key.endswith("_at"):
            assert is_timestamp(value), (where, value)
        elif key.endswith("_date") or key == "date_of_birth":
            assert date.fromisoformat(value).isoformat() == value, (where, value)
        elif key.endswith("country_code") or key == "nationality_code":
            assert re.fullmatch(r"[A-Z]{2}", value), (where, value)
        elif key.endswith("operator_code"):
            assert OPERATOR.fullmatch(value), (where, value)
        elif key == "corridor_code":
            assert CORRIDOR.fullmatch(value), (where, value)
        elif key == "rail_type":
            assert value in {"mobile_money", "bank_transfer"}, (where, value)
    if "operator_code" in body and body["operator_code"] and body.get("country_code"):
        assert OPERATOR.fullmatch(body["operator_code"])["country"] == body["country_code"]


@pytest.fixture
def world(enabled_api, enabled_merchant, django_capture_on_commit_callbacks) -> dict:
    """One of everything docs/api.md names, made through the API by one merchant: a customer with
    a KYC submission, a quote of each flow, a completed payin, a completed payout and a transfer
    whose disbursement failed (so a relaunch would be accepted)."""
    api = enabled_api
    fund(enabled_merchant, "100000")
    customer = create_customer(api, **SENDER_DETAILS)
    kyc = api.post(f"/customers/{customer['id']}/kyc", {"documents": [KYC_DOCUMENT]})
    assert kyc.status_code == 201, kyc.content
    payin_quote = create_quote(api, "payin", customer_id=customer["id"])
    payout_quote = create_quote(api, "payout", customer_id=customer["id"])
    transfer_quote = create_transfer_quote(api, customer_id=customer["id"])
    with django_capture_on_commit_callbacks(execute=True):
        payin = api.post("/payins", payin_body(payin_quote, customer)).json()
        payout = api.post("/payouts", payout_body(payout_quote, customer)).json()
        transfer = api.post(
            "/transfers", transfer_body(transfer_quote, customer, recipient_phone=SN_DECLINED)
        ).json()
    return {
        "api": api,
        "customer": customer,
        "kyc": kyc.json(),
        "payin_quote": payin_quote,
        "payout_quote": payout_quote,
        "transfer_quote": transfer_quote,
        "payin": api.get(f"/payins/{payin['id']}").json(),
        "payout": api.get(f"/payouts/{payout['id']}").json(),
        "transfer": api.get(f"/transfers/{transfer['id']}").json(),
    }


def counts() -> tuple:
    return (
        Customer.objects.count(),
        KycDocument.objects.count(),
        Quote.objects.count(),
        Payin.objects.count(),
        Payout.objects.count(),
        Transfer.objects.count(),
        Transfer.objects.filter(disbursement_attempt__gt=1).count(),
    )


def fresh_bodies(world: dict) -> dict:
    """A body for each POST that the owning merchant could send and have accepted."""
    api, customer = world["api"], world["customer"]
    return {
        "/customers": {"first_name": "Fatou", "last_name": "Sow"},
        "/customers/{customer}/kyc": {"documents": [KYC_DOCUMENT]},
        "/quotes/payin": {
            "country_code": "SN",
            "operator_code": "SN_ORANGE_MOMO",
            "rail_type": "mobile_money",
            "send_amount": "5000",
            "send_currency": "XOF",
        },
        "/quotes/payout": {
            "country_code": "SN",
            "operator_code": "SN_ORANGE_MOMO",
            "rail_type": "mobile_money",
            "send_amount": "5000",
            "send_currency": "XOF",
        },
        "/quotes/transfer": {
            "corridor_code": "CM-SN-XAF-XOF",
            "payer_operator_code": "CM_MTN_MOMO",
            "recipient_operator_code": "SN_WAVE_MOMO",
            "payin_amount": "5000",
            "payin_currency": "XAF",
            "payout_currency": "XOF",
        },
        "/payins": lambda: payin_body(create_quote(api, "payin"), customer),
        "/payouts": lambda: payout_body(create_quote(api, "payout"), customer),
        "/transfers": lambda: transfer_body(
            create_transfer_quote(api, customer_id=customer["id"]), customer
        ),
        "/transfers/{transfer}/relaunch-payout": {},
    }


def resolve(world: dict, template: str) -> str:
    return template.format(customer=world["customer"]["id"], transfer=world["transfer"]["id"])


def body_for(world: dict, template: str):
    body = fresh_bodies(world)[template]
    return body() if callable(body) else body


POSTS = [
    "/customers",
    "/customers/{customer}/kyc",
    "/quotes/payin",
    "/quotes/payout",
    "/quotes/transfer",
    "/payins",
    "/payouts",
    "/transfers",
    "/transfers/{transfer}/relaunch-payout",
]
GETS = {
    "/customers/{id}": "customer",
    "/customers/{id}/kyc": "customer",
    "/quotes/{id}": "payin_quote",
    "/payins/{id}": "payin",
    "/payouts/{id}": "payout",
    "/transfers/{id}": "transfer",
}


# --- both credential headers on every endpoint ----------------------------------


def _credentials(api, which: str) -> dict:
    return {
        "none": {},
        "key only": {"HTTP_X_API_KEY": api.api_key},
        "secret only": {"HTTP_X_API_SECRET": api.api_secret},
        "wrong secret": {"HTTP_X_API_KEY": api.api_key, "HTTP_X_API_SECRET": api.api_secret + "x"},
        "unknown key": {"HTTP_X_API_KEY": "ck_nobody", "HTTP_X_API_SECRET": api.api_secret},
    }[which]


CREDENTIALS = ["none", "key only", "secret only", "wrong secret", "unknown key"]


@pytest.mark.parametrize("which", CREDENTIALS)
@pytest.mark.parametrize("template", POSTS)
def test_every_post_without_valid_credentials_is_401_and_changes_nothing(world, template, which):
    api = world["api"]
    body = body_for(world, template)
    before = counts()
    response = APIClient().post(
        resolve(world, template),
        body,
        format="json",
        HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4()),
        **_credentials(api, which),
    )
    assert_error(response, 401)
    assert counts() == before


@pytest.mark.parametrize("which", CREDENTIALS)
@pytest.mark.parametrize("template", list(GETS))
def test_every_get_without_valid_credentials_is_401(world, template, which):
    path = template.format(id=world[GETS[template]]["id"])
    assert world["api"].get(path).status_code == 200
    response = APIClient().get(path, **_credentials(world["api"], which))
    assert_error(response, 401)


# --- another merchant's resource is a 404, like one that does not exist ---------


@pytest.mark.parametrize("template", list(GETS))
def test_every_get_of_another_merchants_resource_is_404_like_an_unknown_id(
    world, other_api, template
):
    theirs = other_api.get(template.format(id=world[GETS[template]]["id"]))
    unknown = other_api.get(template.format(id=uuid.uuid4()))
    assert_error(theirs, 404)
    assert theirs.json() == unknown.json()


@pytest.mark.parametrize(
    "template", ["/customers/{customer}/kyc", "/transfers/{transfer}/relaunch-payout"]
)
def test_a_post_on_another_merchants_path_id_is_404_and_changes_nothing(world, other_api, template):
    body = body_for(world, template)
    before = counts()
    theirs = other_api.post(resolve(world, template), body)
    unknown = other_api.post(template.format(customer=uuid.uuid4(), transfer=uuid.uuid4()), body)
    assert_error(theirs, 404)
    assert theirs.json() == unknown.json()
    assert counts() == before


@pytest.mark.parametrize(
    ("path", "quote"),
    [("/payins", "payin_quote"), ("/payouts", "payout_quote"), ("/transfers", "transfer_quote")],
)
def test_another_merchants_quote_in_a_body_is_refused_like_an_unknown_one(
    world, other_api, path, quote
):
    """4.1 lists no 404 for these POSTs: another merchant's quote id in the body is a 400,
    the same answer as for an id that does not exist, and nothing is created."""
    enable_everything(other_api.merchant)
    fund(other_api.merchant, "100000")
    their_customer = create_customer(other_api, **SENDER_DETAILS)
    body = {**body_for(world, path), "customer_id": their_customer["id"]}
    before = counts()
    theirs = other_api.post(path, {**body, "quote_id": world[quote]["id"]})
    unknown = other_api.post(path, {**body, "quote_id": str(uuid.uuid4())})
    assert_error(theirs, 400)
    assert theirs.json() == unknown.json()
    assert counts() == before


@pytest.mark.parametrize("path", ["/quotes/payin", "/quotes/payout", "/quotes/transfer"])
def test_another_merchants_customer_in_a_quote_body_is_refused_like_an_unknown_one(
    world, other_api, path
):
    enable_everything(other_api.merchant)
    body = body_for(world, path)
    before = counts()
    theirs = other_api.post(path, {**body, "customer_id": world["customer"]["id"]})
    unknown = other_api.post(path, {**body, "customer_id": str(uuid.uuid4())})
    assert_error(theirs, 400)
    assert theirs.json() == unknown.json()
    assert counts() == before


# --- Idempotency-Key on every POST but KYC; replay and conflict -------------------


@pytest.mark.parametrize("template", [p for p in POSTS if not p.endswith("/kyc")])
def test_every_post_but_kyc_without_idempotency_key_is_400_and_changes_nothing(world, template):
    body = body_for(world, template)
    before = counts()
    response = world["api"].post(resolve(world, template), body, idempotency_key=None)
    assert assert_error(response, 400)["reason"] == "idempotency_key_missing"
    assert counts() == before


def test_a_kyc_submission_needs_no_idempotency_key(world):
    response = world["api"].post(
        f"/customers/{world['customer']['id']}/kyc",
        {"documents": [KYC_DOCUMENT]},
        idempotency_key=None,
    )
    assert response.status_code == 201, response.content


CREATES = {
    "/customers": 201,
    "/quotes/payin": 201,
    "/quotes/payout": 201,
    "/quotes/transfer": 201,
    "/payins": 201,
    "/payouts": 201,
    "/transfers": 201,
}


@pytest.mark.parametrize("path", list(CREATES))
def test_a_replay_answers_the_first_result_with_meta_replayed(world, path):
    api = world["api"]
    body = body_for(world, path)
    key = f"replay-{path}"

    first = api.post(path, body, idempotency_key=key)
    after_first = counts()
    again = api.post(path, body, idempotency_key=key)

    assert first.status_code == again.status_code == CREATES[path]
    assert first.json()["_meta"] == {"idempotency_key": key, "idempotency_replayed": False}
    assert again.json()["_meta"] == {"idempotency_key": key, "idempotency_replayed": True}
    strip = lambda b: {k: v for k, v in b.items() if k != "_meta"}  # noqa: E731
    assert strip(again.json()) == strip(first.json())
    assert counts() == after_first


CHANGED = {
    "/customers": {"first_name": "Other"},
    "/quotes/payin": {"send_amount": "6000"},
    "/quotes/payout": {"send_amount": "6000"},
    "/quotes/transfer": {"payin_amount": "6000"},
    "/payins": {"source": {"phone": "+221770005678"}},
    "/payouts": {"payment_reason_code": "OTHER"},
    "/transfers": {"payment_reason_code": "OTHER"},
}


@pytest.mark.parametrize("path", list(CREATES))
def test_a_key_reused_with_another_body_is_409_and_changes_nothing(world, path):
    api = world["api"]
    body = body_for(world, path)
    assert api.post(path, body, idempotency_key="reused").status_code == 201
    before = counts()
    response = api.post(path, {**body, **CHANGED[path]}, idempotency_key="reused")
    assert assert_error(response, 409)["reason"] == "idempotency_key_reused"
    assert counts() == before


IDEMPOTENT_POSTS = [p for p in POSTS if not p.endswith("/kyc")]


@pytest.mark.parametrize("template", IDEMPOTENT_POSTS)
def test_a_key_still_processing_is_409_on_every_post_and_changes_nothing(world, template):
    api, path = world["api"], resolve(world, template)
    body = body_for(world, template)
    IdempotencyRecord.objects.create(
        merchant=api.merchant,
        key="busy",
        method="POST",
        path=path,
        fingerprint=idempotency.request_fingerprint(method="POST", path=path, body=body),
        status=IdempotencyStatus.IN_PROGRESS,
        locked_at=timezone.now(),
        expires_at=timezone.now() + timedelta(days=1),
    )
    before = counts()
    response = api.post(path, body, idempotency_key="busy")
    assert assert_error(response, 409)["reason"] == "request_in_progress"
    assert counts() == before


@pytest.mark.parametrize("template", IDEMPOTENT_POSTS)
def test_a_key_used_on_another_endpoint_is_409_on_every_post_and_changes_nothing(world, template):
    api = world["api"]
    first = "/quotes/payin" if template == "/customers" else "/customers"
    assert api.post(first, body_for(world, first), idempotency_key="used").status_code == 201
    body = body_for(world, template)
    before = counts()
    response = api.post(resolve(world, template), body, idempotency_key="used")
    assert assert_error(response, 409)["reason"] == "idempotency_key_reused"
    assert counts() == before


# --- resources and fields -------------------------------------------------------------------


CUSTOMER_FIELDS = {
    "external_ref", "customer_type", "first_name", "last_name", "business_name", "id_number",
    "id_type", "email", "phone", "country_code", "nationality_code", "date_of_birth",
    "address_line1", "city", "occupation", "source_of_funds",
    "id", "merchant_id", "kyc_status", "status", "created_at", "updated_at",
}  # fmt: skip
QUOTE_FIELDS = {
    "id", "customer_id", "flow_type", "status", "expires_at", "send_amount", "send_currency",
    "receive_amount", "receive_currency", "country_code", "operator_code", "rail_type",
    "corridor_code", "corridor_type", "payer_operator_code", "recipient_operator_code",
    "total_fee", "wallet_impact", "created_at",
}  # fmt: skip
PAYIN_FIELDS = {
    "id", "merchant_id", "customer_id", "quote_id", "status", "send_amount", "receive_amount",
    "send_currency", "receive_currency", "country_code", "rail_type", "operator_code",
    "provider_reference", "wallet_impact", "pricing", "history", "source", "created_at",
    "updated_at",
}  # fmt: skip
TRANSFER_FIELDS = {
    "id", "merchant_id", "customer_id", "quote_id", "status", "payin_status", "payout_status",
    "send_amount", "receive_amount", "payin_amount", "payout_amount", "send_currency",
    "receive_currency", "payin_currency", "payout_currency", "corridor_code", "corridor_type",
    "execution", "pricing", "payer", "recipient", "history", "created_at", "updated_at",
}  # fmt: skip
PAYER_FIELDS = {
    "country_code", "rail_type", "phone", "operator_code", "bank_name", "bank_code",
    "account_name", "account_number",
}  # fmt: skip
RECIPIENT_FIELDS = PAYER_FIELDS | {
    "recipient_type", "first_name", "last_name", "business_name", "email",
    "recipient_nationality_code", "address_line1", "city",
}  # fmt: skip


def test_every_resource_carries_the_spec_fields_in_the_spec_formats(world):
    api = world["api"]
    customer = api.get(f"/customers/{world['customer']['id']}").json()
    assert customer.keys() >= CUSTOMER_FIELDS
    assert customer["kyc_status"] in {"not_started", "pending", "approved", "rejected"}
    assert customer["status"] == "active"

    kyc = api.get(f"/customers/{customer['id']}/kyc").json()
    assert {"customer_id", "kyc_status", "documents"} <= kyc.keys()
    assert kyc["customer_id"] == customer["id"]
    for document in kyc["documents"]:
        assert set(KYC_DOCUMENT) | {"id", "status", "created_at"} <= document.keys()
        assert document["status"] == "uploaded"

    for name in ("payin_quote", "payout_quote", "transfer_quote"):
        quote = api.get(f"/quotes/{world[name]['id']}").json()
        assert quote.keys() >= QUOTE_FIELDS, name
        assert quote["status"] in {"active", "expired", "consumed"}
        assert isinstance(quote["wallet_impact"], dict)
        check_formats(quote, name)

    for name in ("payin", "payout"):
        resource = world[name]
        assert PAYIN_FIELDS - {"source"} <= resource.keys(), name
        assert isinstance(resource["pricing"], dict) and isinstance(resource["wallet_impact"], dict)
        for item in resource["history"]:
            assert {"status", "reason", "created_at"} <= item.keys()
        check_formats(resource, name)
    assert world["payin"]["status"] in {"created", "pending", "completed", "failed"}
    assert world["payin"]["source"].keys() >= {
        "phone",
        "country_code",
        "rail_type",
        "operator_code",
    }
    assert world["payout"]["recipient"].keys() >= {
        "recipient_type", "first_name", "last_name", "phone", "email",
        "recipient_nationality_code",
    }  # fmt: skip

    transfer = world["transfer"]
    assert transfer.keys() >= TRANSFER_FIELDS
    assert transfer["status"] in {"pending", "collecting", "disbursing", "completed", "failed"}
    assert transfer["payer"].keys() >= PAYER_FIELDS
    assert transfer["recipient"].keys() >= RECIPIENT_FIELDS
    for item in transfer["history"]:
        assert {"status", "reason", "created_at"} <= item.keys()
    for body in (customer, kyc, transfer):
        check_formats(body)


def test_a_created_customer_has_kyc_not_started_and_meta(enabled_api):
    """3.2: a new customer is `not_started`; 2.2: `customer_type` defaults to individual."""
    body = enabled_api.post("/customers", {"first_name": "Awa"}, idempotency_key="c").json()
    assert (body["kyc_status"], body["customer_type"]) == ("not_started", "individual")
    assert body["_meta"] == {"idempotency_key": "c", "idempotency_replayed": False}
    check_formats(body)


def test_quote_fields_by_flow_and_its_15_minute_lifetime(world):
    """2.4: country_code/operator_code/rail_type on payin and payout quotes; corridor_code and
    the two operator codes on transfer quotes; the quote lives 15 minutes."""
    for name, flow in (("payin_quote", "payin"), ("payout_quote", "payout")):
        quote = world[name]
        assert quote["flow_type"] == flow
        assert (quote["country_code"], quote["operator_code"], quote["rail_type"]) == (
            "SN",
            "SN_ORANGE_MOMO",
            "mobile_money",
        )
        assert quote["corridor_code"] is quote["payer_operator_code"] is None
    transfer = world["transfer_quote"]
    assert transfer["flow_type"] == "transfer"
    assert (
        transfer["corridor_code"],
        transfer["payer_operator_code"],
        transfer["recipient_operator_code"],
    ) == ("CM-SN-XAF-XOF", "CM_MTN_MOMO", "SN_WAVE_MOMO")
    for name in ("payin_quote", "payout_quote", "transfer_quote"):
        quote = world[name]
        lifetime = datetime.fromisoformat(quote["expires_at"]) - datetime.fromisoformat(
            quote["created_at"]
        )
        assert lifetime == timedelta(minutes=15), name


def test_a_payment_consumes_its_quote(world):
    """3.1: creating a payment from an active quote makes it `consumed`."""
    for name in ("payin_quote", "payout_quote", "transfer_quote"):
        assert world["api"].get(f"/quotes/{world[name]['id']}").json()["status"] == "consumed"


# --- an active quote expires when the current time is past expires_at -----------------


def _consume(merchant, quote: Quote, now: datetime) -> Quote:
    with transaction.atomic():
        return quote_services.quote_consume(
            merchant=merchant, quote_id=quote.id, flow_type="payin", customer_id=None, now=now
        )


def test_a_quote_is_active_up_to_its_expires_at_and_expired_only_past_it(enabled_api):
    created = create_quote(enabled_api, "payin")
    quote = Quote.objects.get(pk=created["id"])
    past = quote.expires_at + timedelta(microseconds=1)

    assert quote.effective_status(quote.expires_at) == "active"
    assert quote_services.quotes_expire(now=quote.expires_at) == 0
    assert quote.effective_status(past) == "expired"

    def listed(status: str, now: datetime) -> list:
        page = quote_selectors.quote_list(
            merchant=enabled_api.merchant, page=PageRequest(), now=now, status=status
        )
        return [item.id for item in page.items]

    assert listed("active", quote.expires_at) == [quote.id]
    assert listed("expired", quote.expires_at) == []
    assert listed("expired", past) == [quote.id]

    assert _consume(enabled_api.merchant, quote, now=quote.expires_at).status == "consumed"


def test_the_sweep_expires_a_quote_only_past_its_expires_at(enabled_api):
    quote = Quote.objects.get(pk=create_quote(enabled_api, "payin")["id"])
    assert quote_services.quotes_expire(now=quote.expires_at) == 0
    assert quote_services.quotes_expire(now=quote.expires_at + timedelta(microseconds=1)) == 1
    assert enabled_api.get(f"/quotes/{quote.id}").json()["status"] == "expired"


def test_a_payment_with_an_expired_quote_is_400(enabled_api):
    """3.1 and 4.4.2: an expired quote gives 400, for each payment flow."""
    customer = create_customer(enabled_api, **SENDER_DETAILS)
    fund(enabled_api.merchant, "100000")
    quotes = {
        "/payins": (create_quote(enabled_api, "payin"), payin_body),
        "/payouts": (create_quote(enabled_api, "payout"), payout_body),
        "/transfers": (
            create_transfer_quote(enabled_api, customer_id=None),
            lambda q, c: transfer_body(q, c),
        ),
    }
    Quote.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    before = counts()
    for path, (quote, make_body) in quotes.items():
        response = enabled_api.post(path, make_body(quote, customer))
        assert assert_error(response, 400)["reason"] == "quote_expired", path
        assert enabled_api.get(f"/quotes/{quote['id']}").json()["status"] == "expired"
    assert counts() == before


# --- create answers 201 with a non-final status ----------------------------


def test_payment_creation_answers_201_before_the_provider_and_final_status_by_get(
    enabled_api, enabled_merchant, django_capture_on_commit_callbacks
):
    customer = create_customer(enabled_api, **SENDER_DETAILS)
    fund(enabled_merchant, "100000")
    with django_capture_on_commit_callbacks() as callbacks:
        payin = enabled_api.post("/payins", payin_body(create_quote(enabled_api), customer))
        payout = enabled_api.post(
            "/payouts", payout_body(create_quote(enabled_api, "payout"), customer)
        )
        transfer = enabled_api.post(
            "/transfers",
            transfer_body(create_transfer_quote(enabled_api, customer_id=None), customer),
        )
    assert payin.status_code == payout.status_code == transfer.status_code == 201
    assert payin.json()["status"] in {"created", "pending"}
    assert payout.json()["status"] == "pending"
    assert transfer.json()["status"] == "pending"
    for callback in callbacks:
        with django_capture_on_commit_callbacks(execute=True):
            callback()
    assert enabled_api.get(f"/payins/{payin.json()['id']}").json()["status"] == "completed"
    assert enabled_api.get(f"/payouts/{payout.json()['id']}").json()["status"] == "completed"
    assert enabled_api.get(f"/transfers/{transfer.json()['id']}").json()["status"] == "completed"


# --- relaunch-payout answers 202 with the Transfer ------------------------------


def test_relaunch_payout_answers_202_with_the_transfer(world):
    transfer = world["transfer"]
    assert (transfer["status"], transfer["payin_status"], transfer["payout_status"]) == (
        "failed",
        "completed",
        "failed",
    )
    response = world["api"].post(f"/transfers/{transfer['id']}/relaunch-payout", {})
    assert response.status_code == 202, response.content
    body = response.json()
    assert body.keys() >= TRANSFER_FIELDS
    assert body["id"] == transfer["id"]
    assert body["payin_status"] == "completed"  # collection is not repeated
    check_formats(body)


# --- the events a real flow records ---------------------------------------------------------


LEG = {
    "id", "status", "payin_status", "payout_status", "payin_amount", "payin_currency",
    "payout_amount", "payout_currency", "payer_operator_code", "recipient_operator_code",
}  # fmt: skip
SNAPSHOT_FIELDS = {
    "payin": {
        "id", "status", "send_amount", "send_currency", "receive_amount", "receive_currency",
        "country_code", "operator_code", "rail_type", "wallet_impact", "completed_at",
    },
    "payout": {
        "id", "status", "send_amount", "send_currency", "receive_amount", "receive_currency",
        "operator_code", "wallet_impact", "completed_at",
    },
    "transfer": {
        "id", "status", "payin_status", "payout_status", "send_amount", "send_currency",
        "receive_amount", "receive_currency", "corridor_code", "payer_operator_code",
        "recipient_operator_code", "collection_completed_at", "disbursement_completed_at",
    },
    "transfer.payin": LEG | {"collection_reference", "collection_completed_at"},
    "transfer.payout": LEG | {"disbursement_reference"},
}  # fmt: skip
WALLET_IMPACT = {"payin": {"credit_amount", "currency"}, "payout": {"debit_amount", "currency"}}


def check_events(merchant, resources: dict) -> dict:
    """6.2 and 6.3 on every event recorded for the merchant: the envelope, the name, data.type,
    data.id and the snapshot fields docs/webhooks.md shows. Returns the payloads by event name."""
    events = {event.event_type: event.payload for event in Event.objects.filter(merchant=merchant)}
    for name, payload in events.items():
        data_type = name.split(".")[0]
        kind = name.rsplit(".", 1)[0] if name.count(".") == 2 else data_type
        assert payload.keys() == {"id", "event", "created_at", "data"}
        assert is_uuid(payload["id"]) and is_timestamp(payload["created_at"])
        assert payload["event"] == name
        assert payload["data"].keys() == {"type", "id", "object"}
        assert payload["data"]["type"] == data_type
        snapshot = payload["data"]["object"]
        assert payload["data"]["id"] == snapshot["id"] == resources[data_type]["id"]
        assert snapshot.keys() >= SNAPSHOT_FIELDS[kind], name
        if data_type in WALLET_IMPACT:
            assert snapshot["wallet_impact"].keys() == WALLET_IMPACT[data_type]
        check_formats(snapshot, name)
    return events


def test_the_events_of_real_flows_have_the_envelope_names_and_snapshots_of_the_webhook_docs(world):
    events = check_events(world["api"].merchant, world)
    assert events.keys() == {
        "payin.completed",
        "payout.completed",
        "transfer.payin.completed",
        "transfer.payout.failed",
    }
    assert events["payin.completed"]["data"]["object"]["completed_at"]
    assert events["payout.completed"]["data"]["object"]["completed_at"]
    assert events["transfer.payout.failed"]["data"]["object"]["disbursement_failed_at"]


def test_a_completed_transfer_sends_its_leg_and_aggregate_events(
    enabled_api, django_capture_on_commit_callbacks
):
    customer = create_customer(enabled_api, **SENDER_DETAILS)
    quote = create_transfer_quote(enabled_api, customer_id=customer["id"])
    with django_capture_on_commit_callbacks(execute=True):
        transfer = enabled_api.post("/transfers", transfer_body(quote, customer)).json()

    events = check_events(enabled_api.merchant, {"transfer": transfer})
    assert events.keys() == {
        "transfer.payin.completed",
        "transfer.payout.completed",
        "transfer.completed",
    }
    final = events["transfer.completed"]["data"]["object"]
    assert (final["status"], final["payin_status"], final["payout_status"]) == (
        "completed",
        "completed",
        "completed",
    )
    assert final["collection_completed_at"] and final["disbursement_completed_at"]


# --- the limits, as the settings hold them when nothing overrides them ------------


def test_the_default_limits_are_the_specs():
    """Tests set these to their own values; the defaults are what a merchant meets: a quote
    lives 15 minutes, a delivery is retried after 1 m, 5 m, 15 m, 1 h, 4 h and 12 h, and fails
    after the seventh failed attempt."""
    names = ("QUOTE_TTL_SECONDS", "WEBHOOK_RETRY_SCHEDULE")
    env = {k: v for k, v in os.environ.items() if k not in names and not k.startswith("DJANGO_")}
    env["DJANGO_SETTINGS_MODULE"] = "config.settings"
    code = (  # nor a developer's .env: its reader is switched off before the settings load
        "import json, django, dotenv; dotenv.load_dotenv = lambda *args, **kwargs: None; "
        "django.setup(); from django.conf import settings; "
        "from webhooks.services.delivery import max_attempts; "
        f"print(json.dumps([getattr(settings, n) for n in {names!r}] "
        "+ [max_attempts()]))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=Path(__file__).resolve().parent.parent,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    ttl, schedule, attempts = json.loads(result.stdout.strip().splitlines()[-1])
    assert ttl == 15 * 60
    assert schedule == [60, 5 * 60, 15 * 60, 60 * 60, 4 * 60 * 60, 12 * 60 * 60]
    assert attempts == 7
