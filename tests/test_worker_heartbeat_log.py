"""A worker's heartbeat while the shared Redis is away: one warning, not a traceback a beat."""

import pytest

from config import celery, health
from tests.faults.conftest import private_redis  # noqa: F401 - a Redis this test stops


@pytest.fixture
def health_cache_on(private_redis, settings):  # noqa: F811
    settings.CACHES = {
        **settings.CACHES,
        "health": {**settings.CACHES["health"], "LOCATION": private_redis.url},
    }
    celery._HEARTBEAT_FAILING.state = False
    yield private_redis
    celery._HEARTBEAT_FAILING.state = False


def test_a_redis_outage_is_one_warning_without_traceback_and_its_end_one_line(
    health_cache_on, caplog
):
    caplog.set_level("INFO", logger="cowry")
    celery._heartbeat()
    assert not caplog.records

    health_cache_on.stop()
    for _ in range(3):
        celery._heartbeat()
    [warning] = caplog.records
    assert warning.levelname == "WARNING" and warning.exc_info is None
    assert warning.getMessage().startswith("Could not record the worker heartbeat (")

    health_cache_on.start()
    celery._heartbeat()
    celery._heartbeat()
    assert [r.getMessage() for r in caplog.records[1:]] == ["Worker heartbeat recorded again"]
    from django.core.cache import caches

    assert caches["health"].get(health.HEARTBEAT_KEY)
