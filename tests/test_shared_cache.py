"""The shared Redis client: a Redis that hangs holds one API request briefly and no other."""

import contextlib
import socket
import threading

import pytest
from django.conf import settings

from core import shared_cache

pytestmark = pytest.mark.skipif(not settings.REDIS_URL, reason="needs the shared Redis")


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
    """redis-py waited 5 s per command by default: every API request (its rate limit) stalled
    while Redis hung. Now a command gives up after
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
    # left alone: no command of the other requests waited on it
    assert len(accepted) == 1
    assert caplog.text.count("Redis is unreachable") == 1
