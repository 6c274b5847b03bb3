"""/health is 200 only while the database, the broker, Redis and a Celery worker answer;
/health/live is 200 while the web process answers, for the load balancer."""

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
def test_without_a_worker_heartbeat_health_is_503(no_heartbeat):
    response = _health()
    assert response.status_code == 503
    assert response.json()["status"] == "unavailable"
    checks = response.json()["checks"]
    assert (checks["database"], checks["broker"], checks["redis"]) == ("ok", "ok", "ok")
    assert checks["worker"] == "error: silent for 60s"


@pytest.mark.django_db
def test_liveness_needs_no_worker_nor_database(no_heartbeat, django_assert_num_queries):
    with django_assert_num_queries(0):
        response = APIClient().get("/health/live")
    assert (response.status_code, response.json()) == (200, {"status": "ok"})


@pytest.mark.django_db
def test_a_redis_that_does_not_answer_is_503(settings):
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    settings.CACHES = {
        **settings.CACHES,
        "health": {**settings.CACHES["health"], "LOCATION": f"redis://127.0.0.1:{port}/0"},
    }
    response = _health()
    assert response.status_code == 503
    assert response.json()["checks"]["redis"] == "error: ConnectionError"
    assert response.json()["checks"]["worker"] == "unknown"


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_running_worker_makes_health_ok_and_its_heartbeat_outlives_it_briefly(
    no_heartbeat, settings
):
    settings.WORKER_SILENT_AFTER_SECONDS = 3
    assert _health().status_code == 503
    env = {"WORKER_HEARTBEAT_SECONDS": "1", "WORKER_SILENT_AFTER_SECONDS": "3"}
    with celery_worker(extra_env=env) as worker:
        assert wait_until(lambda: _health().status_code == 200), "no heartbeat from the worker"
        assert _health().json()["checks"]["worker"] == "ok"
        caches["health"].delete(health.HEARTBEAT_KEY)  # a heartbeat a second, not just one
        assert wait_until(lambda: _health().status_code == 200, timeout=5)
        assert worker.poll() is None
    # Stopped: silent after WORKER_SILENT_AFTER_SECONDS.
    assert wait_until(lambda: _health().status_code == 503, timeout=10)
