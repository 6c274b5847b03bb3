"""Real threads on PostgreSQL: concurrent refunds never exceed their payin nor the wallet."""

from decimal import Decimal

import pytest
from django.db.models import Sum

from payments.ledger.checks import ledger_check
from payments.models import Payin, Payout, Refund
from tests.locks import together
from tests.payments.conftest import (
    SILENT_PHONE,
    SN_PHONE,
    create_customer,
    create_quote,
    fund,
    payin_body,
    payout_body,
)
from tests.support import MerchantClient, wallet_balance

pytestmark = pytest.mark.django_db(transaction=True)


def _completed_payin(api, customer, phone: str = SN_PHONE) -> str:
    """A payin of 10000 XOF, completed in-process (eager tasks after its commit)."""
    response = api.post("/payins", payin_body(create_quote(api, "payin"), customer, phone))
    assert response.status_code == 201, response.json()
    payin_id = response.json()["id"]
    assert Payin.objects.get(pk=payin_id).status == "completed"
    return payin_id


def test_ten_concurrent_refunds_of_one_payin_never_refund_more_than_it(enabled_merchant):
    api = MerchantClient(enabled_merchant)
    customer = create_customer(api)
    payin_id = _completed_payin(api, customer)
    fund(enabled_merchant, "100000")  # the wallet is not the limit here: the payin is
    clients = [MerchantClient(enabled_merchant) for _ in range(10)]

    def work(i):
        response = clients[i].post(f"/payins/{payin_id}/refunds", {"amount": "3000"})
        return response.status_code, response.json()

    results = together(work, 10)

    created = [body for status, body in results if status == 201]
    refused = [body for status, body in results if status == 400]
    assert len(created) == 3, results  # 3 x 3000 <= 10000 < 4 x 3000
    assert len(refused) == 7
    assert {body["error"]["reason"] for body in refused} == {"refund_exceeds_payin"}
    total = Refund.objects.filter(payin_id=payin_id).aggregate(total=Sum("amount"))["total"]
    assert total == Decimal("9000")
    assert wallet_balance(merchant=enabled_merchant, currency="XOF") == (
        Decimal("100850"),  # 9850 + 100000 - 9000 paid back
        Decimal("0"),
    )
    assert ledger_check()["breaches"] == []


def test_concurrent_refunds_and_payouts_never_overdraw_the_wallet(enabled_merchant):
    api = MerchantClient(enabled_merchant)
    customer = create_customer(api)
    payin_ids = [_completed_payin(api, customer) for _ in range(3)]  # 3 x 9850 = 29550
    payout_quotes = [create_quote(api, "payout") for _ in range(3)]  # 10200 each
    clients = [MerchantClient(enabled_merchant) for _ in range(6)]

    def work(i):
        if i < 3:
            path, body = f"/payins/{payin_ids[i]}/refunds", {"amount": "10000"}
        else:
            path, body = "/payouts", payout_body(payout_quotes[i - 3], customer, SILENT_PHONE)
        response = clients[i].post(path, body)
        return response.status_code, response.json()

    results = together(work, 6)

    created = [body for status, body in results if status == 201]
    refused = [body for status, body in results if status == 400]
    assert len(created) + len(refused) == 6, results
    assert {body["error"]["reason"] for body in refused} == {"insufficient_balance"}
    assert len(created) == 2  # 29550 holds two debits of 10000 or 10200, not three
    available, _ = wallet_balance(merchant=enabled_merchant, currency="XOF")
    debited = sum(Refund.objects.values_list("amount", flat=True)) + sum(
        Payout.objects.values_list("debit_amount", flat=True)
    )
    assert Decimal(0) <= available == Decimal("29550") - debited
    assert ledger_check()["breaches"] == []
