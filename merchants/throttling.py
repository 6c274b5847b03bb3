"""Per-API-key rate limit: a fixed one-minute window counted atomically in the shared cache
(Redis in production), so every web worker shares one count."""

import logging
import math
import time

from django.conf import settings
from django.core.cache import cache
from redis.exceptions import RedisError
from rest_framework.throttling import BaseThrottle

from core import shared_cache

logger = logging.getLogger("cowry")

WINDOW_SECONDS = 60


def _count(counter: str) -> int:
    """Add one to the window's counter and return it, atomically."""
    client = shared_cache.redis_client()
    if client is not None:  # Redis: one pipelined round trip
        key = shared_cache.cache_key(counter)
        pipeline = client.pipeline(transaction=False)  # INCR is atomic on its own
        pipeline.incr(key)
        # Each count pushes the expiry on (the window's last count + 2 windows at most): EXPIRE's
        # NX, which would set it once, needs Redis 7 and failed every count on a Redis 6.
        pipeline.expire(key, WINDOW_SECONDS * 2)
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
        if shared_cache.redis_client() is not None and shared_cache.redis_paused():
            return True  # Redis failed a moment ago: not counted, as below
        try:
            count = _count(counter)
        except RedisError:  # fail open: an outage of the counter must not stop payments
            if shared_cache.redis_failed():
                logger.warning(
                    "Rate limits not counted for %ss: Redis is unreachable",
                    shared_cache.REDIS_PAUSE_SECONDS,
                )
            return True
        self._wait = (window + 1) * WINDOW_SECONDS - now
        if count == limit + 1:  # once a window: which merchant is refused, not every refusal
            logger.warning(
                "Rate limit of %d requests a minute reached by API key %s of merchant %s:"
                " its further requests get 429 for %ds",
                limit,
                api_key.pk,
                api_key.merchant_id,
                math.ceil(self._wait),
            )
        return count <= limit

    def wait(self) -> float:
        return self._wait
