"""A body field the API does not know is a 400 naming it, and nothing is created: a misspelt
optional field would otherwise be dropped without a word."""

import pytest

from customers.models import Customer
from kyc.models import KycDocument
from payments.models import Payin, Payout
from quotes.models import Quote
from tests.catalog import PAYIN_QUOTE, TRANSFER_QUOTE
from tests.payments.conftest import create_customer, create_quote, fund, payin_body, payout_body
from tests.transfers.conftest import SENDER_DETAILS, transfer_body
from tests.transfers.conftest import create_quote as create_transfer_quote
from transfers.models import Transfer

pytestmark = pytest.mark.django_db

DOCUMENT = {"document_type": "passport", "front_file_url": "https://example.com/front.jpg"}


def _refused(response, field: str) -> None:
    assert response.status_code == 400, response.json()
    error = response.json()["error"]
    assert (error["code"], error["reason"]) == ("bad_request", "invalid_request")
    fields = error["fields"]
    for name in field.split("."):  # nested objects' errors are nested
        assert list(fields) == [name], error
        fields = fields[name]
    assert fields[0].startswith("Unknown field: this takes "), error


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"first_name": "Awa", "last_name": "Diallo", "frist_name": "Awa"}, "frist_name"),
        ({"first_name": "Awa", "status": "active"}, "status"),
    ],
)
def test_customer_body(enabled_api, body, field):
    _refused(enabled_api.post("/customers", body), field)
    assert not Customer.objects.exists()


@pytest.mark.parametrize("flow", ["payin", "payout"])
def test_quote_body(enabled_api, flow):
    _refused(enabled_api.post(f"/quotes/{flow}", {**PAYIN_QUOTE, "fee": "0"}), "fee")
    assert not Quote.objects.exists()


def test_transfer_quote_body(enabled_api):
    body = {**TRANSFER_QUOTE, "payout_amout": "9000"}
    _refused(enabled_api.post("/quotes/transfer", body), "payout_amout")
    assert not Quote.objects.exists()


@pytest.mark.parametrize(
    ("extra", "source", "field"),
    [({"amount": "1"}, {}, "amount"), ({}, {"nickname": "x"}, "source.nickname")],
)
def test_payin_body(enabled_api, extra, source, field):
    customer = create_customer(enabled_api)
    body = payin_body(create_quote(enabled_api, "payin"), customer)
    body["source"].update(source)
    _refused(enabled_api.post("/payins", {**body, **extra}), field)
    assert not Payin.objects.exists()


@pytest.mark.parametrize(
    ("extra", "recipient", "field"),
    [({"notify": True}, {}, "notify"), ({}, {"iban": "FR76"}, "recipient.iban")],
)
def test_payout_body(enabled_api, enabled_merchant, extra, recipient, field):
    fund(enabled_merchant, "100000")
    customer = create_customer(enabled_api)
    body = payout_body(create_quote(enabled_api, "payout"), customer, **recipient)
    _refused(enabled_api.post("/payouts", {**body, **extra}), field)
    assert not Payout.objects.exists()


@pytest.mark.parametrize(
    ("extra", "payer", "field"),
    [({"payout_amount": "9000"}, {}, "payout_amount"), ({}, {"pin": "1234"}, "payer.pin")],
)
def test_transfer_body(enabled_api, extra, payer, field):
    customer = create_customer(enabled_api, **SENDER_DETAILS)
    quote = create_transfer_quote(enabled_api, customer_id=customer["id"])
    body = transfer_body(quote, customer, payer=payer, **extra)
    _refused(enabled_api.post("/transfers", body), field)
    assert not Transfer.objects.exists()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"documents": [DOCUMENT], "note": "x"}, "note"),
        (
            {"documents": [{**DOCUMENT, "front_url": "https://example.com/a.jpg"}]},
            "documents.0.front_url",
        ),
    ],
)
def test_kyc_body(enabled_api, body, field):
    customer = create_customer(enabled_api)
    _refused(enabled_api.post(f"/customers/{customer['id']}/kyc", body), field)
    assert not KycDocument.objects.exists()


def test_prediction_and_resend_bodies(enabled_api):
    _refused(
        enabled_api.post("/operators/predict", {"phone": "+221770001234", "country": "SN"}),
        "country",
    )
    _refused(
        enabled_api.post(
            "/events/resend-failed", {"since": "2026-01-01T00:00:00Z", "until": "2026-02-01"}
        ),
        "until",
    )
