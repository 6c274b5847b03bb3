"""Refunds end to end through Redis and a separate worker process."""

from decimal import Decimal

import pytest

from payments.ledger.checks import ledger_check
from tests.payments.conftest import SN_PHONE, create_customer, create_quote, fund, payin_body
from tests.support import MerchantClient, wallet_balance
from tests.worker import wait_until

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

PAYS_IN_ONLY_PHONE = "+221770001998"


def _final(api, path, worker) -> dict:
    def settled():
        assert worker.poll() is None, "the worker died"
        return api.get(path).json()["status"] in ("completed", "failed")

    assert wait_until(settled, timeout=60), api.get(path).json()
    return api.get(path).json()


def _balances(merchant):
    return wallet_balance(merchant=merchant, currency="XOF")


def test_full_and_partial_refunds_complete_or_fail_through_a_real_worker(
    enabled_merchant, celery_worker_process
):
    api = MerchantClient(enabled_merchant)
    customer = create_customer(api)
    paid = {}
    for phone in (SN_PHONE, PAYS_IN_ONLY_PHONE):
        created = api.post("/payins", payin_body(create_quote(api, "payin"), customer, phone))
        paid[phone] = _final(api, f"/payins/{created.json()['id']}", celery_worker_process)
        assert paid[phone]["status"] == "completed"
    fund(enabled_merchant, "1000")
    assert _balances(enabled_merchant) == (Decimal("20700"), Decimal("0"))

    partial = api.post(f"/payins/{paid[SN_PHONE]['id']}/refunds", {"amount": "4000"}).json()
    partial = _final(api, f"/refunds/{partial['id']}", celery_worker_process)
    assert partial["status"] == "completed"
    assert _balances(enabled_merchant) == (Decimal("16700"), Decimal("0"))
    assert ledger_check()["breaches"] == []

    rest = api.post(f"/payins/{paid[SN_PHONE]['id']}/refunds").json()
    assert rest["amount"] == "6000"
    rest = _final(api, f"/refunds/{rest['id']}", celery_worker_process)
    assert rest["status"] == "completed"
    assert _balances(enabled_merchant) == (Decimal("10700"), Decimal("0"))
    payin = api.get(f"/payins/{paid[SN_PHONE]['id']}").json()
    assert payin["refunded_amount"] == "10000"
    assert ledger_check()["breaches"] == []

    declined = api.post(f"/payins/{paid[PAYS_IN_ONLY_PHONE]['id']}/refunds").json()
    assert declined["amount"] == "10000"
    declined = _final(api, f"/refunds/{declined['id']}", celery_worker_process)
    assert (declined["status"], declined["failure_reason"]) == ("failed", "provider_declined")
    assert _balances(enabled_merchant) == (Decimal("10700"), Decimal("0"))
    payin = api.get(f"/payins/{paid[PAYS_IN_ONLY_PHONE]['id']}").json()
    assert (payin["refunded_amount"], payin["refunds"]) == ("0", [declined["id"]])
    assert ledger_check()["breaches"] == []
