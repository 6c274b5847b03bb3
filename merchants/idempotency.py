"""One Idempotency-Key mechanism for every POST that needs it.

The key is claimed in its own statement, committed at once (so a concurrent request with the
same key sees it and gets a 409), then the handler runs in a transaction that also stores the
2xx response, so a resource and its idempotency record are committed together or not at all.

A request completes or releases only the record it claimed (by its id): a request that
stalled past IDEMPOTENCY_LOCK_TIMEOUT_SECONDS may have had its claim taken over by a retry, and
the key is then the retry's. Such a request keeps nothing it wrote and answers as the key's
record says.
"""

import functools
import hashlib
import json
from collections.abc import Callable
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from core.exceptions import DomainError
from merchants.models import IdempotencyRecord, IdempotencyStatus, Merchant

HEADER = "Idempotency-Key"
MAX_KEY_LENGTH = 255


class IdempotencyKeyMissing(DomainError):
    status = 400
    reason = "idempotency_key_missing"
    message = "The Idempotency-Key header is required on this request."


class IdempotencyKeyInvalid(DomainError):
    status = 400
    reason = "idempotency_key_invalid"
    message = (
        f"The Idempotency-Key header must be 1 to {MAX_KEY_LENGTH} printable ASCII characters."
    )


class IdempotencyKeyReused(DomainError):
    status = 409
    reason = "idempotency_key_reused"
    message = "This Idempotency-Key was already used with a different request."


class RequestInProgress(DomainError):
    status = 409
    reason = "request_in_progress"
    message = "A request with this Idempotency-Key is still being processed."


def request_fingerprint(*, method: str, path: str, body: object) -> str:
    canonical = json.dumps(
        {"method": method, "path": path, "body": body}, sort_keys=True, separators=(",", ":")
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


def _with_meta(body: object, *, key: str, replayed: bool) -> object:
    if isinstance(body, dict):
        return {**body, "_meta": {"idempotency_key": key, "idempotency_replayed": replayed}}
    return body


def _expires_at(now: datetime) -> datetime:
    return now + timedelta(seconds=settings.IDEMPOTENCY_KEY_TTL_SECONDS)


def run_idempotent(request: Request, handler: Callable[[], Response]) -> Response:
    """The handler's response under the request's Idempotency-Key (run_keyed)."""
    key = _key_of(request)
    body = request.data  # parse first: malformed JSON is a 400 that claims nothing
    return run_keyed(
        merchant=request.merchant,
        key=key,
        method=request.method,
        path=request.path,
        body=body,
        handler=handler,
    )


def run_keyed(
    *,
    merchant: Merchant,
    key: str,
    method: str,
    path: str,
    body: object,
    handler: Callable[[], Response],
) -> Response:
    """The handler's response under `key` (an Idempotency-Key, or a dashboard form's one-time
    token): claim the key, run the handler in a transaction, store its 2xx response in the
    claimed record in that same transaction; a failure or a non-2xx answer releases the key.
    A request that comes again with the key gets the stored response, replayed."""
    # Path ids are taken in either case: a retry that spells one in capitals is the same request.
    path = path.lower()
    fingerprint = request_fingerprint(method=method, path=path, body=body)
    claimed = _claim(merchant=merchant, key=key, method=method, path=path, fingerprint=fingerprint)
    if isinstance(claimed, IdempotencyRecord):
        return _answer_held(claimed, key=key, fingerprint=fingerprint)
    try:
        with transaction.atomic():
            response = handler()
            if not 200 <= response.status_code < 300:
                raise _HandlerDeclined(response)
            body_out = _with_meta(response.data, key=key, replayed=False)
            _complete(record_id=claimed, response=response, body=body_out)
    except _KeyTakenOver:  # rolled back: nothing of this request was kept
        existing = IdempotencyRecord.objects.filter(merchant=merchant, key=key).first()
        if existing is None:  # the request that took it over failed and released it
            raise RequestInProgress() from None
        return _answer_held(existing, key=key, fingerprint=fingerprint)
    except _HandlerDeclined as declined:
        _release(claimed)
        return declined.response
    except BaseException:
        _release(claimed)
        raise
    response.data = body_out  # a replay is this JSON (its keys in jsonb's order, not this one's)
    return response


def _key_of(request: Request) -> str:
    key = request.headers.get(HEADER)
    if key is None or key.strip() == "":
        raise IdempotencyKeyMissing()
    # ASCII only (an HTTP structured-field string): a server hands other bytes over decoded as
    # latin-1, so "clé" would be stored and echoed garbled and "€" refused as unprintable.
    if len(key) > MAX_KEY_LENGTH or not (key.isascii() and key.isprintable()):
        raise IdempotencyKeyInvalid()
    return key


IDEMPOTENCY_CLAIM = """
INSERT INTO merchants_idempotencyrecord
    (merchant_id, key, method, path, fingerprint, status, locked_at, created_at, expires_at)
VALUES (%(merchant_id)s, %(key)s, %(method)s, %(path)s, %(fingerprint)s, 'in_progress', %(now)s,
    %(now)s, %(expires_at)s)
ON CONFLICT (merchant_id, key) DO NOTHING
RETURNING id
"""
"""The key's claim: the new record's id, or no row when the key is held (no error, so no
savepoint inside a caller's transaction). Every POST makes it; its ORM form (a create, a
savepoint when nested, an IntegrityError caught) cost 3x its CPU: docs/decisions.md."""


def _claim(
    *, merchant: Merchant, key: str, method: str, path: str, fingerprint: str
) -> int | IdempotencyRecord:
    """Claim the key and return the claimed record's id, or return the record that already
    holds the key. An expired record, or one in progress past IDEMPOTENCY_LOCK_TIMEOUT_SECONDS
    (its request crashed or stalled), is deleted and the key claimed again."""
    now = timezone.now()
    stale_before = now - timedelta(seconds=settings.IDEMPOTENCY_LOCK_TIMEOUT_SECONDS)
    params = {
        "merchant_id": merchant.pk,
        "key": key,
        "method": method,
        "path": path,
        "fingerprint": fingerprint,
        "now": now,
        "expires_at": _expires_at(now),
    }
    for _ in range(3):
        with connection.cursor() as cursor:
            cursor.execute(IDEMPOTENCY_CLAIM, params)
            claimed = cursor.fetchone()
        if claimed is not None:
            return claimed[0]
        existing = IdempotencyRecord.objects.filter(merchant=merchant, key=key).first()
        if existing is None:
            continue  # released in between: try to claim again
        expired = existing.expires_at <= now
        abandoned = (
            existing.status == IdempotencyStatus.IN_PROGRESS and existing.locked_at < stale_before
        )
        if not (expired or abandoned):
            return existing
        # Only as it was read: a stalled request that completed its record meanwhile keeps it
        # (its resource is committed with it).
        IdempotencyRecord.objects.filter(
            pk=existing.pk, locked_at=existing.locked_at, status=existing.status
        ).delete()
    raise RequestInProgress()


def _answer_held(existing: IdempotencyRecord, *, key: str, fingerprint: str) -> Response:
    """The answer to a request whose key another request holds: its stored response, or 409."""
    if existing.fingerprint != fingerprint:
        raise IdempotencyKeyReused()
    if existing.status == IdempotencyStatus.IN_PROGRESS:
        raise RequestInProgress()
    return Response(
        _with_meta(existing.response_body, key=key, replayed=True),
        status=existing.response_status,
    )


class _KeyTakenOver(Exception):
    """The record this request claimed is gone: its claim was taken over as abandoned, and the
    key is another request's. Raised inside the handler's transaction, which keeps nothing."""


class _HandlerDeclined(Exception):
    def __init__(self, response: Response) -> None:
        self.response = response


IDEMPOTENCY_COMPLETE = """
UPDATE merchants_idempotencyrecord
SET status = 'completed', response_status = %s, response_body = %s::jsonb
WHERE id = %s
"""
"""The 2xx response stored in the record a request claimed, as the JSON it renders to (the
ORM form parsed that JSON back only to have it dumped again): docs/decisions.md."""


def _complete(*, record_id: int, response: Response, body: object) -> None:
    """Store the 2xx response in the record this request claimed, in the handler's
    transaction; _KeyTakenOver when that record is no longer there."""
    stored = JSONRenderer().render(body).decode()
    with connection.cursor() as cursor:
        cursor.execute(IDEMPOTENCY_COMPLETE, [response.status_code, stored, record_id])
        completed = cursor.rowcount
    if completed != 1:
        raise _KeyTakenOver()


def _release(record_id: int) -> None:
    """Free the key this request claimed: the record it claimed, only that one (the key may be
    another request's by now, its claim having been taken over as abandoned)."""
    IdempotencyRecord.objects.filter(pk=record_id, status=IdempotencyStatus.IN_PROGRESS).delete()


def idempotent(view_method: Callable) -> Callable:
    """Decorates a view's post(): the Idempotency-Key contract (run_idempotent)."""

    @functools.wraps(view_method)
    def wrapper(self, request: Request, *args, **kwargs) -> Response:
        return run_idempotent(request, lambda: view_method(self, request, *args, **kwargs))

    wrapper.idempotent = True
    return wrapper


def purge_expired(*, now=None) -> int:
    now = now or timezone.now()
    deleted, _ = IdempotencyRecord.objects.filter(expires_at__lte=now).delete()
    return deleted
