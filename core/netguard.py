"""Outbound HTTP that cannot be pointed at our own network (SSRF guard).

The check runs when connecting, on every address the name resolves to then, and the socket
connects to those very addresses: a hostname that resolves to a public address at validation
time and to 127.0.0.1 at fetch time (DNS rebinding) is still refused, before any handshake.
Redirects are never followed by the session or the pool manager made here.

Inside `deadline(seconds)` nothing a request does outlives it: the name lookup, each connect,
the TLS handshake, sending the request and reading the answer all get only what is left.
"""

import http.client
import io
import ipaddress
import os
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from contextvars import ContextVar
from urllib.parse import urlsplit, urlunsplit

import requests
import urllib3
from django.conf import settings
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import ConnectTimeoutError, NameResolutionError, NewConnectionError

USER_AGENT = "Cowry/1.0 (+https://cowry.example/webhooks)"


class BlockedDestination(requests.exceptions.ConnectionError):
    """The URL leads to a loopback, private, link-local, multicast or reserved address."""


_REFUSED = "Refusing to connect to non-public address"


_NAT64_PREFIXES = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")
_IPV4_TRANSLATED = ipaddress.ip_network("::ffff:0:0:0/96")  # SIIT (RFC 6052/7915)


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address leads to: mapped, 6to4, Teredo, NAT64,
    IPv4-translated and the old IPv4-compatible form. On an IPv6-only host behind DNS64, an
    internal name resolves to 64:ff9b::<its private IPv4>."""
    if ip.ipv4_mapped:
        return [ip.ipv4_mapped]
    if ip.sixtofour:
        return [ip.sixtofour]
    if ip.teredo:
        return list(ip.teredo)
    if any(ip in prefix for prefix in (*_NAT64_PREFIXES, _IPV4_COMPATIBLE, _IPV4_TRANSLATED)):
        return [ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)]
    return []


def address_is_public(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.is_site_local:
            return False
        embedded = _embedded_ipv4(ip)
        if embedded:
            return all(address_is_public(str(inner)) for inner in embedded)
    return ip.is_global and not ip.is_multicast


class NameResolutionTimeout(ConnectTimeoutError):
    """The host name did not resolve before the deadline."""


# Most name lookups one process runs at once, counting those still running after the request
# that started them gave up at its deadline (getaddrinfo cannot be interrupted). A lookup for a
# host and port already running is joined rather than started again, so a name whose DNS
# never answers holds one thread however often it is asked for; once this many are running,
# a new lookup waits for one to end, and for no longer than its own deadline.
RESOLVER_THREADS = 8


class _Resolver:
    def __init__(self, threads: int) -> None:
        self._threads = threads
        self._forget()

    def _forget(self) -> None:
        """No lookup running: a forked child (a Celery worker process) has none of its
        parent's threads, and must not count their lookups as its own for ever."""
        self._running: dict[tuple[str, int], Future] = {}
        self._changed = threading.Condition()

    def running(self) -> int:
        with self._changed:
            return len(self._running)

    def getaddrinfo(self, host: str, port: int, *, deadline_at: float) -> list:
        """socket.getaddrinfo(host, port, type=SOCK_STREAM), given no longer than until
        `deadline_at` (time.monotonic()); raises TimeoutError past it, socket.gaierror when no
        thread can be started for it."""
        key = (host, port)
        with self._changed:
            lookup = self._running.get(key)
            while lookup is None and len(self._running) >= self._threads:
                left = deadline_at - time.monotonic()
                if left <= 0 or not self._changed.wait(left):
                    raise TimeoutError(f"No name lookup of {host} could start before the deadline.")
                lookup = self._running.get(key)
            if lookup is None:
                lookup = self._running[key] = Future()
                try:
                    threading.Thread(
                        target=self._lookup,
                        args=(key, lookup),
                        name="netguard-resolve",
                        daemon=True,
                    ).start()
                except RuntimeError as exc:  # no thread to be had (a process or memory limit)
                    # Not left as running: every later lookup of the name would join a lookup
                    # that never ends, and the slot would be gone for good.
                    del self._running[key]
                    self._changed.notify_all()
                    raise socket.gaierror(
                        socket.EAI_AGAIN, f"No thread to look up {host}: {exc}"
                    ) from None
        left = deadline_at - time.monotonic()
        try:
            return lookup.result(timeout=max(left, 0))
        except TimeoutError:
            raise TimeoutError(f"The name {host} did not resolve before the deadline.") from None

    def _lookup(self, key: tuple[str, int], lookup: Future) -> None:
        try:
            lookup.set_result(socket.getaddrinfo(*key, type=socket.SOCK_STREAM))
        except BaseException as exc:  # for every request waiting on it, as getaddrinfo raised it
            lookup.set_exception(exc)
        finally:
            with self._changed:
                del self._running[key]
                self._changed.notify_all()


_RESOLVER = _Resolver(RESOLVER_THREADS)
os.register_at_fork(after_in_child=lambda: _RESOLVER._forget())


def _is_ip_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]").split("%", 1)[0])
    except ValueError:
        return False
    return True


def _resolve(host: str, port: int) -> list[str]:
    """The addresses `host` resolves to, in the resolver's order, looked up within what is left
    of the deadline (if any). An address literal needs no lookup: it is resolved here."""
    deadline_at = _DEADLINE.get()
    if deadline_at is None or _is_ip_literal(host):
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    else:
        infos = _RESOLVER.getaddrinfo(host, port, deadline_at=deadline_at)
    return list(dict.fromkeys(sockaddr[0] for *_, sockaddr in infos))


def _public_addresses(host: str, port: int) -> list[str]:
    """The addresses to connect to for `host`: every one it resolves to must be public, so no
    handshake is ever made with an internal service (whether one answers would tell a port
    scan). The connection then goes to these very addresses: a second lookup could give
    another answer (DNS rebinding)."""
    addresses = _resolve(host, port)
    for address in addresses:
        if not address_is_public(address):
            raise OSError(f"{_REFUSED} {address}.")
    return addresses


_DEADLINE: ContextVar[float | None] = ContextVar("netguard_deadline", default=None)


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Reads of a response on the guarded pools inside this block time out `seconds` from now,
    however the peer paces its bytes: a socket timeout bounds one read, so a receiver sending
    a header line every few seconds would otherwise hold the request open for as long as it
    likes."""
    token = _DEADLINE.set(time.monotonic() + seconds)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


class _DeadlineReader(io.RawIOBase):
    """The socket's own raw file (which keeps the socket open while it is read, as http.client
    relies on when it closes a `Connection: close` response's connection early), each read
    timed out by what is left of the deadline."""

    def __init__(self, sock: socket.socket, deadline_at: float) -> None:
        self._sock = sock
        self._raw = sock.makefile("rb", buffering=0)
        self._deadline_at = deadline_at

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        remaining = self._deadline_at - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("The response did not arrive before the deadline.")
        timeout = self._sock.gettimeout()
        self._sock.settimeout(remaining if timeout is None else min(timeout, remaining))
        try:
            return self._raw.readinto(buffer)
        finally:
            self._sock.settimeout(timeout)

    def close(self) -> None:
        if not self.closed:
            self._raw.close()
        super().close()


class _DeadlineSocket:
    """The connection's socket while http.client reads a response: its file reads by deadline."""

    def __init__(self, sock: socket.socket, deadline_at: float) -> None:
        self._sock = sock
        self._deadline_at = deadline_at

    def makefile(self, mode: str = "rb", *args, **kwargs):
        return io.BufferedReader(_DeadlineReader(self._sock, self._deadline_at))

    def sendall(self, data, flags: int = 0) -> None:
        """Sends `data` whole before the deadline, however slowly the peer reads it."""
        timeout = self._sock.gettimeout()
        try:
            with memoryview(data) as view, view.cast("B") as left_to_send:
                while left_to_send:
                    remaining = self._deadline_at - time.monotonic()
                    if remaining <= 0:
                        raise TimeoutError("The request was not sent before the deadline.")
                    self._sock.settimeout(remaining if timeout is None else min(timeout, remaining))
                    left_to_send = left_to_send[self._sock.send(left_to_send, flags) :]
        finally:
            self._sock.settimeout(timeout)

    def __getattr__(self, name: str):
        return getattr(self._sock, name)


class _FinalResponse(http.client.HTTPResponse):
    """The final answer to a request. http.client reads past an interim `100 Continue` only and
    took any other 1xx (102 Processing, 103 Early Hints) for the answer: a webhook acknowledged
    with 103 then 200 was recorded as failed, and its 200, left unread on a kept-alive
    connection back in the pool, was read by the next delivery sent on it as its own answer
    (an event the receiver refused recorded as acknowledged). Every interim answer is skipped
    as a 100 is (RFC 9110 15.2), up to MAX_INTERIM; a 101 (an upgrade, which nothing here asks
    for) is final, and its connection, no longer speaking HTTP, is never used again."""

    MAX_INTERIM = 20

    def _read_status(self):
        version, status, reason = super()._read_status()
        if 100 <= status < 200 and status != http.client.SWITCHING_PROTOCOLS:
            self._interim = getattr(self, "_interim", 0) + 1
            if self._interim > self.MAX_INTERIM:
                raise http.client.HTTPException(f"More than {self.MAX_INTERIM} interim answers.")
            return version, http.client.CONTINUE, reason  # begin() skips it as a 100
        return version, status, reason

    def begin(self) -> None:
        super().begin()
        if self.status < 200:
            self.will_close = True


class _Guarded:
    response_class = _FinalResponse

    def _new_conn(self) -> socket.socket:
        lookup = _resolve if settings.ALLOW_PRIVATE_NETWORK_URLS else _public_addresses
        try:
            addresses = lookup(self._dns_host, self.port)
        except socket.gaierror as exc:
            raise NameResolutionError(self.host, self, exc) from exc
        except TimeoutError as exc:
            raise NameResolutionTimeout(self, str(exc)) from None
        name = self._dns_host
        error: Exception | None = None
        for address in addresses:  # as socket.create_connection would, to these very addresses
            self._dns_host = address  # only for the TCP connection; TLS still checks the name
            try:
                sock = self._connect_within_deadline()
            except ConnectTimeoutError as exc:  # NewConnectionError too: the next address
                error = exc
                continue
            finally:
                self._dns_host = name
            return sock
        raise error or NewConnectionError(self, f"No address for {name}.")

    def _connect_within_deadline(self) -> socket.socket:
        """One connection attempt, given no more than what is left of the deadline (if any):
        a host with many addresses that drop the handshake would otherwise take the connect
        timeout once per address. The socket is left with no more than what is then left of
        the deadline as its timeout, which bounds the TLS handshake that follows as a whole
        (the timeout of SSLSocket.do_handshake is the handshake's total duration)."""
        deadline_at = _DEADLINE.get()
        if deadline_at is None:
            return super()._new_conn()
        left = deadline_at - time.monotonic()
        if left <= 0:
            raise ConnectTimeoutError(self, f"Connection to {self.host} timed out (deadline).")
        configured = self.timeout
        if configured is None or configured is socket._GLOBAL_DEFAULT_TIMEOUT or configured > left:
            self.timeout = left
        try:
            sock = super()._new_conn()
        finally:
            self.timeout = configured
        left = deadline_at - time.monotonic()
        if left <= 0:
            sock.close()
            raise ConnectTimeoutError(self, f"Connection to {self.host} timed out (deadline).")
        timeout = sock.gettimeout()
        sock.settimeout(left if timeout is None else min(timeout, left))
        return sock

    def send(self, data) -> None:
        """http.client's one way to the socket (the request line, headers and body): each
        write given only what is left of the deadline, not the whole connect timeout again."""
        deadline_at = _DEADLINE.get()
        if deadline_at is None:
            return super().send(data)
        if self.sock is None:  # as http.client would (auto_open) before sending
            self.connect()
        real = self.sock
        self.sock = wrapped = _DeadlineSocket(real, deadline_at)
        try:
            return super().send(data)
        finally:
            if self.sock is wrapped:
                self.sock = real

    def getresponse(self):
        deadline_at = _DEADLINE.get()
        if deadline_at is None or self.sock is None:
            return super().getresponse()
        real = self.sock
        self.sock = wrapped = _DeadlineSocket(real, deadline_at)
        try:
            return super().getresponse()
        finally:
            if self.sock is wrapped:  # http.client drops its socket when it closes
                self.sock = real


class _GuardedHTTPConnection(_Guarded, HTTPConnection):
    pass


class _GuardedHTTPSConnection(_Guarded, HTTPSConnection):
    pass


class _GuardedHTTPPool(HTTPConnectionPool):
    ConnectionCls = _GuardedHTTPConnection


class _GuardedHTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _GuardedHTTPSConnection


_GUARDED_POOLS = {"http": _GuardedHTTPPool, "https": _GuardedHTTPSPool}


def refusal_message(url: str) -> str:
    """The refusal, naming the URL without its query, fragment or credentials: it is logged
    (a KYC fetch) and kept on a webhook attempt, and a presigned URL's token is in its query."""
    parts = urlsplit(url)
    netloc = parts.netloc.rpartition("@")[2]
    return f"{_REFUSED}: {urlunsplit((parts.scheme, netloc, parts.path, '', ''))}"


def is_refusal(exc: BaseException) -> bool:
    """Whether a connection error is the guard refusing the address."""
    return _REFUSED in str(exc)


class GuardedAdapter(HTTPAdapter):
    def init_poolmanager(self, *args, **kwargs) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = dict(_GUARDED_POOLS)
        self.poolmanager.key_fn_by_scheme = dict(self.poolmanager.key_fn_by_scheme)

    def send(self, request, *args, **kwargs):
        try:
            return super().send(request, *args, **kwargs)
        except requests.exceptions.ConnectionError as exc:
            if is_refusal(exc):
                raise BlockedDestination(refusal_message(request.url)) from None
            raise

    def proxy_manager_for(self, *args, **kwargs):
        raise BlockedDestination("Proxies are not used for outbound merchant URLs.")


def guarded_session() -> requests.Session:
    """A requests session whose every connection is checked; ignores proxy environment
    variables. Send through its adapter (kyc.fetching._get): session.get() and send() read a
    3xx's whole body into memory, with no limit, even with allow_redirects=False."""
    session = requests.Session()
    session.trust_env = False
    session.max_redirects = 0
    adapter = GuardedAdapter(max_retries=0)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    session.headers["User-Agent"] = USER_AGENT
    return session


def guarded_pool_manager() -> urllib3.PoolManager:
    """The same guarded connections for a hot path that needs no more than urllib3 (requests'
    own transport): no proxies (urllib3 reads no environment), no redirects or retries unless
    a call asks for them. A refused address raises a urllib3 error for which `is_refusal()`."""
    manager = urllib3.PoolManager(retries=False)
    manager.pool_classes_by_scheme = dict(_GUARDED_POOLS)
    manager.key_fn_by_scheme = dict(manager.key_fn_by_scheme)
    return manager


def url_port_valid(url: str) -> bool:
    """Whether the URL's port, if it names one, is 1-65535 (urlsplit raises above it and
    takes 0, which nothing can connect to)."""
    try:
        return urlsplit(url).port != 0
    except ValueError:
        return False


def url_scheme_allowed(url: str, *, allow_http: bool) -> bool:
    scheme = urlsplit(url).scheme.lower()
    return scheme == "https" or (allow_http and scheme == "http")


def url_has_private_literal(url: str) -> bool:
    """Whether the URL's host is a literal non-public address and ALLOW_PRIVATE_NETWORK_URLS is
    off; a hostname is checked on the connected address instead."""
    host = (urlsplit(url).hostname or "").strip("[]")
    try:
        literal = ipaddress.ip_address(host)
    except ValueError:
        return False
    return not settings.ALLOW_PRIVATE_NETWORK_URLS and not address_is_public(str(literal))
