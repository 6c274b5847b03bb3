"""What ops and support see of provider connections: the ops home's connection cards (kind,
target environment, operators, last success, recent errors, token age), a payment's
connection and MTN's raw codes on its page; wrong credentials as an outage, logged once a
minute; never a secret."""

import json
import logging
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from merchants import services as merchant_services
from payments import provider
from payments.models import Payin, Payout, Refund
from payments.services.submission import payin_submit
from payments.services.sweeps import payments_ask_provider
from rails import selectors, services
from tests.payments.conftest import create_customer, fund, payin_body, payout_body
from tests.rails.conftest import (
    CM_PHONE,
    CONNECTION,
    cm_quote,
    cm_transfer,
    connection_add,
    tokens_forget,
)
from tests.support import MerchantClient
from transfers.models import Transfer
from transfers.services.sweeps import transfers_ask_overdue_answers

pytestmark = pytest.mark.django_db

RECIPIENT = "+237670002222"


def _routed(fake, settings, **changes) -> None:
    settings.ALLOW_PRIVATE_NETWORK_URLS = True
    connection_add(fake, callback_base="https://cowry.example", **changes)
    services.operator_route_set(operator_code="CM_MTN_MOMO", name=CONNECTION, at=timezone.now())
    selectors.memo_forget()


def _secrets(fake) -> list[str]:
    values = [
        each[name] for each in fake.credentials.values() for name in ("api_key", "subscription_key")
    ]
    return [*values, selectors.connection_settings(CONNECTION).callback_secret]


def _ops_client() -> Client:
    get_user_model().objects.create_superuser("ops-rails", "o@example.com", "ops-password-long")
    client = Client()
    assert client.login(username="ops-rails", password="ops-password-long")
    return client


def test_wrong_credentials_are_an_outage_logged_once_a_minute_and_shown_to_ops(
    enabled_merchant, fake_mtn, settings, caplog, django_capture_on_commit_callbacks
):
    wrong = json.loads(json.dumps(fake_mtn.credentials))
    wrong["collection"]["api_key"] = "not-the-key"
    _routed(fake_mtn, settings, credentials=wrong)
    api = MerchantClient(enabled_merchant)
    customer = create_customer(api, phone=CM_PHONE)
    with django_capture_on_commit_callbacks(execute=False):  # submitted by hand below
        ids = [
            api.post("/payins", payin_body(cm_quote(api), customer, CM_PHONE)).json()["id"]
            for _ in range(3)
        ]
    caplog.set_level(logging.INFO)
    for payin_id in ids * 2:
        with pytest.raises(provider.ProviderUnavailable):
            payin_submit(payin_id=payin_id, now=timezone.now())
    assert set(Payin.objects.filter(pk__in=ids).values_list("status", flat=True)) == {"pending"}
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR and r.name == "cowry.rails"]
    assert [r.getMessage() for r in errors] == [
        f"Provider connection {CONNECTION}: collection token failed:"
        " credentials refused (HTTP 401 HTTP_401)"
    ]
    assert "not-the-key" not in caplog.text

    page = _ops_client().get("/admin/").content.decode()
    card = page.split(f'data-name="{CONNECTION}"')[1].split("</section>")[0]
    assert "mtn_momo, target environment sandbox" in card
    assert "Operators: CM_MTN_MOMO" in card
    assert "Last success: never" in card
    assert "collection token: credentials refused (HTTP 401 HTTP_401)" in card
    assert "Token age: collection none, disbursement none" in card
    simulator = page.split('data-name="simulator"')[1].split("data-name=")[0]
    assert "SN_ORANGE_MOMO" in simulator and "CM_MTN_MOMO" not in simulator
    for secret in [*_secrets(fake_mtn), "not-the-key"]:
        assert secret not in page
    tokens_forget()


def test_a_payments_page_shows_its_connection_and_mtns_raw_code(
    enabled_merchant, fake_mtn, settings, django_capture_on_commit_callbacks
):
    _routed(fake_mtn, settings)
    fake_mtn.switches.lose_callbacks = True
    fake_mtn.switches.refuse = {CM_PHONE[1:]: "PAYER_NOT_FOUND"}
    api = MerchantClient(enabled_merchant)
    customer = create_customer(api, phone=CM_PHONE)
    with django_capture_on_commit_callbacks(execute=True):
        payin_id = api.post("/payins", payin_body(cm_quote(api), customer, CM_PHONE)).json()["id"]
    payin = Payin.objects.get(pk=payin_id)
    assert (payin.status, payin.failure_reason) == ("failed", "account_not_found")
    merchant_services.staff_user_create(
        username="support-rails", password="pw-123456-staff", merchant=None, role=None, support=True
    )
    client = Client()
    assert client.login(username="support-rails", password="pw-123456-staff")
    page = client.get(f"/admin/payments/payin/{payin_id}/change/").content.decode()
    assert "Connection: <strong>mtn-cm</strong>" in page
    assert "PAYER_NOT_FOUND" in page and "REJECTED" in page
    for secret in _secrets(fake_mtn):
        assert secret not in page
    tokens_forget()


def _support_client() -> Client:
    merchant_services.staff_user_create(
        username="support-codes", password="pw-123456-staff", merchant=None, role=None, support=True
    )
    client = Client()
    assert client.login(username="support-codes", password="pw-123456-staff")
    return client


def _asked_after_poll_after_seconds() -> None:
    """Beat's polls of every leg in flight, once due (callbacks are lost in these tests)."""
    later = timezone.now() + timedelta(seconds=61)
    payments_ask_provider(now=later)
    transfers_ask_overdue_answers(now=later)


@pytest.mark.django_db(transaction=True)
def test_every_failed_legs_raw_code_is_on_its_support_page(enabled_merchant, fake_mtn, settings):
    """A payout, a refund, a transfer's collection and both attempts of a transfer's
    disbursement, each declined by MTN with its own code: support reads each code, beside
    the leg's connection, on the page of the payment or transfer the leg belongs to."""
    _routed(fake_mtn, settings)
    fake = fake_mtn
    fake.switches.lose_callbacks = True
    payer = CM_PHONE[1:]
    api = MerchantClient(enabled_merchant)
    customer = create_customer(api, phone=CM_PHONE)
    payin_id = api.post("/payins", payin_body(cm_quote(api), customer, CM_PHONE)).json()["id"]
    _asked_after_poll_after_seconds()
    assert Payin.objects.get(pk=payin_id).status == "completed"

    fund(enabled_merchant, "20000", currency="XAF")
    fake.switches.declines = {payer: "PAYEE_NOT_FOUND"}
    quote = cm_quote(api, "payout", amount="5000")
    payout_id = api.post("/payouts", payout_body(quote, customer, CM_PHONE)).json()["id"]
    fake.switches.declines = {payer: "TRANSACTION_CANCELED"}
    refund_id = api.post(f"/payins/{payin_id}/refunds", {"amount": "1000"}).json()["id"]
    fake.switches.declines = {payer: "APPROVAL_REJECTED"}
    collection_declined = cm_transfer(api, customer, recipient_phone=RECIPIENT)
    _asked_after_poll_after_seconds()
    fake.switches.declines = {RECIPIENT[1:]: "PAYEE_NOT_ALLOWED_TO_RECEIVE"}
    disbursement_declined = cm_transfer(api, customer, recipient_phone=RECIPIENT)
    _asked_after_poll_after_seconds()  # collected; the disbursement is sent
    _asked_after_poll_after_seconds()  # declined
    fake.switches.declines = {RECIPIENT[1:]: "COULD_NOT_PERFORM_TRANSACTION"}
    relaunched = api.post(f"/transfers/{disbursement_declined}/relaunch-payout")
    assert relaunched.status_code == 202, relaunched.json()
    _asked_after_poll_after_seconds()

    failed = {
        "payout": Payout.objects.get(pk=payout_id).failure_reason,
        "refund": Refund.objects.get(pk=refund_id).failure_reason,
        "collection": Transfer.objects.get(pk=collection_declined).collection_failure_reason,
        "disbursement": Transfer.objects.get(pk=disbursement_declined).disbursement_failure_reason,
    }
    assert failed == {
        "payout": "account_not_found",
        "refund": "cancelled",
        "collection": "payer_declined",
        "disbursement": "provider_declined",
    }
    assert Transfer.objects.get(pk=disbursement_declined).disbursement_attempt == 2
    client = _support_client()
    pages = {
        f"/admin/payments/payout/{payout_id}/change/": ["PAYEE_NOT_FOUND"],
        f"/admin/payments/refund/{refund_id}/change/": ["TRANSACTION_CANCELED"],
        f"/admin/payments/payin/{payin_id}/change/": ["TRANSACTION_CANCELED"],
        f"/admin/transfers/transfer/{collection_declined}/change/": ["APPROVAL_REJECTED"],
        f"/admin/transfers/transfer/{disbursement_declined}/change/": [
            "PAYEE_NOT_ALLOWED_TO_RECEIVE",
            "COULD_NOT_PERFORM_TRANSACTION",
        ],
    }
    for url, codes in pages.items():
        response = client.get(url)
        assert response.status_code == 200, url
        page = response.content.decode()
        assert CONNECTION in page, url
        for code in codes:
            assert code in page, (url, code)
        for secret in _secrets(fake):
            assert secret not in page
    tokens_forget()
