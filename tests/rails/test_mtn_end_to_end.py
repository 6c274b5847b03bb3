"""Payins, payouts, refunds and both legs of a transfer through the MTN MoMo adapter, the
contract fake and a real worker: answered by callbacks, by polls when a callback is lost."""

from decimal import Decimal

import pytest

from payments.ledger.checks import ledger_breaches
from payments.models import Payin, Payout, Refund
from rails.models import ProviderAnswer
from tests.payments.conftest import payin_body, payout_body
from tests.rails.conftest import (
    CM_PHONE,
    CONNECTION,
    cm_quote,
    cm_transfer,
    create_customer,
    fund,
    mtn_worker,
    wait_until,
)
from tests.support import MerchantClient, wallet_balance

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def _settled(model, pk) -> bool:
    return model.objects.filter(pk=pk).exclude(status__in=["created", "pending"]).exists()


def test_payin_payout_and_refund_complete_on_callbacks(enabled_merchant, mtn_routed):
    fake = mtn_routed
    api = MerchantClient(enabled_merchant)
    customer = create_customer(api, phone=CM_PHONE)
    with mtn_worker():
        payin_id = api.post("/payins", payin_body(cm_quote(api), customer, CM_PHONE)).json()["id"]
        assert wait_until(lambda: _settled(Payin, payin_id), timeout=60)
        payin = Payin.objects.get(pk=payin_id)
        assert payin.status == "completed"
        assert payin.provider_connection == CONNECTION
        fund(enabled_merchant, "20000", currency="XAF")
        quote = cm_quote(api, "payout", amount="5000")
        payout_id = api.post("/payouts", payout_body(quote, customer, CM_PHONE)).json()["id"]
        refund = api.post(f"/payins/{payin_id}/refunds", {"amount": "1000"}).json()
        assert wait_until(lambda: _settled(Payout, payout_id), timeout=60)
        assert wait_until(lambda: _settled(Refund, refund["id"]), timeout=60)
    payout, refund = Payout.objects.get(pk=payout_id), Refund.objects.get(pk=refund["id"])
    assert (payout.status, refund.status) == ("completed", "completed")
    assert refund.provider_connection == CONNECTION
    # MTN's transaction id is the provider reference; one submission and one callback each
    answers = {a.reference: a for a in ProviderAnswer.objects.all()}
    for leg in (payin, payout, refund):
        leg.refresh_from_db()
        assert leg.provider_reference == answers[str(leg.id)].financial_transaction_id
    assert sorted(p for p, _, status in fake.submissions if status == 202) == [
        "collection",
        "disbursement",
        "disbursement",
    ]
    assert len(fake.callbacks) == 3 and all(status == 200 for *_, status in fake.callbacks)
    assert {method for method, *_ in fake.callbacks} == {"POST", "PUT"}
    assert fake.token_fetches == {"collection": 1, "disbursement": 1}
    assert ledger_breaches() == []
    # 9850 credited by the payin, 20000 float, less the payout's 5000 + fee and the 1000 refund
    available, _ = wallet_balance(merchant=enabled_merchant, currency="XAF")
    assert available < Decimal("29850")


def test_both_legs_of_a_transfer_and_a_relaunch_complete_on_callbacks(enabled_merchant, mtn_routed):
    from transfers.models import Transfer

    fake = mtn_routed
    api = MerchantClient(enabled_merchant)
    customer = create_customer(api, phone=CM_PHONE)
    fake.switches.declines = {"237670002222": "PAYEE_NOT_ALLOWED_TO_RECEIVE"}
    with mtn_worker():
        transfer_id = cm_transfer(api, customer, recipient_phone="+237670002222")

        def status() -> str:
            return api.get(f"/transfers/{transfer_id}").json()["status"]

        assert wait_until(lambda: status() == "failed", timeout=60), status()
        transfer = Transfer.objects.get(pk=transfer_id)
        assert (transfer.payin_status, transfer.payout_status) == ("completed", "failed")
        assert transfer.disbursement_failure_reason == "recipient_not_allowed"
        assert (transfer.collection_connection, transfer.disbursement_connection) == (
            CONNECTION,
            CONNECTION,
        )
        fake.switches.declines = {}
        response = api.post(f"/transfers/{transfer_id}/relaunch-payout")
        assert response.status_code == 202, response.json()
        assert wait_until(lambda: status() == "completed", timeout=60), status()
    raw = ProviderAnswer.objects.get(reference=f"{transfer_id}:1")
    assert (raw.status, raw.raw_code) == ("FAILED", "PAYEE_NOT_ALLOWED_TO_RECEIVE")
    # support reads both legs' connection and MTN's raw code on the transfer's page
    from django.test import Client

    from merchants import services as merchant_services

    merchant_services.staff_user_create(
        username="support-e2e", password="pw-123456-staff", merchant=None, role=None, support=True
    )
    client = Client()
    assert client.login(username="support-e2e", password="pw-123456-staff")
    page = client.get(f"/admin/transfers/transfer/{transfer_id}/change/").content.decode()
    assert "Connection: <strong>collection mtn-cm, disbursement mtn-cm</strong>" in page
    assert "PAYEE_NOT_ALLOWED_TO_RECEIVE" in page
    # collection, the declined attempt and the relaunch: three references, each sent once
    sent = [reference for _, reference, status in fake.submissions if status == 202]
    assert len(sent) == len(set(sent)) == 3
    assert len(fake.callbacks) == 3
    assert ledger_breaches() == []


def test_a_lost_callback_completes_by_polling(enabled_merchant, mtn_routed):
    from datetime import timedelta

    from django.utils import timezone

    from payments.services.sweeps import payments_ask_provider

    fake = mtn_routed
    fake.switches.lose_callbacks = True
    api = MerchantClient(enabled_merchant)
    customer = create_customer(api, phone=CM_PHONE)
    with mtn_worker():
        payin_id = api.post("/payins", payin_body(cm_quote(api), customer, CM_PHONE)).json()["id"]
        assert wait_until(
            lambda: Payin.objects.filter(pk=payin_id).exclude(provider_reference="").exists()
        )
    assert Payin.objects.get(pk=payin_id).status == "pending"
    assert fake.callbacks == []
    # beat's poll, once the answer is overdue
    assert payments_ask_provider(now=timezone.now() + timedelta(seconds=61)) == 1
    payin = Payin.objects.get(pk=payin_id)
    assert payin.status == "completed"
    assert payin.provider_reference == ProviderAnswer.objects.get().financial_transaction_id


def test_5xx_then_202_keeps_one_reference(enabled_merchant, mtn_routed):
    fake = mtn_routed
    api = MerchantClient(enabled_merchant)
    customer = create_customer(api, phone=CM_PHONE)
    with mtn_worker():
        fake.switches.fail_requests = 2
        payin_id = api.post("/payins", payin_body(cm_quote(api), customer, CM_PHONE)).json()["id"]
        assert wait_until(lambda: _settled(Payin, payin_id), timeout=60)
    assert Payin.objects.get(pk=payin_id).status == "completed"
    submissions = [
        (reference, status)
        for method, path, reference, status in fake.requests
        if method == "POST" and path.endswith("/requesttopay")
    ]
    assert submissions == [(payin_id, 500), (payin_id, 500), (payin_id, 202)]


def test_legs_share_one_token_and_a_401_fetches_a_new_one(enabled_merchant, mtn_routed):
    fake = mtn_routed
    api = MerchantClient(enabled_merchant)
    customer = create_customer(api, phone=CM_PHONE)
    with mtn_worker():
        ids = [
            api.post("/payins", payin_body(cm_quote(api), customer, CM_PHONE)).json()["id"]
            for _ in range(4)
        ]
        assert wait_until(lambda: all(_settled(Payin, each) for each in ids), timeout=60)
        assert fake.token_fetches["collection"] == 1
        fake.expire_tokens()  # MTN forgot it: the next call is a 401
        ids.append(api.post("/payins", payin_body(cm_quote(api), customer, CM_PHONE)).json()["id"])
        assert wait_until(lambda: _settled(Payin, ids[-1]), timeout=60)
    assert set(Payin.objects.filter(pk__in=ids).values_list("status", flat=True)) == {"completed"}
    assert fake.token_fetches["collection"] == 2
    refused = [r for r in fake.requests if r[3] == 401]
    assert len(refused) == 1


def test_mtn_down_then_back_loses_nothing_and_duplicates_nothing(enabled_merchant, mtn_routed):
    from webhooks.models import Event

    fake = mtn_routed
    api = MerchantClient(enabled_merchant)
    customer = create_customer(api, phone=CM_PHONE)
    fund(enabled_merchant, "50000", currency="XAF")
    fake.switches.down = True
    with mtn_worker():
        payins = [
            api.post("/payins", payin_body(cm_quote(api), customer, CM_PHONE)).json()["id"]
            for _ in range(3)
        ]
        quote = cm_quote(api, "payout", amount="5000")
        payouts = [api.post("/payouts", payout_body(quote, customer, CM_PHONE)).json()["id"]]
        assert wait_until(lambda: len(fake.requests) >= 8, timeout=30)
        assert not Payin.objects.exclude(status__in=["created", "pending"]).exists()
        assert Payout.objects.get(pk=payouts[0]).status == "pending"
        fake.switches.down = False
        assert wait_until(
            lambda: all(_settled(Payin, each) for each in payins) and _settled(Payout, payouts[0]),
            timeout=120,
        )
    assert set(Payin.objects.values_list("status", flat=True)) == {"completed"}
    assert Payout.objects.get(pk=payouts[0]).status == "completed"
    for leg in (*payins, *payouts):
        terminal = Event.objects.filter(data_id=leg, event_type__regex=r"\.(completed|failed)$")
        assert terminal.count() == 1, leg
    sent = [reference for _, reference, status in fake.submissions if status == 202]
    assert sorted(sent) == sorted((*payins, *payouts))
    assert ledger_breaches() == []
