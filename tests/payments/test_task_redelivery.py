"""Submission tasks delivered several times at once (acks_late redelivery after a worker died,
the sweep of lost submissions of two beats, a provider-outage retry racing the sweep's): each
payment moves once, posts its journals once and records its event once, however many of the
calls reach the provider (each under the payment's own reference, the same request to it).

Real threads on their own connections run the task bodies at the same moment (a barrier)."""

import pytest

from payments import tasks
from payments.ledger.checks import ledger_breaches
from payments.models import Journal, Payin, Payout
from tests.locks import at_once
from tests.payments.conftest import (
    COLLECTIONS_COUNTED,
    SILENT_PHONE,
    CollectionsCountedGateway,
    create_customer,
    create_quote,
    fund,
    payin_body,
    payout_body,
)
from tests.support import MerchantClient
from webhooks.models import Event

pytestmark = pytest.mark.django_db(transaction=True)

RUNS = 3


@pytest.mark.parametrize("delay", [0, 1], ids=["answer-in-receipt", "answer-by-callback"])
def test_a_payin_submission_delivered_three_times_at_once_completes_it_once(
    enabled_merchant, broker_down, settings, delay
):
    settings.PROVIDER_SIMULATION_DELAY_SECONDS = delay
    settings.PAYMENTS_PROVIDER_GATEWAY = COLLECTIONS_COUNTED
    CollectionsCountedGateway.calls.clear()
    api = MerchantClient(enabled_merchant)
    customer = create_customer(api)
    quote = create_quote(api, "payin")
    with broker_down():  # its enqueue is lost: the submissions below are the test's
        payin_id = api.post("/payins", payin_body(quote, customer)).json()["id"]
    assert Payin.objects.get(pk=payin_id).status == "created"

    at_once(lambda: tasks.submit_payin(payin_id=payin_id), RUNS)

    payin = Payin.objects.get(pk=payin_id)
    assert payin.status == "completed"
    assert list(payin.history.values_list("status", flat=True)) == [
        "created",
        "pending",
        "completed",
    ]
    assert 1 <= len(CollectionsCountedGateway.calls) <= RUNS
    assert set(CollectionsCountedGateway.calls) == {payin_id}  # one reference: one request
    assert list(Event.objects.filter(data_id=payin_id).values_list("event_type", flat=True)) == [
        "payin.completed"
    ]
    assert Journal.objects.filter(resource_id=payin_id).count() == 1
    assert ledger_breaches() == []


@pytest.mark.parametrize("delay", [0, 1], ids=["answer-in-receipt", "answer-by-callback"])
def test_a_payout_submission_delivered_three_times_at_once_pays_it_once(
    enabled_merchant, broker_down, settings, delay
):
    settings.PROVIDER_SIMULATION_DELAY_SECONDS = delay
    api = MerchantClient(enabled_merchant)
    customer = create_customer(api)
    fund(enabled_merchant, "20000")
    quote = create_quote(api, "payout")
    with broker_down():  # its enqueue is lost: the submissions below are the test's
        payout_id = api.post("/payouts", payout_body(quote, customer)).json()["id"]
    assert Payout.objects.get(pk=payout_id).submitted_at is None

    at_once(lambda: tasks.submit_payout(payout_id=payout_id), RUNS)

    payout = Payout.objects.get(pk=payout_id)
    assert payout.status == "completed"
    assert list(payout.history.values_list("status", flat=True)) == ["pending", "completed"]
    assert list(Event.objects.filter(data_id=payout_id).values_list("event_type", flat=True)) == [
        "payout.completed"
    ]
    kinds = sorted(Journal.objects.filter(resource_id=payout_id).values_list("kind", flat=True))
    assert kinds == ["payout_completed", "payout_reserved"]
    assert ledger_breaches() == []


def test_a_provider_answer_delivered_three_times_at_once_is_applied_once(
    enabled_merchant, broker_down
):
    from payments.services.transitions import PAYIN_CALLBACK

    api = MerchantClient(enabled_merchant)
    customer = create_customer(api)
    body = payin_body(create_quote(api, "payin"), customer, SILENT_PHONE)
    with broker_down():  # its enqueue is lost: the submission below is the test's
        payin_id = api.post("/payins", body).json()["id"]
    tasks.submit_payin(payin_id=payin_id)  # received; the provider answers later
    payin = Payin.objects.get(pk=payin_id)
    assert payin.status == "pending" and payin.provider_reference
    answer = {
        "callback": PAYIN_CALLBACK,
        "reference": payin_id,
        "provider_reference": payin.provider_reference,
        "outcome": "completed",
    }

    at_once(lambda: tasks.deliver_provider_answer(**answer), RUNS)

    payin.refresh_from_db()
    assert payin.status == "completed"
    assert payin.history.filter(status="completed").count() == 1
    assert Event.objects.filter(data_id=payin_id).count() == 1
    assert Journal.objects.filter(resource_id=payin_id).count() == 1
    assert ledger_breaches() == []
