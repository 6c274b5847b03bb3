"""The Redis every process shares (REDIS_URL; none in embedded mode), for the hot paths that
need more than Django's cache API or cannot afford its new client per call: the per-key rate
limit and coalesced wake-ups. Keys go through the cache's own naming, so `cache.get/delete`
see the same keys.

A coalesced wake-up: many producers (committed payins, new webhook deliveries), one consumer
task waiting to start. `wake(key, task)` enqueues the task only when no consumer is waiting:
the key is set (SET NX) from the enqueue until a consumer starts and calls `wake_clear(key)`,
or for WAKE_SECONDS if that task is lost. A consumer that finds work wakes one more (once: that
one wakes the next when it finds work in turn), so a backlog is drained by every process of the
task's queue. Without a shared Redis every wake
enqueues, as it must: nothing else would tell the processes apart."""

import contextlib
import logging
from collections.abc import Callable
from typing import TypeVar

import redis
from celery import Task
from django.conf import settings
from django.core.cache import cache
from kombu.exceptions import OperationalError as BrokerError
from redis.exceptions import RedisError

logger = logging.getLogger("cowry")

WAKE_SECONDS = 30

_clients: dict[str, redis.Redis] = {}

Claimed = TypeVar("Claimed")


def redis_client() -> redis.Redis | None:
    """This process's client of the shared Redis (thread-safe; its pool survives a fork), or
    None in embedded mode."""
    url = settings.REDIS_URL
    if not url:
        return None
    client = _clients.get(url)
    if client is None:
        client = _clients[url] = redis.Redis.from_url(url)
    return client


def cache_key(name: str) -> str:
    """`name` as Django's cache stores it (prefix and version)."""
    return cache.make_and_validate_key(name)


def wake(key: str, task: Task) -> bool:
    """Enqueue `task` unless a consumer is already waiting to start. False when neither Redis
    nor the broker could be reached: the caller's sweep is then the fallback."""
    client = redis_client()
    try:
        if client is not None and not client.set(cache_key(key), 1, nx=True, ex=WAKE_SECONDS):
            return True  # a consumer is waiting to start: it will find the new work
        task.delay()
        return True
    except (BrokerError, RedisError):
        logger.warning("Could not wake %s; the work is left to its sweep", task.name)
        if client is not None:
            with contextlib.suppress(RedisError):  # else the key expires on its own
                client.delete(cache_key(key))
        return False


def wake_clear(key: str) -> None:
    """A consumer starts: work committed from now on wakes another."""
    client = redis_client()
    if client is None:
        return
    try:
        client.delete(cache_key(key))
    except RedisError:  # the key expires on its own
        logger.warning("Could not clear the wake key %s", key)


def drain(
    key: str,
    task: Task,
    *,
    claim: Callable[[], Claimed | None],
    handle: Callable[[Claimed], None],
    limit: int,
) -> int:
    """A woken consumer's loop: clear the wake key, then claim one piece of work (after the
    first, wake one more consumer for what else may be waiting), handle it; until `claim`
    finds nothing, or `limit` pieces, when a fresh task goes on. One wake per consumer is
    enough for the chain: more would only be refused by the key already set, at a Redis round
    trip each. Returns how many were claimed. The ordering argument:
    work committed while the key is set is seen by the consumer that will clear it, which
    claims only afterwards; once the key is cleared the next commit wakes a new consumer."""
    wake_clear(key)
    claimed = 0
    while claimed < limit:
        work = claim()
        if work is None:
            return claimed
        if claimed == 0:
            wake(key, task)
        claimed += 1
        handle(work)
    wake(key, task)
    return claimed
