"""One signed POST of a delivery to its endpoint, through the SSRF guard, as an outcome."""

import threading
import time
from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

import urllib3
from django.conf import settings

from core import netguard
from webhooks import signing

RESPONSE_PREFIX_BYTES = 1024


@dataclass(frozen=True)
class Claim:
    delivery_id: UUID
    attempt_id: int
    number: int
    endpoint_id: UUID
    merchant_id: UUID
    url: str
    secret: str | None  # decrypted; None: no key of WEBHOOK_SECRETS_KEYS opens it (never sent)
    body: bytes
    event_id: UUID
    event_type: str


@dataclass(frozen=True)
class Outcome:
    response_status: int | None
    duration_ms: int
    error: str
    response_body: str

    @property
    def acknowledged(self) -> bool:
        return self.response_status is not None and 200 <= self.response_status < 300


_pools = threading.local()


def _delivery_pool() -> urllib3.PoolManager:
    """A guarded pool manager per thread and per private-address setting, reused across
    deliveries so a busy receiver is reached over kept-alive connections. Every new connection
    is still checked by the SSRF guard when it is opened. urllib3 rather than a requests
    session: requests' per-call preparation and cookie handling were a quarter of a payment's
    worker CPU, for nothing a webhook uses."""
    key = bool(settings.ALLOW_PRIVATE_NETWORK_URLS)
    cached = getattr(_pools, "by_setting", None)
    if cached is None:
        cached = _pools.by_setting = {}
    if key not in cached:
        cached[key] = netguard.guarded_pool_manager()
    return cached[key]


def _signed_headers(claim: Claim, *, now: datetime) -> dict[str, str]:
    timestamp = int(now.timestamp())
    return {
        "Content-Type": "application/json",
        "User-Agent": netguard.USER_AGENT,
        signing.SIGNATURE_HEADER: signing.sign(
            secret=claim.secret, timestamp=timestamp, body=claim.body
        ),
        signing.TIMESTAMP_HEADER: str(timestamp),
        signing.EVENT_HEADER: claim.event_type,
        signing.WEBHOOK_ID_HEADER: str(claim.event_id),
    }


def post(*, claim: Claim, now: datetime) -> Outcome:
    """One signed POST. Never follows a redirect; never raises."""
    headers = _signed_headers(claim, now=now)
    timeout = settings.WEBHOOK_TIMEOUT_SECONDS
    status: int | None = None
    error = ""
    answer = ""
    started = time.monotonic()
    try:
        with netguard.deadline(timeout):  # the whole answer, not each read of it
            response = _delivery_pool().urlopen(
                "POST",
                claim.url,
                body=claim.body,
                headers=headers,
                timeout=urllib3.Timeout(connect=timeout, read=timeout),
                redirect=False,
                retries=False,
                preload_content=False,
            )
            status = response.status
            try:
                answer = response.read(RESPONSE_PREFIX_BYTES).decode("utf-8", errors="replace")
            except urllib3.exceptions.HTTPError:
                pass  # the status is the answer; what the body said is only for support
            finally:
                # A body read to the end has already given its connection back to the pool;
                # one read in part cannot be reused (its rest would be read as the next one).
                response.close()
                response.release_conn()
        if 300 <= status < 400:
            location = repr(response.headers.get("Location", ""))
            if len(location) > 900:  # the receiver's text, kept short like its answer
                location = location[:900] + "..."
            error = f"HTTP {status}: redirect to {location} not followed"
        elif not 200 <= status < 300:
            error = f"HTTP {status}"
    except urllib3.exceptions.NewConnectionError as exc:  # a TimeoutError subclass in urllib3 2
        error = f"Could not connect: {exc}"[:1000]
    except netguard.NameResolutionTimeout:
        error = f"Timed out after {timeout:g} s: the host name did not resolve in time"
    except urllib3.exceptions.TimeoutError:  # connect, TLS handshake or the answer
        error = f"Timed out after {timeout:g} s"
    except urllib3.exceptions.HTTPError as exc:
        error = _http_error_text(exc, url=claim.url, timeout=timeout)
    duration_ms = int((time.monotonic() - started) * 1000)
    return Outcome(
        response_status=status,
        duration_ms=duration_ms,
        error=_storable(error),
        response_body=_storable(answer),
    )


def _http_error_text(exc: urllib3.exceptions.HTTPError, *, url: str, timeout: float) -> str:
    if netguard.is_refusal(exc):
        return f"Blocked: {netguard.refusal_message(url)}"
    if isinstance(exc, urllib3.exceptions.ProtocolError) and _timed_out(exc):
        return f"Timed out after {timeout:g} s"  # sending the request
    return f"{type(exc).__name__}: {exc}"[:1000]


def _timed_out(exc: urllib3.exceptions.ProtocolError) -> bool:
    """Whether urllib3 reports as a broken connection a socket timeout (the request could not
    be sent before the deadline: urllib3 calls any OSError while sending "Connection aborted")."""
    return any(isinstance(arg, TimeoutError) for arg in exc.args)


def _storable(text: str) -> str:
    """The receiver's text as PostgreSQL can store it: a NUL character cannot be (the whole
    record of the attempt would fail)."""
    return text.replace("\x00", "\ufffd")
