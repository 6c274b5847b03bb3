"""Downloading a merchant-supplied KYC file safely. No ORM here: fetch_file() returns the bytes
or a failure reason, and the service records the result.

- Every connection goes through core.netguard (the connected peer address is checked, so
  URLs resolving to loopback/private/link-local/reserved addresses are refused unless
  ALLOW_PRIVATE_NETWORK_URLS).
- Redirects are followed by hand, only to the same host and port (and never from https down
  to http), at most MAX_REDIRECTS times.
- Connect/read timeouts plus an overall deadline on everything read, headers included, however
  slowly the server sends (netguard.deadline); the body is streamed and abandoned past
  MAX_FILE_BYTES; only image and PDF content types are accepted, and the first bytes must
  match the announced type.
"""

import re
import time
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

import requests

from core import netguard

MAX_FILE_BYTES = 10 * 1024 * 1024
MAX_REDIRECTS = 3
CONNECT_TIMEOUT_SECONDS = 5
READ_TIMEOUT_SECONDS = 15
TOTAL_DEADLINE_SECONDS = 60
CHUNK_BYTES = 64 * 1024

# content type -> (file extension, what its first bytes must match)
ALLOWED_CONTENT_TYPES: dict[str, tuple[str, re.Pattern[bytes]]] = {
    "image/jpeg": (".jpg", re.compile(rb"\xff\xd8\xff")),
    "image/png": (".png", re.compile(rb"\x89PNG\r\n\x1a\n")),
    "image/webp": (".webp", re.compile(rb"RIFF.{4}WEBP", re.DOTALL)),  # not any RIFF (WAVE...)
    "image/gif": (".gif", re.compile(rb"GIF8[79]a")),
    "application/pdf": (".pdf", re.compile(rb"%PDF-")),
}


@dataclass(frozen=True)
class FetchedFile:
    content: bytes
    content_type: str
    extension: str


class FetchFailed(Exception):
    """reason is a short machine-readable code, detail a human explanation."""

    def __init__(self, reason: str, detail: str = "") -> None:
        self.reason = reason
        self.detail = detail
        super().__init__(f"{reason}: {detail}" if detail else reason)


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    return parts.scheme, (parts.hostname or "").lower(), port


def _redirect_target(current_url: str, location: str) -> str:
    try:
        target = urljoin(current_url, location)
        scheme, host, port = _origin(current_url)
        target_scheme, target_host, target_port = _origin(target)
    except ValueError:  # a port out of range, a broken IPv6 literal: no URL at all
        raise FetchFailed("redirect_not_allowed", "the redirect's Location is not a URL") from None
    if target_scheme not in ("http", "https"):
        raise FetchFailed("redirect_not_allowed", f"redirect to a {target_scheme or '?'} URL")
    upgrade = (scheme, port, target_scheme, target_port) == ("http", 80, "https", 443)
    same_host = target_host == host and (target_port == port or upgrade)
    if not same_host:
        raise FetchFailed("redirect_to_other_host", f"redirect to {target_host}")
    if scheme == "https" and target_scheme == "http":
        raise FetchFailed("redirect_not_allowed", "redirect from https to http")
    return target


def fetch_file(url: str) -> FetchedFile:
    """Download url or raise FetchFailed."""
    deadline = time.monotonic() + TOTAL_DEADLINE_SECONDS
    session = netguard.guarded_session()
    try:
        with netguard.deadline(TOTAL_DEADLINE_SECONDS):
            for _ in range(MAX_REDIRECTS + 1):
                response = _get(session, url)
                with response:
                    if response.is_redirect:
                        url = _redirect_target(url, response.headers.get("Location", ""))
                        continue
                    return _read_body(response, deadline)
        raise FetchFailed("too_many_redirects", f"more than {MAX_REDIRECTS} redirects")
    finally:
        session.close()


def _get(session: requests.Session, url: str) -> requests.Response:
    """The response, its body not read. Sent by the session's adapter, not by session.get():
    even with allow_redirects=False, requests reads a 3xx's whole body into memory to prepare
    the redirect it does not follow, with no limit on its size, gzip decoded."""
    try:
        request = session.prepare_request(
            requests.Request("GET", url, headers={"Accept": ", ".join(ALLOWED_CONTENT_TYPES)})
        )
        return session.get_adapter(request.url).send(
            request, stream=True, timeout=(CONNECT_TIMEOUT_SECONDS, READ_TIMEOUT_SECONDS)
        )
    except netguard.BlockedDestination as exc:
        raise FetchFailed("private_address_refused", str(exc)) from None
    except requests.exceptions.Timeout:
        raise FetchFailed("timeout", "the file server did not answer in time") from None
    except requests.exceptions.RequestException as exc:
        raise FetchFailed("connection_failed", type(exc).__name__) from None


def _read_body(response: requests.Response, deadline: float) -> FetchedFile:
    if response.status_code != 200:
        raise FetchFailed(f"http_status_{response.status_code}", "the file server refused")
    content_type = response.headers.get("Content-Type", "").split(";", 1)[0].strip().lower()
    if content_type not in ALLOWED_CONTENT_TYPES:
        raise FetchFailed("content_type_not_allowed", content_type or "no content type")
    declared = response.headers.get("Content-Length", "")
    if declared.isdigit() and int(declared) > MAX_FILE_BYTES:
        raise FetchFailed("file_too_large", f"over {MAX_FILE_BYTES} bytes")
    body = bytearray()
    try:
        for chunk in response.iter_content(chunk_size=CHUNK_BYTES):
            body.extend(chunk)
            if len(body) > MAX_FILE_BYTES:
                raise FetchFailed("file_too_large", f"over {MAX_FILE_BYTES} bytes")
            if time.monotonic() > deadline:
                raise FetchFailed("timeout", "the download took too long")
    except requests.exceptions.RequestException as exc:
        if time.monotonic() > deadline:  # the deadline cut a read short
            raise FetchFailed("timeout", "the download took too long") from None
        raise FetchFailed("connection_failed", type(exc).__name__) from None
    if not body:
        raise FetchFailed("empty_file", "the file is empty")
    extension, signature = ALLOWED_CONTENT_TYPES[content_type]
    if not signature.match(body):
        raise FetchFailed("content_mismatch", f"the bytes are not {content_type}")
    return FetchedFile(content=bytes(body), content_type=content_type, extension=extension)
