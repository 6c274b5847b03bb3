"""Redis (the broker) stopped while payins are created: the API still answers 201, and once
Redis is back the beat sweeps resubmit what could not be enqueued and every event is delivered.

The broker is a private redis-server started for this test, never the shared one."""

from datetime import timedelta

import pytest
from django.core.cache import caches
from django.utils import timezone
from rest_framework.test import APIClient

from config import health
from config.health import HEARTBEAT_KEY
from payments import provider, tasks
from payments.ledger.checks import ledger_breaches
from payments.models import Payin
from payments.services.sweeps import RESUBMIT_AFTER_SECONDS, payments_stale_submissions
from payments.services.transitions import PAYIN_CALLBACK
from tests.faults.conftest import WORKER_ENV
from tests.payments.conftest import SILENT_PHONE, create_customer, create_quote, payin_body
from tests.support import MerchantClient
from tests.worker import celery_worker, wait_until
from webhooks.models import Event
from webhooks.services.delivery import lease_seconds
from webhooks.services.sweeps import deliveries_dispatch_due

pytestmark = [pytest.mark.faults, pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_payins_created_while_redis_is_down_are_processed_and_delivered_after_it_returns(
    enabled_merchant, isolated_broker, webhook_endpoint, hanging_receiver
):
    api = MerchantClient(enabled_merchant)
    webhook_endpoint(enabled_merchant)
    customer = create_customer(api)
    with celery_worker(extra_env=WORKER_ENV) as worker:
        # Before the outage: a payin the provider has accepted but not yet answered.
        quote = create_quote(api, "payin")
        waiting = api.post("/payins", payin_body(quote, customer, phone=SILENT_PHONE)).json()
        assert wait_until(
            lambda: Payin.objects.get(pk=waiting["id"]).provider_reference != "", timeout=60
        )
        quotes = [create_quote(api, "payin") for _ in range(3)]

        isolated_broker.stop()

        created = []
        for quote in quotes:
            response = api.post("/payins", payin_body(quote, customer))
            assert response.status_code == 201, response.json()
            created.append(response.json()["id"])
        # The provider's answer for the waiting payin arrives during the outage (a callback
        # into the web process): applied and its event recorded, the hand-off to Redis fails.
        held = Payin.objects.get(pk=waiting["id"])
        provider.deliver_answer(
            callback=PAYIN_CALLBACK,
            reference=str(held.pk),
            provider_reference=held.provider_reference,
            outcome=provider.COMPLETED,
        )
        assert Payin.objects.get(pk=held.pk).status == "completed"
        assert set(Payin.objects.filter(pk__in=created).values_list("status", flat=True)) == {
            "created"
        }

        isolated_broker.start()

        # The beat sweeps, run when they are next due: resubmit the lost submissions (the
        # body of payments.tasks.fail_timed_out_payments at that time) and re-dispatch the
        # deliveries whose hand-off was lost.
        later = timezone.now() + timedelta(seconds=RESUBMIT_AFTER_SECONDS + 1)
        stale_payins, _ = payments_stale_submissions(now=later)
        assert sorted(map(str, stale_payins)) == sorted(created)
        for payin_id in stale_payins:
            tasks.submit_payin.delay(payin_id=str(payin_id))
        lease = timedelta(seconds=lease_seconds() + 1)
        assert deliveries_dispatch_due(now=timezone.now() + lease) == 1

        everything = [*created, waiting["id"]]

        def all_delivered() -> bool:
            assert worker.poll() is None, "the worker died"
            statuses = set(Payin.objects.filter(pk__in=everything).values_list("status", flat=True))
            events = set(Event.objects.filter(data_id__in=everything).values_list("id", flat=True))
            delivered = set(hanging_receiver.webhook_ids())
            return statuses == {"completed"} and {str(e) for e in events} <= delivered

        assert wait_until(all_delivered, timeout=120)

    for payin_id in everything:
        (event,) = Event.objects.filter(data_id=payin_id)
        assert event.event_type == "payin.completed"
    assert ledger_breaches() == []


def test_health_is_503_while_the_broker_is_away_and_200_when_it_is_back(
    isolated_broker, worker_heartbeat
):
    """docs/operations.md: /health is 200 when the database and the broker answer, 503 otherwise."""
    anonymous = APIClient(raise_request_exception=False)
    assert anonymous.get("/health").status_code == 200

    isolated_broker.stop()
    health = anonymous.get("/health")
    assert health.status_code == 503
    assert health.json()["status"] == "unavailable"
    assert health.json()["checks"]["database"] == "ok"
    assert health.json()["checks"]["broker"].startswith("error")
    assert health.json()["degraded"] == []  # the broker is required, not an optional part

    isolated_broker.start()  # back, without a restart
    assert anonymous.get("/health").json() == {
        "status": "ok",
        "version": "1.0.0",
        "degraded": [],
        "checks": {"database": "ok", "broker": "ok", "redis": "ok", "worker": "ok"},
    }


def test_health_is_503_while_the_broker_is_away_even_with_a_silent_worker(isolated_broker):
    """The optional checks never decide the code, either way: broker away and no worker is a
    503 naming both."""
    caches["health"].delete(HEARTBEAT_KEY)
    isolated_broker.stop()
    health = APIClient(raise_request_exception=False).get("/health")
    assert health.status_code == 503
    assert health.json()["status"] == "unavailable"
    assert health.json()["checks"]["broker"].startswith("error")
    assert health.json()["degraded"] == ["worker"]


def test_a_broker_outage_is_one_warning_on_health_and_its_end_one_line(
    isolated_broker, worker_heartbeat, caplog, monkeypatch
):
    """Load-balancer probes every few seconds: no django.request ERROR per 503, one WARNING
    when the broker goes away and one INFO when it is back (per web process)."""
    monkeypatch.setattr(health._REQUIRED_FAILING, "state", ())
    caplog.set_level("INFO")
    anonymous = APIClient(raise_request_exception=False)
    assert anonymous.get("/health").status_code == 200

    isolated_broker.stop()
    assert [anonymous.get("/health").status_code for _ in range(3)] == [503] * 3
    isolated_broker.start()
    assert [anonymous.get("/health").status_code for _ in range(2)] == [200] * 2

    lines = [(r.name, r.levelname, r.getMessage()) for r in caplog.records]
    assert [line for line in lines if line[0] == "django.request"] == []
    (warning, back) = [line for line in lines if line[0] == "cowry"]
    assert warning[1] == "WARNING"
    assert warning[2].startswith("/health unavailable (503): broker error: ")
    assert back == ("cowry", "INFO", "/health ok again: the database and the broker answer")
