"""/health is 200 while the database and the broker answer, 503 otherwise (the contract);
Redis and a Celery worker are reported in `checks` and, when not "ok", named in `degraded`,
never a 503. /health/live is 200 while the web process answers.

The database or the broker away (503): tests/faults/test_database_faults.py and
tests/faults/test_redis_down.py."""

import socket

import pytest
from django.core.cache import caches
from rest_framework.test import APIClient

from config import health
from tests.worker import celery_worker, wait_until


@pytest.fixture
def no_heartbeat():
    caches["health"].delete(health.HEARTBEAT_KEY)


def _health():
    return APIClient(raise_request_exception=False).get("/health")


@pytest.mark.django_db
def test_without_a_worker_heartbeat_health_is_200_and_says_the_worker_is_silent(no_heartbeat):
    response = _health()
    assert response.status_code == 200
    assert response.json() == {
        "status": "ok",
        "version": "1.0.0",
        "degraded": ["worker"],
        "checks": {
            "database": "ok",
            "broker": "ok",
            "redis": "ok",
            "worker": "error: silent for 60s",
        },
    }


@pytest.mark.django_db
def test_liveness_needs_no_worker_nor_database(no_heartbeat, django_assert_num_queries):
    with django_assert_num_queries(0):
        response = APIClient().get("/health/live")
    assert (response.status_code, response.json()) == (200, {"status": "ok"})


@pytest.mark.django_db
def test_a_redis_that_does_not_answer_is_200_and_reported(settings):
    """Every cache on a Redis that refuses connections (the broker is a Redis of its own here):
    nothing else on /health's path needs Redis."""
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    settings.CACHES = {
        name: {**cache, "LOCATION": f"redis://127.0.0.1:{port}/0"}
        for name, cache in settings.CACHES.items()
    }
    response = _health()
    assert response.status_code == 200
    assert response.json()["status"] == "ok"
    assert response.json()["degraded"] == ["redis", "worker"]
    assert response.json()["checks"] == {
        "database": "ok",
        "broker": "ok",
        "redis": "error: ConnectionError",
        "worker": "unknown",
    }


def _worker_check() -> str:
    response = _health()
    assert response.status_code == 200, response.json()  # whatever the worker does
    return response.json()["checks"]["worker"]


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_running_worker_clears_degraded_and_its_heartbeat_outlives_it_briefly(
    no_heartbeat, settings
):
    settings.WORKER_SILENT_AFTER_SECONDS = 3
    assert _worker_check() == "error: silent for 3s"
    env = {"WORKER_HEARTBEAT_SECONDS": "1", "WORKER_SILENT_AFTER_SECONDS": "3"}
    with celery_worker(extra_env=env) as worker:
        assert wait_until(lambda: _worker_check() == "ok"), "no heartbeat from the worker"
        assert _health().json()["degraded"] == []
        caches["health"].delete(health.HEARTBEAT_KEY)  # a heartbeat a second, not just one
        assert wait_until(lambda: _worker_check() == "ok", timeout=5)
        assert worker.poll() is None
    # Stopped: silent after WORKER_SILENT_AFTER_SECONDS, and /health still 200.
    assert wait_until(lambda: _worker_check() == "error: silent for 3s", timeout=10)
    assert _health().json()["degraded"] == ["worker"]
