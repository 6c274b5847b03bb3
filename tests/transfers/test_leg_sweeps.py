"""A transfer leg the provider is slow, silent or unreachable about: the sweeps ask for its
status, resubmit what never left, time it out, and keep late or repeated answers harmless."""

from datetime import timedelta

import pytest
from django.utils import timezone

from payments import provider
from payments.models import ProviderDiscrepancy
from payments.provider import sandbox_gateway
from payments.provider.simulator import SimulatorGateway
from payments.services.sweeps import SUBMISSION_IN_FLIGHT_SECONDS
from tests.payments.conftest import (
    COLLECTIONS_COUNTED,
    COLLECTIONS_DOWN,
    DISBURSEMENTS_DOWN,
    CollectionsCountedGateway,
)
from tests.transfers.conftest import (
    CM_SILENT,
    SN_OTHER_PHONE,
    events_of,
    ledger_is_clean,
    transfer_body,
)
from transfers.models import Transfer, TransferHistory
from transfers.services.submission import (
    COLLECTION_CALLBACK,
    disbursement_reference,
    transfer_apply_collection_result,
    transfer_apply_disbursement_result,
    transfer_submit_collection,
    transfer_submit_disbursement,
)
from transfers.services.sweeps import (
    RESUBMIT_AFTER_SECONDS,
    transfers_fail_timed_out,
    transfers_stale_submissions,
)
from webhooks.models import Event

pytestmark = pytest.mark.django_db


@sandbox_gateway("status-unavailable")
class StatusUnavailableGateway(SimulatorGateway):
    """The simulator, whose status query cannot be reached."""

    def transaction_status(self, **kwargs):
        raise ConnectionError("the provider's status API is down")


def test_a_disbursement_whose_status_cannot_be_asked_is_not_failed_by_the_sweep(
    enabled_api, disbursing, run, settings
):
    transfer = disbursing
    settings.PAYMENTS_PROVIDER_GATEWAY = "status-unavailable"

    # a failed leg could be relaunched while the first attempt may have paid: it waits
    assert run(transfers_fail_timed_out, now=transfer.leg_timeout_at) == 0
    body = enabled_api.get(f"/transfers/{transfer.id}").json()
    assert (body["status"], body["payout_status"]) == ("disbursing", "pending")
    assert events_of(transfer.id) == ["transfer.payin.completed"]
    relaunch = enabled_api.post(f"/transfers/{transfer.id}/relaunch-payout")
    assert relaunch.status_code == 409

    settings.PAYMENTS_PROVIDER_GATEWAY = "simulator"
    assert run(transfers_fail_timed_out, now=transfer.leg_timeout_at) == 1
    assert enabled_api.get(f"/transfers/{transfer.id}").json()["payout_status"] == "failed"
    assert ledger_is_clean()


def test_a_disbursement_the_provider_never_received_is_failed_not_asked_about(
    enabled_api, disbursing, run
):
    """No receipt and its last call long over (a provider outage): the sandbox keeps no state
    and would answer from the phone, so it is not asked; the leg times out."""
    transfer = disbursing
    transfer.recipient = {**transfer.recipient, "phone": SN_OTHER_PHONE}  # a phone it pays
    transfer.disbursement_reference = ""
    transfer.disbursement_submitted_at = transfer.leg_timeout_at - timedelta(
        seconds=SUBMISSION_IN_FLIGHT_SECONDS
    )
    transfer.save(
        update_fields=["recipient", "disbursement_reference", "disbursement_submitted_at"]
    )

    assert run(transfers_fail_timed_out, now=transfer.leg_timeout_at) == 1

    body = enabled_api.get(f"/transfers/{transfer.id}").json()
    assert (body["status"], body["payout_status"]) == ("failed", "failed")
    assert ledger_is_clean()


def test_a_disbursement_whose_call_may_be_in_flight_waits_then_times_out(
    enabled_api, disbursing, run
):
    transfer = disbursing
    started = transfer.leg_timeout_at - timedelta(seconds=5)
    Transfer.objects.filter(pk=transfer.id).update(
        disbursement_reference="", disbursement_submitted_at=started
    )

    assert run(transfers_fail_timed_out, now=transfer.leg_timeout_at) == 0
    assert enabled_api.get(f"/transfers/{transfer.id}").json()["status"] == "disbursing"
    relaunch = enabled_api.post(f"/transfers/{transfer.id}/relaunch-payout")
    assert relaunch.status_code == 409  # not while the first attempt may still be paid

    after_any_call = started + timedelta(seconds=SUBMISSION_IN_FLIGHT_SECONDS)
    assert run(transfers_fail_timed_out, now=after_any_call) == 1
    assert enabled_api.get(f"/transfers/{transfer.id}").json()["payout_status"] == "failed"
    assert ledger_is_clean()


def test_the_sweep_asks_the_provider_first_and_applies_a_disbursement_answer_that_was_lost(
    enabled_api, disbursing, run
):
    transfer = disbursing
    # The sandbox decides by the phone: the silent recipient never got an answer from it. A
    # phone it pays stands for a provider that paid but whose answer never reached us.
    transfer.recipient = {**transfer.recipient, "phone": SN_OTHER_PHONE}
    transfer.save(update_fields=["recipient"])

    assert run(transfers_fail_timed_out, now=transfer.leg_timeout_at) == 0

    body = enabled_api.get(f"/transfers/{transfer.id}").json()
    assert (body["status"], body["payin_status"], body["payout_status"]) == (
        "completed",
        "completed",
        "completed",
    )
    assert events_of(transfer.id) == [
        "transfer.payin.completed",
        "transfer.payout.completed",
        "transfer.completed",
    ]
    assert not ProviderDiscrepancy.objects.exists()
    assert ledger_is_clean()


def test_the_sweep_applies_a_collection_answer_that_was_lost_and_the_transfer_goes_on(
    enabled_api, customer, quote, run
):
    response = run(
        enabled_api.post, "/transfers", transfer_body(quote, customer, payer_phone="+237670001999")
    )
    transfer = Transfer.objects.get(pk=response.json()["id"])
    assert transfer.status == "collecting" and transfer.collection_reference
    transfer.payer = {**transfer.payer, "phone": "+237670001234"}  # collected, answer lost
    transfer.save(update_fields=["payer"])

    assert run(transfers_fail_timed_out, now=transfer.leg_timeout_at) == 0

    body = enabled_api.get(f"/transfers/{transfer.id}").json()
    assert (body["status"], body["payin_status"], body["payout_status"]) == (
        "completed",
        "completed",
        "completed",
    )
    assert ledger_is_clean()


def test_late_answer_for_a_replaced_attempt_changes_nothing_and_is_kept_for_reconciliation(
    enabled_api, disbursing, run
):
    transfer = disbursing
    run(transfers_fail_timed_out, now=transfer.leg_timeout_at)
    enabled_api.post(f"/transfers/{transfer.id}/relaunch-payout")  # attempt 2, not submitted
    events = Event.objects.filter(data_id=transfer.id).count()

    # The provider finally answers attempt 1: it must not complete attempt 2.
    transfer_apply_disbursement_result(
        reference=disbursement_reference(transfer.id, 1),
        provider_reference="SIM-late",
        outcome="completed",
        reason="",
        at=timezone.now(),
    )

    transfer.refresh_from_db()
    assert (transfer.status, transfer.payout_status, transfer.disbursement_attempt) == (
        "disbursing",
        "pending",
        2,
    )
    assert transfer.disbursement_reference == ""
    assert Event.objects.filter(data_id=transfer.id).count() == events
    assert ledger_is_clean()
    # Attempt 1 paid after all while attempt 2 is under way: a possible double payout.
    discrepancy = ProviderDiscrepancy.objects.get(resource_id=transfer.id)
    assert discrepancy.resource_type == "transfer_disbursement"
    assert (discrepancy.provider_outcome, discrepancy.our_status) == ("completed", "superseded")


def test_repeated_provider_answer_changes_nothing(enabled_api, customer, quote, run):
    response = run(enabled_api.post, "/transfers", transfer_body(quote, customer))
    transfer = Transfer.objects.get(pk=response.json()["id"])
    events = Event.objects.filter(data_id=transfer.id).count()

    transfer_apply_disbursement_result(
        reference=disbursement_reference(transfer.id, 1),
        provider_reference=transfer.disbursement_reference,
        outcome="completed",
        reason="",
        at=timezone.now(),
    )
    transfer_apply_collection_result(
        reference=str(transfer.id),
        provider_reference=transfer.collection_reference,
        outcome="completed",
        reason="",
        at=timezone.now(),
    )

    assert Event.objects.filter(data_id=transfer.id).count() == events
    assert TransferHistory.objects.filter(transfer=transfer).count() == 4
    assert ledger_is_clean()


def test_sweep_resubmits_a_collection_whose_enqueue_was_lost(
    enabled_api, customer, quote, run, broker_down, caplog
):
    from datetime import timedelta

    from transfers import tasks

    with broker_down():  # the enqueue after commit meets a stopped Redis
        response = run(enabled_api.post, "/transfers", transfer_body(quote, customer))
    assert response.status_code == 201, response.json()
    transfer = Transfer.objects.get(pk=response.json()["id"])
    assert (response.json()["status"], transfer.status) == ("pending", "pending")
    lost = "Broker unreachable; transfers.tasks.submit_transfer_collection "
    assert f"{lost}(transfer_id={transfer.id}) left to its sweep" in caplog.text
    assert transfers_stale_submissions(now=transfer.updated_at) == []
    later = transfer.updated_at + timedelta(seconds=RESUBMIT_AFTER_SECONDS)
    assert transfers_stale_submissions(now=later) == [(transfer.id, None)]

    # The beat task runs a minute later.
    Transfer.objects.filter(pk=transfer.id).update(
        updated_at=timezone.now() - timedelta(seconds=RESUBMIT_AFTER_SECONDS)
    )
    run(tasks.fail_timed_out_transfers)

    transfer.refresh_from_db()
    assert transfer.status == "completed"
    assert transfers_stale_submissions(now=later) == []
    assert ledger_is_clean()


def test_sweep_resubmits_a_disbursement_whose_enqueue_met_a_stopped_broker(
    enabled_api, customer, quote, run, broker_down, caplog
):
    """The collection's answer arrives (a provider callback) while the broker's Redis is
    stopped: the answer is applied, the disbursement's enqueue after commit fails and is
    logged, never raised to the provider's callback; the beat's sweep resubmits it."""
    from transfers import tasks

    body = transfer_body(quote, customer, payer_phone=CM_SILENT)
    transfer = Transfer.objects.get(pk=run(enabled_api.post, "/transfers", body).json()["id"])
    assert transfer.status == "collecting"
    with broker_down():
        run(
            provider.deliver_answer,
            callback=COLLECTION_CALLBACK,
            reference=str(transfer.id),
            provider_reference=transfer.collection_reference,
            outcome="completed",
        )
    transfer.refresh_from_db()
    assert (transfer.status, transfer.disbursement_submitted_at) == ("disbursing", None)
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert any("submit_transfer_disbursement" in m and "sweep" in m for m in warnings), warnings
    later = transfer.updated_at + timedelta(seconds=RESUBMIT_AFTER_SECONDS)
    caplog.clear()
    for run_at in (later, later + timedelta(seconds=30)):  # two sweeps, one line
        assert transfers_stale_submissions(now=run_at) == [(transfer.id, 1)]
    assert [r.getMessage() for r in caplog.records] == [
        f"Resubmitting the disbursement (attempt 1) of transfer {transfer.id} of merchant"
        f" {transfer.merchant_id}: its provider submission was lost (logged again every 10 min"
        " while it stays lost)"
    ]

    # The beat task runs a minute later, the broker back.
    Transfer.objects.filter(pk=transfer.id).update(
        updated_at=timezone.now() - timedelta(seconds=RESUBMIT_AFTER_SECONDS)
    )
    run(tasks.fail_timed_out_transfers)

    transfer.refresh_from_db()
    assert (transfer.status, transfer.payin_status, transfer.payout_status) == (
        "completed",
        "completed",
        "completed",
    )
    assert transfers_stale_submissions(now=later) == []
    assert ledger_is_clean()


def test_a_resubmission_started_just_before_the_timeout_keeps_the_leg_disbursing(
    enabled_api, disbursing, run, settings
):
    transfer = disbursing
    Transfer.objects.filter(pk=transfer.id).update(disbursement_reference="")  # never received
    settings.PAYMENTS_PROVIDER_GATEWAY = DISBURSEMENTS_DOWN
    due = transfer.leg_timeout_at
    with pytest.raises(Exception, match="connection reset"):  # a retry, late
        transfer_submit_disbursement(
            transfer_id=transfer.id, attempt=1, now=due - timedelta(seconds=2)
        )

    assert run(transfers_fail_timed_out, now=due + timedelta(seconds=5)) == 0
    assert enabled_api.post(f"/transfers/{transfer.id}/relaunch-payout").status_code == 409
    window = timedelta(seconds=SUBMISSION_IN_FLIGHT_SECONDS)
    assert run(transfers_fail_timed_out, now=due + window) == 1
    assert ledger_is_clean()


@pytest.mark.parametrize("late", ["enqueue lost", "outage retries"])
def test_a_collection_submission_does_not_start_past_its_leg_timeout(
    enabled_api, customer, quote, run, settings, late
):
    """A collection submitted past its leg's timeout (its enqueue lost and the resubmission
    behind a queue, or a provider outage's retries running past it) makes no provider call:
    the sweep fails the transfer, and no payer is charged for a transfer.failed."""
    response = enabled_api.post("/transfers", transfer_body(quote, customer))  # never enqueued
    transfer = Transfer.objects.get(pk=response.json()["id"])
    if late == "outage retries":
        settings.PAYMENTS_PROVIDER_GATEWAY = COLLECTIONS_DOWN
        with pytest.raises(provider.ProviderUnavailable):  # collecting, with a fresh leg timeout
            transfer_submit_collection(transfer_id=transfer.id, now=timezone.now())
    before = Transfer.objects.get(pk=transfer.id)
    settings.PAYMENTS_PROVIDER_GATEWAY = COLLECTIONS_COUNTED
    CollectionsCountedGateway.calls.clear()

    due = before.leg_timeout_at
    run(transfer_submit_collection, transfer_id=transfer.id, now=due)  # the task, late

    assert CollectionsCountedGateway.calls == []
    after = Transfer.objects.get(pk=transfer.id)
    assert (after.status, after.collection_submitted_at, after.collection_reference) == (
        before.status,
        before.collection_submitted_at,
        "",
    )
    assert run(transfers_fail_timed_out, now=due) == 1
    body = enabled_api.get(f"/transfers/{transfer.id}").json()
    assert (body["status"], body["payin_status"], body["payout_status"]) == (
        "failed",
        "failed",
        "cancelled",
    )
    assert events_of(transfer.id) == ["transfer.payin.failed", "transfer.failed"]
    assert not ProviderDiscrepancy.objects.exists()
    assert ledger_is_clean()


def test_a_collection_whose_call_may_be_in_flight_waits_then_times_out(
    enabled_api, customer, quote, run, settings
):
    response = enabled_api.post("/transfers", transfer_body(quote, customer))  # never enqueued
    transfer = Transfer.objects.get(pk=response.json()["id"])
    settings.PAYMENTS_PROVIDER_GATEWAY = COLLECTIONS_DOWN
    with pytest.raises(provider.ProviderUnavailable):
        transfer_submit_collection(transfer_id=transfer.id, now=timezone.now())
    due = Transfer.objects.get(pk=transfer.id).leg_timeout_at
    for started in (due - timedelta(minutes=30), due - timedelta(seconds=2)):  # a retry, late
        with pytest.raises(provider.ProviderUnavailable):
            transfer_submit_collection(transfer_id=transfer.id, now=started)
    assert Transfer.objects.get(pk=transfer.id).collection_submitted_at == started

    # its last call may still reach the provider: it is not failed while that can be
    assert run(transfers_fail_timed_out, now=due + timedelta(seconds=5)) == 0
    assert enabled_api.get(f"/transfers/{transfer.id}").json()["status"] == "collecting"
    window = timedelta(seconds=SUBMISSION_IN_FLIGHT_SECONDS)
    assert run(transfers_fail_timed_out, now=started + window) == 1
    assert enabled_api.get(f"/transfers/{transfer.id}").json()["payin_status"] == "failed"
    assert ledger_is_clean()
