"""The beat asks the provider about a leg whose answer is overdue (lost on its way: a worker
killed while holding it) and applies that answer through the transition, once."""

from collections import Counter
from datetime import timedelta

import pytest

from payments import tasks as payment_tasks
from tests.transfers.conftest import SN_SILENT, ledger_is_clean, transfer_body
from transfers import services
from transfers.models import Transfer
from webhooks.models import Event

pytestmark = pytest.mark.django_db


@pytest.fixture
def lost_answers(settings, monkeypatch) -> list[dict]:
    """The provider answers later, and each answer it sends is lost before it is applied."""
    settings.PROVIDER_SIMULATION_DELAY_SECONDS = 1
    lost: list[dict] = []
    monkeypatch.setattr(
        payment_tasks.deliver_provider_answer, "apply_async", lambda **sent: lost.append(sent)
    )
    return lost


def _sweep(run, at) -> int:
    return run(services.transfers_ask_overdue_answers, now=at)


def test_lost_answers_are_asked_for_once_overdue_and_end_the_transfer_once(
    enabled_api, customer, quote, run, lost_answers
):
    transfer_id = run(enabled_api.post, "/transfers", transfer_body(quote, customer)).json()["id"]
    collecting = Transfer.objects.get(pk=transfer_id)
    assert (collecting.status, len(lost_answers)) == ("collecting", 1)
    overdue = collecting.updated_at + timedelta(seconds=services.ASK_PROVIDER_AFTER_SECONDS)

    assert _sweep(run, overdue - timedelta(seconds=1)) == 0  # not overdue yet: not asked
    assert Transfer.objects.get(pk=transfer_id).status == "collecting"
    assert _sweep(run, overdue) == 1
    disbursing = Transfer.objects.get(pk=transfer_id)
    assert (disbursing.status, len(lost_answers)) == ("disbursing", 2)
    assert disbursing.disbursement_reference
    assert _sweep(run, overdue + timedelta(seconds=services.ASK_PROVIDER_AFTER_SECONDS)) == 1

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
    collecting = Transfer.objects.get(pk=transfer_id)
    step = timedelta(seconds=services.ASK_PROVIDER_AFTER_SECONDS)
    assert _sweep(run, collecting.updated_at + step) == 1
    disbursing = Transfer.objects.get(pk=transfer_id)

    assert _sweep(run, disbursing.updated_at + step) == 0

    assert Transfer.objects.get(pk=transfer_id).status == "disbursing"
    assert not Event.objects.filter(data_id=transfer_id, event_type="transfer.completed").exists()
