from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from payments import provider, tasks
from payments.ledger.checks import ledger_breaches
from payments.models import Payin, Payout, ProviderDiscrepancy
from payments.provider import sandbox_gateway
from payments.provider.simulator import SimulatorGateway
from payments.services.payins import payin_transition
from payments.services.submission import payin_submit, payout_submit
from payments.services.sweeps import (
    ANSWER_EXPECTED_SECONDS,
    SUBMISSION_IN_FLIGHT_SECONDS,
    payments_ask_provider,
    payments_fail_timed_out,
)
from payments.services.transitions import PAYIN_CALLBACK, PAYOUT_CALLBACK
from tests.payments.conftest import (
    COLLECTIONS_COUNTED,
    COLLECTIONS_DOWN,
    DECLINED_PHONE,
    DISBURSEMENTS_DOWN,
    SILENT_PHONE,
    SN_PHONE,
    CollectionsCountedGateway,
    create_quote,
    fund,
    payin_body,
    payout_body,
)
from tests.support import wallet_balance
from webhooks.models import Event

pytestmark = pytest.mark.django_db


def test_a_payin_the_provider_never_answers_stays_pending_then_the_sweep_fails_it(
    enabled_api, customer, django_capture_on_commit_callbacks, settings
):
    quote = create_quote(enabled_api, "payin")
    with django_capture_on_commit_callbacks(execute=True):
        payin_id = enabled_api.post("/payins", payin_body(quote, customer, SILENT_PHONE)).json()[
            "id"
        ]
    assert enabled_api.get(f"/payins/{payin_id}").json()["status"] == "pending"

    # Not yet due: the sweep leaves it alone.
    assert tasks.fail_timed_out_payments.delay().get() == 0
    assert Payin.objects.get(pk=payin_id).status == "pending"

    Payin.objects.filter(pk=payin_id).update(provider_timeout_at=timezone.now())
    assert tasks.fail_timed_out_payments.delay().get() == 1
    payin = enabled_api.get(f"/payins/{payin_id}").json()
    assert payin["status"] == "failed"
    assert payin["history"][-1]["reason"] == "provider_timeout"
    assert Event.objects.get(data_id=payin_id).event_type == "payin.failed"
    assert tasks.fail_timed_out_payments.delay().get() == 0  # nothing left to fail


def _silent_payout(api, merchant, customer, capture) -> str:
    """A payout of a funded wallet (20000 XOF) that the provider received and never answers."""
    fund(merchant, "20000")
    quote = create_quote(api, "payout")
    with capture(execute=True):
        return api.post("/payouts", payout_body(quote, customer, SILENT_PHONE)).json()["id"]


def _assert_timed_out_and_released(api, merchant, payout_id: str) -> None:
    """Failed for its timeout, its whole reservation back in the 20000 XOF wallet."""
    body = api.get(f"/payouts/{payout_id}").json()
    assert (body["status"], body["history"][-1]["reason"]) == ("failed", "provider_timeout")
    assert wallet_balance(merchant=merchant, currency="XOF") == (
        Decimal("20000"),
        Decimal("0"),
    )
    assert ledger_breaches() == []


def test_a_silent_payout_is_failed_by_the_sweep_and_its_reservation_released(
    enabled_api, enabled_merchant, customer, django_capture_on_commit_callbacks, settings, caplog
):
    payout_id = _silent_payout(
        enabled_api, enabled_merchant, customer, django_capture_on_commit_callbacks
    )
    assert wallet_balance(merchant=enabled_merchant, currency="XOF") == (
        Decimal("9800"),
        Decimal("10200"),
    )
    later = timezone.now() + timedelta(seconds=settings.PROVIDER_TIMEOUT_SECONDS + 1)
    caplog.set_level("WARNING", logger="cowry.payments")
    assert payments_fail_timed_out(now=later) == 1
    _assert_timed_out_and_released(enabled_api, enabled_merchant, payout_id)
    # the operator sees which payment of which merchant the silent provider cost
    assert [r.getMessage() for r in caplog.records if r.name == "cowry.payments"] == [
        f"Payout {payout_id} of merchant {enabled_merchant.pk} failed: no provider answer by"
        " its timeout (provider_timeout)"
    ]


def test_a_late_answer_after_the_timeout_changes_nothing_and_is_kept_for_reconciliation(
    enabled_api, enabled_merchant, customer, django_capture_on_commit_callbacks, settings
):
    payout_id = _silent_payout(
        enabled_api, enabled_merchant, customer, django_capture_on_commit_callbacks
    )
    later = timezone.now() + timedelta(seconds=settings.PROVIDER_TIMEOUT_SECONDS + 1)
    payments_fail_timed_out(now=later)
    provider.deliver_answer(
        callback=PAYOUT_CALLBACK,
        reference=payout_id,
        provider_reference="SIM-late",
        outcome=provider.COMPLETED,
    )
    provider.deliver_answer(  # the provider repeats itself: still one discrepancy
        callback=PAYOUT_CALLBACK,
        reference=payout_id,
        provider_reference="SIM-late",
        outcome=provider.COMPLETED,
    )
    payout = Payout.objects.get(pk=payout_id)
    assert payout.status == "failed"
    assert payout.history.count() == 2
    assert wallet_balance(merchant=enabled_merchant, currency="XOF") == (
        Decimal("20000"),
        Decimal("0"),
    )
    assert ledger_breaches() == []
    discrepancy = ProviderDiscrepancy.objects.get()
    assert (discrepancy.resource_type, str(discrepancy.resource_id)) == ("payout", payout_id)
    assert (discrepancy.provider_outcome, discrepancy.our_status) == ("completed", "failed")
    assert discrepancy.merchant == enabled_merchant
    assert discrepancy.resolved_at is None


def test_a_late_answer_keeps_its_reference_on_a_payin_failed_before_its_receipt(
    enabled_api, customer
):
    quote = create_quote(enabled_api, "payin")
    payin_id = enabled_api.post("/payins", payin_body(quote, customer)).json()["id"]  # unsent
    payin_transition(
        payin_id=payin_id, to="failed", reason="marked_failed_by_support", at=timezone.now()
    )
    provider.deliver_answer(
        callback=PAYIN_CALLBACK,
        reference=payin_id,
        provider_reference="SIM-late",
        outcome=provider.COMPLETED,
    )
    payin = enabled_api.get(f"/payins/{payin_id}").json()
    assert (payin["status"], payin["provider_reference"]) == ("failed", "SIM-late")
    assert ProviderDiscrepancy.objects.get().provider_reference == "SIM-late"
    assert ledger_breaches() == []


def test_a_repeated_answer_that_agrees_records_no_discrepancy(
    enabled_api, customer, django_capture_on_commit_callbacks
):
    quote = create_quote(enabled_api, "payin")
    with django_capture_on_commit_callbacks(execute=True):
        payin_id = enabled_api.post("/payins", payin_body(quote, customer)).json()["id"]
    assert Payin.objects.get(pk=payin_id).status == "completed"
    provider.deliver_answer(
        callback=PAYIN_CALLBACK,
        reference=payin_id,
        provider_reference="SIM-again",
        outcome=provider.COMPLETED,
    )
    assert not ProviderDiscrepancy.objects.exists()


def test_a_rejected_submission_fails_the_payin(
    enabled_api, customer, django_capture_on_commit_callbacks, settings
):
    settings.PAYMENTS_PROVIDER_GATEWAY = "rejecting"
    quote = create_quote(enabled_api, "payin")
    with django_capture_on_commit_callbacks(execute=True):
        payin_id = enabled_api.post("/payins", payin_body(quote, customer)).json()["id"]
    payin = enabled_api.get(f"/payins/{payin_id}").json()
    assert payin["status"] == "failed"
    assert payin["history"][-1]["reason"] == "invalid_account"


@sandbox_gateway("rejecting")
class RejectingGateway:
    """A provider that refuses every request synchronously (a real provider can)."""

    def submit_collection(self, **kwargs):
        raise provider.ProviderRejected("invalid_account")

    submit_disbursement = submit_collection


def test_a_payin_whose_submission_was_never_enqueued_is_resubmitted_by_the_sweep(
    enabled_api, customer, django_capture_on_commit_callbacks, broker_down, caplog
):
    quote = create_quote(enabled_api, "payin")
    with broker_down(), django_capture_on_commit_callbacks(execute=True):  # a lost message
        response = enabled_api.post("/payins", payin_body(quote, customer))
    assert response.status_code == 201, response.json()
    payin_id = response.json()["id"]
    lost = f"Broker unreachable; payments.tasks.submit_payin (payin_id={payin_id}) left to"
    assert lost in caplog.text
    assert tasks.fail_timed_out_payments.delay().get() == 0
    assert Payin.objects.get(pk=payin_id).status == "created"  # too recent to resubmit

    Payin.objects.filter(pk=payin_id).update(created_at=timezone.now() - timedelta(minutes=5))
    tasks.fail_timed_out_payments.delay().get()
    assert enabled_api.get(f"/payins/{payin_id}").json()["status"] == "completed"


def test_a_payout_whose_submission_was_never_enqueued_is_resubmitted_by_the_sweep(
    enabled_api, enabled_merchant, customer, django_capture_on_commit_callbacks, broker_down, caplog
):
    fund(enabled_merchant, "20000")
    quote = create_quote(enabled_api, "payout")
    with broker_down(), django_capture_on_commit_callbacks(execute=True):  # a lost message
        response = enabled_api.post("/payouts", payout_body(quote, customer))
    assert response.status_code == 201, response.json()
    payout_id = response.json()["id"]
    lost = f"Broker unreachable; payments.tasks.submit_payout (payout_id={payout_id}) left to"
    assert lost in caplog.text
    assert Payout.objects.get(pk=payout_id).submitted_at is None
    Payout.objects.filter(pk=payout_id).update(created_at=timezone.now() - timedelta(minutes=5))
    tasks.fail_timed_out_payments.delay().get()
    assert enabled_api.get(f"/payouts/{payout_id}").json()["status"] == "completed"
    assert ledger_breaches() == []


def _answer_lost_on_the_way(model, payment_id: str, party_field: str, phone: str) -> None:
    """The sandbox decides by the party's phone: submitted with SILENT_PHONE, the provider never
    answered. Giving the stored party a phone it completes (or declines) stands for a provider
    that decided but whose answer never reached us (a lost callback, a worker killed with it)."""
    payment = model.objects.get(pk=payment_id)
    setattr(payment, party_field, {**getattr(payment, party_field), "phone": phone})
    payment.save(update_fields=[party_field])


@pytest.mark.parametrize(
    ("phone", "outcome", "available", "reserved"),
    [
        (SN_PHONE, "completed", Decimal("9800"), Decimal("0")),
        (DECLINED_PHONE, "failed", Decimal("20000"), Decimal("0")),
    ],
)
def test_the_sweep_asks_the_provider_first_and_applies_a_payout_answer_that_was_lost(
    enabled_api,
    enabled_merchant,
    customer,
    django_capture_on_commit_callbacks,
    settings,
    phone,
    outcome,
    available,
    reserved,
):
    payout_id = _silent_payout(
        enabled_api, enabled_merchant, customer, django_capture_on_commit_callbacks
    )
    _answer_lost_on_the_way(Payout, payout_id, "recipient", phone)

    later = timezone.now() + timedelta(seconds=settings.PROVIDER_TIMEOUT_SECONDS + 1)
    failed = payments_fail_timed_out(now=later)

    payout = enabled_api.get(f"/payouts/{payout_id}").json()
    assert payout["status"] == outcome
    assert payout["history"][-1]["reason"] != "provider_timeout"
    assert failed == 0  # answered, not timed out
    # a completed payout's money left; a declined one's reservation came back
    assert wallet_balance(merchant=enabled_merchant, currency="XOF") == (
        available,
        reserved,
    )
    assert [e.event_type for e in Event.objects.filter(data_id=payout_id)] == [f"payout.{outcome}"]
    # the answer arriving late after all is the same answer: nothing changes, nothing to reconcile
    provider.deliver_answer(
        callback=PAYOUT_CALLBACK,
        reference=payout_id,
        provider_reference=Payout.objects.get(pk=payout_id).provider_reference,
        outcome=outcome,
        reason="provider_declined" if outcome == "failed" else "",
    )
    assert Payout.objects.get(pk=payout_id).status == outcome
    assert not ProviderDiscrepancy.objects.exists()
    assert ledger_breaches() == []


def test_the_sweep_applies_a_payin_answer_that_was_lost_and_still_fails_a_silent_one(
    enabled_api, enabled_merchant, customer, django_capture_on_commit_callbacks, settings
):
    quote_lost = create_quote(enabled_api, "payin")
    quote_silent = create_quote(enabled_api, "payin")
    with django_capture_on_commit_callbacks(execute=True):
        lost = enabled_api.post("/payins", payin_body(quote_lost, customer, SILENT_PHONE)).json()
        silent = enabled_api.post(
            "/payins", payin_body(quote_silent, customer, SILENT_PHONE)
        ).json()
    _answer_lost_on_the_way(Payin, lost["id"], "source", SN_PHONE)

    later = timezone.now() + timedelta(seconds=settings.PROVIDER_TIMEOUT_SECONDS + 1)
    assert payments_fail_timed_out(now=later) == 1  # only the silent one

    assert enabled_api.get(f"/payins/{lost['id']}").json()["status"] == "completed"
    silent_after = enabled_api.get(f"/payins/{silent['id']}").json()
    assert (silent_after["status"], silent_after["history"][-1]["reason"]) == (
        "failed",
        "provider_timeout",
    )
    assert wallet_balance(merchant=enabled_merchant, currency="XOF")[0] == Decimal(
        lost["receive_amount"]
    )
    assert ledger_breaches() == []


@sandbox_gateway("status-trouble")
class StatusTroubleGateway(SimulatorGateway):
    """The simulator, whose status answers go wrong for phones ending 1999: an unknown outcome
    for ...11999, its client raising for ...21999; others answer as the simulator does."""

    def transaction_status(self, **kwargs):
        if kwargs["phone"].endswith("11999"):
            return provider.ProviderReceipt(provider_reference="SIM-x", outcome="refunded")
        if kwargs["phone"].endswith("21999"):
            raise RuntimeError("the provider's client broke")
        return super().transaction_status(**kwargs)


def test_one_legs_status_trouble_does_not_hold_up_the_other_timeouts(
    enabled_api, enabled_merchant, customer, django_capture_on_commit_callbacks, settings
):
    fund(enabled_merchant, "40000")
    payouts = []
    for phone in ("+221770011999", "+221770021999", SILENT_PHONE):
        quote = create_quote(enabled_api, "payout")
        with django_capture_on_commit_callbacks(execute=True):
            payouts.append(enabled_api.post("/payouts", payout_body(quote, customer, phone)).json())
    payout_ids = [payout["id"] for payout in payouts]
    settings.PAYMENTS_PROVIDER_GATEWAY = "status-trouble"

    later = timezone.now() + timedelta(seconds=settings.PROVIDER_TIMEOUT_SECONDS + 1)
    # the unknown outcome cannot be applied and the provider could not be asked about the
    # second: both wait for the next run; only the silent one times out
    assert payments_fail_timed_out(now=later) == 1

    statuses = [enabled_api.get(f"/payouts/{i}").json()["status"] for i in payout_ids]
    assert statuses == ["pending", "pending", "failed"]
    still_reserved = sum(Decimal(p["wallet_impact"]["debit_amount"]) for p in payouts[:2])
    assert wallet_balance(merchant=enabled_merchant, currency="XOF")[1] == still_reserved
    assert ledger_breaches() == []


def test_a_payout_whose_status_cannot_be_asked_stays_pending_until_the_provider_answers(
    enabled_api, enabled_merchant, customer, django_capture_on_commit_callbacks, settings, caplog
):
    fund(enabled_merchant, "40000")
    quote = create_quote(enabled_api, "payout")
    with django_capture_on_commit_callbacks(execute=True):
        payout = enabled_api.post("/payouts", payout_body(quote, customer, "+221770021999")).json()
    available_before = wallet_balance(merchant=enabled_merchant, currency="XOF")[0]
    later = timezone.now() + timedelta(seconds=settings.PROVIDER_TIMEOUT_SECONDS + 1)

    settings.PAYMENTS_PROVIDER_GATEWAY = "status-trouble"
    for _ in range(2):  # failing it would free money the provider may have paid out
        assert payments_fail_timed_out(now=later) == 0
    assert enabled_api.get(f"/payouts/{payout['id']}").json()["status"] == "pending"
    assert wallet_balance(merchant=enabled_merchant, currency="XOF")[0] == (available_before)
    assert not Event.objects.filter(data_id=payout["id"]).exists()
    assert "could not be asked its status" in caplog.text

    # the provider can be asked again and says it is still working on it: now it times out
    settings.PAYMENTS_PROVIDER_GATEWAY = "simulator"
    assert payments_fail_timed_out(now=later) == 1
    body = enabled_api.get(f"/payouts/{payout['id']}").json()
    assert (body["status"], body["history"][-1]["reason"]) == ("failed", "provider_timeout")
    assert ledger_breaches() == []


def test_a_payin_whose_status_cannot_be_asked_still_times_out(
    enabled_api, enabled_merchant, customer, django_capture_on_commit_callbacks, settings
):
    quote = create_quote(enabled_api, "payin")
    with django_capture_on_commit_callbacks(execute=True):
        payin = enabled_api.post("/payins", payin_body(quote, customer, "+221770021999")).json()
    settings.PAYMENTS_PROVIDER_GATEWAY = "status-trouble"

    later = timezone.now() + timedelta(seconds=settings.PROVIDER_TIMEOUT_SECONDS + 1)
    assert payments_fail_timed_out(now=later) == 1  # no money leaves on a payin
    body = enabled_api.get(f"/payins/{payin['id']}").json()
    assert (body["status"], body["history"][-1]["reason"]) == ("failed", "provider_timeout")


def test_a_payout_the_provider_never_received_is_failed_not_asked_about(
    enabled_api, enabled_merchant, customer, django_capture_on_commit_callbacks, settings
):
    """Every call failed (a provider outage): no reference. The sandbox keeps no state and would
    answer for any reference from the phone, so asking it would invent a payment; the payout is
    failed once its last call is long over."""
    payout_id = _silent_payout(
        enabled_api, enabled_merchant, customer, django_capture_on_commit_callbacks
    )
    _answer_lost_on_the_way(Payout, payout_id, "recipient", SN_PHONE)  # a phone it would pay
    payout = Payout.objects.get(pk=payout_id)
    window = timedelta(seconds=SUBMISSION_IN_FLIGHT_SECONDS)
    last_call = payout.provider_timeout_at - window
    Payout.objects.filter(pk=payout_id).update(provider_reference="", submitted_at=last_call)

    assert payments_fail_timed_out(now=payout.provider_timeout_at) == 1

    _assert_timed_out_and_released(enabled_api, enabled_merchant, payout_id)


def test_a_payout_whose_submission_may_be_in_flight_waits_then_times_out(
    enabled_api, enabled_merchant, customer, django_capture_on_commit_callbacks, settings
):
    payout_id = _silent_payout(
        enabled_api, enabled_merchant, customer, django_capture_on_commit_callbacks
    )
    payout = Payout.objects.get(pk=payout_id)
    due = payout.provider_timeout_at
    # its provider call started just before the timeout and has not returned yet
    started = due - timedelta(seconds=5)
    Payout.objects.filter(pk=payout_id).update(provider_reference="", submitted_at=started)

    assert payments_fail_timed_out(now=due) == 0  # may still reach the provider
    assert Payout.objects.get(pk=payout_id).status == "pending"
    assert wallet_balance(merchant=enabled_merchant, currency="XOF")[1] > 0

    after_any_call = started + timedelta(seconds=SUBMISSION_IN_FLIGHT_SECONDS)
    assert payments_fail_timed_out(now=after_any_call) == 1
    _assert_timed_out_and_released(enabled_api, enabled_merchant, payout_id)


def test_a_payout_submission_does_not_start_past_its_timeout(
    enabled_api, enabled_merchant, customer, settings
):
    fund(enabled_merchant, "20000")
    quote = create_quote(enabled_api, "payout")
    payout_id = enabled_api.post("/payouts", payout_body(quote, customer)).json()["id"]  # not sent
    due = Payout.objects.get(pk=payout_id).provider_timeout_at

    payout_submit(payout_id=payout_id, now=due)  # the sweep decides it now

    payout = Payout.objects.get(pk=payout_id)
    assert (payout.status, payout.submitted_at, payout.provider_reference) == ("pending", None, "")
    assert payments_fail_timed_out(now=due) == 1


def test_a_resubmission_started_just_before_the_timeout_keeps_the_payout_pending(
    enabled_api, enabled_merchant, customer, settings
):
    fund(enabled_merchant, "20000")
    quote = create_quote(enabled_api, "payout")
    payout_id = enabled_api.post("/payouts", payout_body(quote, customer)).json()["id"]
    due = Payout.objects.get(pk=payout_id).provider_timeout_at
    settings.PAYMENTS_PROVIDER_GATEWAY = DISBURSEMENTS_DOWN
    for started in (due - timedelta(minutes=30), due - timedelta(seconds=2)):  # a retry, late
        with pytest.raises(provider.ProviderUnavailable):
            payout_submit(payout_id=payout_id, now=started)

    # its last call may still reach the provider: it is not failed while that can be
    assert payments_fail_timed_out(now=due + timedelta(seconds=5)) == 0
    assert Payout.objects.get(pk=payout_id).status == "pending"
    window = timedelta(seconds=SUBMISSION_IN_FLIGHT_SECONDS)
    assert payments_fail_timed_out(now=due + window) == 1


@pytest.mark.parametrize("late", ["enqueue lost", "outage retries"])
def test_a_payin_submission_does_not_start_past_its_timeout(
    enabled_api, enabled_merchant, customer, settings, late
):
    """A submission past the payin's timeout (its enqueue lost and the sweep's resubmission
    behind a queue, or a provider outage's retries running past it) makes no provider call:
    the sweep fails the payin, and no payer is charged for a payin the merchant is told
    failed (no late "completed", no discrepancy for ops)."""
    quote = create_quote(enabled_api, "payin")
    payin_id = enabled_api.post("/payins", payin_body(quote, customer)).json()["id"]  # not sent
    due = Payin.objects.get(pk=payin_id).provider_timeout_at
    if late == "outage retries":
        settings.PAYMENTS_PROVIDER_GATEWAY = COLLECTIONS_DOWN
        with pytest.raises(provider.ProviderUnavailable):
            payin_submit(payin_id=payin_id, now=due - timedelta(minutes=30))
    before = Payin.objects.get(pk=payin_id)
    settings.PAYMENTS_PROVIDER_GATEWAY = COLLECTIONS_COUNTED
    CollectionsCountedGateway.calls.clear()

    payin_submit(payin_id=payin_id, now=due)  # the submit_payin task, late

    assert CollectionsCountedGateway.calls == []
    payin = Payin.objects.get(pk=payin_id)
    assert (payin.status, payin.submitted_at, payin.provider_reference) == (
        before.status,
        before.submitted_at,
        "",
    )
    assert payments_fail_timed_out(now=due) == 1
    body = enabled_api.get(f"/payins/{payin_id}").json()
    assert (body["status"], body["history"][-1]["reason"]) == ("failed", "provider_timeout")
    assert list(Event.objects.filter(data_id=payin_id).values_list("event_type", flat=True)) == [
        "payin.failed"
    ]
    assert not ProviderDiscrepancy.objects.exists()
    assert ledger_breaches() == []


def test_a_payin_whose_collection_may_be_in_flight_waits_then_times_out(
    enabled_api, customer, django_capture_on_commit_callbacks
):
    quote = create_quote(enabled_api, "payin")
    with django_capture_on_commit_callbacks(execute=True):
        payin_id = enabled_api.post("/payins", payin_body(quote, customer, SILENT_PHONE)).json()[
            "id"
        ]
    due = Payin.objects.get(pk=payin_id).provider_timeout_at
    # its provider call started just before the timeout and has not returned yet
    started = due - timedelta(seconds=5)
    Payin.objects.filter(pk=payin_id).update(provider_reference="", submitted_at=started)

    assert payments_fail_timed_out(now=due) == 0  # the payer may still be charged
    assert Payin.objects.get(pk=payin_id).status == "pending"

    after_any_call = started + timedelta(seconds=SUBMISSION_IN_FLIGHT_SECONDS)
    assert payments_fail_timed_out(now=after_any_call) == 1
    body = enabled_api.get(f"/payins/{payin_id}").json()
    assert (body["status"], body["history"][-1]["reason"]) == ("failed", "provider_timeout")


def test_a_resubmission_started_just_before_the_timeout_keeps_the_payin_pending(
    enabled_api, customer, settings
):
    quote = create_quote(enabled_api, "payin")
    payin_id = enabled_api.post("/payins", payin_body(quote, customer)).json()["id"]
    due = Payin.objects.get(pk=payin_id).provider_timeout_at
    settings.PAYMENTS_PROVIDER_GATEWAY = COLLECTIONS_DOWN
    for started in (due - timedelta(minutes=30), due - timedelta(seconds=2)):  # a retry, late
        with pytest.raises(provider.ProviderUnavailable):
            payin_submit(payin_id=payin_id, now=started)
    assert Payin.objects.get(pk=payin_id).submitted_at == due - timedelta(seconds=2)

    # its last call may still reach the provider: it is not failed while that can be
    assert payments_fail_timed_out(now=due + timedelta(seconds=5)) == 0
    assert Payin.objects.get(pk=payin_id).status == "pending"
    window = timedelta(seconds=SUBMISSION_IN_FLIGHT_SECONDS)
    assert payments_fail_timed_out(now=due + window) == 1


@sandbox_gateway("status-down")
class StatusDownGateway(SimulatorGateway):
    """The simulator, whose status calls cannot reach the provider (an outage)."""

    def transaction_status(self, **kwargs):
        raise provider.ProviderUnavailable("connection reset")


def test_a_provider_whose_status_is_down_is_one_line_a_run_without_a_traceback(
    enabled_api, customer, django_capture_on_commit_callbacks, settings, caplog
):
    ids = []
    for _ in range(2):
        quote = create_quote(enabled_api, "payin")
        with django_capture_on_commit_callbacks(execute=True):
            ids.append(
                enabled_api.post("/payins", payin_body(quote, customer, SILENT_PHONE)).json()["id"]
            )
    settings.PAYMENTS_PROVIDER_GATEWAY = "status-down"
    caplog.set_level("WARNING", logger="cowry.payments")
    overdue = timezone.now() + timedelta(seconds=ANSWER_EXPECTED_SECONDS + 1)

    assert payments_ask_provider(now=overdue) == 0

    [line] = [r for r in caplog.records if r.name == "cowry.payments"]
    assert line.exc_info is None
    assert line.getMessage().startswith(
        "Provider status unavailable (connection reset) for 2 overdue payment(s): "
    )
    assert set(ids) <= set(line.getMessage().split(": ")[1].split("; ")[0].split(", "))
    assert Payin.objects.filter(pk__in=ids, status="pending").count() == 2
