import contextlib
import gzip
import http.server
import struct
import threading
import time
import zlib
from dataclasses import dataclass, field

import pytest

from kyc.fetching import MAX_FILE_BYTES
from tests.factories import CustomerFactory
from tests.faults.conftest import (  # noqa: F401 - the broker's Redis, stopped for a moment
    broker_down,
    isolated_broker,
    private_redis,
)


def _png_1x1() -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    pixels = zlib.compress(b"\x00\xff\x00\x00")
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )


PNG = _png_1x1()
GZIPPED_ZEROS = gzip.compress(b"\x00" * (4 << 20))  # one gzip member; members may follow
PDF = b"%PDF-1.4\n1 0 obj <<>> endobj\ntrailer <<>>\n%%EOF\n"


@dataclass
class FileServer:
    """A real HTTP file server on 127.0.0.1 (reachable as 127.0.0.1 and as localhost)."""

    port: int
    requests: list[str] = field(default_factory=list)
    drips: list[str] = field(default_factory=list)
    redirect_bodies: list[str] = field(default_factory=list)

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"


@pytest.fixture
def file_server():
    server_state: dict = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            state: FileServer = server_state["state"]
            state.requests.append(self.path)
            path = self.path
            if path == "/id.png":
                self._send(200, "image/png", PNG)
            elif path == "/id.pdf":
                self._send(200, "application/pdf; charset=binary", PDF)
            elif path == "/big.png":
                self._send(200, "image/png", PNG + b"\x00" * MAX_FILE_BYTES)
            elif path == "/big-unannounced.png":
                self.send_response(200)
                self.send_header("Content-Type", "image/png")
                self.end_headers()
                self.wfile.write(PNG)
                block = b"\x00" * 65536
                try:
                    for _ in range(MAX_FILE_BYTES // len(block) + 2):
                        self.wfile.write(block)
                except (BrokenPipeError, ConnectionResetError):
                    pass
            elif path == "/bomb.png":  # 64 MiB once decompressed, 64 KiB on the wire
                self.send_response(200)
                self.send_header("Content-Type", "image/png")
                self.send_header("Content-Encoding", "gzip")
                self.end_headers()
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self.wfile.write(gzip.compress(PNG) + GZIPPED_ZEROS * 16)
            elif path == "/image.svg":
                self._send(200, "image/svg+xml", b'<svg xmlns="http://www.w3.org/2000/svg"/>')
            elif path == "/page.html":
                self._send(200, "text/html", b"<html>not an image</html>")
            elif path == "/fake.png":
                self._send(200, "image/png", b"<html>pretending</html>")
            elif path == "/wave.webp":  # a RIFF file, but WAVE audio, not a WebP image
                self._send(200, "image/webp", b"RIFF\x24\x00\x00\x00WAVEfmt " + b"\x00" * 32)
            elif path in ("/drip.png", "/drip-headers.png"):
                self._drip(headers_too=path == "/drip-headers.png")
            elif path == "/elsewhere":
                self._redirect(state.url("/id.png", host="localhost"))
            elif path == "/same-host":
                self._redirect("/id.png")
            elif path == "/redirect-with-body":  # a same-host redirect with a long body
                self._redirect_with_body("/id.png")
            elif path == "/bad-port":  # a Location that is no URL at all
                self._redirect("http://127.0.0.1:99999/id.png")
            elif path == "/bad-ipv6":
                self._redirect("http://[::1/id.png")
            else:
                self._send(404, "text/plain", b"not found")

        def _send(self, status: int, content_type: str, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self.wfile.write(body)

        def _drip(self, *, headers_too: bool) -> None:
            """A PNG sent a few bytes every 0.1 s (its header lines too, one by one): 4 s in
            all. Records whether the client listened to the end or hung up."""
            state: FileServer = server_state["state"]
            try:
                self.send_response(200)
                self.flush_headers()
                for name, value in [("Content-Type", "image/png"), ("X-Pad", "x")] * (
                    10 if headers_too else 1
                ):
                    self.wfile.write(f"{name}: {value}\r\n".encode())
                    self.wfile.flush()
                    if headers_too:
                        time.sleep(0.1)
                self.wfile.write(f"Content-Length: {len(PNG)}\r\n\r\n".encode())
                for start in range(0, len(PNG), 2):
                    self.wfile.write(PNG[start : start + 2])
                    self.wfile.flush()
                    time.sleep(0.1)
                state.drips.append("listened to the end")
            except (BrokenPipeError, ConnectionResetError):
                state.drips.append("hung up")

        def _redirect(self, location: str) -> None:
            self.send_response(302)
            self.send_header("Location", location)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def _redirect_with_body(self, location: str) -> None:
            """A 302 followed by four times MAX_FILE_BYTES of body, no length announced.
            Records whether the client read it to the end or hung up."""
            state: FileServer = server_state["state"]
            self.send_response(302)
            self.send_header("Location", location)
            self.send_header("Connection", "close")
            self.end_headers()
            block = b"x" * 65536
            try:
                for _ in range(4 * MAX_FILE_BYTES // len(block)):
                    self.wfile.write(block)
                state.redirect_bodies.append("read to the end")
            except (BrokenPipeError, ConnectionResetError):
                state.redirect_bodies.append("hung up")
            self.close_connection = True

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    state = FileServer(port=server.server_address[1])
    server_state["state"] = state
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield state
    server.shutdown()
    server.server_close()


@pytest.fixture(autouse=True)
def _media_in_tmp(settings, tmp_path):
    settings.MEDIA_ROOT = str(tmp_path / "media")


@pytest.fixture
def private_urls_allowed(settings):
    settings.ALLOW_PRIVATE_NETWORK_URLS = True


@pytest.fixture
def customer(merchant):
    return CustomerFactory(merchant=merchant)
