"""GET /balances: available and reserved per currency, from the ledger."""

from decimal import Decimal

import pytest
from rest_framework.test import APIClient

from payments.ledger.accounts import MERCHANT_AVAILABLE, MERCHANT_RESERVED
from payments.ledger.journals import account_balances
from tests.extras.conftest import SILENT_PHONE, create_payout, fund

pytestmark = pytest.mark.django_db


def test_a_new_merchant_sees_every_currency_at_zero(api):
    response = api.get("/balances")

    assert response.status_code == 200
    assert response.json() == {
        "data": [
            {"currency": "XAF", "available": "0", "reserved": "0"},
            {"currency": "XOF", "available": "0", "reserved": "0"},
        ]
    }


def test_balances_follow_the_ledger_through_a_reserving_payout(
    enabled_api, enabled_merchant, customer
):
    fund(enabled_merchant, "50000")
    payout = create_payout(enabled_api, customer, phone=SILENT_PHONE, amount="10000")
    debit = payout["wallet_impact"]["debit_amount"]

    body = enabled_api.get("/balances").json()

    xof = next(item for item in body["data"] if item["currency"] == "XOF")
    accounts = account_balances(merchant=enabled_merchant, currency="XOF")
    assert Decimal(xof["reserved"]) == Decimal(debit) == accounts[MERCHANT_RESERVED]
    assert Decimal(xof["available"]) == accounts[MERCHANT_AVAILABLE]
    assert int(xof["available"]) + int(xof["reserved"]) == 50000
    assert next(i for i in body["data"] if i["currency"] == "XAF")["available"] == "0"


def test_balances_are_the_merchants_own(api, other_api):
    fund(other_api.merchant, "700")

    mine = api.get("/balances").json()["data"]
    theirs = other_api.get("/balances").json()["data"]

    assert all(item["available"] == "0" for item in mine)
    assert {"currency": "XOF", "available": "700", "reserved": "0"} in theirs


def test_balances_need_credentials(db):
    assert APIClient().get("/balances").status_code == 401
