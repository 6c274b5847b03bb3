"""Two beat schedulers at once (a deploy mistake): every sweep runs twice, concurrently. Each
leg still ends once (one failure or one late answer applied, one history row, one event, one
journal), and each webhook is attempted once.

Real threads on their own connections run the sweeps' bodies at the same moment (a barrier);
the webhooks go over real sockets to a receiver."""

from collections import Counter
from datetime import timedelta

import pytest
from django.utils import timezone

from payments.ledger.checks import ledger_breaches
from payments.models import Journal, Payin, Payout
from payments.services.sweeps import payments_fail_timed_out
from quotes import services as quote_services
from tests.locks import at_once
from tests.payments.conftest import (
    SILENT_PHONE,
    SN_PHONE,
    create_customer,
    create_quote,
    fund,
    payin_body,
    payout_body,
)
from tests.support import MerchantClient
from tests.transfers import conftest as transfers
from transfers.models import Transfer, TransferHistory
from transfers.services.sweeps import transfers_fail_timed_out
from webhooks.models import Delivery, DeliveryAttempt, Event
from webhooks.services.delivery import lease_seconds
from webhooks.services.sweeps import deliveries_dispatch_due

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True)]

SCHEDULERS = 3


def _sweeps(now) -> None:
    """One beat's due sweeps, as their tasks run them at `now`."""
    payments_fail_timed_out(now=now)
    transfers_fail_timed_out(now=now)
    quote_services.quotes_expire(now=now)
    deliveries_dispatch_due(now=now)


def test_sweeps_of_two_beat_schedulers_at_once_end_each_leg_once(
    enabled_merchant, webhook_endpoint, hanging_receiver, settings
):
    settings.PROVIDER_SIMULATION_DELAY_SECONDS = 0
    api = MerchantClient(enabled_merchant)
    customer = create_customer(api)
    fund(enabled_merchant, "100000")

    # Legs the provider received and never answers, and legs whose answer was lost on its way
    # (the provider decided; the sweep asks it first and applies that).
    silent_payins = [
        api.post("/payins", payin_body(create_quote(api, "payin"), customer, SILENT_PHONE)).json()[
            "id"
        ]
        for _ in range(3)
    ]
    payouts = [
        api.post(
            "/payouts", payout_body(create_quote(api, "payout"), customer, SILENT_PHONE)
        ).json()["id"]
        for _ in range(4)
    ]
    silent_payouts, answered_payouts = payouts[:2], payouts[2:]
    for payout in Payout.objects.filter(pk__in=answered_payouts):
        payout.recipient = {**payout.recipient, "phone": SN_PHONE}
        payout.save(update_fields=["recipient"])
    sender = transfers.create_customer(api, **transfers.SENDER_DETAILS)
    silent_transfers = [
        api.post(
            "/transfers",
            transfers.transfer_body(
                transfers.create_quote(api, customer_id=sender["id"]),
                sender,
                recipient_phone=transfers.SN_SILENT,
            ),
        ).json()["id"]
        for _ in range(2)
    ]
    assert set(Payin.objects.values_list("status", flat=True)) == {"pending"}
    assert not Payout.objects.filter(provider_reference="").exists()
    assert set(Transfer.objects.values_list("status", flat=True)) == {"disbursing"}
    assert not Transfer.objects.filter(disbursement_reference="").exists()
    earlier = set(Event.objects.values_list("id", flat=True))  # the collections' events
    webhook_endpoint(enabled_merchant)  # the events the sweeps record go out

    later = timezone.now() + timedelta(seconds=settings.PROVIDER_TIMEOUT_SECONDS + 1)
    at_once(lambda: _sweeps(later), SCHEDULERS)

    swept = Event.objects.exclude(id__in=earlier)
    events = Counter(swept.values_list("data_id", "event_type"))
    expected = Counter(
        [(p, "payin.failed") for p in silent_payins]
        + [(p, "payout.failed") for p in silent_payouts]
        + [(p, "payout.completed") for p in answered_payouts]
        + [(t, "transfer.payout.failed") for t in silent_transfers]
    )
    assert {(str(k[0]), k[1]): n for k, n in events.items()} == {
        (str(k[0]), k[1]): n for k, n in expected.items()
    }
    for payin in Payin.objects.all():
        assert list(payin.history.values_list("status", flat=True)) == [
            "created",
            "pending",
            "failed",
        ]
    for payout in Payout.objects.all():
        assert payout.history.count() == 2  # pending, then its one outcome
    journals = Counter(
        Journal.objects.filter(resource_type="payout").values_list("kind", flat=True)
    )
    assert journals == {"payout_reserved": 4, "payout_released": 2, "payout_completed": 2}
    for transfer_id in silent_transfers:
        reasons = TransferHistory.objects.filter(transfer_id=transfer_id).values_list(
            "reason", flat=True
        )
        assert list(reasons).count("provider_timeout") == 1
    assert ledger_breaches() == []

    # The sweeps' events were recorded at the clock of the sweep; their deliveries are due,
    # and the wake of a sender after the commit was lost: the dispatch sweeps of both
    # schedulers hand them out, each once, and each is attempted once.
    now = timezone.now()
    stale = now - timedelta(seconds=lease_seconds() + 1)
    assert Delivery.objects.update(next_attempt_at=now, dispatched_at=stale) == swept.count()
    at_once(lambda: deliveries_dispatch_due(now=now), SCHEDULERS)
    assert set(Delivery.objects.values_list("status", flat=True)) == {"succeeded"}
    assert set(Delivery.objects.values_list("attempts", flat=True)) == {1}
    assert DeliveryAttempt.objects.count() == swept.count()
    received = Counter(hanging_receiver.webhook_ids())
    assert set(received.values()) == {1}
    assert set(received) == {str(event_id) for event_id in swept.values_list("id", flat=True)}
