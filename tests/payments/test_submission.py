"""Each committed payin and payout enqueues its own provider submission after commit; a
provider outage is retried by the submission task, a lost enqueue by the sweep."""

from datetime import timedelta

import pytest

from payments import provider, tasks
from payments.ledger.checks import ledger_breaches
from payments.models import Payin, PayinHistory
from payments.provider import sandbox_gateway
from payments.services.sweeps import (
    RESUBMISSION_LOG_SECONDS,
    RESUBMIT_AFTER_SECONDS,
    payments_stale_submissions,
)
from tests.payments.conftest import create_customer, create_quote, payin_body
from tests.support import MerchantClient
from tests.worker import wait_until
from webhooks.models import Event

pytestmark = pytest.mark.django_db(transaction=True)


@sandbox_gateway("flaky")
class FlakyGateway:
    """Unreachable for its first request, then the simulator."""

    calls = 0

    def submit_collection(self, **kwargs):
        type(self).calls += 1
        if type(self).calls == 1:
            raise provider.ProviderUnavailable("connection refused")
        from payments.provider.simulator import SimulatorGateway

        return SimulatorGateway().submit_collection(**kwargs)


def test_a_created_payin_is_submitted_once_its_transaction_commits(enabled_merchant):
    api = MerchantClient(enabled_merchant)
    customer = create_customer(api)

    payin_id = api.post("/payins", payin_body(create_quote(api, "payin"), customer)).json()["id"]

    payin = api.get(f"/payins/{payin_id}").json()
    assert payin["status"] == "completed"
    assert [entry["status"] for entry in payin["history"]] == ["created", "pending", "completed"]


def test_a_provider_outage_leaves_the_payin_pending_for_the_retry_that_completes_it(
    enabled_merchant, settings
):
    settings.PAYMENTS_PROVIDER_GATEWAY = "flaky"
    FlakyGateway.calls = 0
    api = MerchantClient(enabled_merchant)
    customer = create_customer(api)

    response = api.post("/payins", payin_body(create_quote(api, "payin"), customer))

    assert response.status_code == 201  # the outage is the task's, never the request's
    payin = Payin.objects.get(pk=response.json()["id"])
    assert (payin.status, payin.provider_reference) == ("pending", "")
    tasks.submit_payin(payin_id=str(payin.pk))  # the task's retry
    assert FlakyGateway.calls == 2
    body = api.get(f"/payins/{payin.pk}").json()
    assert body["status"] == "completed"
    assert [entry["status"] for entry in body["history"]] == ["created", "pending", "completed"]


def test_a_lost_enqueue_leaves_the_payin_created_for_the_sweep_that_submits_it(
    enabled_merchant, broker_down, caplog
):
    api = MerchantClient(enabled_merchant)
    customer = create_customer(api)
    quote = create_quote(api, "payin")
    with broker_down():  # the enqueue after commit meets a stopped Redis
        response = api.post("/payins", payin_body(quote, customer))
    assert response.status_code == 201, response.json()
    payin = Payin.objects.get(pk=response.json()["id"])
    assert (response.json()["status"], payin.status) == ("created", "created")
    lost = f"payments.tasks.submit_payin (payin_id={payin.pk}) left to its sweep"
    assert lost in caplog.text

    later = payin.created_at + timedelta(seconds=RESUBMIT_AFTER_SECONDS + 1)
    assert payments_stale_submissions(now=later)[0] == [payin.pk]
    tasks.submit_payin(payin_id=str(payin.pk))

    assert Payin.objects.get(pk=payin.pk).status == "completed"
    assert Event.objects.filter(data_id=payin.pk).count() == 1


def test_a_submission_that_stays_lost_is_logged_once_per_payment_not_once_per_sweep(
    enabled_merchant, broker_down, caplog
):
    api = MerchantClient(enabled_merchant)
    customer = create_customer(api)
    quotes = [create_quote(api, "payin") for _ in range(2)]
    with broker_down():  # both enqueues after commit meet a stopped Redis
        first, second = (api.post("/payins", payin_body(q, customer)).json()["id"] for q in quotes)
    found = Payin.objects.get(pk=first).created_at + timedelta(seconds=RESUBMIT_AFTER_SECONDS + 1)
    # the second is lost 30 s after the first: found by the next run
    Payin.objects.filter(pk=second).update(created_at=found - timedelta(seconds=31))
    caplog.set_level("WARNING", logger="cowry.payments")
    caplog.clear()

    def resubmitted(payin_id: str) -> str:
        return (
            f"Resubmitting Payin {payin_id} of merchant {enabled_merchant.pk}: its provider"
            " submission was lost (logged again every 10 min while it stays lost)"
        )

    def lines() -> list[str]:
        return [r.getMessage() for r in caplog.records if r.name == "cowry.payments"]

    for run_at, stale in ((found, [first]), (found + timedelta(seconds=30), [first, second])):
        assert sorted(map(str, payments_stale_submissions(now=run_at)[0])) == sorted(stale)
    assert lines() == [resubmitted(first), resubmitted(second)]

    # still lost ten minutes after its line: the first is logged again, the second not yet
    reminder = found + timedelta(seconds=RESUBMISSION_LOG_SECONDS)
    payments_stale_submissions(now=reminder)
    assert lines() == [resubmitted(first), resubmitted(second), resubmitted(first)]


@pytest.mark.worker
def test_payments_created_back_to_back_all_complete_through_a_real_worker(
    enabled_merchant, celery_worker_process
):
    api = MerchantClient(enabled_merchant)
    customer = create_customer(api)
    quotes = [create_quote(api, "payin") for _ in range(30)]

    payin_ids = [api.post("/payins", payin_body(quote, customer)).json()["id"] for quote in quotes]

    def all_completed() -> bool:
        assert celery_worker_process.poll() is None, "the worker died"
        statuses = Payin.objects.filter(pk__in=payin_ids).values_list("status", flat=True)
        return set(statuses) == {"completed"}

    assert wait_until(all_completed, timeout=90)
    assert PayinHistory.objects.filter(payin_id__in=payin_ids, status="pending").count() == 30
    assert Event.objects.filter(data_id__in=payin_ids, event_type="payin.completed").count() == 30
    assert ledger_breaches() == []
