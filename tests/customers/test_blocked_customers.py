"""A blocked customer (ops set `status` in the dashboard) gets no new quote and no payment,
not even with a quote made before the block: a 400 `customer_blocked` naming customer_id."""

import pytest

from customers.models import Customer
from payments.models import Payin, Payout
from tests.payments.conftest import create_customer, create_quote, fund, payin_body, payout_body
from tests.quotes.test_quotes_api import TRANSFER
from tests.transfers.conftest import SENDER_DETAILS, transfer_body
from tests.transfers.conftest import create_quote as create_transfer_quote
from transfers.models import Transfer

pytestmark = pytest.mark.django_db


def _block(customer: dict) -> None:
    Customer.objects.filter(pk=customer["id"]).update(status="blocked")


def _refused(response) -> None:
    assert response.status_code == 400, response.json()
    error = response.json()["error"]
    assert error["reason"] == "customer_blocked"
    assert error["fields"].keys() == {"customer_id"}


@pytest.mark.parametrize("flow", ["payin", "payout"])
def test_a_blocked_customer_gets_no_quote(enabled_api, flow):
    customer = create_customer(enabled_api)
    _block(customer)
    body = {
        "customer_id": customer["id"],
        "country_code": "SN",
        "operator_code": "SN_ORANGE_MOMO",
        "rail_type": "mobile_money",
        "send_amount": "10000",
        "send_currency": "XOF",
    }
    _refused(enabled_api.post(f"/quotes/{flow}", body))


def test_a_blocked_customer_gets_no_transfer_quote(enabled_api):
    customer = create_customer(enabled_api, **SENDER_DETAILS)
    _block(customer)
    _refused(enabled_api.post("/quotes/transfer", {**TRANSFER, "customer_id": customer["id"]}))


@pytest.mark.parametrize("quote_names_the_customer", [True, False])
def test_a_quote_made_before_the_block_pays_nothing(
    enabled_api, enabled_merchant, quote_names_the_customer
):
    customer = create_customer(enabled_api)
    named = {"customer_id": customer["id"]} if quote_names_the_customer else {}
    payin_quote = create_quote(enabled_api, "payin", **named)
    payout_quote = create_quote(enabled_api, "payout", **named)
    fund(enabled_merchant, "100000")
    _block(customer)

    _refused(enabled_api.post("/payins", payin_body(payin_quote, customer)))
    _refused(enabled_api.post("/payouts", payout_body(payout_quote, customer)))
    assert not Payin.objects.exists() and not Payout.objects.exists()
    assert enabled_api.get(f"/quotes/{payin_quote['id']}").json()["status"] == "active"


def test_a_transfer_quote_made_before_the_block_pays_nothing(enabled_api):
    customer = create_customer(enabled_api, **SENDER_DETAILS)
    quote = create_transfer_quote(enabled_api, customer_id=customer["id"])
    _block(customer)
    _refused(enabled_api.post("/transfers", transfer_body(quote, customer)))
    assert not Transfer.objects.exists()


def test_a_blocked_customer_can_still_be_read(enabled_api):
    customer = create_customer(enabled_api)
    _block(customer)
    assert enabled_api.get(f"/customers/{customer['id']}").json()["status"] == "blocked"
