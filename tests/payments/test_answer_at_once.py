"""A provider's answer for a pending payin is applied by a compare-and-set: the payin read,
then everything its final status writes in one statement, only while the payin is as read.
What it writes must be what the locked transition writes, and racing answers (for one payin,
or for many payins of one wallet) must leave one outcome each and a balanced ledger."""

import contextlib
import uuid
from decimal import Decimal

import pytest
from django.core.cache import cache
from django.db import connection
from django.utils import timezone

from config.celery import app
from payments import ledger, provider, selectors, services
from payments.models import Journal, Payin, PayinStatus, ProviderDiscrepancy
from tests.payments.conftest import SILENT_PHONE, create_customer, create_quote, fund, payin_body
from tests.payments.test_concurrency import _run_together
from tests.support import MerchantClient
from webhooks import services as webhook_services
from webhooks.models import Delivery, Event

pytestmark = pytest.mark.django_db(transaction=True)


@contextlib.contextmanager
def _webhooks_queued():
    """The deliveries' tasks go to the broker, where no worker takes them, instead of running
    here: the count is of the answer's statements, not of the webhooks sent after commit."""
    app.conf.task_always_eager = False
    try:
        yield
    finally:
        app.conf.task_always_eager = True
        with app.connection_for_write() as connection_to_broker:
            connection_to_broker.default_channel.queue_purge("webhooks")


if connection.vendor != "postgresql":
    pytest.skip("the compare-and-set statement is PostgreSQL's", allow_module_level=True)


def _pending_payins(api, customer, count: int) -> list[str]:
    """Payins the provider took and never answers: pending, waiting for an answer."""
    ids = [
        api.post("/payins", payin_body(create_quote(api, "payin"), customer, SILENT_PHONE)).json()[
            "id"
        ]
        for _ in range(count)
    ]
    assert set(Payin.objects.filter(pk__in=ids).values_list("status", flat=True)) == {"pending"}
    return ids


def _answer(payin_id: str, outcome: str = provider.COMPLETED, reason: str = "") -> None:
    provider.deliver_answer(
        callback=services.PAYIN_CALLBACK,
        reference=payin_id,
        provider_reference="SIM-answer",
        outcome=outcome,
        reason=reason,
    )


def _written(payin_id: str) -> dict:
    """Everything a payin's final status wrote, without keys or times that differ anyway."""
    payin = Payin.objects.get(pk=payin_id)
    (journal,) = Journal.objects.filter(resource_type="payin", resource_id=payin.pk) or [None]
    (event,) = Event.objects.filter(data_id=payin.pk)
    payload = event.payload
    return {
        "status": payin.status,
        "reference_kept": payin.provider_reference.startswith("SIM-"),  # the submission's
        "final_at_set": (payin.completed_at or payin.failed_at) == payin.updated_at,
        "failure_reason": payin.failure_reason,
        "history": list(payin.history.values_list("status", "reason")),
        "journal": journal
        and (
            journal.kind,
            journal.currency,
            sorted((line.account.code, line.amount) for line in journal.lines.all()),
        ),
        "event": (event.event_type, payload["data"]["type"], sorted(payload["data"]["object"])),
        "object_status": payload["data"]["object"]["status"],
        "deliveries": list(Delivery.objects.filter(event=event).values_list("status", "attempts")),
    }


@pytest.mark.parametrize(
    ("outcome", "reason"), [(provider.COMPLETED, ""), (provider.FAILED, "provider_declined")]
)
def test_an_answer_writes_in_one_statement_what_the_locked_transition_writes(
    enabled_merchant, receiver, webhook_settings, django_assert_num_queries, outcome, reason
):
    webhook_services.endpoint_set(merchant=enabled_merchant, url=receiver.url, now=timezone.now())
    api = MerchantClient(enabled_merchant)
    fund(enabled_merchant, "1000")  # the wallet exists: the compare-and-set's case
    locked, at_once = _pending_payins(api, create_customer(api), 2)
    before, _ = selectors.wallet_balance(merchant=enabled_merchant, currency="XOF")

    with _webhooks_queued():
        services.payin_transition(payin_id=locked, to=outcome, reason=reason, at=timezone.now())
    # the read, the statement, then the read of its deliveries to hand them out after commit
    with _webhooks_queued(), django_assert_num_queries(3):
        assert services._payin_finished_at_once(
            payin_id=uuid.UUID(at_once),
            to=outcome,
            reason=reason,
            at=timezone.now(),
            provider_reference="SIM-answer",
        )

    written = _written(at_once)
    assert written == _written(locked)
    assert (written["status"], written["object_status"]) == (outcome, outcome)
    assert written["deliveries"] == [("pending", 0)]
    credited = Decimal(0) if outcome == provider.FAILED else 2 * Decimal("9850")
    assert selectors.wallet_balance(merchant=enabled_merchant, currency="XOF")[0] == (
        before + credited
    )
    assert ledger.ledger_breaches() == []


def test_an_answer_for_a_payin_no_longer_pending_writes_nothing_and_defers(enabled_merchant):
    api = MerchantClient(enabled_merchant)
    fund(enabled_merchant, "1000")
    (payin_id,) = _pending_payins(api, create_customer(api), 1)
    _answer(payin_id)
    written = _written(payin_id)

    assert not services._payin_finished_at_once(
        payin_id=uuid.UUID(payin_id),
        to=PayinStatus.FAILED,
        reason="provider_declined",
        at=timezone.now(),
        provider_reference="SIM-other",
    )
    assert _written(payin_id) == written


def test_the_first_answer_of_a_merchant_without_a_wallet_takes_the_locked_way(enabled_merchant):
    api = MerchantClient(enabled_merchant)
    (payin_id,) = _pending_payins(api, create_customer(api), 1)

    assert not services._payin_finished_at_once(
        payin_id=uuid.UUID(payin_id),
        to=PayinStatus.COMPLETED,
        reason="",
        at=timezone.now(),
        provider_reference="SIM-answer",
    )
    _answer(payin_id)  # post_journal creates the wallet under its lock

    assert Payin.objects.get(pk=payin_id).status == "completed"
    assert selectors.wallet_balance(merchant=enabled_merchant, currency="XOF")[0] == Decimal("9850")
    assert ledger.ledger_breaches() == []


def test_racing_answers_for_one_payin_leave_one_outcome(enabled_merchant):
    api = MerchantClient(enabled_merchant)
    fund(enabled_merchant, "1000")
    (payin_id,) = _pending_payins(api, create_customer(api), 1)

    _run_together(
        lambda i: _answer(
            payin_id,
            provider.COMPLETED if i % 2 == 0 else provider.FAILED,
            "" if i % 2 == 0 else "provider_declined",
        ),
        6,
    )

    payin = Payin.objects.get(pk=payin_id)
    assert payin.status in ("completed", "failed")
    assert list(payin.history.values_list("status", flat=True)) == [
        "created",
        "pending",
        payin.status,
    ]
    assert Event.objects.filter(data_id=payin.pk).count() == 1
    credited = Decimal("9850") if payin.status == "completed" else Decimal(0)
    available, _ = selectors.wallet_balance(merchant=enabled_merchant, currency="XOF")
    assert available == Decimal("1000") + credited
    assert ledger.ledger_breaches() == []


def test_racing_answers_for_payins_of_one_wallet_credit_it_with_each(enabled_merchant):
    api = MerchantClient(enabled_merchant)
    fund(enabled_merchant, "1000")
    payin_ids = _pending_payins(api, create_customer(api), 8)

    _run_together(lambda i: _answer(payin_ids[i]), 8)

    assert Payin.objects.filter(pk__in=payin_ids, status="completed").count() == 8
    available, _ = selectors.wallet_balance(merchant=enabled_merchant, currency="XOF")
    assert available == Decimal("1000") + 8 * Decimal("9850")
    assert ledger.ledger_breaches() == []


def _claimed_payin(api, customer) -> Payin:
    """A payin created while a submitter is "busy", then claimed as a submitter claims it:
    pending, with its wallet's id, not yet sent to the provider."""
    cache.set(services.SUBMITTER_WAKE_KEY, 1, timeout=60)
    payin_id = api.post("/payins", payin_body(create_quote(api, "payin"), customer)).json()["id"]
    (claimed,) = services._submission_claim(now=timezone.now())
    assert (str(claimed.pk), claimed.status) == (payin_id, "pending")
    assert claimed.provider_reference == ""
    return claimed


@pytest.fixture
def instant_provider(settings):
    settings.PROVIDER_SIMULATION_DELAY_SECONDS = 0  # the simulator answers in its receipt


def test_an_answer_in_the_receipt_is_written_in_one_statement_without_a_second_read(
    enabled_merchant, receiver, webhook_settings, instant_provider, django_assert_num_queries
):
    webhook_services.endpoint_set(merchant=enabled_merchant, url=receiver.url, now=timezone.now())
    api = MerchantClient(enabled_merchant)
    customer = create_customer(api)
    fund(enabled_merchant, "1000")
    called_back = _pending_payins(api, customer, 1)[0]
    with _webhooks_queued():
        _answer(called_back)  # the callback's way, for comparison
    claimed = _claimed_payin(api, customer)

    # no read of the payin, no separate reference update; the deliveries read after commit
    with _webhooks_queued(), django_assert_num_queries(2):
        services._payin_send(claimed, now=timezone.now())

    written = _written(str(claimed.pk))
    assert written == {**_written(called_back), "history": written["history"]}
    assert written["history"] == [
        ("created", ""),
        ("pending", services.REASON_SUBMITTED),
        ("completed", ""),
    ]
    assert written["deliveries"] == [("pending", 0)]
    payin = Payin.objects.get(pk=claimed.pk)
    assert (
        payin.provider_reference
        == provider.gateway()
        .submit_collection(
            reference=str(payin.pk),
            amount=payin.send_amount,
            currency=payin.send_currency,
            operator_code=payin.operator_code,
            phone=payin.source["phone"],
            callback=services.PAYIN_CALLBACK,
        )
        .provider_reference
    )
    available, _ = selectors.wallet_balance(merchant=enabled_merchant, currency="XOF")
    assert available == Decimal("1000") + 2 * Decimal("9850")
    assert ledger.ledger_breaches() == []


def test_an_answer_in_the_receipt_for_a_payin_changed_since_its_claim_goes_the_callbacks_way(
    enabled_merchant, instant_provider
):
    api = MerchantClient(enabled_merchant)
    fund(enabled_merchant, "1000")
    claimed = _claimed_payin(api, create_customer(api))
    services.payin_transition(  # the timeout sweep got there between claim and answer
        payin_id=claimed.pk,
        to=PayinStatus.FAILED,
        reason=services.REASON_PROVIDER_TIMEOUT,
        at=timezone.now(),
    )

    services._payin_send(claimed, now=timezone.now())

    payin = Payin.objects.get(pk=claimed.pk)
    assert (payin.status, payin.failure_reason) == ("failed", services.REASON_PROVIDER_TIMEOUT)
    assert not Journal.objects.filter(resource_type="payin", resource_id=payin.pk).exists()
    assert list(Event.objects.filter(data_id=payin.pk).values_list("event_type", flat=True)) == [
        "payin.failed"
    ]
    # the provider's contradicting answer is kept for reconciliation, as a late callback's is
    assert ProviderDiscrepancy.objects.filter(
        resource_id=payin.pk, provider_outcome="completed", our_status="failed"
    ).exists()
    assert selectors.wallet_balance(merchant=enabled_merchant, currency="XOF")[0] == Decimal("1000")
    assert ledger.ledger_breaches() == []


def test_an_answer_in_the_receipt_before_the_merchants_first_wallet_takes_the_locked_way(
    enabled_merchant, instant_provider
):
    api = MerchantClient(enabled_merchant)
    claimed = _claimed_payin(api, create_customer(api))
    assert claimed.wallet_id is None

    services._payin_send(claimed, now=timezone.now())  # post_journal creates the wallet

    assert Payin.objects.get(pk=claimed.pk).status == "completed"
    assert selectors.wallet_balance(merchant=enabled_merchant, currency="XOF")[0] == Decimal("9850")
    assert ledger.ledger_breaches() == []
