"""The sandbox phone ending 998, through Redis and a real worker: a wallet that pays but cannot
be paid. Collections from it complete; payouts to it are declined (provider_declined)."""

from decimal import Decimal

import pytest

from payments.ledger.checks import ledger_breaches
from payments.models import Payin, Payout
from tests.payments.conftest import (
    create_customer,
    create_quote,
    fund,
    payin_body,
    payout_body,
)
from tests.support import MerchantClient, wallet_balance
from tests.worker import wait_until

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

PAYS_ONLY = "+221770001998"


def test_a_payin_from_a_998_phone_completes_and_a_payout_to_it_is_declined(
    enabled_merchant, celery_worker_process
):
    api = MerchantClient(enabled_merchant)
    customer = create_customer(api)

    def settled(path: str) -> dict:
        assert celery_worker_process.poll() is None, "the worker died"
        body = api.get(path).json()
        return body if body["status"] in ("completed", "failed") else {}

    payin = api.post("/payins", payin_body(create_quote(api, "payin"), customer, PAYS_ONLY))
    assert payin.status_code == 201, payin.json()
    assert wait_until(lambda: settled(f"/payins/{payin.json()['id']}"), timeout=60)
    assert Payin.objects.get(pk=payin.json()["id"]).status == "completed"

    fund(enabled_merchant, "10000")
    quote = create_quote(api, "payout", amount="5000")
    payout = api.post("/payouts", payout_body(quote, customer, PAYS_ONLY))
    assert payout.status_code == 201, payout.json()
    assert wait_until(lambda: settled(f"/payouts/{payout.json()['id']}"), timeout=60)
    payout = api.get(f"/payouts/{payout.json()['id']}").json()
    assert (payout["status"], payout["history"][-1]["reason"]) == ("failed", "provider_declined")
    assert Payout.objects.get(pk=payout["id"]).failure_reason == "provider_declined"

    # 9850 from the payin + the 10000 float; the payout's reservation was released
    assert wallet_balance(merchant=enabled_merchant, currency="XOF") == (
        Decimal("19850"),
        Decimal("0"),
    )
    assert ledger_breaches() == []
