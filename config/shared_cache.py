"""The Redis every process shares (REDIS_URL; none in embedded mode), for the hot paths that
need more than Django's cache API or cannot afford its new client per call: the per-key rate
limit and coalesced wake-ups. Keys go through the cache's own naming, so `cache.get/delete`
see the same keys.

A coalesced wake-up: many producers (committed payins, new webhook deliveries), one consumer
task waiting to start or at work. `wake(key, task)` enqueues the task only when no consumer is:
the key is set (SET NX) from the enqueue until that consumer, about to stop or failing, clears
it (see `drain`), or for WAKE_SECONDS if its process is lost. A consumer whose claim leaves work
waiting enqueues one more, so a backlog is drained by every process of the task's queue.
A consumer running in a worker lingers: when nothing is left it waits a moment for a nudge,
which a wake that finds the key held leaves, so a steady stream of work costs no task per piece.
Without a shared Redis every wake enqueues, as it must: nothing else would tell the processes
apart."""

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import redis
from celery import Task
from django.conf import settings
from django.core.cache import cache
from django.db import InterfaceError, OperationalError, close_old_connections
from kombu.exceptions import OperationalError as BrokerError
from redis.exceptions import RedisError

logger = logging.getLogger("cowry")

WAKE_SECONDS = 30
LINGER_BUDGET_SECONDS = 10  # < WAKE_SECONDS; then a consumer stops lingering (drain)
# A Redis that takes connections and does not answer (stopped, swapping, a half-open
# connection after a failover) must not hold API requests: a command gives up after this...
REDIS_TIMEOUT_SECONDS = 0.5
# ...and after a failure the request path leaves Redis alone for this long (fails open).
REDIS_PAUSE_SECONDS = 5.0

_clients: dict[tuple[str, bool], redis.Redis] = {}
_paused_until = 0.0

Claimed = TypeVar("Claimed")


def redis_client(*, blocking: bool = False) -> redis.Redis | None:
    """This process's client of the shared Redis (thread-safe; its pool survives a fork), or
    None in embedded mode. Its commands give up after REDIS_TIMEOUT_SECONDS; `blocking`: the
    client for commands that wait on the server (BLPOP, at most LINGER_BUDGET_SECONDS), whose
    reads may take that long."""
    url = settings.REDIS_URL
    if not url:
        return None
    client = _clients.get((url, blocking))
    if client is None:
        timeouts = {
            "socket_connect_timeout": REDIS_TIMEOUT_SECONDS,
            "socket_timeout": (
                LINGER_BUDGET_SECONDS + REDIS_TIMEOUT_SECONDS if blocking else REDIS_TIMEOUT_SECONDS
            ),
        }
        client = _clients[(url, blocking)] = redis.Redis.from_url(url, **timeouts)
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


# Set the wake key; when it is already set, leave a nudge (at most one waits) for a lingering
# consumer instead. One round trip, and no window between the test and the nudge.
_WAKE_SCRIPT = """
if redis.call('SET', KEYS[1], 1, 'NX', 'EX', ARGV[1]) then return 1 end
redis.call('RPUSH', KEYS[2], 1)
redis.call('LTRIM', KEYS[2], -1, -1)
redis.call('EXPIRE', KEYS[2], ARGV[1])
return 0
"""
_scripts: dict[int, redis.commands.core.Script] = {}


def _nudge_key(key: str) -> str:
    return cache_key(f"{key}:nudge")


_deferred = threading.local()


@contextmanager
def wakes_deferred() -> Iterator[None]:
    """Within it, `wake` only notes what it would wake; each consumer noted is woken once when
    it ends. For a consumer that makes work for another piece after piece (the submitter's
    answered payins, each with its webhook deliveries): one wake for its batch instead of one
    Redis round trip per piece. A wake noted is lost with the process, as one due right after a
    commit is: the other consumer's sweep is the fallback."""
    if getattr(_deferred, "wakes", None) is not None:  # nested: the outer one wakes them
        yield
        return
    _deferred.wakes = wakes = {}
    try:
        yield
    finally:
        _deferred.wakes = None
        for key, task in wakes.items():
            wake(key, task)


def wake(key: str, task: Task) -> bool:
    """Enqueue `task` unless a consumer is already waiting to start or at work (then nudge it).
    False when neither Redis nor the broker could be reached: the caller's sweep is then the
    fallback. Within `wakes_deferred`, noted for its end (True)."""
    wakes = getattr(_deferred, "wakes", None)
    if wakes is not None:
        wakes[key] = task
        return True
    client = redis_client()
    if client is not None and redis_paused():
        # It failed a moment ago, and the broker is often the same server: the request does
        # not wait on either; the sweep resubmits, as when both are down.
        return False
    try:
        if client is not None:
            script = _scripts.get(id(client))
            if script is None:
                script = _scripts[id(client)] = client.register_script(_WAKE_SCRIPT)
            if not script(keys=[cache_key(key), _nudge_key(key)], args=[WAKE_SECONDS]):
                return True  # a consumer is waiting to start or at work: it will find the work
    except RedisError:
        # The script may have run and set the key even so (an answer later than the timeout):
        # later wakes would then only nudge, and no consumer would come. One of its own does;
        # at worst it is one task more.
        if redis_failed():
            logger.warning("Could not wake %s through Redis; enqueued it directly", task.name)
        return _enqueue(task)
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


def _nudged(key: str, seconds: float) -> bool:
    """Wait up to `seconds` for a nudge (taking it); False when none came or Redis is away."""
    client = redis_client(blocking=True)
    if client is None:
        return False
    try:
        return client.blpop([_nudge_key(key)], timeout=seconds) is not None
    except RedisError:
        logger.warning("Could not wait for a nudge on %s", key)
        return False


def _enqueue(task: Task, **kwargs: object) -> bool:
    """Enqueue the consumer task; False (logged) when the broker cannot be reached."""
    try:
        task.delay(**kwargs)
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
    rest: Callable[[Claimed], bool] = lambda _: True,
    linger: float = 0,
    gather: float = 0,
    helper: bool = False,
) -> int:
    """A woken consumer's loop: claim a piece of work and handle it, until `claim` finds
    nothing, or `limit` pieces, when a fresh task takes over. The wake key stays set while it
    works, so new work wakes no other consumer: this one claims it. When a claim finds nothing
    it clears the key and claims once more, for what was committed in between; only when that
    finds nothing too does it stop. The first claim that `more(piece)` says left work waiting
    (a full batch, another delivery due) enqueues one more consumer, a helper, which does the
    same but leaves the key alone (the consumer that holds it claims whatever comes next) and
    stops at its first claim that finds nothing: a backlog is drained by every process of the
    queue, while a trickle keeps one consumer busy instead of a task per piece. Returns how
    many were claimed.

    With `linger` (a consumer in a worker; never a helper), before clearing the key it waits
    up to `linger` seconds for a nudge, and claims again when one comes; after a piece whose
    claim said, through `rest`, that nothing else was waiting, it goes straight to waiting. It
    lingers only within LINGER_BUDGET_SECONDS of its start (the key, held afresh at the start,
    outlives that), then drains as one that does not linger: the worker processes it shares
    with other queues get their turn. With `gather`, a consumer a nudge woke within `gather`
    seconds of its wait (a stream) waits that long before it claims, so what the stream commits
    meanwhile is claimed at once (one wake and one claim for several pieces instead of one
    each); the nudges left meanwhile are dropped, as that claim sees every commit before it. A
    nudge after a longer quiet (a lone piece) is claimed at once.

    The ordering argument: a commit whose wake finds the key set happened before the key is
    next cleared, and the consumer holding it clears it and then claims before it stops (or
    hands the key to a fresh task at its limit); a commit whose wake finds the key clear
    enqueues a consumer of its own. A nudge is left after its commit, so a consumer that takes
    it claims that work; and a claim that said nothing was waiting saw every commit before it,
    while every later one leaves a nudge. A consumer that fails (an exception: its database
    connection lost twice, a piece it could not record) clears the key as it stops, so the next
    commit wakes another; one lost with its process delays new work by at most WAKE_SECONDS
    (the key expires). What either left unclaimed or unrecorded is for its sweep."""
    claimed = 0
    helped = False
    waiting = True
    lingers_until = 0.0
    if linger and not helper:
        lingers_until = time.monotonic() + LINGER_BUDGET_SECONDS
        wake_hold(key)  # a chain of hand-overs may have outlived the key
    try:
        while claimed < limit:
            work = _claim(claim) if waiting else None
            if work is None:
                if helper:
                    return claimed
                wait = min(linger, lingers_until - time.monotonic())
                if wait > 0:
                    quiet_since = time.monotonic()
                    if _nudged(key, wait):
                        if time.monotonic() - quiet_since < gather:  # a stream, not a lone piece
                            _gather(key, gather)
                        waiting = True
                        continue
                wake_clear(key)
                work = _claim(claim)
                if work is None:
                    return claimed
                wake_hold(key)
            if not helped and more(work):
                helped = _enqueue(task, helper=True)
            claimed += 1
            handle(work)
            waiting = rest(work) or time.monotonic() >= lingers_until
    except BaseException:
        if not helper:  # it stops: the next commit must wake another (a helper holds no key)
            wake_clear(key)
        raise
    _enqueue(task, helper=helper)  # the key stays set: the fresh task goes on with the work
    return claimed


def _gather(key: str, seconds: float) -> None:
    """Let a stream's next pieces arrive for `seconds`, then drop the nudge they left: a nudge
    is left after its commit, so the claim that follows sees that work."""
    time.sleep(seconds)
    client = redis_client()
    if client is None:
        return
    with contextlib.suppress(RedisError):  # a nudge kept only costs one empty claim
        client.delete(_nudge_key(key))


def _claim(claim: Callable[[], Claimed | None]) -> Claimed | None:
    """`claim()`, once more on a new connection if the database connection failed: it may
    have been closed or killed (pg_terminate_backend, a failover) while this consumer waited
    or worked on its last piece. A new task's would be checked first, by CONN_HEALTH_CHECKS;
    checking before every claim would cost a round trip per piece. A second failure ends the
    consumer (`drain` then lets its key go)."""
    try:
        return claim()
    except (OperationalError, InterfaceError):
        logger.warning("The database connection failed; claiming on a new one")
        close_old_connections()
        return claim()


def linger_seconds(request: object) -> float:
    """How long a consumer task lingers for more work: not at all when run eagerly (in the
    caller's process), else CONSUMER_LINGER_SECONDS (a helper never lingers: `drain`)."""
    if getattr(request, "is_eager", False):
        return 0
    return settings.CONSUMER_LINGER_SECONDS


def gather_seconds(request: object) -> float:
    """How long a lingering consumer a nudge woke waits before it claims (`drain`): not at all
    when run eagerly, else CONSUMER_GATHER_SECONDS."""
    if getattr(request, "is_eager", False):
        return 0
    return settings.CONSUMER_GATHER_SECONDS
