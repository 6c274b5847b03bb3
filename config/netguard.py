"""Outbound HTTP that cannot be pointed at our own network (SSRF guard).

The check runs on the address the socket actually connected to, after DNS resolution, so a
hostname that resolves to a public address at validation time and to 127.0.0.1 at fetch time
(DNS rebinding) is still refused. Redirects are never followed by the session made here.
"""

import ipaddress
import socket
from urllib.parse import urlsplit

import requests
from django.conf import settings
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

USER_AGENT = "Cowry/1.0 (+https://cowry.example/webhooks)"


class BlockedDestination(requests.exceptions.ConnectionError):
    """The URL leads to a loopback, private, link-local, multicast or reserved address."""


_REFUSED = "Refusing to connect to non-public address"


def address_is_public(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


def _check_peer(sock: socket.socket) -> None:
    if settings.ALLOW_PRIVATE_NETWORK_URLS:
        return
    peer = sock.getpeername()[0]
    if not address_is_public(peer):
        sock.close()
        raise OSError(f"{_REFUSED} {peer}.")


class _GuardedHTTPConnection(HTTPConnection):
    def _new_conn(self) -> socket.socket:
        sock = super()._new_conn()
        _check_peer(sock)
        return sock


class _GuardedHTTPSConnection(HTTPSConnection):
    def _new_conn(self) -> socket.socket:
        sock = super()._new_conn()
        _check_peer(sock)
        return sock


class _GuardedHTTPPool(HTTPConnectionPool):
    ConnectionCls = _GuardedHTTPConnection


class _GuardedHTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _GuardedHTTPSConnection


class GuardedAdapter(HTTPAdapter):
    def init_poolmanager(self, *args, **kwargs) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {
            "http": _GuardedHTTPPool,
            "https": _GuardedHTTPSPool,
        }
        self.poolmanager.key_fn_by_scheme = dict(self.poolmanager.key_fn_by_scheme)

    def send(self, request, *args, **kwargs):
        try:
            return super().send(request, *args, **kwargs)
        except requests.exceptions.ConnectionError as exc:
            if _REFUSED in str(exc):
                raise BlockedDestination(f"{_REFUSED}: {request.url}") from None
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


def url_scheme_allowed(url: str, *, allow_http: bool) -> bool:
    scheme = urlsplit(url).scheme.lower()
    return scheme == "https" or (allow_http and scheme == "http")
