"""The beat asks the provider about a leg whose answer is overdue (lost on its way: a worker
killed while holding it) and applies that answer through the transition, once. The answers are
really published to a private Redis broker, where no worker takes them, and thrown away."""

from collections import Counter
from datetime import timedelta

import pytest

from tests.transfers.conftest import SN_SILENT, ledger_is_clean, transfer_body
from transfers.models import Transfer
from transfers.services.sweeps import ASK_PROVIDER_AFTER_SECONDS, transfers_ask_overdue_answers
from webhooks.models import Event

pytestmark = pytest.mark.django_db

ANSWER = "payments.tasks.deliver_provider_answer"
SUBMIT_COLLECTION = "transfers.tasks.submit_transfer_collection"
SUBMIT_DISBURSEMENT = "transfers.tasks.submit_transfer_disbursement"


@pytest.fixture
def lost_answers(settings, broker_queues):
    """The provider answers later: `submit(run, task)` takes the leg's submission off the
    broker and runs it here; the answers the provider publishes then, counted waiting in the
    broker's queue, are thrown away unapplied. Returns how many were lost."""
    settings.PROVIDER_SIMULATION_DELAY_SECONDS = 1

    def submit(run, task: str) -> int:
        assert run(broker_queues.run, task) == 1  # its enqueue after commit went to Redis
        published = broker_queues.waiting()[ANSWER]
        assert broker_queues.lose(ANSWER) == published
        return published

    return submit


def _sweep(run, at) -> int:
    return run(transfers_ask_overdue_answers, now=at)


def test_lost_answers_are_asked_for_once_overdue_and_end_the_transfer_once(
    enabled_api, customer, quote, run, lost_answers
):
    transfer_id = run(enabled_api.post, "/transfers", transfer_body(quote, customer)).json()["id"]
    assert lost_answers(run, SUBMIT_COLLECTION) == 1
    collecting = Transfer.objects.get(pk=transfer_id)
    assert collecting.status == "collecting"
    overdue = collecting.updated_at + timedelta(seconds=ASK_PROVIDER_AFTER_SECONDS)

    assert _sweep(run, overdue - timedelta(seconds=1)) == 0  # not overdue yet: not asked
    assert Transfer.objects.get(pk=transfer_id).status == "collecting"
    assert _sweep(run, overdue) == 1
    assert lost_answers(run, SUBMIT_DISBURSEMENT) == 1
    disbursing = Transfer.objects.get(pk=transfer_id)
    assert disbursing.status == "disbursing"
    assert disbursing.disbursement_reference
    assert _sweep(run, overdue + timedelta(seconds=ASK_PROVIDER_AFTER_SECONDS)) == 1

    transfer = Transfer.objects.get(pk=transfer_id)
    assert (transfer.status, transfer.payin_status, transfer.payout_status) == (
        "completed",
        "completed",
        "completed",
    )
    assert _sweep(run, overdue + timedelta(minutes=5)) == 0  # nothing left to ask
    events = Counter(Event.objects.filter(data_id=transfer_id).values_list("event_type", flat=True))
    assert events == {
        "transfer.payin.completed": 1,
        "transfer.payout.completed": 1,
        "transfer.completed": 1,
    }
    assert list(transfer.history.values_list("status", flat=True)) == [
        "pending",
        "collecting",
        "disbursing",
        "completed",
    ]
    assert ledger_is_clean()


def test_a_leg_the_provider_has_not_decided_stays_as_it_is(
    enabled_api, customer, quote, run, lost_answers
):
    body = transfer_body(quote, customer, recipient_phone=SN_SILENT)
    transfer_id = run(enabled_api.post, "/transfers", body).json()["id"]
    assert lost_answers(run, SUBMIT_COLLECTION) == 1
    collecting = Transfer.objects.get(pk=transfer_id)
    step = timedelta(seconds=ASK_PROVIDER_AFTER_SECONDS)
    assert _sweep(run, collecting.updated_at + step) == 1
    assert lost_answers(run, SUBMIT_DISBURSEMENT) == 0  # the provider has not decided
    disbursing = Transfer.objects.get(pk=transfer_id)
    assert disbursing.disbursement_reference  # received: the sweep asks about it

    assert _sweep(run, disbursing.updated_at + step) == 0

    assert Transfer.objects.get(pk=transfer_id).status == "disbursing"
    assert not Event.objects.filter(data_id=transfer_id, event_type="transfer.completed").exists()
