"""SIGKILL of the Celery worker in the middle of payment traffic, with the broker's default
visibility timeout (an hour): what the killed worker held (submissions it had taken, provider
answers it was counting down) is not handed out again for an hour. The beat sweep asks the
provider about every payment whose answer is overdue and resubmits lost submissions, so after a
restart every payin and payout is final within two minutes, once: one terminal event each, a
clean ledger."""

import os
import signal
import threading
import time

import pytest
import redis

from payments import tasks
from payments.ledger.checks import ledger_check
from payments.models import Journal, Payin, Payout
from tests.payments.conftest import (
    DECLINED_PHONE,
    create_customer,
    create_quote,
    fund,
    payin_body,
    payout_body,
)
from tests.support import MerchantClient
from tests.worker import celery_worker, wait_until
from webhooks.models import Event

pytestmark = [pytest.mark.faults, pytest.mark.worker, pytest.mark.django_db(transaction=True)]

# The provider answers through counted-down tasks the worker holds; no visibility override.
TRAFFIC_ENV = {"PROVIDER_SIMULATION_DELAY_SECONDS": "5"}
BEAT_SECONDS = 30  # as CELERY_BEAT_SCHEDULE's ask-provider-about-overdue-payments
RECOVERY_SECONDS = 120


class _Beat(threading.Thread):
    """Publishes the payments sweep on its schedule, as celery beat would."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(BEAT_SECONDS):
            tasks.ask_provider_about_overdue_payments.delay()


def _final(model, ids) -> bool:
    return not model.objects.filter(pk__in=ids).exclude(status__in=["completed", "failed"]).exists()


def test_every_payment_in_flight_when_the_worker_is_killed_is_final_once_after_restart(
    enabled_merchant, isolated_broker
):
    broker = redis.Redis.from_url(isolated_broker.url)
    api = MerchantClient(enabled_merchant)
    customer = create_customer(api)
    fund(enabled_merchant, "1000000")
    phones = ["+221770001234", DECLINED_PHONE]
    payin_quotes = [create_quote(api, "payin") for _ in range(8)]
    payout_quotes = [create_quote(api, "payout") for _ in range(4)]

    with celery_worker(extra_env=TRAFFIC_ENV) as worker:
        payin_ids = [
            api.post("/payins", payin_body(quote, customer, phones[i % 2])).json()["id"]
            for i, quote in enumerate(payin_quotes)
        ]
        payout_ids = [
            api.post("/payouts", payout_body(quote, customer, phones[i % 2])).json()["id"]
            for i, quote in enumerate(payout_quotes)
        ]
        # mid-traffic: some received by the provider (their answers counting down in the
        # worker), the others still waiting for their submission
        assert wait_until(
            lambda: (
                Payin.objects.filter(pk__in=payin_ids).exclude(provider_reference="").count() >= 2
            ),
            timeout=60,
        )
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait(timeout=30)
    in_flight = Payin.objects.filter(pk__in=payin_ids, status="pending").count()
    assert in_flight, "no answer was in flight"
    held = broker.hlen("unacked")  # what the killed worker held: handed out again in an hour

    beat = _Beat()
    with celery_worker(extra_env=TRAFFIC_ENV) as worker:
        restarted = time.monotonic()
        beat.start()
        try:
            assert wait_until(
                lambda: _final(Payin, payin_ids) and _final(Payout, payout_ids),
                timeout=RECOVERY_SECONDS,
            )
        finally:
            beat.stopped.set()
        recovered = time.monotonic() - restarted
        assert recovered <= RECOVERY_SECONDS
        print(f"{in_flight} payins in flight; all final {recovered:.0f} s after the restart")
        assert worker.poll() is None
    assert broker.hlen("unacked") >= held  # recovered without them

    for payment_id in [*payin_ids, *payout_ids]:
        terminal = Event.objects.filter(
            data_id=payment_id, event_type__regex=r"\.(completed|failed)$"
        )
        assert terminal.count() == 1, payment_id
    completed = Payin.objects.filter(pk__in=payin_ids, status="completed")
    assert completed.count() == 4  # the declined phone's fail, the others complete
    assert Journal.objects.filter(resource_id__in=completed.values("id")).count() == 4
    assert Payout.objects.filter(pk__in=payout_ids, status="completed").count() == 2
    assert ledger_check()["breaches"] == []
