"""The Redis every process shares (REDIS_URL; none in embedded mode), for what needs more than
Django's cache API or cannot afford a new client per call: the per-key rate limit and the
dashboard's login counters. Keys go through the cache's own naming, so `cache.get/delete` see
the same keys. A Redis that hangs must not hold API requests: commands give up quickly and the
request path then leaves Redis alone for a moment (it fails open)."""

import time

import redis
from django.conf import settings
from django.core.cache import cache

# A Redis that takes connections and does not answer (stopped, swapping, a half-open
# connection after a failover) must not hold API requests: a command gives up after this...
REDIS_TIMEOUT_SECONDS = 0.5
# ...and after a failure the request path leaves Redis alone for this long (fails open).
REDIS_PAUSE_SECONDS = 5.0

_clients: dict[str, redis.Redis] = {}
_paused_until = 0.0


def redis_client() -> redis.Redis | None:
    """This process's client of the shared Redis (thread-safe; its pool survives a fork), or
    None in embedded mode. Its commands give up after REDIS_TIMEOUT_SECONDS."""
    url = settings.REDIS_URL
    if not url:
        return None
    client = _clients.get(url)
    if client is None:
        client = _clients[url] = redis.Redis.from_url(
            url,
            socket_connect_timeout=REDIS_TIMEOUT_SECONDS,
            socket_timeout=REDIS_TIMEOUT_SECONDS,
        )
    return client


def redis_paused() -> bool:
    """Whether the request path should leave Redis alone for now (it failed a moment ago)."""
    return time.monotonic() < _paused_until


def redis_failed() -> bool:
    """Note a failure of Redis on the request path: it is left alone for REDIS_PAUSE_SECONDS.
    True for the failure that starts a pause (the one to log)."""
    global _paused_until
    starts = not redis_paused()
    _paused_until = time.monotonic() + REDIS_PAUSE_SECONDS
    return starts


def cache_key(name: str) -> str:
    """`name` as Django's cache stores it (prefix and version)."""
    return cache.make_and_validate_key(name)
