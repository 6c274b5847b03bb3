"""The Redis every process shares (REDIS_URL; none in embedded mode), for the hot paths that
need more than Django's cache API or cannot afford its new client per call: the per-key rate
limit and coalesced wake-ups. Keys go through the cache's own naming, so `cache.get/delete`
see the same keys.

A coalesced wake-up: many producers (committed payins, new webhook deliveries), one consumer
task waiting to start or at work. `wake(key, task)` enqueues the task only when no consumer is:
the key is set (SET NX) from the enqueue until that consumer, about to stop, clears it (see
`drain`), or for WAKE_SECONDS if the consumer is lost. A consumer whose claim leaves work
waiting enqueues one more, so a backlog is drained by every process of the task's queue.
Without a shared Redis every wake enqueues, as it must: nothing else would tell the processes
apart."""

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
    """Enqueue `task` unless a consumer is already waiting to start or at work. False when
    neither Redis nor the broker could be reached: the caller's sweep is then the fallback."""
    client = redis_client()
    try:
        if client is not None and not client.set(cache_key(key), 1, nx=True, ex=WAKE_SECONDS):
            return True  # a consumer is waiting to start or at work: it will find the new work
    except RedisError:
        logger.warning("Could not wake %s; the work is left to its sweep", task.name)
        return False
    if _enqueue(task):
        return True
    if client is not None:  # no consumer is coming: let the next commit try again
        with contextlib.suppress(RedisError):  # else the key expires on its own
            client.delete(cache_key(key))
    return False


def wake_clear(key: str) -> None:
    """A consumer is about to stop: work committed from now on wakes another."""
    client = redis_client()
    if client is None:
        return
    try:
        client.delete(cache_key(key))
    except RedisError:  # the key expires on its own
        logger.warning("Could not clear the wake key %s", key)


def wake_hold(key: str) -> None:
    """A consumer goes on working: work committed from now on waits for it."""
    client = redis_client()
    if client is None:
        return
    try:
        client.set(cache_key(key), 1, ex=WAKE_SECONDS)
    except RedisError:  # new work then wakes a consumer of its own: only a wasted task
        logger.warning("Could not set the wake key %s", key)


def _enqueue(task: Task) -> bool:
    """Enqueue the consumer task; False (logged) when the broker cannot be reached."""
    try:
        task.delay()
        return True
    except BrokerError:
        logger.warning("Could not enqueue %s; the work is left to its sweep", task.name)
        return False


def drain(
    key: str,
    task: Task,
    *,
    claim: Callable[[], Claimed | None],
    more: Callable[[Claimed], bool],
    handle: Callable[[Claimed], None],
    limit: int,
) -> int:
    """A woken consumer's loop: claim a piece of work and handle it, until `claim` finds
    nothing, or `limit` pieces, when a fresh task takes over. The wake key stays set while it
    works, so new work wakes no other consumer: this one claims it. When a claim finds nothing
    it clears the key and claims once more, for what was committed in between; only when that
    finds nothing too does it stop. The first claim that `more(piece)` says left work waiting
    (a full batch, another delivery due) enqueues one more consumer, which does the same: a
    backlog is drained by every process of the queue, while a trickle keeps one consumer busy
    instead of a task per piece. Returns how many were claimed.

    The ordering argument: a commit whose wake finds the key set happened before the key is
    next cleared, and every consumer clears it and then claims before it stops; a commit whose
    wake finds the key clear enqueues a consumer of its own. A consumer lost with the key set
    delays new work by at most WAKE_SECONDS (the key expires), and its sweep catches the rest."""
    claimed = 0
    helped = False
    while claimed < limit:
        work = claim()
        if work is None:
            wake_clear(key)
            work = claim()
            if work is None:
                return claimed
            wake_hold(key)
        if not helped and more(work):
            helped = _enqueue(task)
        claimed += 1
        handle(work)
    _enqueue(task)  # the key stays set: the fresh task goes on with this one's work
    return claimed
