import time

import pytest
from django.conf import settings
from django.core.cache import cache

from core import shared_cache

pytestmark = pytest.mark.django_db
PATH = "/customers/00000000-0000-0000-0000-000000000000"


@pytest.fixture(autouse=True)
def _clear_counters():
    cache.clear()
    yield
    cache.clear()


def test_requests_over_the_merchant_limit_get_429_with_retry_after(api):
    api.merchant.rate_limit_per_minute = 3
    api.merchant.save()
    path = "/customers/00000000-0000-0000-0000-000000000000"

    statuses = [api.get(path).status_code for _ in range(3)]
    limited = api.get(path)

    assert statuses == [404, 404, 404]
    assert limited.status_code == 429
    assert limited.json()["error"]["code"] == "rate_limited"
    assert 1 <= int(limited["Retry-After"]) <= 60


def test_the_first_refusal_of_a_window_is_logged_once_with_the_key_and_merchant(api, caplog):
    """An operator sees which merchant is being refused, once a minute, not once a request."""
    api.merchant.rate_limit_per_minute = 2
    api.merchant.save()
    caplog.set_level("WARNING", logger="cowry")

    assert [api.get(PATH).status_code for _ in range(5)] == [404, 404, 429, 429, 429]
    key = api.merchant.api_keys.get()
    [refusal] = [r.getMessage() for r in caplog.records if r.name == "cowry"]
    assert refusal.startswith(
        f"Rate limit of 2 requests a minute reached by API key {key.pk} of merchant"
        f" {api.merchant.pk}: its further requests get 429 for "
    )


@pytest.mark.parametrize(("wait", "retry_after"), [(30.0, "30"), (29.2, "30"), (0.0, "1")])
def test_retry_after_is_the_wait_rounded_up_to_a_whole_second(wait, retry_after):
    from rest_framework.exceptions import Throttled

    from core.exceptions import build_error_response

    response = build_error_response(Throttled(wait=wait))

    assert (response.status_code, response["Retry-After"]) == (429, retry_after)


def test_limit_is_counted_per_api_key(make_api, merchant):
    merchant.rate_limit_per_minute = 1
    merchant.save()
    first, second = make_api(merchant), make_api(merchant)
    path = "/customers/00000000-0000-0000-0000-000000000000"
    assert first.get(path).status_code == 404
    assert first.get(path).status_code == 429
    assert second.get(path).status_code == 404


def test_rate_limited_post_creates_nothing(api):
    from customers.models import Customer

    api.merchant.rate_limit_per_minute = 1
    api.merchant.save()
    assert api.post("/customers", {"first_name": "A"}).status_code == 201
    assert api.post("/customers", {"first_name": "B"}).status_code == 429
    assert Customer.objects.count() == 1


def test_a_merchant_limit_of_zero_is_refused_not_read_as_no_limit(merchant):
    """0 used to mean "the platform default" (6000/min): an ops engineer entering 0 to stop a
    merchant lifted its limit instead. The form says why; the database refuses it anyway."""
    from django.contrib.admin.sites import site
    from django.contrib.auth import get_user_model
    from django.db import IntegrityError, transaction
    from django.test import RequestFactory

    from merchants.models import Merchant

    admin = site._registry[Merchant]
    request = RequestFactory().get("/")
    request.user = get_user_model().objects.create_superuser("ops", "ops@example.com", "pw-ops-1")
    form_class = admin.get_form(
        request, merchant, fields=["name", "status", "rate_limit_per_minute"]
    )
    form = form_class(
        data={"name": merchant.name, "status": "active", "rate_limit_per_minute": "0"},
        instance=merchant,
    )
    assert not form.is_valid()
    assert "rate_limit_per_minute" in form.errors
    with pytest.raises(IntegrityError), transaction.atomic():
        Merchant.objects.filter(pk=merchant.pk).update(rate_limit_per_minute=0)


@pytest.mark.skipif(not settings.REDIS_URL, reason="needs the shared Redis")
def test_the_count_uses_only_commands_redis_6_knows(api):
    """EXPIRE's NX option came with Redis 7.0: on a Redis 6 (Ubuntu 22.04's, many managed
    ones) the count failed on every request, so the limit was never applied, and each failure
    paused the request path's Redis use (the rate limit itself) for REDIS_PAUSE_SECONDS."""
    from merchants.models import ApiKey

    counter = f"ratelimit:{ApiKey.objects.get(key=api.api_key).pk}:"
    client = shared_cache.redis_client()
    db = client.connection_pool.connection_kwargs.get("db", 0)
    with client.monitor() as monitor:
        assert api.get(PATH).status_code == 404
        deadline = time.monotonic() + 5
        commands = []
        while time.monotonic() < deadline and not any("EXPIRE" in c for c in commands):
            seen = monitor.next_command()
            if seen["db"] == db and counter in seen["command"]:
                commands.append(seen["command"])
    expires = [c.split() for c in commands if c.startswith("EXPIRE")]
    assert expires and all(len(parts) == 3 for parts in expires)  # EXPIRE key seconds


@pytest.fixture
def clock(monkeypatch):
    """The rate limit's clock, set by the test (the windows are fixed minutes of it)."""
    from types import SimpleNamespace

    from merchants import throttling

    state = SimpleNamespace(now=1_800_000_000.0)
    monkeypatch.setattr(throttling, "time", SimpleNamespace(time=lambda: state.now))
    return state


def test_a_window_frees_at_its_edge_and_retry_after_says_when(api, clock):
    api.merchant.rate_limit_per_minute = 2
    api.merchant.save()
    clock.now = 30_000_000 * 60 + 0.0  # the first instant of a window
    assert [api.get(PATH).status_code for _ in range(2)] == [404, 404]
    assert api.get(PATH)["Retry-After"] == "60"
    clock.now += 59.95  # its last moment: still limited, and never told 0
    assert api.get(PATH)["Retry-After"] == "1"
    clock.now += 0.05  # the next window
    assert [api.get(PATH).status_code for _ in range(3)] == [404, 404, 429]


def test_requests_refused_before_or_by_the_limit_do_not_hold_a_key_back(api, clock):
    """A 401 is not counted (no key is proven: whoever knows a public key id must not use up
    its merchant's limit); a 429 is, but only in its own window: hammering a limited key does
    not carry the refusal over into the next window."""
    from rest_framework.test import APIClient

    api.merchant.rate_limit_per_minute = 2
    api.merchant.save()
    clock.now = 30_000_000 * 60 + 1.0
    stranger = APIClient()
    stranger.credentials(HTTP_X_API_KEY=api.api_key, HTTP_X_API_SECRET="cs_guess")
    assert {stranger.get(PATH).status_code for _ in range(5)} == {401}
    assert [api.get(PATH).status_code for _ in range(10)] == [404, 404] + [429] * 8
    clock.now += 60
    assert [api.get(PATH).status_code for _ in range(3)] == [404, 404, 429]


def test_a_new_merchant_limit_applies_to_the_next_request(api, clock):
    api.merchant.rate_limit_per_minute = 1
    api.merchant.save()
    assert [api.get(PATH).status_code for _ in range(2)] == [404, 429]
    api.merchant.rate_limit_per_minute = 3  # as the dashboard saves it: no restart, no cache
    api.merchant.save()
    assert [api.get(PATH).status_code for _ in range(2)] == [404, 429]


@pytest.mark.skipif(not settings.REDIS_URL, reason="needs the shared Redis")
def test_processes_hitting_one_key_at_once_share_one_limit(merchant):
    """Forked processes, each with its own connection to Redis, as gunicorn's workers: the
    count is atomic in Redis, so exactly the limit gets through."""
    import multiprocessing
    from types import SimpleNamespace

    from merchants import services, throttling

    merchant.rate_limit_per_minute = 25
    merchant.save()
    request = SimpleNamespace(auth=services.api_key_create(merchant=merchant).api_key)
    context = multiprocessing.get_context("fork")
    results, start = context.Queue(), context.Barrier(6)

    def worker() -> None:  # no database: the key and its merchant are already in memory
        start.wait()
        throttle = throttling.ApiKeyRateThrottle()
        results.put([throttle.allow_request(request, None) for _ in range(10)])

    window = int(time.time() // 60)
    processes = [context.Process(target=worker) for _ in range(6)]
    for process in processes:
        process.start()
    allowed = [answer for _ in processes for answer in results.get(timeout=30)]
    for process in processes:
        process.join()
    assert len(allowed) == 60
    if int(time.time() // 60) == window:  # all in one window (else the count says nothing)
        assert allowed.count(True) == 25


def test_a_redis_that_refuses_connections_lets_requests_through(api, settings, caplog):
    """Fail open (docs/decisions.md): a Redis that is down must not stop payments."""
    import socket

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    api.merchant.rate_limit_per_minute = 1
    api.merchant.save()
    settings.REDIS_URL = f"redis://127.0.0.1:{port}/0"
    shared_cache._clients.clear()
    try:
        statuses = [api.get(PATH).status_code for _ in range(3)]
    finally:
        shared_cache._clients.clear()
    assert statuses == [404, 404, 404]
    assert caplog.text.count("Redis is unreachable") == 1
