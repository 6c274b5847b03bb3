"""A worker SIGKILLed right after the provider took a request (it decided: the payer charged,
the recipient paid) and before the worker heard the answer: the provider's decision is only
at the provider. After a restart (and the beat sweeps run by hand when they are next due) the
same request goes out again under the same reference, and its answer is applied exactly once:
one outcome, each event once, each journal once, the payout's reservation consumed once.

The kill is made by the worker's own provider gateway (tests.faults.gateways), at that exact
point of the call, in a real worker process with the test's settings module."""

import uuid
from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from payments import tasks
from payments.ledger.checks import ledger_breaches
from payments.models import Journal, Payout
from payments.services.sweeps import (
    RESUBMIT_AFTER_SECONDS,
    payments_fail_timed_out,
    payments_stale_submissions,
)
from tests.payments.conftest import create_customer, create_quote, fund, payout_body
from tests.support import MerchantClient, wallet_balance
from tests.transfers import conftest as transfers
from tests.worker import celery_worker, wait_until
from transfers.models import Transfer
from webhooks.models import Event

pytestmark = [pytest.mark.faults, pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def _killed(worker) -> bool:
    return worker.poll() is not None


def _resubmission_due():
    """When the sweep of lost submissions next runs for a payment submitted now."""
    return timezone.now() + timedelta(seconds=RESUBMIT_AFTER_SECONDS + 1)


def _resubmit_lost_payout(payout_id: str, receiver):
    """The sweep of lost submissions finds the payout and submits it again (its body when next
    due); returns its one event, once the payout completed and the receiver got the webhook."""
    later = _resubmission_due()
    assert payments_stale_submissions(now=later) == ([], [uuid.UUID(payout_id)])
    tasks.submit_payout.delay(payout_id=payout_id)
    assert wait_until(lambda: Payout.objects.get(pk=payout_id).status == "completed", timeout=60)
    (event,) = Event.objects.filter(data_id=payout_id)
    assert wait_until(lambda: str(event.id) in receiver.webhook_ids(), timeout=60)
    return event


def _assert_payout_paid_once(merchant, payout_id: str, debit, event, provider_requests) -> None:
    assert provider_requests() == [f"disbursement:{payout_id}"] * 2
    assert event.event_type == "payout.completed"
    kinds = sorted(Journal.objects.filter(resource_id=payout_id).values_list("kind", flat=True))
    assert kinds == ["payout_completed", "payout_reserved"]
    assert wallet_balance(merchant=merchant, currency="XOF") == (
        Decimal("20000") - debit,
        Decimal(0),
    )
    assert ledger_breaches() == []


def _assert_transfer_completed_once(transfer_id: str, events, provider_requests) -> None:
    """Each leg asked twice under its reference, each event and journal once."""
    assert provider_requests() == [
        f"collection:{transfer_id}",
        f"collection:{transfer_id}",
        f"disbursement:{transfer_id}:1",
        f"disbursement:{transfer_id}:1",
    ]
    assert sorted(events.values_list("event_type", flat=True)) == [
        "transfer.completed",
        "transfer.payin.completed",
        "transfer.payout.completed",
    ]
    kinds = sorted(Journal.objects.filter(resource_id=transfer_id).values_list("kind", flat=True))
    assert kinds == ["transfer_collected", "transfer_disbursed", "transfer_settled"]


def test_worker_killed_after_the_provider_paid_a_payout_pays_it_once(
    enabled_merchant, isolated_broker, webhook_endpoint, hanging_receiver, faulty_provider
):
    env, provider_requests = faulty_provider
    api = MerchantClient(enabled_merchant)
    webhook_endpoint(enabled_merchant)
    fund(enabled_merchant, "20000")
    customer = create_customer(api)
    quote = create_quote(api, "payout")

    with celery_worker(extra_env=env(kill=("disbursement",))) as worker:
        response = api.post("/payouts", payout_body(quote, customer))
        assert response.status_code == 201
        assert wait_until(lambda: _killed(worker), timeout=60), "the worker was never killed"
    payout_id = response.json()["id"]

    # The provider paid; we have no answer, no reference: still pending, still reserved.
    assert provider_requests() == [f"disbursement:{payout_id}"]
    payout = Payout.objects.get(pk=payout_id)
    assert (payout.status, payout.provider_reference) == ("pending", "")
    assert not Event.objects.filter(data_id=payout_id).exists()
    debit = payout.debit_amount  # 10000 + 1% + 100
    assert wallet_balance(merchant=enabled_merchant, currency="XOF") == (
        Decimal("20000") - debit,
        debit,
    )

    with celery_worker(extra_env=env()) as worker:
        assert payments_fail_timed_out(now=_resubmission_due()) == 0
        event = _resubmit_lost_payout(payout_id, hanging_receiver)
        assert worker.poll() is None

    # The same request again (the provider's idempotency key is our reference): paid once.
    _assert_payout_paid_once(enabled_merchant, payout_id, debit, event, provider_requests)
    assert set(hanging_receiver.webhook_ids()) == {str(event.id)}


def test_worker_killed_after_each_provider_call_of_a_transfer_completes_it_once(
    enabled_merchant, isolated_broker, webhook_endpoint, hanging_receiver, faulty_provider
):
    env, provider_requests = faulty_provider
    api = MerchantClient(enabled_merchant)
    webhook_endpoint(enabled_merchant)
    customer = transfers.create_customer(api, **transfers.SENDER_DETAILS)
    quote = transfers.create_quote(api, customer_id=customer["id"])

    with celery_worker(extra_env=env(kill=("collection", "disbursement"))) as worker:
        response = api.post("/transfers", transfers.transfer_body(quote, customer))
        assert response.status_code == 201, response.json()
        assert wait_until(lambda: _killed(worker), timeout=60), "never killed at the collection"
    transfer_id = response.json()["id"]
    transfer = Transfer.objects.get(pk=transfer_id)
    assert (transfer.status, transfer.collection_reference) == ("collecting", "")

    # The killed task is handed out again (acks late, visibility timeout): the collection is
    # asked again, completes, and the disbursement's first call kills this worker too.
    with celery_worker(extra_env=env(kill=("collection", "disbursement"))) as worker:
        assert wait_until(lambda: _killed(worker), timeout=60), "never killed at the disbursement"
    transfer = Transfer.objects.get(pk=transfer_id)
    assert (transfer.status, transfer.disbursement_reference) == ("disbursing", "")

    with celery_worker(extra_env=env()) as worker:
        assert wait_until(
            lambda: Transfer.objects.get(pk=transfer_id).status == "completed", timeout=60
        )
        events = Event.objects.filter(data_id=transfer_id)
        ids = {str(event_id) for event_id in events.values_list("id", flat=True)}
        assert wait_until(lambda: ids <= set(hanging_receiver.webhook_ids()), timeout=60)
        assert worker.poll() is None

    _assert_transfer_completed_once(transfer_id, events, provider_requests)
    body = api.get(f"/transfers/{transfer_id}").json()
    assert [h["reason"] for h in body["history"]] == [
        "created",
        "collection_submitted",
        "collection_completed",
        "disbursement_completed",
    ]
    assert ledger_breaches() == []
    assert set(hanging_receiver.webhook_ids()) == ids


def test_connection_cut_after_the_provider_paid_a_payout_pays_it_once(
    enabled_merchant, isolated_broker, webhook_endpoint, hanging_receiver, faulty_provider
):
    """The submission's database connection is terminated between the provider's payment and
    the answer's recording: the answer is lost, the worker lives on, and the submission task
    retries the dropped connection: the same request again, its answer applied once."""
    env, provider_requests = faulty_provider
    api = MerchantClient(enabled_merchant)
    webhook_endpoint(enabled_merchant)
    fund(enabled_merchant, "20000")
    customer = create_customer(api)
    quote = create_quote(api, "payout")

    with celery_worker(extra_env=env(cut=("disbursement",))) as worker:
        response = api.post("/payouts", payout_body(quote, customer))
        assert response.status_code == 201
        payout_id = response.json()["id"]
        assert wait_until(
            lambda: Payout.objects.get(pk=payout_id).status == "completed", timeout=60
        )
        (event,) = Event.objects.filter(data_id=payout_id)
        assert wait_until(lambda: str(event.id) in hanging_receiver.webhook_ids(), timeout=60)
        assert worker.poll() is None

    payout = Payout.objects.get(pk=payout_id)
    _assert_payout_paid_once(
        enabled_merchant, payout_id, payout.debit_amount, event, provider_requests
    )


def test_connection_cut_after_each_provider_call_of_a_transfer_completes_it_once(
    enabled_merchant, isolated_broker, webhook_endpoint, hanging_receiver, faulty_provider
):
    """Each leg's task retries a dropped connection: the same request again, its answer
    applied once."""
    env, provider_requests = faulty_provider
    api = MerchantClient(enabled_merchant)
    webhook_endpoint(enabled_merchant)
    customer = transfers.create_customer(api, **transfers.SENDER_DETAILS)
    quote = transfers.create_quote(api, customer_id=customer["id"])

    with celery_worker(extra_env=env(cut=("collection", "disbursement"))) as worker:
        response = api.post("/transfers", transfers.transfer_body(quote, customer))
        assert response.status_code == 201, response.json()
        transfer_id = response.json()["id"]
        assert wait_until(
            lambda: Transfer.objects.get(pk=transfer_id).status == "completed", timeout=60
        )
        events = Event.objects.filter(data_id=transfer_id)
        ids = {str(event_id) for event_id in events.values_list("id", flat=True)}
        assert wait_until(lambda: ids <= set(hanging_receiver.webhook_ids()), timeout=60)
        assert worker.poll() is None

    _assert_transfer_completed_once(transfer_id, events, provider_requests)
    assert ledger_breaches() == []
