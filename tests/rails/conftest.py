"""The MTN MoMo adapter end to end: the contract fake (rails.fake_mtn) serves the MTN API over
real HTTP in this process, the live server takes its callbacks, a real worker does the rest."""

import contextlib
from collections.abc import Iterator

import pytest
from django.core.cache import cache
from django.utils import timezone

from rails import selectors, services
from rails.fake_mtn import FakeMtn
from tests.payments.conftest import create_customer, fund  # noqa: F401 - reused by the tests
from tests.worker import celery_worker, wait_until  # noqa: F401

CM_PHONE = "+237670001234"
CONNECTION = "mtn-cm"
WORKER_ENV = {"ALLOW_PRIVATE_NETWORK_URLS": "true"}


@pytest.fixture(autouse=True)
def _routes_forgotten() -> Iterator[None]:
    """No route or connection of a test outlives it in this process's memo (the database is
    flushed after each test; the memo would still name its connections)."""
    selectors.memo_forget()
    yield
    cache.set(selectors.ROUTES_VERSION_KEY, "after-a-rails-test", None)
    selectors.memo_forget()


@pytest.fixture
def fake_mtn() -> Iterator[FakeMtn]:
    fake = FakeMtn().start()
    yield fake
    fake.stop()


def tokens_forget(name: str = CONNECTION) -> None:
    """The connection's tokens, and its once-a-minute notes, gone from the shared cache."""
    for product in services.PRODUCTS:
        cache.delete(services.token_cache_key(name, product))
        for step in ("token", "submit", "status"):
            cache.delete(services.error_logged_key(name, f"{product} {step}"))
    cache.delete(f"rails:success-noted:{name}")


def connection_add(fake: FakeMtn, *, callback_base: str, name: str = CONNECTION, **changes):
    tokens_forget(name)
    services.connection_add(
        name=name,
        kind="mtn_momo",
        base_url=fake.url,
        target_environment=changes.get("target_environment", "sandbox"),
        callback_base=callback_base,
        credentials=changes.get("credentials", fake.credentials),
        at=timezone.now(),
    )
    selectors.memo_forget()


@pytest.fixture
def mtn_routed(fake_mtn, live_server, settings, enabled_merchant):
    """CM_MTN_MOMO routed to a connection on the fake; callbacks to the live server."""
    settings.ALLOW_PRIVATE_NETWORK_URLS = True
    connection_add(fake_mtn, callback_base=live_server.url)
    services.operator_route_set(operator_code="CM_MTN_MOMO", name=CONNECTION, at=timezone.now())
    selectors.memo_forget()
    yield fake_mtn
    tokens_forget()
    selectors.memo_forget()


@contextlib.contextmanager
def mtn_worker(**env: str):
    with celery_worker(extra_env={**WORKER_ENV, **env}) as worker:
        yield worker


def cm_quote(api, flow: str = "payin", amount: str = "10000") -> dict:
    from tests.payments.conftest import create_quote

    return create_quote(api, flow, amount=amount, operator="CM_MTN_MOMO")


def cm_transfer(api, customer, *, recipient_phone: str) -> str:
    """A CM-CM-XAF transfer from CM_PHONE to an MTN recipient; its id."""
    from tests.transfers.conftest import create_quote, transfer_body

    quote = create_quote(
        api,
        customer_id=customer["id"],
        corridor="CM-CM-XAF-XAF",
        recipient_operator="CM_MTN_MOMO",
    )
    body = transfer_body(quote, customer, payer_phone=CM_PHONE, recipient_phone=recipient_phone)
    response = api.post("/transfers", body)
    assert response.status_code == 201, response.json()
    return response.json()["id"]
