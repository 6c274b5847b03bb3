"""Coalesced wake-ups against the real Redis: how many consumer tasks producers and a drain
enqueue, and that work committed at any moment of a drain is claimed."""

import uuid

import pytest
from django.conf import settings

from config import shared_cache

pytestmark = pytest.mark.skipif(not settings.REDIS_URL, reason="needs the shared Redis")


class RecordingTask:
    """Stands in for the consumer's Celery task: counts the consumers enqueued."""

    name = "tests.recording_consumer"

    def __init__(self) -> None:
        self.enqueued = 0

    def delay(self) -> None:
        self.enqueued += 1


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


def drain(key: str, task: RecordingTask, queue: Queue, limit: int = 10, handle=None) -> list:
    handled: list[int] = []

    def record(claimed: tuple[int, bool]) -> None:
        handled.append(claimed[0])
        if handle is not None:
            handle(claimed)

    shared_cache.drain(
        key, task, claim=queue.claim, more=lambda claimed: claimed[1], handle=record, limit=limit
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
