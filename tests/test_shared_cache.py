"""Coalesced wake-ups against the real Redis: how many consumer tasks a drain enqueues."""

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


def drain(
    key: str, task: RecordingTask, work: list[int], limit: int = 10, handle=None
) -> list[int]:
    handled: list[int] = []

    def record(piece: int) -> None:
        handled.append(piece)
        if handle is not None:
            handle(piece)

    shared_cache.drain(
        key, task, claim=lambda: work.pop(0) if work else None, handle=record, limit=limit
    )
    return handled


def test_a_consumer_that_finds_work_wakes_one_more_once():
    key, task = f"test-drain-{uuid.uuid4()}", RecordingTask()

    assert drain(key, task, [1, 2, 3, 4, 5]) == [1, 2, 3, 4, 5]
    assert task.enqueued == 1
    # that consumer has not started yet: new work wakes no one else
    assert shared_cache.wake(key, task)
    assert task.enqueued == 1


def test_the_consumer_it_woke_wakes_the_next_not_this_one():
    key, task = f"test-drain-{uuid.uuid4()}", RecordingTask()

    # the woken consumer starts (clears the key) while this one is still handling its work
    started = lambda _piece: shared_cache.wake_clear(key)  # noqa: E731
    assert drain(key, task, [1, 2, 3, 4, 5], handle=started) == [1, 2, 3, 4, 5]
    assert task.enqueued == 1


def test_a_consumer_that_finds_nothing_wakes_no_one():
    key, task = f"test-drain-{uuid.uuid4()}", RecordingTask()

    assert drain(key, task, []) == []
    assert task.enqueued == 0
    assert shared_cache.wake(key, task)  # the key was cleared: the next work wakes a consumer
    assert task.enqueued == 1


def test_a_consumer_at_its_limit_leaves_the_rest_to_the_one_it_woke():
    key, task = f"test-drain-{uuid.uuid4()}", RecordingTask()
    work = [1, 2, 3, 4, 5]

    assert drain(key, task, work, limit=3) == [1, 2, 3]
    assert task.enqueued == 1
    shared_cache.wake_clear(key)  # that consumer starts
    assert drain(key, task, work, limit=3) == [4, 5]
    assert task.enqueued == 2
