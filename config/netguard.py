"""Outbound HTTP that cannot be pointed at our own network (SSRF guard).

The check runs when connecting, on every address the name resolves to then, and the socket
connects to those very addresses: a hostname that resolves to a public address at validation
time and to 127.0.0.1 at fetch time (DNS rebinding) is still refused, before any handshake.
Redirects are never followed by the session or the pool manager made here.
"""

import io
import ipaddress
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from urllib.parse import urlsplit

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


def _public_addresses(host: str, port: int) -> list[str]:
    """The addresses to connect to for `host`: every one it resolves to must be public, so no
    handshake is ever made with an internal service (whether one answers would tell a port
    scan). The connection then goes to these very addresses: a second lookup could give
    another answer (DNS rebinding)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    addresses = list(dict.fromkeys(sockaddr[0] for *_, sockaddr in infos))
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

    def __getattr__(self, name: str):
        return getattr(self._sock, name)


class _Guarded:
    def _new_conn(self) -> socket.socket:
        if settings.ALLOW_PRIVATE_NETWORK_URLS:
            return self._connect_within_deadline()
        try:
            addresses = _public_addresses(self._dns_host, self.port)
        except socket.gaierror as exc:
            raise NameResolutionError(self.host, self, exc) from exc
        name = self._dns_host
        error: Exception | None = None
        for address in addresses:  # as socket.create_connection would, but checked ones only
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
        timeout once per address."""
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
            return super()._new_conn()
        finally:
            self.timeout = configured

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
    return f"{_REFUSED}: {url}"


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
    """A requests session whose every connection is checked; never follows redirects
    (pass allow_redirects=False on each call) and ignores proxy environment variables."""
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


def url_scheme_allowed(url: str, *, allow_http: bool) -> bool:
    scheme = urlsplit(url).scheme.lower()
    return scheme == "https" or (allow_http and scheme == "http")
