"""What a payin's creation (PAYIN_CREATION, one statement after the quote's locked read)
writes: the quote consumed, the payin row, its `created` history row; the 201's body is what
those rows read back; a refused payin writes nothing."""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.conf import settings

from payments.models import Payin, PayinHistory
from quotes.models import Quote
from tests.payments.conftest import SN_PHONE, create_quote, payin_body

pytestmark = pytest.mark.django_db


def _without_meta(body: dict) -> dict:
    return {name: value for name, value in body.items() if name != "_meta"}


def test_a_payin_is_created_with_its_quote_consumed_and_its_history(
    enabled_api, enabled_merchant, customer
):
    quote = create_quote(enabled_api, "payin", amount="10000", customer_id=customer["id"])

    response = enabled_api.post("/payins", payin_body(quote, customer))

    assert response.status_code == 201, response.json()
    body = response.json()
    payin = Payin.objects.get(pk=body["id"])
    consumed = Quote.objects.get(pk=quote["id"])
    assert (consumed.status, consumed.consumed_at) == ("consumed", payin.created_at)
    assert payin.quote_id == consumed.id
    assert (payin.merchant_id, str(payin.customer_id)) == (enabled_merchant.id, customer["id"])
    assert payin.status == "created"
    assert (payin.country_code, payin.operator_code, payin.rail_type) == (
        "SN",
        "SN_ORANGE_MOMO",
        "mobile_money",
    )
    assert (payin.send_amount, payin.send_currency) == (Decimal("10000"), "XOF")
    assert (payin.receive_amount, payin.receive_currency, payin.total_fee) == (
        consumed.receive_amount,
        consumed.receive_currency,
        consumed.total_fee,
    )
    assert payin.pricing == consumed.pricing
    assert payin.wallet_impact == {
        "credit_amount": body["receive_amount"],
        "currency": consumed.receive_currency,
    }
    assert payin.source == {"phone": SN_PHONE}
    assert (payin.provider_connection, payin.provider_reference) == ("simulator", "")
    assert payin.provider_timeout_at == payin.created_at + timedelta(
        seconds=settings.PROVIDER_TIMEOUT_SECONDS
    )
    assert (payin.submitted_at, payin.completed_at, payin.failed_at) == (None, None, None)
    assert (payin.failure_reason, payin.updated_at) == ("", payin.created_at)
    history = list(PayinHistory.objects.filter(payin=payin).values("id", "status", "reason"))
    assert [(h["status"], h["reason"]) for h in history] == [("created", "")]
    assert PayinHistory.objects.get(pk=history[0]["id"]).created_at == payin.created_at

    assert _without_meta(body) == enabled_api.get(f"/payins/{payin.id}").json()


def test_a_refused_payin_writes_nothing_and_leaves_its_quote_active(
    enabled_api, enabled_merchant, customer
):
    quote = create_quote(enabled_api, "payin", customer_id=customer["id"])
    body = payin_body(quote, customer)
    body["source"]["country_code"] = "CI"  # the quote routes to Senegal

    response = enabled_api.post("/payins", body)

    assert response.status_code == 400
    assert response.json()["error"]["reason"] == "party_routing_mismatch"
    assert Quote.objects.get(pk=quote["id"]).status == "active"
    assert not Payin.objects.filter(quote_id=quote["id"]).exists()
    assert enabled_api.post("/payins", payin_body(quote, customer)).status_code == 201
