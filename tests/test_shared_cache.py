"""Coalesced wake-ups against the real Redis: how many consumer tasks producers and a drain
enqueue, and that work committed at any moment of a drain is claimed, by a consumer that
lingers for more work or by one that does not."""

import contextlib
import socket
import threading
import time
import uuid

import pytest
from django.conf import settings
from django.db import DatabaseError, OperationalError
from django.db import connection as db_connection

from config import shared_cache

pytestmark = pytest.mark.skipif(not settings.REDIS_URL, reason="needs the shared Redis")


class RecordingTask:
    """Stands in for the consumer's Celery task: counts the consumers enqueued."""

    name = "tests.recording_consumer"

    def __init__(self) -> None:
        self.enqueued = 0
        self.helpers = 0

    def delay(self, helper: bool = False) -> None:
        self.enqueued += 1
        self.helpers += helper


class Queue:
    """Work waiting to be claimed one piece at a time; each claim also says whether it left
    more waiting, as a full batch or the sender's `more_due` does. `on_empty` runs once, the
    first time a claim finds nothing (work committed just then)."""

    def __init__(self, pieces: list[int], on_empty=None) -> None:
        self.pieces = pieces
        self.claims = 0
        self.on_empty = on_empty

    def claim(self) -> tuple[int, bool] | None:
        self.claims += 1
        if not self.pieces:
            if self.on_empty is not None:
                self.on_empty, on_empty = None, self.on_empty
                on_empty()
            return None
        return self.pieces.pop(0), bool(self.pieces)


def drain(
    key: str, task: RecordingTask, queue: Queue, limit: int = 10, handle=None, linger: float = 0
) -> list:
    handled: list[int] = []

    def record(claimed: tuple[int, bool]) -> None:
        handled.append(claimed[0])
        if handle is not None:
            handle(claimed)

    shared_cache.drain(
        key,
        task,
        claim=queue.claim,
        more=lambda claimed: claimed[1],
        rest=lambda claimed: claimed[1],
        handle=record,
        limit=limit,
        linger=linger,
    )
    return handled


@pytest.fixture
def key():
    return f"test-drain-{uuid.uuid4()}"


def produce(key: str, task: RecordingTask, queue: Queue, piece: int) -> None:
    """A producer: its work is committed, then it wakes a consumer."""
    queue.pieces.append(piece)
    assert shared_cache.wake(key, task)


def test_work_committed_while_a_consumer_works_is_claimed_by_it_and_wakes_no_one(key):
    task, queue = RecordingTask(), Queue([])
    produce(key, task, queue, 1)
    assert task.enqueued == 1  # the consumer, waiting to start

    def more_arrives(claimed):
        if claimed[0] < 4:
            produce(key, task, queue, claimed[0] + 1)

    assert drain(key, task, queue, handle=more_arrives) == [1, 2, 3, 4]
    assert task.enqueued == 1
    produce(key, task, queue, 5)  # the consumer has stopped: the next work wakes another
    assert task.enqueued == 2


def test_work_committed_as_a_consumer_finds_nothing_is_claimed_after_the_key_is_cleared(key):
    task = RecordingTask()
    queue = Queue([1])
    queue.on_empty = lambda: produce(key, task, queue, 2)  # its wake finds the key still set
    shared_cache.wake(key, task)

    assert drain(key, task, queue) == [1, 2]
    assert task.enqueued == 1


def test_a_backlog_enqueues_one_more_consumer_once(key):
    task, queue = RecordingTask(), Queue([1, 2, 3, 4, 5])
    shared_cache.wake(key, task)

    assert drain(key, task, queue) == [1, 2, 3, 4, 5]
    assert task.enqueued == 2  # the one woken, and one more for the backlog


def test_a_trickle_enqueues_no_other_consumer(key):
    task, queue = RecordingTask(), Queue([1])
    shared_cache.wake(key, task)

    assert drain(key, task, queue) == [1]
    assert task.enqueued == 1


def test_a_consumer_that_finds_nothing_leaves_the_next_work_to_a_new_one(key):
    task, queue = RecordingTask(), Queue([])
    shared_cache.wake(key, task)

    assert drain(key, task, queue) == []
    produce(key, task, queue, 1)
    assert task.enqueued == 2


def test_a_consumer_at_its_limit_hands_over_and_new_work_waits_for_the_fresh_task(key):
    task, queue = RecordingTask(), Queue([1, 2, 3, 4, 5])
    shared_cache.wake(key, task)

    assert drain(key, task, queue, limit=3) == [1, 2, 3]
    assert task.enqueued == 3  # the first, one more for the backlog, and the fresh one
    produce(key, task, queue, 6)  # the key is still held for the fresh task
    assert task.enqueued == 3
    assert drain(key, task, queue, limit=3) == [4, 5, 6]


def test_a_backlog_helper_is_enqueued_as_a_helper(key):
    task, queue = RecordingTask(), Queue([1, 2])
    shared_cache.wake(key, task)

    drain(key, task, queue)
    assert (task.enqueued, task.helpers) == (2, 1)


def _cut_and_use_the_connection() -> None:
    """Terminate this thread's PostgreSQL backend (as pg_terminate_backend from elsewhere, or a
    failover, would), then use the connection: OperationalError."""
    with db_connection.cursor() as cursor:
        with contextlib.suppress(DatabaseError):
            cursor.execute("SELECT pg_terminate_backend(pg_backend_pid())")
        cursor.execute("SELECT 1")


class CutQueue(Queue):
    """A Queue whose claims read the database; the attempts numbered in `cut` find their
    connection cut."""

    def __init__(self, pieces: list[int], cut: set[int]) -> None:
        super().__init__(pieces)
        self.cut = cut
        self.attempts = 0

    def claim(self) -> tuple[int, bool] | None:
        self.attempts += 1
        if self.attempts in self.cut:
            _cut_and_use_the_connection()
        with db_connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return super().claim()


@pytest.fixture
def cut_connection(transactional_db):
    if db_connection.vendor != "postgresql":
        pytest.skip("cuts a PostgreSQL backend")
    yield
    db_connection.close()  # it may be left cut


def test_a_claim_cut_right_after_a_piece_is_made_again_and_the_consumer_goes_on(
    key, cut_connection
):
    task, queue = RecordingTask(), CutQueue([1, 2], cut={2})  # the claim after piece 1
    shared_cache.wake(key, task)

    assert drain(key, task, queue) == [1, 2]
    produce(key, task, queue, 3)  # it stopped as usual, its key let go
    assert task.enqueued == 3  # the first, one more for the backlog, and one for piece 3


@pytest.mark.parametrize("failure", ["claim-cut-twice", "piece-not-recorded"])
def test_a_consumer_that_fails_lets_its_key_go_and_the_next_work_wakes_another(
    key, cut_connection, failure
):
    task = RecordingTask()
    queue = CutQueue([1, 2], cut={2, 3} if failure == "claim-cut-twice" else set())

    def handle(claimed: tuple[int, bool]) -> None:
        if failure == "piece-not-recorded":
            _cut_and_use_the_connection()

    shared_cache.wake(key, task)
    with pytest.raises(OperationalError):
        drain(key, task, queue, handle=handle)
    produce(key, task, queue, 3)
    assert task.enqueued == 3  # the first, one more for the backlog, and one for piece 3


def test_a_helper_that_fails_leaves_the_key_to_the_holder(key, cut_connection):
    task, queue = RecordingTask(), CutQueue([1], cut={1, 2})
    shared_cache.wake(key, task)

    with pytest.raises(OperationalError):
        shared_cache.drain(
            key,
            task,
            claim=queue.claim,
            more=lambda claimed: False,
            handle=lambda claimed: None,
            limit=10,
            helper=True,
        )
    produce(key, task, queue, 2)  # still held: the holder claims it
    assert task.enqueued == 1


# A lingering consumer. LINGER is far longer than any of these tests takes when the consumer is
# woken by a nudge: a broken nudge shows as a test that waits it out and then fails.
LINGER = 30.0


def test_a_lingering_consumer_claims_work_committed_while_it_waits_and_wakes_no_one(key):
    task, queue = RecordingTask(), Queue([1])
    shared_cache.wake(key, task)
    later = threading.Timer(0.2, produce, args=(key, task, queue, 2))
    later.start()
    started = time.monotonic()

    # limit=2: the second piece ends the drain by a hand-over instead of another wait
    assert drain(key, task, queue, limit=2, linger=LINGER) == [1, 2]
    later.join()
    assert time.monotonic() - started < LINGER / 2  # woken by the nudge, not by the timeout
    assert task.enqueued == 2  # the first and the hand-over: none for the work that came
    assert queue.claims == 2  # nothing was waiting after 1: no claim until the nudge


class BatchQueue(Queue):
    """Work claimed as a batch: a claim takes every piece waiting."""

    def claim(self) -> tuple[list[int], bool] | None:
        self.claims += 1
        if not self.pieces:
            return None
        batch, self.pieces = self.pieces, []
        return batch, False


def drain_batches(
    key: str, task: RecordingTask, arrivals: list[tuple[float, int]], gather: float
) -> tuple[list[list[int]], BatchQueue]:
    """A lingering consumer that claims batches (the first holds piece 1, woken at once),
    drained while each of `arrivals` (seconds from now, piece) is committed; three claims."""
    queue = BatchQueue([1])
    shared_cache.wake(key, task)
    producers = [
        threading.Timer(at, produce, args=(key, task, queue, piece)) for at, piece in arrivals
    ]
    for producer in producers:
        producer.start()
    handled: list[list[int]] = []
    shared_cache.drain(
        key,
        task,
        claim=queue.claim,
        more=lambda claimed: False,
        rest=lambda claimed: claimed[1],
        handle=lambda claimed: handled.append(claimed[0]),
        limit=3,
        linger=LINGER,
        gather=gather,
    )
    for producer in producers:
        producer.join()
    return handled, queue


def test_a_lingering_consumer_woken_by_a_nudge_gathers_a_stream_into_one_claim(key):
    task = RecordingTask()
    handled, queue = drain_batches(key, task, [(0.1, 2), (0.2, 3), (1.5, 4)], gather=0.6)

    assert handled == [[1], [2, 3], [4]]  # 3 came during the gather after 2's nudge
    assert queue.claims == 3  # 3's nudge was dropped: no empty claim after [2, 3]
    assert task.enqueued == 2  # the first and the hand-over


def test_a_lone_piece_after_a_quiet_is_claimed_without_gathering(key):
    handled, _ = drain_batches(key, RecordingTask(), [(1.0, 2), (1.25, 3)], gather=0.3)

    assert handled == [[1], [2], [3]]  # 2 came after a quiet longer than the gather: at once


def test_work_committed_while_a_lingering_consumer_works_is_claimed_after_it(key):
    task, queue = RecordingTask(), Queue([1])
    shared_cache.wake(key, task)

    def more_arrives(claimed):
        if claimed[0] == 1:
            produce(key, task, queue, 2)  # the key is held: this leaves a nudge

    assert drain(key, task, queue, limit=2, handle=more_arrives, linger=LINGER) == [1, 2]
    assert task.enqueued == 2


def test_a_lingering_consumer_that_waits_in_vain_stops_and_the_next_work_wakes_another(key):
    task, queue = RecordingTask(), Queue([1])
    shared_cache.wake(key, task)

    assert drain(key, task, queue, linger=0.2) == [1]
    assert task.enqueued == 1
    produce(key, task, queue, 2)
    assert task.enqueued == 2


def test_a_lingering_consumer_stops_lingering_after_its_budget(key, monkeypatch):
    monkeypatch.setattr(shared_cache, "LINGER_BUDGET_SECONDS", 0.3)
    task, queue = RecordingTask(), Queue([1])
    shared_cache.wake(key, task)
    started = time.monotonic()

    assert drain(key, task, queue, linger=LINGER) == [1]
    assert time.monotonic() - started < LINGER / 2


def test_a_wake_that_finds_the_key_held_leaves_one_nudge_at_most(key):
    task, queue = RecordingTask(), Queue([])
    for piece in range(3):
        produce(key, task, queue, piece)
    client = shared_cache.redis_client()

    assert task.enqueued == 1
    assert client.llen(shared_cache.cache_key(f"{key}:nudge")) == 1


class Request:
    def __init__(self, is_eager: bool) -> None:
        self.is_eager = is_eager


def test_only_a_consumer_run_by_a_worker_lingers(settings):
    settings.CONSUMER_LINGER_SECONDS = 0.5

    assert shared_cache.linger_seconds(Request(is_eager=False)) == 0.5
    assert shared_cache.linger_seconds(Request(is_eager=True)) == 0


def test_a_consumer_run_by_a_worker_gathers_and_an_eager_one_does_not(settings):
    settings.CONSUMER_GATHER_SECONDS = 0.04

    assert shared_cache.gather_seconds(Request(is_eager=False)) == 0.04
    assert shared_cache.gather_seconds(Request(is_eager=True)) == 0


def test_a_helper_stops_at_its_first_empty_claim_and_leaves_the_key_to_the_holder(key):
    task, queue = RecordingTask(), Queue([1, 2])
    shared_cache.wake(key, task)  # the key holder is on its way (or lingering)
    handled: list[int] = []

    shared_cache.drain(
        key,
        task,
        claim=queue.claim,
        more=lambda claimed: False,
        handle=lambda claimed: handled.append(claimed[0]),
        limit=10,
        linger=LINGER,  # a helper never lingers, whatever it is given
        helper=True,
    )
    assert handled == [1, 2]
    assert queue.claims == 3  # no second claim after the empty one: the key was not cleared
    produce(key, task, queue, 3)  # still held: the holder claims it, no one new is woken
    assert task.enqueued == 1


def test_a_helper_at_its_limit_hands_over_to_a_helper(key):
    task, queue = RecordingTask(), Queue([1, 2, 3])
    shared_cache.drain(
        key,
        task,
        claim=queue.claim,
        more=lambda claimed: False,
        handle=lambda claimed: None,
        limit=2,
        helper=True,
    )
    assert (task.enqueued, task.helpers) == (1, 1)


def test_wakes_deferred_wake_each_consumer_once_when_they_end(key):
    task, other = RecordingTask(), RecordingTask()
    other_key = f"{key}-other"
    with shared_cache.wakes_deferred():
        for _ in range(3):
            assert shared_cache.wake(key, task)
        shared_cache.wake(other_key, other)
        with shared_cache.wakes_deferred():  # nested: still the outer one's
            shared_cache.wake(key, task)
        assert (task.enqueued, other.enqueued) == (0, 0)
    assert (task.enqueued, other.enqueued) == (1, 1)
    shared_cache.wake(key, task)  # the key is held now: a nudge, as any wake after it
    assert task.enqueued == 1
    client = shared_cache.redis_client()
    assert client.llen(shared_cache.cache_key(f"{key}:nudge")) == 1


@pytest.fixture
def silent_redis():
    """A Redis address that takes connections and never answers (stopped, swapping, or a
    half-open connection after a failover), and how many connections it was opened."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    server.settimeout(0.1)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            with contextlib.suppress(OSError):
                accepted.append(server.accept()[0])

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"redis://127.0.0.1:{server.getsockname()[1]}/0", accepted
    stop.set()
    thread.join()
    for connection in accepted:
        connection.close()
    server.close()


@pytest.mark.django_db
def test_a_redis_that_does_not_answer_holds_one_request_briefly_and_no_other(
    enabled_merchant, silent_redis, settings, caplog
):
    """redis-py waited 5 s per command by default: every API request (rate limit, then the
    payin's wake-up) stalled while Redis hung. Now a command gives up after
    REDIS_TIMEOUT_SECONDS and the request path leaves Redis alone for REDIS_PAUSE_SECONDS."""
    from tests.payments.conftest import create_customer, create_quote, payin_body
    from tests.support import MerchantClient

    api = MerchantClient(enabled_merchant)
    customer = create_customer(api)
    quotes = [create_quote(api, "payin") for _ in range(4)]
    url, accepted = silent_redis
    settings.REDIS_URL = url
    shared_cache._clients.clear()
    try:
        statuses = [
            api.post("/payins", payin_body(quote, customer)).status_code for quote in quotes
        ]
    finally:
        shared_cache._clients.clear()
    assert statuses == [201] * 4
    # one connection, one command given up (the first request's rate limit); then Redis was
    # left alone: no command of the other requests, nor the first one's wake-up, waited on it
    assert len(accepted) == 1
    assert caplog.text.count("Redis is unreachable") == 1


@pytest.fixture
def slow_redis():
    """A proxy to the real Redis whose answers arrive 0.7 s late once `slow` is set (a fork for
    a save, a busy moment): later than REDIS_TIMEOUT_SECONDS, far below redis-py's own 5 s."""
    from urllib.parse import urlparse

    real = urlparse(settings.REDIS_URL)
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    server.settimeout(0.1)
    stop, slow = threading.Event(), threading.Event()

    def pipe(source: socket.socket, target: socket.socket, late: bool) -> None:
        with contextlib.suppress(OSError):
            while not stop.is_set() and (data := source.recv(65536)):
                if late and slow.is_set():
                    time.sleep(0.7)
                target.sendall(data)

    def serve() -> None:
        while not stop.is_set():
            try:
                client, _ = server.accept()
            except OSError:
                continue
            upstream = socket.create_connection((real.hostname, real.port or 6379))
            threading.Thread(target=pipe, args=(client, upstream, False), daemon=True).start()
            threading.Thread(target=pipe, args=(upstream, client, True), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"redis://127.0.0.1:{server.getsockname()[1]}{real.path}", slow
    stop.set()
    thread.join()
    server.close()


@pytest.mark.skipif(not settings.REDIS_URL, reason="needs the shared Redis")
def test_a_wake_whose_answer_comes_too_late_still_brings_a_consumer(slow_redis, settings):
    """The script ran and set the key, but its answer came after the client gave up: later
    wakes would only nudge, and no consumer would come for WAKE_SECONDS. It enqueues one."""
    key = f"late-wake-{uuid.uuid4()}"
    task = RecordingTask()
    shared_cache.redis_client().script_load(shared_cache._WAKE_SCRIPT)  # cached, as in service
    real_url = settings.REDIS_URL
    settings.REDIS_URL, slow = slow_redis
    shared_cache._clients.clear()
    shared_cache.redis_client().ping()  # the process's pooled connection, made earlier
    slow.set()
    try:
        shared_cache.wake(key, task)
    finally:
        settings.REDIS_URL = real_url
        shared_cache._clients.clear()
    time.sleep(0.9)  # the late answer has been written: the key is set
    assert shared_cache.redis_client().exists(shared_cache.cache_key(key))
    assert task.enqueued == 1
