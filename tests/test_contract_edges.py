"""Odd but possible requests found by an audit of the API contract: each gets a clean answer
in the error shape (or is ignored, as unknown parameters are), never a 500, HTML or YAML."""

import base64
import json
import uuid

import pytest
from django.test import Client

from customers.models import Customer
from quotes.models import Quote
from tests.payments.conftest import create_customer
from tests.transfers.conftest import SENDER_DETAILS, transfer_body
from tests.transfers.conftest import create_quote as create_transfer_quote
from transfers.models import Transfer

pytestmark = pytest.mark.django_db

LISTS = ["/customers", "/quotes", "/payins", "/payouts", "/transfers", "/events"]


def _cursor(parts) -> str:
    return base64.urlsafe_b64encode(json.dumps(parts).encode()).decode().rstrip("=")


@pytest.mark.parametrize("path", LISTS)
@pytest.mark.parametrize("id_part", [5, ["a"], {"a": 1}, None])
def test_a_forged_cursor_is_a_400_naming_it(api, path, id_part):
    response = api.get(path, cursor=_cursor(["2026-01-01T00:00:00+00:00", id_part]))
    assert response.status_code == 400, response.content
    assert response.json()["error"]["fields"].keys() == {"cursor"}


@pytest.mark.parametrize("cursor", [_cursor("2026"), _cursor(["2026-01-01T00:00:00+00:00"])])
def test_a_cursor_that_is_not_a_pair_is_a_400(api, cursor):
    response = api.get("/customers", cursor=cursor)
    assert response.status_code == 400, response.content


@pytest.mark.parametrize("limit", ["1_0", " 5", "+5", "\u0663", "5.0"])
def test_limit_is_ascii_digits_only(api, limit):
    response = api.get("/customers", limit=limit)
    assert response.status_code == 400, response.content
    assert response.json()["error"]["fields"].keys() == {"limit"}


def test_limit_in_ascii_digits_still_works(api):
    for _ in range(3):
        create_customer(api)
    body = api.get("/customers", limit="02").json()
    assert (len(body["data"]), body["has_more"]) == (2, True)


def test_an_unknown_format_parameter_is_ignored_like_any_unknown_parameter(api):
    customer = create_customer(api)
    response = api.get(f"/customers/{customer['id']}", format="xml")
    assert response.status_code == 200, response.content
    assert response.json()["id"] == customer["id"]
    assert api.get("/customers", format="xml").json()["data"][0]["id"] == customer["id"]


def test_ids_given_as_json_numbers_are_refused_on_transfers(enabled_api):
    customer = create_customer(enabled_api, **SENDER_DETAILS)
    quote = create_transfer_quote(enabled_api, customer_id=customer["id"])
    body = transfer_body(quote, customer)
    body["quote_id"] = uuid.UUID(quote["id"]).int
    body["customer_id"] = uuid.UUID(customer["id"]).int
    response = enabled_api.post("/transfers", body)
    assert response.status_code == 400, response.content
    assert response.json()["error"]["fields"].keys() == {"quote_id", "customer_id"}
    assert not Transfer.objects.exists()


@pytest.mark.parametrize("path", ["/quotes/payin", "/quotes/payout"])
@pytest.mark.parametrize("customer_id", ["int", True])
def test_a_customer_id_that_is_not_a_string_is_refused_on_quotes(enabled_api, path, customer_id):
    customer = create_customer(enabled_api)
    body = {
        "customer_id": uuid.UUID(customer["id"]).int if customer_id == "int" else customer_id,
        "country_code": "SN",
        "operator_code": "SN_ORANGE_MOMO",
        "rail_type": "mobile_money",
        "send_amount": "10000",
        "send_currency": "XOF",
    }
    response = enabled_api.post(path, body)
    assert response.status_code == 400, response.content
    assert response.json()["error"]["fields"].keys() == {"customer_id"}
    assert not Quote.objects.exists()


@pytest.mark.parametrize(
    "method,path,status",
    [("POST", "/schema", 405), ("DELETE", "/schema", 405), ("POST", "/docs", 405)],
)
def test_schema_and_docs_errors_are_in_the_error_shape(client, method, path, status):
    response = client.generic(method, path)
    assert response.status_code == status
    assert response["Content-Type"].startswith("application/json"), response.content
    assert json.loads(response.content)["error"]["code"] == "method_not_allowed"


def test_the_schema_still_comes_in_the_format_asked_for(client):
    assert client.get("/schema", {"format": "json"}).json()["openapi"].startswith("3.")
    assert client.get("/schema")["Content-Type"].startswith("application/vnd.oai.openapi")
    assert client.get("/schema", {"format": "xml"}).status_code == 200


def test_options_on_statements_is_json_metadata_not_csv(api):
    response = api.client.options("/statements")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/json"), response.content
    assert response.json()["name"]


@pytest.mark.parametrize("path", ["/docs", "/schema"])
def test_options_on_the_docs_and_schema_is_json_metadata(path):
    response = Client(raise_request_exception=False).options(path)
    assert response.status_code == 200, response.content[:200]
    assert response["Content-Type"] == "application/json"


def test_a_statement_is_still_csv(api):
    response = api.get("/statements", currency="XOF", **{"from": "2026-01-01", "to": "2026-01-02"})
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/csv")
    assert Customer.objects.count() == 0
