"""PostgreSQL faults: connections killed with pg_terminate_backend under traffic, and a
database that is away (a test-scoped connection pointed at a closed port; the shared
PostgreSQL is never stopped)."""

import contextlib
import threading
import uuid
import wsgiref.simple_server
from collections.abc import Iterator

import pytest
import requests
from django.core.wsgi import get_wsgi_application
from django.db import connection
from rest_framework.test import APIClient

from customers.models import Customer
from tests.faults.conftest import admin_connection, free_port, other_backends
from tests.support import MerchantClient
from tests.worker import wait_until

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True)]


class _QuietHandler(wsgiref.simple_server.WSGIRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture
def live_server_url() -> Iterator[str]:
    """The real WSGI app on a socket, one request at a time in one thread, so it keeps one
    persistent database connection (CONN_MAX_AGE) for the killer to cut."""
    server = wsgiref.simple_server.make_server(
        "127.0.0.1", 0, get_wsgi_application(), handler_class=_QuietHandler
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


def test_killed_connections_under_traffic_never_leave_partial_writes_and_recover(
    merchant, live_server_url, settings
):
    # A request killed after claiming its idempotency key leaves the claim behind; it is
    # taken as crashed after this long, and the client's retry with the same key goes through.
    settings.IDEMPOTENCY_LOCK_TIMEOUT_SECONDS = 1
    client = MerchantClient(merchant)
    auth = {"X-Api-Key": client.api_key, "X-Api-Secret": client.api_secret}
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        (own_pid,) = cursor.fetchone()

    monitor = admin_connection()
    (monitor_pid,) = monitor.execute("SELECT pg_backend_pid()").fetchone()
    stop = threading.Event()
    kills = []

    def killer() -> None:
        while not stop.wait(0.05):  # pacing only; nothing below depends on timing
            for pid in other_backends(monitor, exclude={own_pid, monitor_pid}):
                monitor.execute("SELECT pg_terminate_backend(%s)", [pid])
                kills.append(pid)

    answers: list[requests.Response] = []
    intents: list[tuple[str, str]] = []

    def create(ref: str, key: str) -> bool:
        response = requests.post(
            f"{live_server_url}/customers",
            json={"external_ref": ref, "first_name": "Awa", "last_name": "Diallo"},
            headers={**auth, "Idempotency-Key": key},
            timeout=30,
        )
        answers.append(response)
        return response.status_code == 201

    def create_next() -> None:
        ref, key = f"ref-{len(intents)}", str(uuid.uuid4())
        intents.append((ref, key))
        # Retried with the same key until created, as a merchant's client would.
        assert wait_until(lambda: create(ref, key), timeout=60)

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    try:
        # Traffic goes on until the killer has cut connections several times, however fast
        # the requests are; the cap only bounds a broken run.
        while len(kills) < 3 and len(intents) < 2000:
            create_next()
    finally:
        stop.set()
        thread.join()
        monitor.close()
    assert len(kills) >= 3, "the killer never found a connection to kill"
    # No restart: the same server process answers the next requests.
    for _ in range(4):
        ref, key = f"ref-{len(intents)}", str(uuid.uuid4())
        intents.append((ref, key))
        assert create(ref, key)

    failures = [r for r in answers if r.status_code != 201]
    for response in failures:
        assert response.headers["Content-Type"].startswith("application/json")
        assert response.status_code in (409, 500, 503), response.text
        assert response.json()["error"]["code"] in (
            "conflict",
            "internal_error",
            "service_unavailable",
        )
    # Exactly one customer per intent: nothing half-written, nothing duplicated.
    refs = sorted(Customer.objects.filter(merchant=merchant).values_list("external_ref", flat=True))
    assert refs == sorted(ref for ref, _ in intents)


@contextlib.contextmanager
def database_away() -> Iterator[None]:
    """This thread's connection points at a closed port until the block ends."""
    connection.close()
    saved = connection.settings_dict["PORT"], connection.settings_dict["HOST"]
    connection.settings_dict["HOST"], connection.settings_dict["PORT"] = "127.0.0.1", free_port()
    try:
        yield
    finally:
        connection.close()
        connection.settings_dict["PORT"], connection.settings_dict["HOST"] = saved


def test_health_is_503_while_the_database_is_away_and_200_when_it_is_back(
    merchant, worker_heartbeat
):
    client = MerchantClient(merchant)
    anonymous = APIClient(raise_request_exception=False)
    api = APIClient(raise_request_exception=False)
    api.credentials(HTTP_X_API_KEY=client.api_key, HTTP_X_API_SECRET=client.api_secret)
    path = f"/customers/{uuid.uuid4()}"

    with database_away():
        health = anonymous.get("/health")
        read = api.get(path)

    assert health.status_code == 503
    assert health.json()["status"] == "unavailable"
    assert health.json()["checks"]["database"].startswith("error")
    assert health.json()["degraded"] == []  # the database is required, not an optional part
    assert read.status_code == 503
    assert read["Content-Type"].startswith("application/json")
    assert read.json()["error"]["code"] == "service_unavailable"

    # Back, without a restart.
    assert anonymous.get("/health").status_code == 200
    assert api.get(path).status_code == 404


def test_an_unreachable_database_is_a_503_with_retry_after_and_is_logged(merchant, caplog):
    """docs/errors.md: 503 service_unavailable when the database cannot be reached."""
    client = MerchantClient(merchant)
    api = APIClient(raise_request_exception=False)
    api.credentials(HTTP_X_API_KEY=client.api_key, HTTP_X_API_SECRET=client.api_secret)

    with database_away():
        read = api.get("/customers")
        write = api.post(
            "/customers", {"first_name": "Awa"}, format="json", HTTP_IDEMPOTENCY_KEY="k-away"
        )

    for response in (read, write):
        assert response.status_code == 503, response.content
        assert response["Content-Type"].startswith("application/json")
        assert 1 <= int(response["Retry-After"]) <= 30
        error = response.json()["error"]
        assert error["code"] == "service_unavailable"
        assert error["reason"] == "service_unavailable"
        assert error["message"] and "Traceback" not in response.content.decode()
    logged = [r for r in caplog.records if r.name == "cowry.errors"]
    assert len(logged) == 2 and all(r.levelname == "ERROR" and r.exc_info for r in logged)
    # Back: the write goes through with the same key, once.
    created = api.post(
        "/customers", {"first_name": "Awa"}, format="json", HTTP_IDEMPOTENCY_KEY="k-away"
    )
    assert created.status_code == 201
    assert Customer.objects.filter(merchant=merchant).count() == 1
