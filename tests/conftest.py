import pytest

from tests.catalog import enable_everything, load_catalog
from tests.factories import MerchantFactory
from tests.support import MerchantClient


@pytest.fixture(autouse=True, scope="session")
def _tasks_imported():
    """The apps' tasks modules imported before any test: the first import sets Django up again
    (Celery's fixup), its logging with it, and a test's caplog handler went with it."""
    from config.celery import app

    app.loader.import_default_modules()


@pytest.fixture(autouse=True)
def _eager_celery(settings):
    """Unit tests run task code in-process; the worker tests start a real worker instead."""

    from config.celery import app
    from core import shared_cache

    # nor dashboard logins refused for another test's (or an earlier run's) failures: every
    # test client logs in from 127.0.0.1, whose counter outlives a test by its window
    redis = shared_cache.redis_client()
    if redis is not None:
        stale = list(redis.scan_iter(match=shared_cache.cache_key("login-failures:*")))
        if stale:
            redis.delete(*stale)
    shared_cache._paused_until = 0.0  # nor a Redis outage another test made
    app.conf.task_always_eager = True
    app.conf.task_eager_propagates = True
    yield
    app.conf.task_always_eager = False


@pytest.fixture(autouse=True)
def _no_ledger_check_of_another_test():
    """The ops home shows the last recorded check_ledger outcome: not one an earlier test left."""
    from django.core.cache import cache

    from payments.ledger.checks import LAST_CHECK_CACHE_KEY

    cache.delete(LAST_CHECK_CACHE_KEY)


@pytest.fixture
def merchant(db):
    return MerchantFactory()


@pytest.fixture
def other_merchant(db):
    return MerchantFactory()


@pytest.fixture
def api(merchant) -> MerchantClient:
    return MerchantClient(merchant)


@pytest.fixture
def other_api(other_merchant) -> MerchantClient:
    return MerchantClient(other_merchant)


@pytest.fixture
def make_api(db):
    return MerchantClient


@pytest.fixture
def catalog(db) -> None:
    """The seeded operator/corridor catalog, platform fee schedules and FX rates."""
    load_catalog()


@pytest.fixture
def enabled_merchant(catalog):
    """A merchant with every catalog operator and corridor enabled."""
    merchant = MerchantFactory()
    enable_everything(merchant)
    return merchant


@pytest.fixture
def enabled_api(enabled_merchant) -> MerchantClient:
    return MerchantClient(enabled_merchant)


@pytest.fixture
def stalled_dns(monkeypatch):
    """Names given to `stalled_dns.stall(name)` do not resolve until `stalled_dns.release()`."""
    import socket
    from functools import partial

    from tests.slow_network import StalledDns

    state = StalledDns()
    monkeypatch.setattr(socket, "getaddrinfo", partial(state.getaddrinfo, socket.getaddrinfo))
    yield state
    state.wait_for_lookups_to_end()


@pytest.fixture(params=[False, True], ids=["silent", "dripping"])
def silent_tls_server(request):
    """A port that accepts and never completes a TLS handshake: says nothing, or drips it."""
    from tests.slow_network import SilentTlsServer

    server = SilentTlsServer(drip=request.param)
    yield server
    server.close()


@pytest.fixture
def worker_heartbeat():
    """A worker's heartbeat as config.celery.Heartbeat records it, for /health tests that are
    about something else (tests/test_health.py starts a real worker)."""
    from django.core.cache import caches

    from config import health

    health.heartbeat_record()
    yield
    caches["health"].delete(health.HEARTBEAT_KEY)
