"""Commands on provider connections and routes (the ops commands call these), and the record of
what a connection did last (its last success, its recent errors)."""

import json
import logging
import secrets
import uuid
from collections.abc import Callable
from datetime import datetime
from urllib.parse import urlsplit

from django.core.cache import cache
from django.db import transaction

from core import secrets_at_rest
from quotes.models import Operator
from rails import selectors
from rails.models import (
    SIMULATOR,
    ConnectionKind,
    OperatorRoute,
    ProviderAnswer,
    ProviderConnection,
    ProviderError,
)

logger = logging.getLogger("cowry.rails")

PRODUCTS = ("collection", "disbursement")
CREDENTIAL_FIELDS = ("subscription_key", "api_user", "api_key")
# A connection's recent errors kept for the ops home.
ERRORS_KEPT = 20
# A connection's trouble is a line (and a row on the ops home) at most this often per step.
ERROR_LOG_SECONDS = 60
# last_success_at is written at most this often.
SUCCESS_WRITE_SECONDS = 60


class ConnectionRefused(Exception):
    """An ops command on connections or routes that cannot be done; the message says why."""


# Functions (name -> how many unfinished legs name that connection) the apps that own legs
# register, so that a connection in use is not removed: rails knows no leg.
_leg_counters: list[Callable[[str], int]] = []


def unfinished_legs_counter_register(counter: Callable[[str], int]) -> None:
    _leg_counters.append(counter)


def credentials_parse(text: str) -> dict:
    """The credentials' JSON as read on standard input, checked (never quoted back)."""
    try:
        credentials = json.loads(text)
    except ValueError:
        raise ConnectionRefused("The credentials are not valid JSON.") from None
    if not isinstance(credentials, dict) or set(credentials) != set(PRODUCTS):
        raise ConnectionRefused(
            'The credentials must be {"collection": {...}, "disbursement": {...}}.'
        )
    for product in PRODUCTS:
        each = credentials[product]
        if not isinstance(each, dict) or set(each) != set(CREDENTIAL_FIELDS):
            raise ConnectionRefused(
                f"The {product} credentials must have exactly: {', '.join(CREDENTIAL_FIELDS)}."
            )
        if not all(isinstance(value, str) and value for value in each.values()):
            raise ConnectionRefused(f"The {product} credentials must be non-empty strings.")
    return credentials


def _url_checked(url: str, *, flag: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query:
        raise ConnectionRefused(f"{flag} must be an http(s) URL without a query.")
    return url.rstrip("/")


def _changed() -> None:
    """Every process reads the routes and connections afresh within ROUTES_MEMO_SECONDS."""
    cache.set(selectors.ROUTES_VERSION_KEY, uuid.uuid4().hex, None)
    selectors.memo_forget()


def connection_add(
    *,
    name: str,
    kind: str,
    base_url: str,
    target_environment: str,
    callback_base: str,
    credentials: dict,
    at: datetime,
) -> ProviderConnection:
    if name == SIMULATOR or ProviderConnection.objects.filter(name=name).exists():
        raise ConnectionRefused(f"A connection named {name!r} exists.")
    if kind != ConnectionKind.MTN_MOMO:
        raise ConnectionRefused(f"Unknown kind {kind!r} (known: {ConnectionKind.MTN_MOMO}).")
    if not target_environment:
        raise ConnectionRefused("--target-environment is required.")
    connection = ProviderConnection.objects.create(
        name=name,
        kind=kind,
        base_url=_url_checked(base_url, flag="--base-url"),
        target_environment=target_environment,
        callback_base=_url_checked(callback_base, flag="--callback-base"),
        credentials=secrets_at_rest.encrypt(json.dumps(credentials)),
        callback_secret=secrets_at_rest.encrypt(secrets.token_urlsafe(24)),
        created_at=at,
        updated_at=at,
    )
    transaction.on_commit(_changed)
    return connection


def connection_update(
    *,
    name: str,
    at: datetime,
    base_url: str | None = None,
    target_environment: str | None = None,
    callback_base: str | None = None,
    credentials: dict | None = None,
) -> ProviderConnection:
    """Change what is given; new credentials drop the connection's cached tokens."""
    connection = ProviderConnection.objects.filter(name=name).first()
    if connection is None:
        raise ConnectionRefused(f"No connection named {name!r}.")
    if base_url is not None:
        connection.base_url = _url_checked(base_url, flag="--base-url")
    if callback_base is not None:
        connection.callback_base = _url_checked(callback_base, flag="--callback-base")
    if target_environment:
        connection.target_environment = target_environment
    if credentials is not None:
        connection.credentials = secrets_at_rest.encrypt(json.dumps(credentials))
    connection.updated_at = at
    connection.save()
    for product in PRODUCTS:
        cache.delete(token_cache_key(name, product))
    transaction.on_commit(_changed)
    return connection


def connection_remove(*, name: str) -> None:
    connection = ProviderConnection.objects.filter(name=name).first()
    if connection is None:
        raise ConnectionRefused(f"No connection named {name!r}.")
    routed = selectors.connections_in_use(name)
    if routed:
        raise ConnectionRefused(f"Connection {name!r} is the route of {', '.join(routed)}.")
    legs = sum(counter(name) for counter in _leg_counters)
    if legs:
        raise ConnectionRefused(f"Connection {name!r} has {legs} unfinished leg(s).")
    connection.delete()
    transaction.on_commit(_changed)


def operator_route_set(*, operator_code: str, name: str, at: datetime) -> None:
    """Route `operator_code`'s new legs through connection `name` (`simulator`: back to it)."""
    if not Operator.objects.filter(code=operator_code).exists():
        raise ConnectionRefused(f"No catalog operator {operator_code!r}.")
    if name == SIMULATOR:
        OperatorRoute.objects.filter(operator_code=operator_code).delete()
    else:
        connection = ProviderConnection.objects.filter(name=name).first()
        if connection is None:
            raise ConnectionRefused(f"No connection named {name!r}.")
        OperatorRoute.objects.update_or_create(
            operator_code=operator_code, defaults={"connection": connection, "updated_at": at}
        )
    transaction.on_commit(_changed)


def token_cache_key(name: str, product: str) -> str:
    return selectors.token_cache_key(name, product)


def connection_succeeded(*, name: str, at: datetime) -> None:
    """Note a call that worked: last_success_at, written at most once a minute (across
    processes), not once a call."""
    if cache.add(f"rails:success-noted:{name}", 1, SUCCESS_WRITE_SECONDS):
        ProviderConnection.objects.filter(name=name).update(last_success_at=at)


def error_logged_key(name: str, step: str) -> str:
    return f"rails:error-logged:{name}:{step.replace(' ', '-')}"


def connection_failed(*, name: str, step: str, message: str, at: datetime) -> None:
    """A connection's trouble: one ERROR line and one row for the ops home a minute per
    connection and step, however many legs meet it (across processes)."""
    if not cache.add(error_logged_key(name, step), 1, ERROR_LOG_SECONDS):
        return
    logger.error("Provider connection %s: %s failed: %s", name, step, message)
    connection = ProviderConnection.objects.filter(name=name).first()
    if connection is None:
        return
    ProviderError.objects.create(
        connection=connection, step=step, message=message[:300], created_at=at
    )
    kept = connection.errors.order_by("-created_at").values_list("id", flat=True)[:ERRORS_KEPT]
    connection.errors.exclude(id__in=list(kept)).delete()


def answer_record(
    *,
    connection: str,
    product: str,
    reference: str,
    status: str,
    raw_code: str,
    financial_transaction_id: str,
    at: datetime,
) -> None:
    """Keep what the operator last said of request `reference`, for support."""
    ProviderAnswer.objects.update_or_create(
        connection=connection,
        product=product,
        reference=reference,
        defaults={
            "status": status,
            "raw_code": raw_code,
            "financial_transaction_id": financial_transaction_id,
            "updated_at": at,
        },
    )
