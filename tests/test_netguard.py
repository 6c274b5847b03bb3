import http.server
import socket
import threading
import time
from types import SimpleNamespace

import pytest
import urllib3

from core import netguard
from tests.slow_network import SilentTlsServer, slow_connect


@pytest.fixture
def local_server():
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"hello")

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()


@pytest.mark.parametrize(
    ("address", "public"),
    [
        ("127.0.0.1", False),
        ("10.1.2.3", False),
        ("172.16.0.1", False),
        ("192.168.1.1", False),
        ("169.254.169.254", False),
        ("0.0.0.0", False),
        ("::1", False),
        ("::ffff:127.0.0.1", False),
        ("fe80::1", False),
        ("224.0.0.1", False),
        ("8.8.8.8", True),
        ("2001:4860:4860::8888", True),
        # IPv6 forms that lead to an IPv4 address are judged by that address
        ("64:ff9b::7f00:1", False),  # NAT64 of 127.0.0.1
        ("::ffff:0:a9fe:a9fe", False),  # IPv4-translated (SIIT) 169.254.169.254
        ("::ffff:0:808:808", True),  # IPv4-translated 8.8.8.8
        ("64:ff9b::a9fe:a9fe", False),  # NAT64 of 169.254.169.254
        ("64:ff9b::808:808", True),  # NAT64 of 8.8.8.8
        ("2002:7f00:1::", False),  # 6to4 of 127.0.0.1
        ("::7f00:1", False),  # IPv4-compatible 127.0.0.1
        ("2001:0:4136:e378:8000:63bf:3fff:fdd2", False),  # Teredo, client 192.0.2.45
        ("fec0::1", False),  # site-local
        ("100.64.0.1", False),  # shared address space (carrier-grade NAT)
        ("100.127.255.254", False),
        ("198.18.0.1", False),  # benchmarking
        ("240.0.0.1", False),  # reserved
        ("255.255.255.255", False),
        ("0.1.2.3", False),  # "this network"
        ("fc00::1", False),  # unique local
        ("fd00:ec2::254", False),  # a cloud metadata service's IPv6 address
        ("fe80::1%eth0", False),  # link-local with a zone
        ("ff02::1", False),  # multicast
        ("::", False),
        ("::ffff:100.64.0.1", False),
        ("::ffff:169.254.169.254", False),
        ("64:ff9b:1::a9fe:a9fe", False),  # local-use NAT64 of 169.254.169.254
        ("2002:a00:1::", False),  # 6to4 of 10.0.0.1
    ],
)
def test_address_classification(address, public):
    assert netguard.address_is_public(address) is public


@pytest.fixture
def silent_listener():
    """A loopback port that listens (an internal service) and tells whether anyone connected."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.setblocking(False)

    def connected() -> bool:
        try:
            listener.accept()[0].close()
            return True
        except BlockingIOError:
            return False

    yield SimpleNamespace(port=listener.getsockname()[1], connected=connected)
    listener.close()


def test_a_refused_host_gets_no_handshake_open_port_or_closed(settings, silent_listener):
    settings.ALLOW_PRIVATE_NETWORK_URLS = False
    open_port = silent_listener.port
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    for port in (open_port, closed_port):  # the same refusal: no port scan through it
        with pytest.raises(netguard.BlockedDestination):
            netguard.guarded_session().get(f"http://localhost:{port}/", timeout=2)
    assert not silent_listener.connected()


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1",
        "2130706433",  # the same address as one decimal integer
        "0x7f000001",  # hexadecimal
        "0177.0.0.1",  # octal
        "0x7f.1",
        "127.1",
        "0",
        "0.0.0.0",  # reaches the host's own services on Linux
        "LOCALHOST",
        "[::1]",
        "[::]",
        "[::ffff:127.0.0.1]",
        "[::ffff:7f00:1]",
        "[0:0:0:0:0:ffff:127.0.0.1]",
    ],
)
def test_every_spelling_of_a_loopback_address_is_refused_before_the_handshake(
    settings, host, silent_listener
):
    """The address is judged as resolved (the C library reads integer, octal and hexadecimal
    spellings, which no URL check here parses), on both outbound paths."""
    settings.ALLOW_PRIVATE_NETWORK_URLS = False
    url = f"http://{host}:{silent_listener.port}/"
    with pytest.raises(urllib3.exceptions.HTTPError) as refused:
        netguard.guarded_pool_manager().request("POST", url, timeout=2, retries=False)
    assert netguard.is_refusal(refused.value)
    with pytest.raises(netguard.BlockedDestination):
        netguard.guarded_session().get(url, timeout=2)
    assert not silent_listener.connected()


def test_a_name_that_rebinds_to_loopback_after_the_check_gets_no_handshake(
    settings, monkeypatch, silent_listener
):
    settings.ALLOW_PRIVATE_NETWORK_URLS = False
    port = silent_listener.port
    real_getaddrinfo = socket.getaddrinfo
    answers = iter(["1.1.1.1"])  # public the first time, then loopback (a TTL-0 DNS server)

    def rebinding_getaddrinfo(host, *args, **kwargs):
        if host == "rebind.example":
            host = next(answers, "127.0.0.1")
        return real_getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding_getaddrinfo)
    with pytest.raises(urllib3.exceptions.HTTPError):
        netguard.guarded_pool_manager().request(
            "GET", f"http://rebind.example:{port}/", timeout=0.5
        )
    assert not silent_listener.connected()  # it went to the address that was checked


def test_a_checked_address_that_times_out_falls_back_to_the_next_one(
    local_server, settings, monkeypatch
):
    # As socket.create_connection does: a name with an unreachable address first (a broken
    # AAAA record) and a working one second still connects. Loopback counts as public here.
    settings.ALLOW_PRIVATE_NETWORK_URLS = False
    monkeypatch.setattr(netguard, "address_is_public", lambda address: True)
    real_getaddrinfo = socket.getaddrinfo
    real_connect = socket.socket.connect

    def two_addresses(host, port, *args, **kwargs):
        if host == "dual.example":
            return real_getaddrinfo("127.0.0.2", port, socket.AF_INET, socket.SOCK_STREAM) + (
                real_getaddrinfo("127.0.0.1", port, socket.AF_INET, socket.SOCK_STREAM)
            )
        return real_getaddrinfo(host, port, *args, **kwargs)

    def blackholed_connect(sock, address):
        if address[0] == "127.0.0.2":
            raise TimeoutError("timed out")
        return real_connect(sock, address)

    monkeypatch.setattr(socket, "getaddrinfo", two_addresses)
    monkeypatch.setattr(socket.socket, "connect", blackholed_connect)
    port = local_server.rsplit(":", 1)[1].rstrip("/")
    response = netguard.guarded_pool_manager().request(
        "GET", f"http://dual.example:{port}/", timeout=2
    )
    assert (response.status, response.data) == (200, b"hello")


def test_the_deadline_bounds_the_connects_to_every_address_together(settings, monkeypatch):
    """A host whose many addresses all drop the handshake: each connect would take the whole
    connect timeout (6 x 0.4 s here); under a deadline they share it (the webhook attempt's
    WEBHOOK_TIMEOUT_SECONDS)."""
    settings.ALLOW_PRIVATE_NETWORK_URLS = False
    monkeypatch.setattr(netguard, "address_is_public", lambda address: True)
    real_getaddrinfo = socket.getaddrinfo
    tried = []

    def six_addresses(host, port, *args, **kwargs):
        if host == "many.example":
            return [
                real_getaddrinfo(f"127.0.0.{n}", port, socket.AF_INET, socket.SOCK_STREAM)[0]
                for n in range(2, 8)
            ]
        return real_getaddrinfo(host, port, *args, **kwargs)

    def dropped_handshake(sock, address):
        tried.append(address[0])
        time.sleep(sock.gettimeout())  # no SYN-ACK ever comes
        raise TimeoutError("timed out")

    monkeypatch.setattr(socket, "getaddrinfo", six_addresses)
    monkeypatch.setattr(socket.socket, "connect", dropped_handshake)
    started = time.monotonic()
    with netguard.deadline(0.5), pytest.raises(urllib3.exceptions.ConnectTimeoutError):
        netguard.guarded_pool_manager().connection_from_url("http://many.example:8080/").urlopen(
            "GET", "/", timeout=urllib3.Timeout(connect=0.4, read=0.4), retries=False
        )

    assert time.monotonic() - started < 1.2  # not 6 x 0.4 s
    assert 1 <= len(tried) < 6


def test_loopback_url_is_refused_when_private_urls_are_not_allowed(local_server, settings):
    settings.ALLOW_PRIVATE_NETWORK_URLS = False
    with pytest.raises(netguard.BlockedDestination):
        netguard.guarded_session().get(local_server, timeout=2)


def test_a_refusal_names_the_url_without_its_query_or_credentials(local_server, settings):
    """The refusal's text goes to logs (a KYC fetch's failure) and to a webhook attempt's error:
    a presigned file URL's token, in its query, or credentials in it stay out of both."""
    settings.ALLOW_PRIVATE_NETWORK_URLS = False
    url = local_server + "id-front.png?X-Amz-Signature=s3cr3t-token#frag"
    with pytest.raises(netguard.BlockedDestination) as refused:
        netguard.guarded_session().get(url, timeout=2)
    assert str(refused.value).endswith(local_server + "id-front.png")
    assert "s3cr3t" not in str(refused.value)
    assert netguard.refusal_message("https://user:pw@10.0.0.1:8443/hook?t=1") == (
        "Refusing to connect to non-public address: https://10.0.0.1:8443/hook"
    )


def test_hostname_resolving_to_loopback_is_refused(local_server, settings):
    settings.ALLOW_PRIVATE_NETWORK_URLS = False
    with pytest.raises(netguard.BlockedDestination):
        netguard.guarded_session().get(local_server.replace("127.0.0.1", "localhost"), timeout=2)


def test_loopback_url_is_fetched_when_private_urls_are_allowed(local_server, settings):
    settings.ALLOW_PRIVATE_NETWORK_URLS = True
    response = netguard.guarded_session().get(local_server, timeout=2)
    assert response.status_code == 200
    assert response.content == b"hello"


def test_the_pool_manager_refuses_a_hostname_resolving_to_loopback(local_server, settings):
    settings.ALLOW_PRIVATE_NETWORK_URLS = False
    with pytest.raises(urllib3.exceptions.HTTPError) as refused:
        netguard.guarded_pool_manager().request(
            "GET", local_server.replace("127.0.0.1", "localhost"), timeout=2
        )
    assert netguard.is_refusal(refused.value)


def test_the_pool_manager_fetches_loopback_when_private_urls_are_allowed(local_server, settings):
    settings.ALLOW_PRIVATE_NETWORK_URLS = True
    response = netguard.guarded_pool_manager().request("GET", local_server, timeout=2)
    assert response.status == 200
    assert response.data == b"hello"


# Everything a request does inside netguard.deadline() shares it: the name lookup, the connect,
# the TLS handshake, sending the request and reading the answer (the webhook attempt's
# WEBHOOK_TIMEOUT_SECONDS, the KYC fetch's overall limit).


def _post_within(seconds: float, url: str, *, body: bytes = b"{}") -> float:
    """POSTs under a deadline of `seconds` with generous socket timeouts; the time it took."""
    started = time.monotonic()
    with netguard.deadline(seconds), pytest.raises(urllib3.exceptions.HTTPError) as failed:
        netguard.guarded_pool_manager().urlopen(
            "POST",
            url,
            body=body,
            timeout=urllib3.Timeout(connect=5, read=5),
            retries=False,
            redirect=False,
        )
    elapsed = time.monotonic() - started
    assert not netguard.is_refusal(failed.value)
    return elapsed


@pytest.mark.parametrize("private_allowed", [True, False], ids=["private-allowed", "guarded"])
def test_a_name_that_does_not_resolve_is_given_up_at_the_deadline(
    settings, stalled_dns, private_allowed
):
    settings.ALLOW_PRIVATE_NETWORK_URLS = private_allowed
    stalled_dns.stall("stalled.example", resolves_to="93.184.216.34")
    started = time.monotonic()
    with netguard.deadline(0.5), pytest.raises(urllib3.exceptions.HTTPError) as failed:
        netguard.guarded_pool_manager().urlopen(
            "GET", "https://stalled.example/", timeout=5, retries=False
        )

    assert time.monotonic() - started < 1.2  # not until the resolver answers
    assert type(failed.value).__name__ == "NameResolutionTimeout"
    assert "did not resolve before the deadline" in str(failed.value)
    assert stalled_dns.lookups == ["stalled.example"]


def test_lookups_left_running_at_the_deadline_are_shared_by_name_and_capped(
    settings, stalled_dns, monkeypatch
):
    """getaddrinfo cannot be interrupted: a lookup given up at the deadline runs on in its
    thread. Asking again for the same name joins it, and no more than RESOLVER_THREADS run at
    once, however many slow names are asked for."""
    settings.ALLOW_PRIVATE_NETWORK_URLS = True
    monkeypatch.setattr(netguard, "_RESOLVER", netguard._Resolver(2))

    def lookup(name: str, within: float = 0.2):
        with netguard.deadline(within):
            netguard.guarded_pool_manager().urlopen("GET", f"http://{name}:9/", retries=False)

    def resolver_threads() -> int:
        return sum(thread.name == "netguard-resolve" for thread in threading.enumerate())

    for name in ["a.stalled.example"] * 3 + ["b.stalled.example"]:
        stalled_dns.stall(name)
        with pytest.raises(netguard.NameResolutionTimeout):
            lookup(name)
    assert stalled_dns.lookups == ["a.stalled.example", "b.stalled.example"]
    assert netguard._RESOLVER.running() == 2
    assert resolver_threads() == 2

    stalled_dns.stall("c.stalled.example")  # no thread free: it waits for one, until its deadline
    started = time.monotonic()
    with pytest.raises(netguard.NameResolutionTimeout, match="could start"):
        lookup("c.stalled.example", within=0.3)
    assert 0.25 < time.monotonic() - started < 1
    assert stalled_dns.lookups == ["a.stalled.example", "b.stalled.example"]
    assert resolver_threads() == 2

    stalled_dns.release()  # the DNS answers at last: the threads end
    for _ in range(100):
        if netguard._RESOLVER.running() == 0:
            break
        time.sleep(0.02)
    assert netguard._RESOLVER.running() == 0
    with pytest.raises(urllib3.exceptions.NewConnectionError):  # resolved; nothing listens on 9
        lookup("c.stalled.example", within=2)


def test_the_tls_handshake_gets_only_what_is_left_of_the_deadline(
    settings, monkeypatch, silent_tls_server
):
    """A connection accepted late, then a handshake the server never finishes (in silence, or
    a byte at a time, each well within the socket timeout): the two share the deadline."""
    settings.ALLOW_PRIVATE_NETWORK_URLS = True
    slow_connect(monkeypatch, port=silent_tls_server.port, seconds=0.9)

    elapsed = _post_within(1.0, f"https://127.0.0.1:{silent_tls_server.port}/hook")

    assert elapsed < 1.5  # not 0.9 s more
    assert silent_tls_server.accepted == 1


def test_sending_the_request_gets_only_what_is_left_of_the_deadline(settings, monkeypatch):
    """A connection accepted late by a receiver that never reads the request: sending it gets
    what is left of the deadline, not the whole connect timeout again."""
    settings.ALLOW_PRIVATE_NETWORK_URLS = True
    server = SilentTlsServer()  # plain http here: it reads a few KiB and then nothing
    try:
        slow_connect(monkeypatch, port=server.port, seconds=0.9)
        elapsed = _post_within(1.0, f"http://127.0.0.1:{server.port}/", body=b"x" * 32_000_000)
    finally:
        server.close()

    assert elapsed < 1.5


def test_a_lookup_whose_thread_cannot_start_fails_that_request_only(
    settings, local_server, monkeypatch
):
    """No thread to be had (a process or memory limit): the request fails as a name that
    could not be resolved (an urllib3 error the webhook sender records, not a RuntimeError
    out of its loop), and the name is not left counted as being looked up: the next request
    for it resolves it, rather than waiting on a lookup that never started until its
    deadline, for as long as the process lives."""
    settings.ALLOW_PRIVATE_NETWORK_URLS = True
    monkeypatch.setattr(netguard, "_RESOLVER", netguard._Resolver(2))
    real_start = threading.Thread.start
    refused = []

    def start(thread):
        if thread.name == "netguard-resolve" and not refused:
            refused.append(thread)
            raise RuntimeError("can't start new thread")
        return real_start(thread)

    monkeypatch.setattr(threading.Thread, "start", start)
    url = local_server.replace("127.0.0.1", "localhost")

    with netguard.deadline(2), pytest.raises(urllib3.exceptions.NameResolutionError):
        netguard.guarded_pool_manager().urlopen("GET", url, retries=False)
    assert refused
    assert netguard._RESOLVER.running() == 0

    with netguard.deadline(2):
        response = netguard.guarded_pool_manager().urlopen("GET", url, retries=False)
    assert (response.status, response.data) == (200, b"hello")
