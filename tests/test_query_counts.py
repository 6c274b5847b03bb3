"""Pinned query counts of the hot endpoints, so an N+1 or an extra lookup cannot creep back
unnoticed. A change here must be deliberate: update the number and say why.

Counted inside the test's transaction: a POST's Idempotency-Key claim (one INSERT) and its
handler's transaction.atomic() each show a SAVEPOINT and its RELEASE there, 4 statements that
autocommit does not send. A quote for a customer checks the customer in the operator's read,
and a payin whose quote names its customer does not read the customer again (1 fewer). The API
key is read from the cache (warmed by the first request); POST /payins joins the request's
transaction (no savepoint of its own); GET /payins/{id} is one statement (PAYIN_READ)."""

import pytest

from rails import selectors as rails_selectors
from tests.support import MerchantClient

pytestmark = pytest.mark.django_db

QUOTE = {
    "country_code": "SN",
    "operator_code": "SN_ORANGE_MOMO",
    "rail_type": "mobile_money",
    "send_amount": "10000",
    "send_currency": "XOF",
}


@pytest.fixture
def warm_api(enabled_merchant):
    api = MerchantClient(enabled_merchant)
    api.get("/customers/00000000-0000-0000-0000-000000000000")  # last_used_at written once
    rails_selectors.operator_route(QUOTE["operator_code"])  # the routes' memo, as when warm
    return api


@pytest.fixture
def customer(warm_api) -> dict:
    return warm_api.post("/customers", {"first_name": "Awa"}).json()


@pytest.fixture
def quote(warm_api) -> dict:
    return warm_api.post("/quotes/payin", QUOTE).json()


def _payin_body(quote: dict, customer: dict) -> dict:
    return {
        "quote_id": quote["id"],
        "customer_id": customer["id"],
        "source": {"phone": "+221770000123"},
    }


def test_post_customers(warm_api, django_assert_num_queries):
    with django_assert_num_queries(7):
        assert warm_api.post("/customers", {"first_name": "Awa"}).status_code == 201


def test_get_customer(warm_api, customer, django_assert_num_queries):
    with django_assert_num_queries(1):
        assert warm_api.get(f"/customers/{customer['id']}").status_code == 200


def test_post_quote_payin(warm_api, django_assert_num_queries):
    with django_assert_num_queries(7):
        assert warm_api.post("/quotes/payin", QUOTE).status_code == 201


def test_post_quote_payin_for_a_customer(warm_api, customer, django_assert_num_queries):
    with django_assert_num_queries(7):  # the customer is checked in the operator's read
        body = {**QUOTE, "customer_id": customer["id"]}
        assert warm_api.post("/quotes/payin", body).status_code == 201


def test_get_quote(warm_api, quote, django_assert_num_queries):
    with django_assert_num_queries(1):
        assert warm_api.get(f"/quotes/{quote['id']}").status_code == 200


def test_post_payin(warm_api, customer, quote, django_assert_num_queries):
    with django_assert_num_queries(7):
        assert warm_api.post("/payins", _payin_body(quote, customer)).status_code == 201


def test_post_payin_with_a_quote_made_for_its_customer(
    warm_api, customer, django_assert_num_queries
):
    quote = warm_api.post("/quotes/payin", {**QUOTE, "customer_id": customer["id"]}).json()
    with django_assert_num_queries(6):  # the quote vouches for the customer
        assert warm_api.post("/payins", _payin_body(quote, customer)).status_code == 201


def test_get_payin(warm_api, customer, quote, django_assert_num_queries):
    payin = warm_api.post("/payins", _payin_body(quote, customer)).json()
    with django_assert_num_queries(1):
        assert warm_api.get(f"/payins/{payin['id']}").status_code == 200
