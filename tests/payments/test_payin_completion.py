"""What a payin's completion (PAYIN_COMPLETION, one statement) writes: the status and its
history row, the journal and its lines, the wallet's credit, the event and a delivery per
subscribed endpoint; and that it writes nothing when the wallet cannot take the credit."""

import json
from decimal import Decimal

import pytest
import redis
from django.utils import timezone

from core import money
from payments.ledger.journals import BalanceOutOfRange
from payments.models import Journal, Payin, Wallet
from payments.services import payins
from payments.services.submission import payin_submit
from payments.tasks import submit_payin
from tests.faults.conftest import (  # noqa: F401 - the broker's Redis, private to the test
    _eager_off,
    isolated_broker,
    private_redis,
)
from tests.payments.conftest import create_quote, payin_body
from tests.support import wallet_balance
from webhooks.models import Delivery, Event, WebhookEndpoint
from webhooks.services.endpoints import endpoint_add
from webhooks.services.events import _hand_off

pytestmark = pytest.mark.django_db


def _pending_payin(api, customer) -> Payin:
    """A payin moved to pending, its answer not applied yet (the provider answers later)."""
    quote = create_quote(api, "payin", customer_id=customer["id"])
    payin_id = api.post("/payins", payin_body(quote, customer)).json()["id"]
    payin = Payin.objects.get(pk=payin_id)
    payins.payin_transition(payin_id=payin.id, to="pending", at=timezone.now())
    return payin


def _endpoints(merchant, receiver_url: str) -> dict[str, WebhookEndpoint]:
    now = timezone.now()
    every, _ = endpoint_add(merchant=merchant, url=receiver_url, now=now)
    payouts_only, _ = endpoint_add(
        merchant=merchant, url=receiver_url, event_types=["payout.completed"], now=now
    )
    disabled, _ = endpoint_add(merchant=merchant, url=receiver_url, now=now)
    WebhookEndpoint.objects.filter(pk=disabled.pk).update(enabled=False)
    return {"every": every, "payouts_only": payouts_only, "disabled": disabled}


def test_a_completion_writes_status_history_journal_wallet_event_and_deliveries(
    enabled_api, enabled_merchant, customer, django_capture_on_commit_callbacks
):
    endpoints = _endpoints(enabled_merchant, "https://hooks.example.com/cowry")
    payin = _pending_payin(enabled_api, customer)
    before, _ = wallet_balance(merchant=enabled_merchant, currency="XOF")
    at = timezone.now()

    with django_capture_on_commit_callbacks() as callbacks:
        payins.payin_transition(
            payin_id=payin.id, to="completed", at=at, provider_reference="SIM-0123456789abcdef0123"
        )

    payin.refresh_from_db()
    assert payin.status == "completed"
    assert payin.completed_at == payin.updated_at == at
    assert payin.provider_reference == "SIM-0123456789abcdef0123"
    history = list(payin.history.values_list("status", "reason", "created_at"))
    assert history[-1] == ("completed", "", at)
    assert [status for status, _, _ in history] == ["created", "pending", "completed"]

    journal = Journal.objects.get(resource_type="payin", resource_id=payin.id)
    assert (journal.kind, journal.merchant_id, journal.currency, journal.memo) == (
        "payin_completed",
        enabled_merchant.id,
        "XOF",
        "",
    )
    assert journal.created_at == at
    lines = {line.account.code: line.amount for line in journal.lines.select_related("account")}
    assert lines == {
        "provider_clearing:SN_ORANGE_MOMO": Decimal("-10000"),
        "merchant_available": Decimal("9850"),
        "fee_revenue": Decimal("150"),
    }
    assert wallet_balance(merchant=enabled_merchant, currency="XOF")[0] == before + Decimal("9850")

    event = Event.objects.get(data_id=payin.id)
    assert (event.event_type, event.data_type, event.created_at) == ("payin.completed", "payin", at)
    assert json.loads(event.body) == event.payload  # the body as sent, the payload as jsonb
    obj = event.payload["data"]["object"]
    assert obj["status"] == "completed"
    assert obj["provider_reference"] == "SIM-0123456789abcdef0123"
    got = enabled_api.get(f"/payins/{payin.id}").json()
    assert obj["completed_at"] == got["history"][-1]["created_at"]
    assert obj["receive_amount"] == got["receive_amount"] == "9850"

    deliveries = list(Delivery.objects.filter(event=event))
    assert [d.endpoint_id for d in deliveries] == [endpoints["every"].id]
    (delivery,) = deliveries
    assert (delivery.status, delivery.attempts, delivery.next_attempt_at) == ("pending", 0, at)
    assert delivery.dispatched_at == delivery.created_at == at
    handed_off = [c.args for c in callbacks if getattr(c, "func", None) is _hand_off]
    assert handed_off == [(delivery.id,)]  # to a worker, after commit


def test_the_first_completion_in_a_currency_creates_the_wallet(
    enabled_api, enabled_merchant, customer
):
    Wallet.objects.filter(merchant=enabled_merchant).delete()
    payin = _pending_payin(enabled_api, customer)

    payins.payin_transition(payin_id=payin.id, to="completed", at=timezone.now())

    assert wallet_balance(merchant=enabled_merchant, currency="XOF") == (Decimal("9850"), 0)
    assert Payin.objects.get(pk=payin.id).status == "completed"


def test_a_credit_past_the_wallets_ceiling_writes_nothing(enabled_api, enabled_merchant, customer):
    payin = _pending_payin(enabled_api, customer)
    nearly_full = money.AMOUNT_CEILING - Decimal("100")
    Wallet.objects.update_or_create(
        merchant=enabled_merchant, currency="XOF", defaults={"available": nearly_full}
    )

    with pytest.raises(BalanceOutOfRange):
        payins.payin_transition(payin_id=payin.id, to="completed", at=timezone.now())

    assert Payin.objects.get(pk=payin.id).status == "pending"
    assert list(Payin.objects.get(pk=payin.id).history.values_list("status", flat=True)) == [
        "created",
        "pending",
    ]
    assert not Journal.objects.filter(resource_id=payin.id).exists()
    assert not Event.objects.filter(data_id=payin.id).exists()
    assert wallet_balance(merchant=enabled_merchant, currency="XOF")[0] == nearly_full


def test_a_repeated_answer_changes_nothing(enabled_api, enabled_merchant, customer):
    payin = _pending_payin(enabled_api, customer)
    payins.payin_transition(payin_id=payin.id, to="completed", at=timezone.now())
    balance = wallet_balance(merchant=enabled_merchant, currency="XOF")

    payins.payin_apply_provider_result(
        reference=str(payin.id),
        provider_reference="SIM-other",
        outcome="completed",
        reason="",
        at=timezone.now(),
    )

    assert Journal.objects.filter(resource_id=payin.id).count() == 1
    assert Event.objects.filter(data_id=payin.id).count() == 1
    assert wallet_balance(merchant=enabled_merchant, currency="XOF") == balance


def test_the_submission_completes_a_payin_the_provider_answers_at_once(
    enabled_api, enabled_merchant, customer, settings
):
    settings.PROVIDER_SIMULATION_DELAY_SECONDS = 0
    quote = create_quote(enabled_api, "payin", customer_id=customer["id"])
    payin_id = enabled_api.post("/payins", payin_body(quote, customer)).json()["id"]

    payin_submit(payin_id=payin_id, now=timezone.now())

    assert enabled_api.get(f"/payins/{payin_id}").json()["status"] == "completed"
    assert Journal.objects.filter(resource_id=payin_id, kind="payin_completed").count() == 1


@pytest.mark.django_db(transaction=True)
def test_the_worker_sends_a_payins_webhook_itself_once_the_answer_commits(
    enabled_api,
    enabled_merchant,
    customer,
    receiver,
    webhook_settings,
    isolated_broker,  # noqa: F811 - the fixture
):
    """The submission that applies the provider's answer sends the payin.completed webhook
    itself, after the answer commits: no `deliver_webhook` task on the broker."""
    webhook_settings.PROVIDER_SIMULATION_DELAY_SECONDS = 0
    endpoint_add(merchant=enabled_merchant, url=receiver.url, now=timezone.now())
    quote = create_quote(enabled_api, "payin", customer_id=customer["id"])
    broker = redis.Redis.from_url(isolated_broker.url)
    with _eager_off():
        payin_id = enabled_api.post("/payins", payin_body(quote, customer)).json()["id"]
        assert broker.llen("provider") == 1  # its submission, waiting for a worker

        submit_payin.run(payin_id=payin_id)

    (request,) = receiver.requests
    assert json.loads(request.body)["event"] == "payin.completed"
    assert json.loads(request.body)["data"]["id"] == payin_id
    assert Delivery.objects.get(event__data_id=payin_id).status == "succeeded"
    assert broker.llen("webhooks") == 0
