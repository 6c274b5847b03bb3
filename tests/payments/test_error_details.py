"""Refusals about an amount carry the amounts in the error's `details`, as the error reference
says, and change nothing."""

from decimal import Decimal

import pytest

from config.errors_guidance import GUIDANCE
from tests.payments.conftest import create_quote, fund, payin_body, payout_body
from tests.support import wallet_balance

pytestmark = pytest.mark.django_db


def _refused(response, reason: str) -> dict:
    assert response.status_code == 400, response.json()
    error = response.json()["error"]
    assert error["reason"] == reason
    meaning = GUIDANCE[reason][0]
    assert all(name in meaning for name in error["details"]), (reason, error["details"])
    return error["details"]


def test_amount_refusals_name_their_amounts(
    enabled_api, enabled_merchant, customer, django_capture_on_commit_callbacks
):
    # a payout the empty wallet cannot pay: send_amount + fee needed, nothing available
    response = enabled_api.post(
        "/payouts", payout_body(create_quote(enabled_api, "payout"), customer)
    )
    assert _refused(response, "insufficient_balance") == {
        "available": "0",
        "requested": "10200",
        "currency": "XOF",
    }
    assert "0 XOF available, 10200 XOF needed" in response.json()["error"]["message"]

    with django_capture_on_commit_callbacks(execute=True):
        payin = enabled_api.post("/payins", payin_body(create_quote(enabled_api), customer)).json()
    path = f"/payins/{payin['id']}/refunds"
    # the whole payin back: 10000, but the payin credited only 9850 (its fee is kept)
    assert _refused(enabled_api.post(path), "insufficient_balance") == {
        "available": "9850",
        "requested": "10000",
        "currency": "XOF",
    }
    assert _refused(enabled_api.post(path, {"amount": "20000"}), "refund_exceeds_payin") == {
        "refundable": "10000",
        "requested": "20000",
        "currency": "XOF",
    }
    assert wallet_balance(merchant=enabled_merchant, currency="XOF") == (Decimal(9850), 0)

    fund(enabled_merchant, "1000")
    with django_capture_on_commit_callbacks(execute=True):
        assert enabled_api.post(path, {"amount": "9990"}).status_code == 201
    details = _refused(enabled_api.post(path, {"amount": "10"}), "amount_below_minimum")
    assert details == {"amount": "10", "minimum": "100", "currency": "XOF"}


def test_a_quote_outside_the_operators_limits_names_them(enabled_api):
    body = {
        "country_code": "SN",
        "operator_code": "SN_ORANGE_MOMO",
        "rail_type": "mobile_money",
        "send_currency": "XOF",
    }
    below = enabled_api.post("/quotes/payin", {**body, "send_amount": "1"})
    assert _refused(below, "amount_below_minimum") == {
        "amount": "1",
        "minimum": "100",
        "currency": "XOF",
    }
    above = enabled_api.post("/quotes/payin", {**body, "send_amount": "999999999"})
    details = _refused(above, "amount_above_maximum")
    assert (details["amount"], details["currency"]) == ("999999999", "XOF")
    assert Decimal(details["maximum"]) < Decimal("999999999")
