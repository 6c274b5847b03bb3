"""Racers lined up behind a row lock: a test holds a lock, starts its racers, waits until they
all wait for it, then lets go, so the order they meet in is the one under test."""

import threading
import time

from django.db import connection


def waiting_for_a_lock(count: int, timeout: float = 30) -> None:
    """Until `count` other sessions of this database wait for a lock; AssertionError after
    `timeout` seconds. Works inside a transaction too: the activity is read afresh each time,
    not from the transaction's snapshot of it."""
    deadline = time.monotonic() + timeout
    while True:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_stat_clear_snapshot()")
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
            )
            if cursor.fetchone()[0] >= count:
                return
        if time.monotonic() > deadline:
            raise AssertionError(f"{count} sessions never waited for a lock")
        time.sleep(0.01)


def start(work, results: list) -> threading.Thread:
    """Run `work` in a thread of its own (its own database connection), appending its result."""

    def run():
        try:
            results.append(work())
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def at_once(work, runs: int) -> None:
    """`work` in `runs` threads released at the same moment, each on its own database
    connection (a task delivered several times, two beats' sweeps); AssertionError with
    whatever any of them raised."""
    barrier = threading.Barrier(runs, timeout=30)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            barrier.wait()
            work()
        except BaseException as error:  # the test reports it
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=run) for _ in range(runs)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors, errors


def together(work, count: int) -> list:
    """`work(index)` in `count` threads released at the same moment, each on its own database
    connection; their results by index (None for one that raised)."""
    barrier = threading.Barrier(count, timeout=60)
    results = [None] * count

    def run(index):
        try:
            barrier.wait()
            results[index] = work(index)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results
