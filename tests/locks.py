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
