"""Fault-injection helpers: a webhook receiver that can hang until released, a private Redis
server that can be stopped and started (the broker down for a moment: `broker_down`) or whose
queues the test reads and empties (`broker_queues`), and PostgreSQL backend inspection."""

import base64
import contextlib
import http.server
import json
import shutil
import socket
import subprocess
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import psycopg
import pytest
import redis
from django.utils import timezone

from core import shared_cache
from core.jobs import registered
from tests.faults.gateways import CUT_ENV, KILL_ENV, RUN_ENV, requests_key
from tests.worker import QUEUES, _database_url, wait_until
from webhooks.services.endpoints import endpoint_set


@dataclass
class HangingReceiver:
    """Answers 200, except that while `hold` is set each request blocks until `release()`."""

    url: str = ""
    requests: list[tuple[dict[str, str], bytes]] = field(default_factory=list)
    hold: bool = False
    arrived: threading.Event = field(default_factory=threading.Event)
    released: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def release(self) -> None:
        self.hold = False
        self.released.set()

    def webhook_ids(self) -> list[str]:
        with self.lock:
            return [headers["X-Cowry-Webhook-Id"] for headers, _ in self.requests]


@pytest.fixture
def hanging_receiver() -> Iterator[HangingReceiver]:
    state = HangingReceiver()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            with state.lock:
                state.requests.append((dict(self.headers.items()), body))
            if state.hold:
                state.arrived.set()
                state.released.wait(timeout=120)
            try:
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")
            except OSError:
                pass  # the sender is gone (killed, or timed out)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    yield state
    state.release()
    server.shutdown()
    server.server_close()


@pytest.fixture
def webhook_endpoint(hanging_receiver, settings):
    """Returns a function that points a merchant's webhooks at the hanging receiver (or at
    `url`)."""
    settings.ALLOW_PRIVATE_NETWORK_URLS = True
    settings.WEBHOOK_ALLOW_HTTP = True

    def configure(merchant, url: str | None = None):
        endpoint, _secret = endpoint_set(
            merchant=merchant, url=url or hanging_receiver.url, now=timezone.now()
        )
        return endpoint

    return configure


WORKER_ENV = {
    "ALLOW_PRIVATE_NETWORK_URLS": "true",
    "WEBHOOK_ALLOW_HTTP": "true",
    # A task whose worker was SIGKILLed is handed out again after this, not after an hour.
    "CELERY_VISIBILITY_TIMEOUT_SECONDS": "3",
}


@pytest.fixture
def faulty_provider():
    """(worker env, the provider's requests so far): env(kill=kinds, cut=kinds) is a worker
    whose gateway kills it, or cuts its database connection, after the first call of those
    kinds for each reference."""
    run = uuid.uuid4().hex
    client = shared_cache.redis_client()

    def env(*, kill: tuple[str, ...] = (), cut: tuple[str, ...] = ()) -> dict[str, str]:
        return {
            **WORKER_ENV,
            "DJANGO_SETTINGS_MODULE": "tests.faults.worker_settings",
            RUN_ENV: run,
            KILL_ENV: ",".join(kill),
            CUT_ENV: ",".join(cut),
        }

    def requests() -> list[str]:
        return [item.decode() for item in client.lrange(requests_key(run), 0, -1)]

    yield env, requests
    client.delete(*client.keys(shared_cache.cache_key(f"faults:{run}:*")))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def admin_connection() -> psycopg.Connection:
    """A separate connection to the test database, outside Django (autocommit)."""
    return psycopg.connect(_database_url(), autocommit=True)


def backends_waiting_on_a_lock(conn: psycopg.Connection, *, pattern: str) -> list[int]:
    rows = conn.execute(
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
        "AND wait_event_type = 'Lock' AND query ILIKE %s",
        [pattern],
    ).fetchall()
    return [pid for (pid,) in rows]


def other_backends(conn: psycopg.Connection, *, exclude: set[int]) -> list[int]:
    rows = conn.execute(
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
        "AND backend_type = 'client backend' AND pid <> pg_backend_pid()"
    ).fetchall()
    return [pid for (pid,) in rows if pid not in exclude]


def backend_gone(conn: psycopg.Connection, pid: int) -> bool:
    row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", [pid]).fetchone()
    return row[0] == 0


REDIS_FLAGS = ("--save", "", "--appendonly", "no")


class RedisServer:
    """A private redis-server (never the shared one on 6379) that the test stops and starts."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.skip("redis-server is not installed")
        self.process = subprocess.Popen(
            [*(binary, "--port", str(self.port), "--bind", "127.0.0.1"), *REDIS_FLAGS],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        assert wait_until(self.answers, timeout=20), "redis-server did not start"

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None

    def answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False


@pytest.fixture
def private_redis() -> Iterator[RedisServer]:
    server = RedisServer()
    server.start()
    yield server
    server.stop()


def _use_broker(url: str) -> None:
    from config.celery import app

    app.conf.broker_url = url
    app._pool = None
    app.amqp._producer_pool = None


@pytest.fixture
def isolated_broker(private_redis, settings, monkeypatch) -> Iterator[RedisServer]:
    """This process and the workers it starts talk to the private Redis."""
    previous = settings.CELERY_BROKER_URL
    settings.CELERY_BROKER_URL = private_redis.url
    monkeypatch.setenv("CELERY_BROKER_URL", private_redis.url)  # celery reads it first
    _use_broker(private_redis.url)
    yield private_redis
    _use_broker(previous)


@contextlib.contextmanager
def _eager_off() -> Iterator[None]:
    """This process's enqueues really publish to the broker for the block."""
    from config.celery import app

    eager = app.conf.task_always_eager
    app.conf.task_always_eager = False
    try:
        yield
    finally:
        app.conf.task_always_eager = eager


@pytest.fixture
def broker_down(isolated_broker) -> Callable[[], contextlib.AbstractContextManager[None]]:
    """`with broker_down():` the broker's Redis (the private one) is stopped and this process
    publishes to it, eager execution off: every enqueue in the block really fails, as kombu
    fails it in an outage. After the block Redis is back and tasks run in-process again.
    Outside tests/faults, import it with isolated_broker and private_redis into the conftest."""
    from config.celery import app

    # The tasks modules imported now: the first enqueue that has to import them sets Django up
    # again through Celery's fixup, and its logging with it (caplog's handler gone).
    app.loader.import_default_modules()

    @contextlib.contextmanager
    def outage() -> Iterator[None]:
        isolated_broker.stop()
        try:
            with _eager_off():
                yield
        finally:
            isolated_broker.start()

    return outage


@dataclass
class BrokerQueues:
    """The private broker's queues as kombu's Redis transport keeps them: a list per queue,
    the oldest message last, each a JSON envelope whose base64 body is (args, kwargs, embed).
    No worker consumes them: the test takes messages off by task name."""

    server: RedisServer

    def _client(self) -> redis.Redis:
        return redis.Redis.from_url(self.server.url)

    def _messages(self) -> Iterator[tuple[str, bytes, dict]]:
        client = self._client()
        for queue in QUEUES.split(","):
            for raw in reversed(client.lrange(queue, 0, -1)):
                yield queue, raw, json.loads(raw)

    def waiting(self) -> Counter[str]:
        """The tasks published and not taken yet, by name."""
        return Counter(message["headers"]["task"] for _, _, message in self._messages())

    def _take(self, name: str) -> list[tuple[list, dict]]:
        """Take every waiting message of the task `name` off its queue: (args, kwargs) each."""
        client = self._client()
        taken = []
        for queue, raw, message in list(self._messages()):
            if message["headers"]["task"] == name and client.lrem(queue, 1, raw):
                assert message["properties"]["body_encoding"] == "base64"
                args, kwargs, _embed = json.loads(base64.b64decode(message["body"]))
                taken.append((args, kwargs))
        return taken

    def run(self, name: str) -> int:
        """Run the body of each waiting `name` here, as a worker would (in this process and
        the test's transaction: call it inside `run` of the transfers' tests to send what it
        enqueues after commit); how many ran. What they publish waits in the queues."""
        taken = self._take(name)
        for args, kwargs in taken:
            registered(name).apply(args=args, kwargs=kwargs)
        return len(taken)

    def lose(self, name: str) -> int:
        """Every waiting `name` is lost, never run (its worker killed, the message gone with
        it); how many."""
        return len(self._take(name))


@pytest.fixture
def broker_queues(isolated_broker) -> Iterator[BrokerQueues]:
    """Eager execution off: every enqueue of this process really publishes to the private
    Redis, where it waits, consumed by no worker, until the test runs or loses it.
    Outside tests/faults, import it with isolated_broker and private_redis into the conftest."""
    from config.celery import app

    app.loader.import_default_modules()  # as broker_down does
    with _eager_off():
        yield BrokerQueues(isolated_broker)
