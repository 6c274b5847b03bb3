"""Per-API-key rate limit: a fixed one-minute window counted atomically in the shared cache
(Redis in production), so every web worker shares one count."""

import time

from django.conf import settings
from django.core.cache import cache
from rest_framework.throttling import BaseThrottle

WINDOW_SECONDS = 60


def _count(counter: str) -> int:
    """Add one to the window's counter and return it, atomically."""
    backend = getattr(cache, "_cache", None)
    if hasattr(backend, "get_client"):  # Redis: one pipelined round trip
        key = cache.make_and_validate_key(counter)
        pipeline = backend.get_client(key, write=True).pipeline()
        pipeline.incr(key)
        pipeline.expire(key, WINDOW_SECONDS * 2, nx=True)
        return pipeline.execute()[0]
    if cache.add(counter, 1, timeout=WINDOW_SECONDS * 2):  # local memory (embedded mode)
        return 1
    return cache.incr(counter)


class ApiKeyRateThrottle(BaseThrottle):
    def allow_request(self, request, view) -> bool:
        api_key = request.auth
        if api_key is None or not hasattr(api_key, "merchant"):
            return True
        limit = api_key.merchant.rate_limit_per_minute or settings.RATE_LIMIT_PER_MINUTE
        now = time.time()
        window = int(now // WINDOW_SECONDS)
        counter = f"ratelimit:{api_key.pk}:{window}"
        count = _count(counter)
        self._wait = (window + 1) * WINDOW_SECONDS - now
        return count <= limit

    def wait(self) -> float:
        return self._wait
