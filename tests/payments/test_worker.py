"""End to end through Redis and a separate worker process."""

from decimal import Decimal

import pytest

from payments.ledger.checks import ledger_breaches
from payments.models import Payin
from tests.payments.conftest import (
    DECLINED_PHONE,
    SILENT_PHONE,
    SN_PHONE,
    create_customer,
    create_quote,
    fund,
    payin_body,
    payout_body,
)
from tests.support import MerchantClient, wallet_balance
from tests.worker import celery_worker, wait_until

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_payin_and_payout_complete_through_a_real_worker(enabled_merchant, celery_worker_process):
    api = MerchantClient(enabled_merchant)
    customer = create_customer(api)
    quote = create_quote(api, "payin")
    response = api.post("/payins", payin_body(quote, customer))
    assert response.status_code == 201
    payin_id = response.json()["id"]

    def payin_status():
        assert celery_worker_process.poll() is None, "the worker died"
        return api.get(f"/payins/{payin_id}").json()["status"]

    assert wait_until(lambda: payin_status() == "completed", timeout=60), payin_status()

    fund(enabled_merchant, "10000")
    quote = create_quote(api, "payout", amount="5000")
    payout_id = api.post("/payouts", payout_body(quote, customer)).json()["id"]
    assert wait_until(
        lambda: api.get(f"/payouts/{payout_id}").json()["status"] == "completed", timeout=60
    )
    # 9850 from the payin + 10000 float - (5000 + 150 fee)
    assert wallet_balance(merchant=enabled_merchant, currency="XOF") == (
        Decimal("14700"),
        Decimal("0"),
    )
    assert ledger_breaches() == []


def test_the_simulated_provider_answers_after_its_configured_delay(enabled_merchant):
    """The sandbox: a leg completes after PROVIDER_SIMULATION_DELAY_SECONDS, not before; 000
    fails it with provider_declined and 999 leaves it pending."""
    delay = 3
    api = MerchantClient(enabled_merchant)
    customer = create_customer(api)
    with celery_worker(extra_env={"PROVIDER_SIMULATION_DELAY_SECONDS": str(delay)}) as worker:
        ids = {
            phone: api.post(
                "/payins", payin_body(create_quote(api, "payin"), customer, phone)
            ).json()["id"]
            for phone in (SN_PHONE, DECLINED_PHONE, SILENT_PHONE)
        }

        def settled() -> bool:
            assert worker.poll() is None, "the worker died"
            return not Payin.objects.filter(
                pk__in=[ids[SN_PHONE], ids[DECLINED_PHONE]],
                status__in=["created", "pending"],
            ).exists()

        assert wait_until(settled, timeout=90)
        completed = Payin.objects.get(pk=ids[SN_PHONE])
        assert completed.status == "completed"
        assert (completed.completed_at - completed.submitted_at).total_seconds() >= delay
        declined = Payin.objects.get(pk=ids[DECLINED_PHONE])
        assert (declined.status, declined.failure_reason) == ("failed", "provider_declined")
        silent = Payin.objects.get(pk=ids[SILENT_PHONE])
        assert silent.status == "pending" and silent.provider_reference
