"""A submitter's claim outlives a payment's timeout: the provider is slow on the calls before
it in the claim (ten calls of a claim made one after the other, each within the gateway's
timeouts, can add up to more than the sweep's in-flight window), and the timeout sweep fails
the payment meanwhile. Its call must not be made after that: a payout the provider pays once
its reservation was released lets the merchant spend the money twice, and a payin the payer
is charged for is failed.

Real threads and connections: the submitter in a thread, blocked in the provider's first call
(a sandbox that holds it until released); the sweep in the test's thread, at a clock jumped to
when it runs in the scenario."""

import threading
from datetime import timedelta
from decimal import Decimal

import pytest
from django.core.cache import cache
from django.utils import timezone

from payments import ledger, selectors, services
from payments.models import Payin, Payout, ProviderDiscrepancy
from payments.provider.simulator import SimulatorGateway
from tests.payments.conftest import (
    create_customer,
    create_quote,
    fund,
    payin_body,
    payout_body,
)
from tests.support import MerchantClient
from tests.worker import wait_until
from webhooks.models import Event

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True)]


class SlowFirstCallGateway(SimulatorGateway):
    """The sandbox (deciding at once), holding the first request it receives until the test
    releases it; every request it receives is recorded (kind, our reference)."""

    requests: list[tuple[str, str]] = []
    arrived = threading.Event()
    released = threading.Event()
    submitters: list[threading.Thread] = []

    def _submit(self, *, kind: str, reference: str, **kwargs):
        cls = SlowFirstCallGateway
        first = not cls.requests
        cls.requests.append((kind, reference))
        if first:
            cls.arrived.set()
            cls.released.wait(timeout=30)
        return super()._submit(kind=kind, reference=reference, **kwargs)


@pytest.fixture
def slow_provider(settings):
    settings.PAYMENTS_PROVIDER_GATEWAY = f"{__name__}.SlowFirstCallGateway"
    settings.PROVIDER_SIMULATION_DELAY_SECONDS = 0
    SlowFirstCallGateway.requests = []
    SlowFirstCallGateway.arrived = threading.Event()
    SlowFirstCallGateway.released = threading.Event()
    SlowFirstCallGateway.submitters = []
    yield SlowFirstCallGateway
    SlowFirstCallGateway.released.set()
    # A test that failed midway leaves its submitter at work: it must be done before the
    # database is flushed, or the flush deadlocks with it and the next tests see its rows.
    for thread in SlowFirstCallGateway.submitters:
        thread.join(timeout=60)


def _waiting(create) -> list[str]:
    """Two payments committed while a submitter is "waiting to start": nothing is enqueued for
    them."""
    cache.set(services.SUBMITTER_WAKE_KEY, 1, timeout=60)
    return [create() for _ in range(2)]


def _submitter_stuck_in_the_first_call(slow_provider) -> threading.Thread:
    def submitter() -> None:
        from django.db import connection

        try:
            services.payments_submit_waiting()
        finally:
            connection.close()

    thread = threading.Thread(target=submitter)
    slow_provider.submitters.append(thread)
    thread.start()
    assert slow_provider.arrived.wait(timeout=30), "the submitter never called the provider"
    return thread


def _release_late(slow_provider, thread, *, claimed_at) -> None:
    """Let the first call return once the second's would start well after the claim."""
    late = timedelta(seconds=services.CLAIM_CALL_SLACK_SECONDS + 0.2)
    assert wait_until(lambda: timezone.now() - claimed_at > late, timeout=10)
    slow_provider.released.set()
    thread.join(timeout=30)
    assert not thread.is_alive()


def test_a_payout_failed_by_the_sweep_while_its_claim_waits_is_never_sent(
    enabled_merchant, slow_provider
):
    api = MerchantClient(enabled_merchant)
    customer = create_customer(api)
    fund(enabled_merchant, "100000")
    first, late = _waiting(
        lambda: api.post("/payouts", payout_body(create_quote(api, "payout"), customer)).json()[
            "id"
        ],
    )
    Payout.objects.filter(pk=late).update(provider_timeout_at=timezone.now() + timedelta(minutes=1))

    thread = _submitter_stuck_in_the_first_call(slow_provider)
    claimed_at = Payout.objects.get(pk=late).submitted_at
    assert claimed_at is not None  # claimed with the first, its call not made yet

    # The sweep runs once the claim is older than any one call: the late payout is past its
    # timeout, its recorded start is no longer in flight, so it is failed and released.
    sweep_at = claimed_at + timedelta(seconds=services.SUBMISSION_IN_FLIGHT_SECONDS + 1)
    assert services.payments_fail_timed_out(now=sweep_at) == 1
    assert Payout.objects.get(pk=late).status == "failed"
    _release_late(slow_provider, thread, claimed_at=claimed_at)

    # The provider was never asked to pay the failed payout.
    assert [reference for _, reference in slow_provider.requests] == [first]
    assert not ProviderDiscrepancy.objects.exists()
    assert Payout.objects.get(pk=first).status == "completed"
    body = api.get(f"/payouts/{late}").json()
    assert (body["status"], body["history"][-1]["reason"]) == ("failed", "provider_timeout")
    assert list(Event.objects.filter(data_id=late).values_list("event_type", flat=True)) == [
        "payout.failed"
    ]
    # 100000 less the first payout's debit (10000 + 1% + 100); the late one's released.
    available, reserved = selectors.wallet_balance(merchant=enabled_merchant, currency="XOF")
    assert (available, reserved) == (Decimal("89800"), Decimal(0))
    assert ledger.ledger_breaches() == []


def test_a_payin_failed_by_the_sweep_while_its_claim_waits_is_never_collected(
    enabled_merchant, slow_provider
):
    api = MerchantClient(enabled_merchant)
    customer = create_customer(api)
    first, late = _waiting(
        lambda: api.post("/payins", payin_body(create_quote(api, "payin"), customer)).json()["id"],
    )
    Payin.objects.filter(pk=late).update(provider_timeout_at=timezone.now() + timedelta(minutes=1))

    thread = _submitter_stuck_in_the_first_call(slow_provider)
    claimed_at = Payin.objects.get(pk=late).submitted_at
    assert Payin.objects.get(pk=late).status == "pending"  # claimed, its call not made yet

    # At its timeout its recorded start may still be a call in flight: the sweep leaves it, as
    # it leaves a payout. Once the claim is older than any one call, it is failed.
    due = Payin.objects.get(pk=late).provider_timeout_at
    assert services.payments_fail_timed_out(now=due) == 0
    sweep_at = claimed_at + timedelta(seconds=services.SUBMISSION_IN_FLIGHT_SECONDS + 1)
    assert services.payments_fail_timed_out(now=sweep_at) == 1
    _release_late(slow_provider, thread, claimed_at=claimed_at)

    # The payer was never charged for the failed payin.
    assert [reference for _, reference in slow_provider.requests] == [first]
    assert not ProviderDiscrepancy.objects.exists()
    assert Payin.objects.get(pk=first).status == "completed"
    body = api.get(f"/payins/{late}").json()
    assert (body["status"], body["history"][-1]["reason"]) == ("failed", "provider_timeout")
    assert list(Event.objects.filter(data_id=late).values_list("event_type", flat=True)) == [
        "payin.failed"
    ]
    assert selectors.wallet_balance(merchant=enabled_merchant, currency="XOF")[0] == Decimal("9850")
    assert ledger.ledger_breaches() == []
