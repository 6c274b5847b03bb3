"""One Idempotency-Key mechanism for every POST that needs it (docs/api.md).

The key is claimed in its own short transaction (so a concurrent request with the same key sees
it at once and gets a 409), then the handler runs in a transaction that also stores the 2xx
response, so a resource and its idempotency record are committed together or not at all; or,
for a handler that holds its writes (`held`), in the one statement that writes them. A handler
that holds its writes and opens no transaction has the key claimed in its first read's
statement instead (still committed before it goes on), and any answer it gives is the one a
claim made first would have given.

A request completes or releases only the record it claimed (by its id): a request that
stalled past IDEMPOTENCY_LOCK_TIMEOUT_SECONDS may have had its claim taken over by a retry, and
the key is then the retry's. Such a request keeps nothing it wrote and answers as the key's
record says.
"""

import functools
import hashlib
import json
from collections.abc import Callable
from contextlib import nullcontext
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.utils import timezone
from rest_framework.exceptions import APIException
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from config import rawsql
from config.exceptions import DomainError
from config.transactions import savepoint_if_nested
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


# The hot path of every POST, as one statement each on PostgreSQL: no savepoint, no exception
# on a duplicate key, no ORM compilation. Other databases (embedded SQLite) use the ORM.
_CLAIM_SQL = """
INSERT INTO merchants_idempotencyrecord
    (merchant_id, key, method, path, fingerprint, status, locked_at, created_at, expires_at)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)
ON CONFLICT (merchant_id, key) DO NOTHING
RETURNING id
"""
_COMPLETE_SQL = """
UPDATE merchants_idempotencyrecord
SET status = %s, response_status = %s, response_body = %s::jsonb
WHERE id = %s"""
# A held statement's writes, the completion's included, are made only while the request's own
# record is there; locked, it cannot be taken over before the statement commits.
_OWN_RECORD_SQL = "SELECT 1 FROM merchants_idempotencyrecord WHERE id = %s FOR UPDATE"


def _expires_at(now: datetime) -> datetime:
    return now + timedelta(seconds=settings.IDEMPOTENCY_KEY_TTL_SECONDS)


def _claim_params(
    *, merchant: Merchant, key: str, method: str, path: str, fingerprint: str, now: datetime
) -> list:
    status = IdempotencyStatus.IN_PROGRESS
    return [merchant.pk, key, method, path, fingerprint, status, now, now, _expires_at(now)]


def _insert(
    *, merchant: Merchant, key: str, method: str, path: str, fingerprint: str, now: datetime
) -> int | None:
    """Insert the in-progress record and return its id; None when the key is already held."""
    if connection.vendor == "postgresql":
        params = _claim_params(
            merchant=merchant, key=key, method=method, path=path, fingerprint=fingerprint, now=now
        )
        with connection.cursor() as cursor:
            cursor.execute(_CLAIM_SQL, params)
            row = cursor.fetchone()
            return None if row is None else row[0]
    try:
        with savepoint_if_nested():
            record = IdempotencyRecord.objects.create(
                merchant=merchant,
                key=key,
                method=method,
                path=path,
                fingerprint=fingerprint,
                status=IdempotencyStatus.IN_PROGRESS,
                locked_at=now,
                expires_at=_expires_at(now),
            )
        return record.pk
    except IntegrityError:
        return None


class _KeyHeld(Exception):
    """The claim that rode on the handler's first read found the key held."""


def _claim_ride(
    *, merchant: Merchant, key: str, method: str, path: str, fingerprint: str
) -> rawsql.Ride:
    """The key's claim, sent with the handler's first read (one round trip less): it commits
    with that read, before the handler goes on, so a concurrent request with the key sees it
    as a separate claim would be seen. Found held, the read raises _KeyHeld."""

    def after(claimed_id: int | None) -> None:
        if claimed_id is None:
            raise _KeyHeld()

    params = _claim_params(
        merchant=merchant,
        key=key,
        method=method,
        path=path,
        fingerprint=fingerprint,
        now=timezone.now(),
    )
    return rawsql.Ride(sql=_CLAIM_SQL, params=params, after=after)


def _claim(
    *, merchant: Merchant, key: str, method: str, path: str, fingerprint: str
) -> int | IdempotencyRecord:
    """Claim the key and return the claimed record's id, or return the record that already
    holds the key."""
    now = timezone.now()
    stale_before = now - timedelta(seconds=settings.IDEMPOTENCY_LOCK_TIMEOUT_SECONDS)
    for _ in range(3):
        claimed = _insert(
            merchant=merchant, key=key, method=method, path=path, fingerprint=fingerprint, now=now
        )
        if claimed is not None:
            return claimed
        existing = IdempotencyRecord.objects.filter(merchant=merchant, key=key).first()
        if existing is None:
            continue  # released in between: try to claim again
        expired = existing.expires_at <= now
        abandoned = (
            existing.status == IdempotencyStatus.IN_PROGRESS and existing.locked_at < stale_before
        )
        if expired or abandoned:
            # Only as it was read: a stalled request that completed its record meanwhile keeps
            # it (its resource is committed with it).
            IdempotencyRecord.objects.filter(
                pk=existing.pk, locked_at=existing.locked_at, status=existing.status
            ).delete()
            continue
        return existing
    raise RequestInProgress()


class _KeyTakenOver(Exception):
    """The record this request claimed is gone: its claim was taken over as abandoned, and the
    key is another request's. Raised before anything of this request is kept."""


def _complete(
    *, record_id: int, response: Response, body: object, held: rawsql.Held | None
) -> None:
    """Store the 2xx response in the record this request claimed, in the handler's
    transaction; with the handler's `held` writes, in their statement, which writes nothing
    unless that record is still there. _KeyTakenOver when it is not."""
    rendered = JSONRenderer().render(body)
    params = [IdempotencyStatus.COMPLETED, response.status_code, rendered.decode(), record_id]
    if held is not None:  # PostgreSQL
        held.only_while(_OWN_RECORD_SQL, [record_id], _KeyTakenOver)
        completion = rawsql.Part(
            name="completion", sql=_COMPLETE_SQL + "{condition} RETURNING 1", params=params
        )
        held.add(also=[completion])
        held.send()
        return
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(_COMPLETE_SQL, params)
            completed = cursor.rowcount
    else:
        completed = IdempotencyRecord.objects.filter(pk=record_id).update(
            status=IdempotencyStatus.COMPLETED,
            response_status=response.status_code,
            response_body=json.loads(rendered),
        )
    if completed != 1:
        raise _KeyTakenOver()  # the handler's transaction keeps nothing


def run_idempotent(
    request: Request,
    handler: Callable[[], Response],
    *,
    held: bool = False,
    atomic: bool = True,
) -> Response:
    """The handler's response under the request's Idempotency-Key. `held`: the handler's
    `rawsql.save_together` writes are held back and sent with the response's record in one
    statement (a round trip fewer; the handler must not read them back). `atomic=False`, for
    a handler whose only writes are held: no transaction is opened, that statement is one, and
    on PostgreSQL the key is claimed with the handler's first read (`rawsql.riding`), another
    round trip fewer; a handler that made no read has it claimed before its answer is given."""
    key = request.headers.get(HEADER)
    if key is None or key.strip() == "":
        raise IdempotencyKeyMissing()
    # ASCII only (an HTTP structured-field string): a server hands other bytes over decoded as
    # latin-1, so "clé" would be stored and echoed garbled and "€" refused as unprintable.
    if len(key) > MAX_KEY_LENGTH or not (key.isascii() and key.isprintable()):
        raise IdempotencyKeyInvalid()
    merchant: Merchant = request.merchant
    body = request.data  # parse first: malformed JSON is a 400 that claims nothing
    # Path ids are taken in either case: a retry that spells one in capitals is the same request.
    path = request.path.lower()
    fingerprint = request_fingerprint(method=request.method, path=path, body=body)
    claim = functools.partial(
        _claim,
        merchant=merchant,
        key=key,
        method=request.method,
        path=path,
        fingerprint=fingerprint,
    )
    # Writes are held on PostgreSQL only; elsewhere a transaction keeps them together.
    atomic = atomic or connection.vendor != "postgresql"
    run = functools.partial(
        _run_claimed,
        handler,
        merchant=merchant,
        key=key,
        fingerprint=fingerprint,
        held=held,
        atomic=atomic,
    )
    if held and not atomic:
        ride = _claim_ride(
            merchant=merchant,
            key=key,
            method=request.method,
            path=path,
            fingerprint=fingerprint,
        )
        try:
            return run(ride=ride, claim=claim)
        except _KeyHeld:  # the handler stopped at its first read
            pass
    claimed = claim()
    if isinstance(claimed, IdempotencyRecord):
        return _answer_held(claimed, key=key, fingerprint=fingerprint)
    return run(record_id=claimed)


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


def _run_claimed(
    handler: Callable[[], Response],
    *,
    merchant: Merchant,
    key: str,
    fingerprint: str,
    held: bool,
    atomic: bool,
    record_id: int | None = None,
    ride: rawsql.Ride | None = None,
    claim: Callable[[], int | IdempotencyRecord] | None = None,
) -> Response:
    """The handler under the key, whose record (`record_id`) this request has claimed, or, with
    `ride`, claims with the handler's first read; when no read took the ride, `claim` claims
    the key before the handler's answer is given (an error included), as a claim made first
    would have."""

    def own() -> IdempotencyRecord | None:
        """None once this request holds the key; else the record that holds it."""
        nonlocal record_id
        if record_id is None:
            claimed = ride.value if ride.sent else claim()  # a sent ride raised if it failed
            if isinstance(claimed, IdempotencyRecord):
                return claimed
            record_id = claimed
        return None

    try:
        with (
            transaction.atomic() if atomic else nullcontext(),
            rawsql.holding() if held else nullcontext() as holder,
            rawsql.riding(ride) if ride is not None else nullcontext(),
        ):
            try:
                response = handler()
            except (DomainError, APIException) as error:
                if (existing := own()) is not None:
                    raise _Answered(existing) from error
                raise
            if (existing := own()) is not None:
                raise _Answered(existing)
            if not 200 <= response.status_code < 300:
                raise _HandlerDeclined(response)
            body_out = _with_meta(response.data, key=key, replayed=False)
            _complete(record_id=record_id, response=response, body=body_out, held=holder)
    except _Answered as answered:  # nothing was written: the held writes were never sent
        return _answer_held(answered.existing, key=key, fingerprint=fingerprint)
    except _KeyTakenOver:  # nothing was written: rolled back, or the held statement refused
        existing = IdempotencyRecord.objects.filter(merchant=merchant, key=key).first()
        if existing is None:  # the request that took it over failed and released it
            raise RequestInProgress() from None
        return _answer_held(existing, key=key, fingerprint=fingerprint)
    except _HandlerDeclined as declined:
        _release(record_id)
        return declined.response
    except _KeyHeld:
        raise
    except BaseException:
        if record_id is None and ride is not None and ride.sent:
            record_id = ride.value
        if record_id is not None:
            _release(record_id)
        raise
    response.data = body_out  # a replay is this JSON (its keys in jsonb's order, not this one's)
    return response


class _Answered(Exception):
    """The key turned out to be held by another request: answer as it says."""

    def __init__(self, existing: IdempotencyRecord) -> None:
        self.existing = existing


class _HandlerDeclined(Exception):
    def __init__(self, response: Response) -> None:
        self.response = response


def _release(record_id: int) -> None:
    """Free the key this request claimed: the record it claimed, only that one (the key may be
    another request's by now, its claim having been taken over as abandoned)."""
    IdempotencyRecord.objects.filter(pk=record_id, status=IdempotencyStatus.IN_PROGRESS).delete()


def idempotent(
    view_method: Callable | None = None, *, held: bool = False, atomic: bool = True
) -> Callable:
    """Decorates a view's post(): the Idempotency-Key contract of docs/api.md. `held` and
    `atomic` as for run_idempotent."""

    def decorate(method: Callable) -> Callable:
        @functools.wraps(method)
        def wrapper(self, request: Request, *args, **kwargs) -> Response:
            return run_idempotent(
                request,
                lambda: method(self, request, *args, **kwargs),
                held=held,
                atomic=atomic,
            )

        wrapper.idempotent = True
        return wrapper

    return decorate if view_method is None else decorate(view_method)


def purge_expired(*, now=None) -> int:
    now = now or timezone.now()
    deleted, _ = IdempotencyRecord.objects.filter(expires_at__lte=now).delete()
    return deleted
