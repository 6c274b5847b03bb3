"""Orderings of provider answers, timeout sweeps, relaunches and quote expiry that meet on one
row: real threads on PostgreSQL, lined up behind a lock the test holds (tests/locks.py), so the
order they meet in is the one under test. Each asserts what the merchant sees: statuses,
balances, events and webhooks, the provider discrepancy support gets, a clean check_ledger."""

import threading
from datetime import timedelta
from decimal import Decimal

import pytest
from django.db import transaction
from django.utils import timezone

from merchants import services as merchant_services
from payments import provider
from payments.models import Payin, Payout, ProviderDiscrepancy
from payments.provider import sandbox_gateway
from payments.services.payouts import PayoutNotStuck, payout_mark_failed
from payments.services.sweeps import payments_fail_timed_out
from payments.services.transitions import PAYIN_CALLBACK, PAYOUT_CALLBACK
from quotes import services as quote_services
from quotes.models import Quote
from tests.locks import start, waiting_for_a_lock
from tests.payments.adjustments import adjust, balances, ledger_clean
from tests.payments.conftest import (
    SILENT_PHONE,
    create_customer,
    create_quote,
    fund,
    payin_body,
    payout_body,
)
from tests.support import MerchantClient
from tests.transfers import conftest as transfer_helpers
from transfers.models import Transfer
from transfers.services.submission import (
    COLLECTION_CALLBACK,
    DISBURSEMENT_CALLBACK,
    transfer_submit_collection,
)
from transfers.services.support import transfer_apply_provider_completion
from transfers.services.sweeps import transfers_fail_timed_out
from webhooks.models import Delivery, Event
from webhooks.services.endpoints import endpoint_set

pytestmark = pytest.mark.django_db(transaction=True)

CM_SILENT_PHONE = "+237670001999"


def _in_order(model, row_id, racers: dict, first: str | None = None) -> dict:
    """Run the racers (name -> callable), each in a thread of its own, lined up in the dict's
    order behind a lock on the row, the one named `first` (if any) ahead of the others; then
    let go. Their results (or the exception they raised) by name."""
    if first is not None:
        racers = {first: racers[first]} | racers
    results: dict = {}

    def named(name, work):
        def run():
            try:
                return name, work()
            except Exception as error:  # the test asserts on it
                return name, error

        return run

    collected: list = []
    threads = []
    with transaction.atomic():
        model.objects.select_for_update().get(pk=row_id)
        for count, (name, work) in enumerate(racers.items(), start=1):
            threads.append(start(named(name, work), collected))
            waiting_for_a_lock(count)
    for thread in threads:
        thread.join(timeout=60)
    results.update(collected)
    assert set(results) == set(racers), results
    return results


@pytest.fixture
def hooks(enabled_merchant, receiver, webhook_settings):
    """The merchant's webhook endpoint, a local receiver: the events it was sent."""
    endpoint_set(merchant=enabled_merchant, url=receiver.url, now=timezone.now())

    def sent(data_id) -> list[str]:
        return [
            r.headers["X-Cowry-Event"]
            for r in receiver.requests
            if f'"id": "{data_id}"' in r.body.decode() or str(data_id) in r.body.decode()
        ]

    return sent


def _due(model, row_id, field: str = "provider_timeout_at") -> None:
    """The row's provider timeout is over: the sweeps run on the real clock (the events they
    record are then due for delivery at once, as in production)."""
    model.objects.filter(pk=row_id).update(**{field: timezone.now() - timedelta(seconds=1)})


def _events(data_id) -> list[str]:
    return list(
        Event.objects.filter(data_id=data_id)
        .order_by("created_at")
        .values_list("event_type", flat=True)
    )


def _deliveries(data_id) -> list[str]:
    return sorted(
        Delivery.objects.filter(event__data_id=data_id).values_list("event__event_type", flat=True)
    )


# --- a payout's late completion racing the timeout sweep ---------------------------------------


@pytest.mark.parametrize("first", ["answer", "sweep"])
def test_a_payouts_late_completion_racing_the_timeout_sweep_settles_it_once(
    enabled_merchant, hooks, settings, first
):
    """The provider's "completed" arrives as the sweep, which asked and heard "still working",
    fails the payout for its timeout: whichever takes the payout's row first decides; the other
    changes no money. Completed first: paid, nothing to reconcile. Failed first: released, the
    answer is kept for support, and debit_wallet --discrepancy takes the payout back."""
    api = MerchantClient(enabled_merchant)
    fund(enabled_merchant, "20000")
    customer = create_customer(api)
    quote = create_quote(api, "payout")
    response = api.post("/payouts", payout_body(quote, customer, SILENT_PHONE))
    payout_id = response.json()["id"]
    payout = Payout.objects.get(pk=payout_id)
    assert (payout.status, bool(payout.provider_reference)) == ("pending", True)
    _due(Payout, payout_id)

    def answer():
        return provider.deliver_answer(
            callback=PAYOUT_CALLBACK,
            reference=payout_id,
            provider_reference=payout.provider_reference,
            outcome=provider.COMPLETED,
        )

    def sweep():
        return payments_fail_timed_out(now=timezone.now())

    results = _in_order(Payout, payout_id, {"answer": answer, "sweep": sweep}, first)

    body = api.get(f"/payouts/{payout_id}").json()
    assert results["answer"] is None
    if first == "answer":
        assert results["sweep"] == 0
        assert body["status"] == "completed"
        assert balances(api) == {"currency": "XOF", "available": "9800", "reserved": "0"}
        assert not ProviderDiscrepancy.objects.exists()
    else:
        assert results["sweep"] == 1
        assert (body["status"], body["history"][-1]["reason"]) == ("failed", "provider_timeout")
        assert balances(api) == {"currency": "XOF", "available": "20000", "reserved": "0"}
        discrepancy = ProviderDiscrepancy.objects.get()
        assert (discrepancy.resource_type, str(discrepancy.resource_id)) == ("payout", payout_id)
        assert (discrepancy.provider_outcome, discrepancy.our_status) == ("completed", "failed")
    assert [entry["status"] for entry in body["history"]] == ["pending", body["status"]]
    assert _events(payout_id) == [f"payout.{body['status']}"]
    assert _deliveries(payout_id) == [f"payout.{body['status']}"]
    assert hooks(payout_id) == [f"payout.{body['status']}"]
    ledger_clean()

    if first == "sweep":  # ops take back what the provider paid: the books agree again
        adjust("debit_wallet", enabled_merchant, "10200", "--discrepancy", str(discrepancy.id))
        assert balances(api) == {"currency": "XOF", "available": "9800", "reserved": "0"}
        ledger_clean()


@pytest.mark.parametrize("first", ["answer", "support"])
def test_support_marking_a_stuck_payout_failed_racing_its_completion_settles_it_once(
    enabled_merchant, hooks, first
):
    """Support marks a stuck payout failed (the provider said out of band it did not pay) as
    the provider's "completed" comes in. Completed first: support is refused, the payout is
    paid. Support first: the reservation is released once, the answer is kept for ops."""
    api = MerchantClient(enabled_merchant)
    fund(enabled_merchant, "20000")
    customer = create_customer(api)
    quote = create_quote(api, "payout")
    payout_id = api.post("/payouts", payout_body(quote, customer, SILENT_PHONE)).json()["id"]
    payout = Payout.objects.get(pk=payout_id)
    _due(Payout, payout_id)
    agent = merchant_services.staff_user_create(
        username="support-agent", password="pw-1-staff-login", support=True
    )

    def answer():
        return provider.deliver_answer(
            callback=PAYOUT_CALLBACK,
            reference=payout_id,
            provider_reference=payout.provider_reference,
            outcome=provider.COMPLETED,
        )

    def support():
        return payout_mark_failed(payout_id=payout_id, actor=agent, now=timezone.now())

    results = _in_order(Payout, payout_id, {"answer": answer, "support": support}, first)

    body = api.get(f"/payouts/{payout_id}").json()
    assert results["answer"] is None
    if first == "answer":
        assert isinstance(results["support"], PayoutNotStuck), results
        assert body["status"] == "completed"
        assert balances(api) == {"currency": "XOF", "available": "9800", "reserved": "0"}
        assert not ProviderDiscrepancy.objects.exists()
    else:
        assert (body["status"], body["history"][-1]["reason"]) == (
            "failed",
            "marked_failed_by_support",
        )
        assert balances(api) == {"currency": "XOF", "available": "20000", "reserved": "0"}
        discrepancy = ProviderDiscrepancy.objects.get()
        assert (discrepancy.provider_outcome, discrepancy.our_status) == ("completed", "failed")
    assert _events(payout_id) == [f"payout.{body['status']}"]
    assert hooks(payout_id) == [f"payout.{body['status']}"]
    ledger_clean()


# --- a payin's answer (one statement, no lock) racing the timeout sweep -------------------------


@pytest.mark.parametrize("first", ["answer", "sweep"])
def test_a_payins_answer_written_at_once_racing_the_timeout_sweep_has_one_outcome(
    enabled_merchant, hooks, settings, first
):
    """The answer takes no lock: its one statement is a compare-and-set on the payin. The sweep
    holding the payin first makes it write nothing; the answer then finds the payin failed and
    keeps itself for support, and credit_wallet --discrepancy pays the merchant."""
    api = MerchantClient(enabled_merchant)
    fund(enabled_merchant, "1")  # a wallet already: the answer takes its one-statement way
    customer = create_customer(api)
    response = api.post("/payins", payin_body(create_quote(api, "payin"), customer, SILENT_PHONE))
    payin_id = response.json()["id"]
    payin = Payin.objects.get(pk=payin_id)
    assert (payin.status, bool(payin.provider_reference)) == ("pending", True)
    _due(Payin, payin_id)

    def answer():
        return provider.deliver_answer(
            callback=PAYIN_CALLBACK,
            reference=payin_id,
            provider_reference=payin.provider_reference,
            outcome=provider.COMPLETED,
        )

    def sweep():
        return payments_fail_timed_out(now=timezone.now())

    results = _in_order(Payin, payin_id, {"answer": answer, "sweep": sweep}, first)

    body = api.get(f"/payins/{payin_id}").json()
    assert results["answer"] is None
    if first == "answer":
        assert results["sweep"] == 0
        assert body["status"] == "completed"
        assert balances(api)["available"] == "9851"
        assert not ProviderDiscrepancy.objects.exists()
    else:
        assert results["sweep"] == 1
        assert (body["status"], body["history"][-1]["reason"]) == ("failed", "provider_timeout")
        assert balances(api)["available"] == "1"
        discrepancy = ProviderDiscrepancy.objects.get()
        assert (discrepancy.resource_type, discrepancy.provider_outcome) == ("payin", "completed")
    assert [entry["status"] for entry in body["history"]] == ["created", "pending", body["status"]]
    assert _events(payin_id) == [f"payin.{body['status']}"]
    assert _deliveries(payin_id) == [f"payin.{body['status']}"]
    assert hooks(payin_id) == [f"payin.{body['status']}"]
    ledger_clean()

    if first == "sweep":
        adjust("credit_wallet", enabled_merchant, "9850", "--discrepancy", str(discrepancy.id))
        assert balances(api)["available"] == "9851"
        ledger_clean()


# --- a collection on its way to the provider when the sweep looks at its payin -----------------


@sandbox_gateway("sweep-during-collection")
class SweepDuringCollectionGateway:
    """The simulator, whose collection call is still on its way when the timeout sweep runs
    (the sweep runs inside the call), then answers "completed" in its receipt."""

    def __init__(self):
        from payments.provider.simulator import SimulatorGateway

        self.simulator = SimulatorGateway()

    def submit_collection(self, **kwargs):
        _due(Payin, kwargs["reference"])
        swept.append(payments_fail_timed_out(now=timezone.now()))
        receipt = self.simulator.transaction_status(
            kind=provider.COLLECTION, reference=kwargs["reference"], phone=kwargs["phone"]
        )
        return receipt

    def transaction_status(self, **kwargs):
        return self.simulator.transaction_status(**kwargs)


swept: list[int] = []


def test_a_payin_whose_collection_is_on_its_way_at_its_timeout_is_left_to_its_answer(
    enabled_merchant, hooks, settings
):
    """A collection call still on its way at the payin's timeout (no receipt, no reference,
    its start recorded a moment ago): the sweep leaves the payin pending, as it leaves a payout
    whose call may be in flight, rather than tell the merchant it failed while the payer may be
    charged. The receipt then says the payer paid: the payin completes, the merchant gets
    payin.completed once and its wallet the credit; nothing is left for ops."""
    settings.PAYMENTS_PROVIDER_GATEWAY = "sweep-during-collection"
    swept.clear()
    api = MerchantClient(enabled_merchant)
    customer = create_customer(api)
    response = api.post("/payins", payin_body(create_quote(api, "payin"), customer))
    payin_id = response.json()["id"]

    assert swept == [0]
    body = api.get(f"/payins/{payin_id}").json()
    assert [entry["status"] for entry in body["history"]] == ["created", "pending", "completed"]
    assert balances(api)["available"] == "9850"
    assert _events(payin_id) == ["payin.completed"]
    assert hooks(payin_id) == ["payin.completed"]
    assert not ProviderDiscrepancy.objects.exists()
    ledger_clean()


# --- a transfer's legs: late answers racing the timeout sweep ----------------------------------


def _transfer(api, **phones) -> Transfer:
    customer = transfer_helpers.create_customer(api, **transfer_helpers.SENDER_DETAILS)
    quote = transfer_helpers.create_quote(api, customer_id=customer["id"])
    response = api.post("/transfers", transfer_helpers.transfer_body(quote, customer, **phones))
    assert response.status_code == 201, response.json()
    return Transfer.objects.get(pk=response.json()["id"])


def _transfer_whose_collection_enqueue_is_lost(api, broker_down) -> Transfer:
    """A transfer created while the broker's Redis is stopped: the API answers 201, the
    collection's enqueue after commit fails, and the transfer waits, pending, for the sweep's
    resubmission (or the leg's timeout)."""
    with broker_down():
        transfer = _transfer(api)
    assert transfer.status == "pending"
    assert (transfer.collection_submitted_at, transfer.collection_reference) == (None, "")
    return transfer


def _suspense(transfer_id) -> Decimal:
    from payments.ledger.accounts import TRANSFER_SUSPENSE
    from payments.models import JournalLine

    lines = JournalLine.objects.filter(
        account__code=TRANSFER_SUSPENSE, journal__resource_id=transfer_id
    )
    return sum((line.amount for line in lines), Decimal(0))


@pytest.mark.parametrize("first", ["answer", "sweep"])
def test_a_collections_late_completion_racing_the_timeout_sweep_has_one_outcome(
    enabled_merchant, hooks, first
):
    api = MerchantClient(enabled_merchant)
    transfer = _transfer(api, payer_phone=CM_SILENT_PHONE)
    assert (transfer.status, bool(transfer.collection_reference)) == ("collecting", True)
    _due(Transfer, transfer.id, "leg_timeout_at")

    def answer():
        return provider.deliver_answer(
            callback=COLLECTION_CALLBACK,
            reference=str(transfer.id),
            provider_reference=transfer.collection_reference,
            outcome=provider.COMPLETED,
        )

    def sweep():
        return transfers_fail_timed_out(now=timezone.now())

    results = _in_order(Transfer, transfer.id, {"answer": answer, "sweep": sweep}, first)

    body = api.get(f"/transfers/{transfer.id}").json()
    assert results["answer"] is None
    if first == "answer":  # collected, then disbursed to the recipient
        assert results["sweep"] == 0
        assert (body["status"], body["payin_status"], body["payout_status"]) == (
            "completed",
            "completed",
            "completed",
        )
        expected = [
            "transfer.payin.completed",
            "transfer.payout.completed",
            "transfer.completed",
        ]
        assert not ProviderDiscrepancy.objects.exists()
    else:
        assert results["sweep"] == 1
        assert (body["status"], body["payin_status"], body["payout_status"]) == (
            "failed",
            "failed",
            "cancelled",
        )
        expected = ["transfer.payin.failed", "transfer.failed"]
        discrepancy = ProviderDiscrepancy.objects.get()
        assert (discrepancy.resource_type, discrepancy.provider_outcome) == (
            "transfer_collection",
            "completed",
        )
    assert _events(transfer.id) == expected
    assert sorted(hooks(transfer.id)) == sorted(expected)
    assert _suspense(transfer.id) == 0
    ledger_clean()

    if first == "sweep":  # what the payer paid goes to the merchant, once
        adjust(
            "credit_wallet",
            enabled_merchant,
            "10000",
            "--discrepancy",
            str(discrepancy.id),
            currency="XAF",
        )
        assert balances(api, "XAF")["available"] == "10000"
        ledger_clean()


@pytest.mark.parametrize("first", ["answer", "sweep"])
def test_a_disbursements_late_completion_racing_the_timeout_sweep_pays_the_recipient_once(
    enabled_merchant, hooks, first
):
    """Completed first: the transfer completes. Failed first: the money stays in suspense, the
    answer blocks a relaunch (the recipient has the money), and support applies the completion:
    the transfer completes as the answer would have completed it."""
    api = MerchantClient(enabled_merchant)
    transfer = _transfer(api, recipient_phone=transfer_helpers.SN_SILENT)
    assert (transfer.status, bool(transfer.disbursement_reference)) == ("disbursing", True)
    _due(Transfer, transfer.id, "leg_timeout_at")

    def answer():
        return provider.deliver_answer(
            callback=DISBURSEMENT_CALLBACK,
            reference=f"{transfer.id}:1",
            provider_reference=transfer.disbursement_reference,
            outcome=provider.COMPLETED,
        )

    def sweep():
        return transfers_fail_timed_out(now=timezone.now())

    results = _in_order(Transfer, transfer.id, {"answer": answer, "sweep": sweep}, first)

    body = api.get(f"/transfers/{transfer.id}").json()
    assert results["answer"] is None
    completed = ["transfer.payin.completed", "transfer.payout.completed", "transfer.completed"]
    if first == "answer":
        assert results["sweep"] == 0
        assert body["status"] == "completed"
        assert _events(transfer.id) == completed
        assert not ProviderDiscrepancy.objects.exists()
        assert _suspense(transfer.id) == 0
        ledger_clean()
        return
    assert results["sweep"] == 1
    assert (body["status"], body["payin_status"], body["payout_status"]) == (
        "failed",
        "completed",
        "failed",
    )
    assert _events(transfer.id) == ["transfer.payin.completed", "transfer.payout.failed"]
    assert sorted(hooks(transfer.id)) == sorted(_events(transfer.id))
    assert _suspense(transfer.id) == transfer.payin_amount
    discrepancy = ProviderDiscrepancy.objects.get()
    assert (discrepancy.resource_type, discrepancy.reference) == (
        "transfer_disbursement",
        f"{transfer.id}:1",
    )
    ledger_clean()

    relaunch = api.post(f"/transfers/{transfer.id}/relaunch-payout", None)
    assert (relaunch.status_code, relaunch.json()["error"]["reason"]) == (
        409,
        "transfer_not_relaunchable",
    )
    agent = merchant_services.staff_user_create(
        username="support-agent", password="pw-1-staff-login", support=True
    )
    transfer_apply_provider_completion(
        discrepancy_id=discrepancy.id, actor=agent, now=timezone.now()
    )
    body = api.get(f"/transfers/{transfer.id}").json()
    assert body["status"] == "completed"
    assert _events(transfer.id) == [
        "transfer.payin.completed",
        "transfer.payout.failed",
        "transfer.payout.completed",
        "transfer.completed",
    ]
    assert _suspense(transfer.id) == 0
    ledger_clean()


@sandbox_gateway("collection-on-its-way")
class CollectionOnItsWayGateway:
    """The simulator, whose collection call is still on its way until the timeout sweep has
    run (`sweep_done`)."""

    sweep_done = threading.Event()
    calls: list[str] = []

    def __init__(self):
        from payments.provider.simulator import SimulatorGateway

        self.simulator = SimulatorGateway()

    def submit_collection(self, **kwargs):
        self.calls.append(kwargs["reference"])
        assert self.sweep_done.wait(timeout=30)
        return self.simulator.submit_collection(**kwargs)

    def submit_disbursement(self, **kwargs):
        return self.simulator.submit_disbursement(**kwargs)

    def transaction_status(self, **kwargs):
        return self.simulator.transaction_status(**kwargs)


@pytest.mark.parametrize("submission", ["in time", "late"])
def test_a_transfer_whose_collection_is_submitted_while_the_sweep_looks_has_one_outcome(
    enabled_merchant, hooks, settings, broker_down, submission
):
    """The collection's submission started just before the leg's timeout (in time) or after it
    (late: a lost enqueue, a queue an hour behind), and the sweep reads the transfer pending
    past its timeout. In time, the submission holds the transfer's row first: it moves it to
    collecting (a fresh leg timeout) and calls the provider, and the sweep must not fail a leg
    that changed since it read it: the provider collects the payer's money and the transfer
    goes on. Late: no call starts past the leg's timeout, and the sweep fails the transfer
    cleanly: no payer charged for a transfer.failed, nothing for ops."""
    from transfers import tasks as transfer_tasks

    api = MerchantClient(enabled_merchant)
    transfer = _transfer_whose_collection_enqueue_is_lost(api, broker_down)
    _due(Transfer, transfer.id, "leg_timeout_at")
    due = Transfer.objects.get(pk=transfer.id).leg_timeout_at
    settings.PAYMENTS_PROVIDER_GATEWAY = "collection-on-its-way"
    CollectionOnItsWayGateway.sweep_done.clear()
    CollectionOnItsWayGateway.calls.clear()

    def submit():
        if submission == "in time":  # the task's clock read just before the timeout
            return transfer_submit_collection(
                transfer_id=transfer.id, now=due - timedelta(milliseconds=1)
            )
        return transfer_tasks.submit_transfer_collection.delay(transfer_id=str(transfer.id))

    def sweep():
        try:
            return transfers_fail_timed_out(now=timezone.now())
        finally:
            CollectionOnItsWayGateway.sweep_done.set()

    if submission == "in time":
        # the submission takes the transfer first; the sweep read it pending while it waited
        results = _in_order(Transfer, transfer.id, {"submission": submit, "sweep": sweep})
    else:  # it looks at the transfer's timeout and goes no further: no lock to line up behind
        results = {"submission": submit(), "sweep": sweep()}

    body = api.get(f"/transfers/{transfer.id}").json()
    if submission == "in time":
        assert results["sweep"] == 0
        assert CollectionOnItsWayGateway.calls == [str(transfer.id)]
        assert (body["status"], body["payin_status"], body["payout_status"]) == (
            "completed",
            "completed",
            "completed",
        )
        expected = ["transfer.payin.completed", "transfer.payout.completed", "transfer.completed"]
    else:
        assert results["sweep"] == 1
        assert CollectionOnItsWayGateway.calls == []
        assert (body["status"], body["payin_status"], body["payout_status"]) == (
            "failed",
            "failed",
            "cancelled",
        )
        failed = Transfer.objects.get(pk=transfer.id)
        assert (failed.collection_submitted_at, failed.collection_reference) == (None, "")
        expected = ["transfer.payin.failed", "transfer.failed"]
    assert _events(transfer.id) == expected
    assert sorted(hooks(transfer.id)) == sorted(expected)
    assert not ProviderDiscrepancy.objects.exists()
    assert _suspense(transfer.id) == 0
    ledger_clean()


def test_a_collection_submission_that_finds_the_sweep_has_failed_its_transfer_stands_down(
    enabled_merchant, hooks, settings, broker_down, caplog
):
    """The submission read the transfer pending just before its leg's timeout, and the sweep,
    which read it past its timeout, takes the transfer's row first and fails it. The
    submission then finds a transfer it can no longer submit: it calls no provider and ends
    quietly, the task done (it used to raise InvalidTransition, an error in the
    worker's log for ops and a task failure for a transfer that had ended as it should)."""
    api = MerchantClient(enabled_merchant)
    transfer = _transfer_whose_collection_enqueue_is_lost(api, broker_down)
    caplog.clear()  # the lost enqueue's warning; the race below must log no error
    _due(Transfer, transfer.id, "leg_timeout_at")
    due = Transfer.objects.get(pk=transfer.id).leg_timeout_at
    settings.PAYMENTS_PROVIDER_GATEWAY = "collection-on-its-way"
    CollectionOnItsWayGateway.sweep_done.set()  # a call, if one were made, would go through
    CollectionOnItsWayGateway.calls.clear()

    def submit():
        return transfer_submit_collection(
            transfer_id=transfer.id, now=due - timedelta(milliseconds=1)
        )

    def sweep():
        return transfers_fail_timed_out(now=timezone.now())

    with caplog.at_level("WARNING"):
        results = _in_order(
            Transfer, transfer.id, {"sweep": sweep, "submission": submit}, first="sweep"
        )

    assert results["sweep"] == 1
    assert isinstance(results["submission"], Transfer), results["submission"]
    assert results["submission"].status == "failed"
    assert CollectionOnItsWayGateway.calls == []
    body = api.get(f"/transfers/{transfer.id}").json()
    assert (body["status"], body["payin_status"], body["payout_status"]) == (
        "failed",
        "failed",
        "cancelled",
    )
    assert _events(transfer.id) == ["transfer.payin.failed", "transfer.failed"]
    assert sorted(hooks(transfer.id)) == ["transfer.failed", "transfer.payin.failed"]
    assert not [r for r in caplog.records if r.levelname in ("ERROR", "CRITICAL")]
    assert _suspense(transfer.id) == 0
    ledger_clean()


@pytest.mark.parametrize("first", ["relaunch", "answer"])
def test_a_relaunch_racing_the_previous_attempts_late_completion_is_kept_for_support(
    enabled_merchant, first
):
    """Attempt 1 was declined; a relaunch (to a recipient the provider is slow to pay) and a
    late "completed" for attempt 1 meet on the transfer. Relaunch first: attempt 2 is on its way,
    attempt 1's answer is superseded and kept for support. Answer first: the relaunch is refused
    (the recipient may have the money) and nothing more leaves suspense."""
    api = MerchantClient(enabled_merchant)
    transfer = _transfer(api, recipient_phone="+221770001000")
    assert (transfer.status, transfer.payout_status) == ("failed", "failed")

    def answer():
        return provider.deliver_answer(
            callback=DISBURSEMENT_CALLBACK,
            reference=f"{transfer.id}:1",
            provider_reference="SIM-attempt-1",
            outcome=provider.COMPLETED,
        )

    def relaunch():
        client = MerchantClient(enabled_merchant)
        recipient = {
            "recipient_type": "individual",
            "first_name": "Moussa",
            "last_name": "Ndiaye",
            "phone": transfer_helpers.SN_SILENT,
        }
        response = client.post(
            f"/transfers/{transfer.id}/relaunch-payout", {"recipient": recipient}
        )
        return response.status_code, response.json()

    results = _in_order(Transfer, transfer.id, {"relaunch": relaunch, "answer": answer}, first)

    body = api.get(f"/transfers/{transfer.id}").json()
    discrepancy = ProviderDiscrepancy.objects.get()
    assert (discrepancy.reference, discrepancy.provider_outcome) == (
        f"{transfer.id}:1",
        "completed",
    )
    if first == "relaunch":
        assert results["relaunch"][0] == 202, results
        assert (body["status"], body["execution"]["disbursement_attempt"]) == ("disbursing", 2)
        assert discrepancy.our_status == "superseded"
    else:
        status, refusal = results["relaunch"]
        assert (status, refusal["error"]["reason"]) == (409, "transfer_not_relaunchable")
        assert (body["status"], body["execution"]["disbursement_attempt"]) == ("failed", 1)
        assert discrepancy.our_status == "failed"
    assert _events(transfer.id) == ["transfer.payin.completed", "transfer.payout.failed"]
    assert _suspense(transfer.id) == transfer.payin_amount
    ledger_clean()


# --- the quote expiry sweep racing a consumption --------------------------------------------


@pytest.mark.parametrize("flow", ["payin", "payout"])
@pytest.mark.parametrize("first", ["payment", "sweep"])
def test_the_quote_expiry_sweep_racing_a_payment_for_the_quote_has_one_winner(
    enabled_merchant, flow, first
):
    """A payment checked its quote just before expiry; the sweep, whose clock passed it, expires
    it at the same moment. Payment first: created, the quote consumed, the sweep leaves it.
    Sweep first: the payment is a 400 quote_expired and nothing moved."""
    api = MerchantClient(enabled_merchant)
    fund(enabled_merchant, "20000")
    customer = create_customer(api)
    quote = create_quote(api, flow)
    expires_at = Quote.objects.get(pk=quote["id"]).expires_at
    body_of = payin_body if flow == "payin" else payout_body

    def pay():
        response = MerchantClient(enabled_merchant).post(
            f"/{flow}s", body_of(quote, customer, SILENT_PHONE)
        )
        return response.status_code, response.json()

    def sweep():
        return quote_services.quotes_expire(now=expires_at + timedelta(seconds=1))

    results = _in_order(Quote, quote["id"], {"payment": pay, "sweep": sweep}, first)

    model = Payin if flow == "payin" else Payout
    status, response = results["payment"]
    if first == "payment":
        assert status == 201, response
        assert results["sweep"] == 0
        assert Quote.objects.get(pk=quote["id"]).status == "consumed"
        assert model.objects.count() == 1
        reserved = "10200" if flow == "payout" else "0"
        assert balances(api)["reserved"] == reserved
    else:
        assert (status, response["error"]["reason"]) == (400, "quote_expired"), response
        assert results["sweep"] == 1
        assert Quote.objects.get(pk=quote["id"]).status == "expired"
        assert not model.objects.exists()
        assert balances(api) == {"currency": "XOF", "available": "20000", "reserved": "0"}
    ledger_clean()
