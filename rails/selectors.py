"""Reads of the provider connections: the route of an operator and a connection's settings, read
on every submission from this process's memo of them, which is good for ROUTES_MEMO_SECONDS and
then kept as long as the routes' version in the shared cache has not moved (a change bumps it):
no query per leg, and a route change reaches every process within seconds."""

import json
import logging
import threading
import time
import uuid
from dataclasses import dataclass, field

from django.conf import settings
from django.core.cache import cache

from core import secrets_at_rest
from quotes.models import Operator
from rails.models import (
    SIMULATOR,
    OperatorRoute,
    ProviderAnswer,
    ProviderConnection,
    ProviderError,
)

logger = logging.getLogger("cowry.rails")

# A route change applies to the legs submitted from at most this long after it (DESIGN: 5 s).
ROUTES_MEMO_SECONDS = 2.0
ROUTES_VERSION_KEY = "rails:routes:version"


@dataclass(frozen=True)
class ConnectionSettings:
    """One connection as an adapter uses it; the secrets never in its repr."""

    name: str
    kind: str
    base_url: str
    target_environment: str
    callback_base: str
    credentials: dict = field(repr=False)
    callback_secret: str = field(repr=False)


@dataclass
class _Memo:
    checked: float = float("-inf")
    version: str | None = None
    routes: dict[str, str] = field(default_factory=dict)
    connections: dict[str, ConnectionSettings] = field(default_factory=dict)


_memo = _Memo()
_lock = threading.Lock()


def connection_settings_of(connection: ProviderConnection) -> ConnectionSettings:
    return ConnectionSettings(
        name=connection.name,
        kind=connection.kind,
        base_url=connection.base_url.rstrip("/"),
        target_environment=connection.target_environment,
        callback_base=connection.callback_base.rstrip("/"),
        credentials=json.loads(secrets_at_rest.decrypt(connection.credentials)),
        callback_secret=secrets_at_rest.decrypt(connection.callback_secret),
    )


def _shared_version() -> str | None:
    """The routes' version every process compares (None without a shared cache: reload)."""
    if not settings.REDIS_URL:
        return None
    try:
        version = cache.get(ROUTES_VERSION_KEY)
        if version is None:
            cache.add(ROUTES_VERSION_KEY, uuid.uuid4().hex, None)
            version = cache.get(ROUTES_VERSION_KEY)
        return version
    except Exception:  # a Redis outage: read the database, as without a shared cache
        logger.warning("Routes' version unavailable from the shared cache", exc_info=True)
        return None


def _current() -> _Memo:
    with _lock:
        now = time.monotonic()
        if now - _memo.checked < ROUTES_MEMO_SECONDS:
            return _memo
        version = _shared_version()
        if version is None or version != _memo.version:
            connections = {
                each.name: connection_settings_of(each) for each in ProviderConnection.objects.all()
            }
            _memo.routes = dict(
                OperatorRoute.objects.values_list("operator_code", "connection__name")
            )
            _memo.connections = connections
            _memo.version = version
        _memo.checked = now
        return _memo


def memo_forget() -> None:
    """This process reads the routes afresh at its next use (after a change it made)."""
    with _lock:
        _memo.checked = float("-inf")
        _memo.version = None


def operator_route(operator_code: str) -> str:
    """The name of the connection a new leg of `operator_code` is submitted through."""
    return _current().routes.get(operator_code, SIMULATOR)


def connection_settings(name: str) -> ConnectionSettings:
    """A connection's settings (KeyError: no such connection, e.g. removed)."""
    memo = _current()
    if name not in memo.connections:
        memo_forget()  # one made a moment ago in another process
        memo = _current()
    return memo.connections[name]


def token_cache_key(name: str, product: str) -> str:
    """Where the shared cache keeps a connection's token of `product`."""
    return f"rails:token:{name}:{product}"


def connections_in_use(name: str) -> list[str]:
    """The operators routed to connection `name`."""
    return sorted(
        OperatorRoute.objects.filter(connection__name=name).values_list("operator_code", flat=True)
    )


def provider_answers_of(references: list[str]) -> list:
    """What the operators last said of these requests (our references), oldest first."""
    return list(ProviderAnswer.objects.filter(reference__in=references).order_by("updated_at"))


def connections_overview(*, now: float) -> list[dict]:
    """Each connection as ops see it on their home: kind, target environment, the operators
    routed to it, its last success, its recent errors and its tokens' age (never a secret).
    `now` is a Unix time."""
    routes = dict(OperatorRoute.objects.values_list("operator_code", "connection__name"))
    codes = list(Operator.objects.order_by("code").values_list("code", flat=True))
    rows = [
        {
            "name": SIMULATOR,
            "kind": "simulator",
            "target_environment": "sandbox",
            "operators": [code for code in codes if code not in routes],
            "last_success_at": None,
            "errors": [],
            "token_ages": {},
        }
    ]
    for connection in ProviderConnection.objects.order_by("name"):
        ages = {}
        for product in ("collection", "disbursement"):
            cached = cache.get(token_cache_key(connection.name, product))
            ages[product] = None if not cached else int(max(now - cached["fetched_at"], 0))
        rows.append(
            {
                "name": connection.name,
                "kind": connection.kind,
                "target_environment": connection.target_environment,
                "operators": sorted(
                    code for code, name in routes.items() if name == connection.name
                ),
                "last_success_at": connection.last_success_at,
                "errors": list(
                    ProviderError.objects.filter(connection=connection).order_by("-created_at")[:3]
                ),
                "token_ages": ages,
            }
        )
    return rows
