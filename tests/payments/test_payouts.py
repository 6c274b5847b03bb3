import uuid
from decimal import Decimal

import pytest

from payments.ledger.checks import ledger_breaches
from payments.ledger.journals import account_balances
from payments.models import Journal, Payout
from tests.payments.conftest import (
    DECLINED_PHONE,
    create_quote,
    fund,
    payout_body,
)
from tests.support import wallet_balance
from webhooks.models import Event

pytestmark = pytest.mark.django_db


def _balances(merchant):
    return wallet_balance(merchant=merchant, currency="XOF")


def test_payout_reserves_the_debit_then_completes_and_settles_it(
    enabled_api, enabled_merchant, customer, django_capture_on_commit_callbacks
):
    fund(enabled_merchant, "50000")
    quote = create_quote(enabled_api, "payout")
    with django_capture_on_commit_callbacks() as callbacks:
        response = enabled_api.post("/payouts", payout_body(quote, customer))
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["status"] == "pending"
    assert body["send_amount"] == body["receive_amount"] == "10000"
    assert body["wallet_impact"] == {"debit_amount": "10200", "currency": "XOF"}
    assert body["payment_reason_code"] == "SALARY"
    assert body["payment_reason_text"] is None
    assert body["recipient"]["first_name"] == "Moussa"
    assert body["recipient"]["recipient_type"] == "individual"
    assert body["recipient"]["operator_code"] == "SN_ORANGE_MOMO"
    assert body["recipient"]["bank_name"] is None
    assert _balances(enabled_merchant) == (Decimal("39800"), Decimal("10200"))

    with django_capture_on_commit_callbacks(execute=True):
        for callback in callbacks:
            callback()

    payout = enabled_api.get(f"/payouts/{body['id']}").json()
    assert payout["status"] == "completed"
    assert [h["status"] for h in payout["history"]] == ["pending", "completed"]
    assert _balances(enabled_merchant) == (Decimal("39800"), Decimal("0"))
    balances = account_balances(merchant=enabled_merchant, currency="XOF")
    assert balances["provider_clearing:SN_ORANGE_MOMO"] == Decimal("10000")
    assert balances["fee_revenue"] == Decimal("200")
    event = Event.objects.get(data_id=body["id"])
    assert event.event_type == "payout.completed"
    obj = event.payload["data"]["object"]
    assert obj["wallet_impact"] == {"debit_amount": "10200", "currency": "XOF"}
    assert obj["status"] == "completed"
    assert obj["completed_at"] is not None
    assert ledger_breaches() == []


def test_payout_declined_by_the_provider_releases_the_reservation(
    enabled_api, enabled_merchant, customer, django_capture_on_commit_callbacks
):
    fund(enabled_merchant, "50000")
    quote = create_quote(enabled_api, "payout")
    with django_capture_on_commit_callbacks(execute=True):
        response = enabled_api.post("/payouts", payout_body(quote, customer, DECLINED_PHONE))
    assert response.status_code == 201
    payout = enabled_api.get(f"/payouts/{response.json()['id']}").json()
    assert payout["status"] == "failed"
    assert payout["history"][-1]["reason"] == "provider_declined"
    assert _balances(enabled_merchant) == (Decimal("50000"), Decimal("0"))
    assert Event.objects.get(data_id=payout["id"]).event_type == "payout.failed"
    assert ledger_breaches() == []


def test_payout_with_insufficient_balance_is_rejected_and_changes_nothing(
    enabled_api, enabled_merchant, customer
):
    fund(enabled_merchant, "10199")  # the debit is 10000 + 200 fee
    quote = create_quote(enabled_api, "payout")
    journals = Journal.objects.count()
    response = enabled_api.post("/payouts", payout_body(quote, customer))
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "bad_request"
    assert response.json()["error"]["reason"] == "insufficient_balance"
    assert Payout.objects.count() == 0
    assert Journal.objects.count() == journals
    assert _balances(enabled_merchant) == (Decimal("10199"), Decimal("0"))
    assert enabled_api.get(f"/quotes/{quote['id']}").json()["status"] == "active"


def test_payout_with_no_wallet_at_all_is_insufficient_balance(enabled_api, customer):
    quote = create_quote(enabled_api, "payout")
    response = enabled_api.post("/payouts", payout_body(quote, customer))
    assert response.status_code == 400
    assert response.json()["error"]["reason"] == "insufficient_balance"


def test_business_recipient_needs_a_business_name(enabled_api, enabled_merchant, customer):
    fund(enabled_merchant, "50000")
    quote = create_quote(enabled_api, "payout")
    body = payout_body(quote, customer, recipient_type="business")
    del body["recipient"]["first_name"]
    del body["recipient"]["last_name"]
    response = enabled_api.post("/payouts", body)
    assert response.status_code == 400
    assert "business_name" in response.json()["error"]["fields"]["recipient"]
    body["recipient"]["business_name"] = "Ndiaye SARL"
    response = enabled_api.post("/payouts", body)
    assert response.status_code == 201, response.json()
    assert response.json()["recipient"]["business_name"] == "Ndiaye SARL"


def test_get_payout_of_another_merchant_is_404(enabled_api, enabled_merchant, customer, other_api):
    fund(enabled_merchant, "50000")
    quote = create_quote(enabled_api, "payout")
    payout_id = enabled_api.post("/payouts", payout_body(quote, customer)).json()["id"]
    response = other_api.get(f"/payouts/{payout_id}")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
    assert enabled_api.get(f"/payouts/{uuid.uuid4()}").status_code == 404
    assert enabled_api.get(f"/payouts/{payout_id}").status_code == 200
