import time

import pytest
from django.conf import settings
from django.core.cache import cache

from config import shared_cache

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


@pytest.mark.parametrize(("wait", "retry_after"), [(30.0, "30"), (29.2, "30"), (0.0, "1")])
def test_retry_after_is_the_wait_rounded_up_to_a_whole_second(wait, retry_after):
    from rest_framework.exceptions import Throttled

    from config.exceptions import build_error_response

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
    from django.db import IntegrityError, transaction
    from django.test import RequestFactory

    from merchants.models import Merchant

    admin = site._registry[Merchant]
    request = RequestFactory().get("/")
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
    paused the request path's Redis use (payment wake-ups) for REDIS_PAUSE_SECONDS."""
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
