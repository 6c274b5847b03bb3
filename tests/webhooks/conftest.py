"""A real HTTP receiver on a local socket that records every raw request it gets."""

import http.server
import threading
import time
import uuid
from dataclasses import dataclass, field

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone

from merchants import services as merchant_services
from tests.faults.conftest import (  # noqa: F401 - the broker's Redis, stopped for a moment
    admin_connection,
    backends_waiting_on_a_lock,
    broker_down,
    isolated_broker,
    private_redis,
)
from tests.worker import wait_until
from webhooks import selectors
from webhooks.services.endpoints import endpoint_set
from webhooks.services.events import event_record


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    client_port: int = 0  # the same port for two requests: one kept-alive connection


@dataclass
class Receiver:
    url: str = ""
    requests: list[Received] = field(default_factory=list)
    # Each item answers one request: an int status (with a body longer than the 1 KiB a delivery
    # keeps), ("short", status) (a body of a few bytes), ("body", status, raw bytes),
    # ("sleep", seconds), ("drip", seconds, lines) (a 200 whose header lines come one every
    # `seconds`), ("closing", status, body) (Connection: close, the body a moment after the
    # headers), ("redirect", path), ("raw", status, [(header, value)], body) (the body sent as
    # is, no length announced, the connection closed after it) or ("drip-body", seconds,
    # body) (a 200 whose body comes a byte every `seconds`), ("interim", [codes], seconds,
    # status) (an interim answer per 1xx code, then, `seconds` later, `status` with a short
    # body; no status: none).
    plan: list = field(default_factory=list)
    # For "raw" and "drip-body" answers: "sent it all" or "hung up" (the client closed first).
    endings: list[str] = field(default_factory=list)
    default: object = 200
    lock: threading.Lock = field(default_factory=threading.Lock)

    def next_answer(self):
        with self.lock:
            return self.plan.pop(0) if self.plan else self.default


@pytest.fixture
def receiver():
    state = Receiver()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self):
            length = int(self.headers.get("Content-Length", "0"))
            body = self.rfile.read(length)
            with state.lock:
                state.requests.append(
                    Received(self.path, dict(self.headers.items()), body, self.client_address[1])
                )
            answer = state.next_answer()
            try:
                if isinstance(answer, tuple) and answer[0] == "sleep":
                    time.sleep(answer[1])
                    self._reply(200, b"late")
                elif isinstance(answer, tuple) and answer[0] == "short":
                    self._reply(answer[1], b"short %d" % answer[1])
                elif isinstance(answer, tuple) and answer[0] == "body":
                    self._reply(answer[1], answer[2])
                elif isinstance(answer, tuple) and answer[0] == "drip":
                    self.send_response(200)
                    self.flush_headers()
                    for line in range(answer[2]):
                        time.sleep(answer[1])
                        self.wfile.write(b"X-Drip-%d: x\r\n" % line)
                        self.wfile.flush()
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                elif isinstance(answer, tuple) and answer[0] == "closing":
                    self.send_response(answer[1])
                    self.send_header("Connection", "close")
                    self.send_header("Content-Length", str(len(answer[2])))
                    self.end_headers()
                    self.wfile.flush()
                    time.sleep(0.05)
                    self.wfile.write(answer[2])
                    self.close_connection = True
                elif isinstance(answer, tuple) and answer[0] in ("raw", "drip-body"):
                    self._send_slowly(answer)
                elif isinstance(answer, tuple) and answer[0] == "interim":
                    _, codes, pause, status = answer
                    for code in codes:
                        self.send_response_only(code)
                        self.send_header("Link", "</style.css>; rel=preload")
                        self.end_headers()
                    time.sleep(pause)
                    if status is not None:
                        self._reply(status, b"short %d" % status)
                elif isinstance(answer, tuple) and answer[0] == "redirect":
                    self.send_response(302)
                    self.send_header("Location", answer[1])
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                else:
                    self._reply(answer, b"answer %d " % answer + b"x" * 2000)
            except (BrokenPipeError, ConnectionResetError):
                pass

        do_GET = do_POST

        def _send_slowly(self, answer: tuple) -> None:
            if answer[0] == "raw":
                _, status, headers, body = answer
                pause, step = 0.0, 65536
            else:
                _, pause, body = answer
                status, step = 200, 1
                headers = [("Content-Length", str(len(body)))]
            self.send_response(status)
            for name, value in headers:
                self.send_header(name, value)
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            try:
                for start in range(0, len(body), step):
                    self.wfile.write(body[start : start + step])
                    self.wfile.flush()
                    time.sleep(pause)
                state.endings.append("sent it all")
            except (BrokenPipeError, ConnectionResetError):
                state.endings.append("hung up")

        def _reply(self, status: int, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    yield state
    server.shutdown()
    server.server_close()


@pytest.fixture
def webhook_settings(settings):
    settings.ALLOW_PRIVATE_NETWORK_URLS = True
    settings.WEBHOOK_ALLOW_HTTP = True
    settings.WEBHOOK_TIMEOUT_SECONDS = 2
    settings.WEBHOOK_RETRY_SCHEDULE = [60, 300, 900, 3600, 14400, 43200]
    return settings


@pytest.fixture
def developer(merchant) -> Client:
    """The merchant's developer, logged in to the dashboard."""
    username = f"dev-{merchant.pk}"
    merchant_services.staff_user_create(
        username=username, password="pw-123456-staff", merchant=merchant, role="developer"
    )
    browser = Client()
    assert browser.login(username=username, password="pw-123456-staff")
    return browser


def signing_secret(endpoint) -> str:
    """The endpoint's signing secret in clear (it is stored encrypted)."""
    return selectors.endpoint_signing_secret(endpoint=endpoint)


@pytest.fixture
def endpoint(merchant, receiver, webhook_settings):
    endpoint, _secret = endpoint_set(merchant=merchant, url=receiver.url, now=timezone.now())
    return endpoint


def record_event(
    merchant, event_type: str = "payin.completed", data_type=None, snapshot=None, at=None
):
    """An event of `event_type` about a fresh resource (`snapshot` with its new id), recorded
    and fanned out at `at` (now)."""
    data_id = uuid.uuid4()
    snapshot = snapshot or {"status": event_type.rsplit(".", 1)[1]}
    return event_record(
        merchant_id=merchant.pk,
        event_type=event_type,
        data_type=data_type or event_type.split(".", 1)[0],
        data_id=data_id,
        data_object={**snapshot, "id": str(data_id)},
        at=at or timezone.now(),
    )


def racing_behind_a_held_row(requests: list, *, lock_sql: str, params: list) -> list:
    """Each request (a callable) in a thread of its own, started while a connection of the
    test holds a row (`lock_sql`), which it lets go once every one of them waits for a lock:
    they meet where the lock puts them, not where the timing would. Their answers, in the
    order they came."""
    answers = []

    def run(request):
        try:
            answers.append(request())
        finally:
            connection.close()

    holder, monitor = admin_connection(), admin_connection()
    try:
        with holder.transaction():
            holder.execute(lock_sql, params)
            threads = [threading.Thread(target=run, args=(request,)) for request in requests]
            for thread in threads:
                thread.start()
            assert wait_until(
                lambda: len(backends_waiting_on_a_lock(monitor, pattern="%")) == len(requests),
                timeout=30,
            )
        for thread in threads:
            thread.join()
    finally:
        holder.close()
        monitor.close()
    return answers
