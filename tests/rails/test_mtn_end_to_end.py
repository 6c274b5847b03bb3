"""Payins, payouts, refunds and both legs of a transfer through the MTN MoMo adapter, the
contract fake and a real worker: answered by callbacks, by polls when a callback is lost."""

from decimal import Decimal

import pytest

from payments import ledger
from payments.models import Payin, Payout, Refund
from rails.models import ProviderAnswer
from tests.payments.conftest import payin_body, payout_body
from tests.rails.conftest import (
    CM_PHONE,
    CONNECTION,
    cm_quote,
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
    assert ledger.ledger_breaches() == []
    # 9850 credited by the payin, 20000 float, less the payout's 5000 + fee and the 1000 refund
    available, _ = wallet_balance(merchant=enabled_merchant, currency="XAF")
    assert available < Decimal("29850")
