"""Helpers for the extras tests: resources made through the real API."""

import contextlib

import pytest

from tests.dashboard.conftest import staff_client  # noqa: F401 - dashboard logins
from tests.payments.conftest import (  # noqa: F401 - the extras tests import them from here
    DECLINED_PHONE,
    SILENT_PHONE,
    SN_PHONE,
    create_customer,
    create_quote,
    fund,
)
from tests.webhooks.conftest import receiver, webhook_settings  # noqa: F401 - HTTP receiver


def create_payin(
    api, customer: dict, *, phone: str = SN_PHONE, amount: str = "10000", settle=None
) -> dict:
    """`settle`: the django_capture_on_commit_callbacks fixture, to run the provider now."""
    quote = create_quote(api, "payin", amount=amount)
    with settle(execute=True) if settle else contextlib.nullcontext():
        response = api.post(
            "/payins",
            {"quote_id": quote["id"], "customer_id": customer["id"], "source": {"phone": phone}},
        )
    assert response.status_code == 201, response.json()
    return response.json()


def create_payout(
    api, customer: dict, *, phone: str = SN_PHONE, amount: str = "1000", settle=None
) -> dict:
    quote = create_quote(api, "payout", amount=amount)
    with settle(execute=True) if settle else contextlib.nullcontext():
        response = api.post(
            "/payouts",
            {
                "quote_id": quote["id"],
                "customer_id": customer["id"],
                "recipient": {"first_name": "Moussa", "last_name": "Ndiaye", "phone": phone},
            },
        )
    assert response.status_code == 201, response.json()
    return response.json()


def walk(api, path: str, **params) -> list[dict]:
    """Every item of a list, following next_cursor page by page."""
    items: list[dict] = []
    cursor = None
    for _ in range(1000):
        query = dict(params)
        if cursor:
            query["cursor"] = cursor
        response = api.get(path, **query)
        assert response.status_code == 200, response.json()
        body = response.json()
        assert set(body) == {"data", "has_more", "next_cursor"}
        items.extend(body["data"])
        if not body["has_more"]:
            assert body["next_cursor"] is None
            return items
        cursor = body["next_cursor"]
    raise AssertionError("pagination never ended")


@pytest.fixture
def customer(enabled_api) -> dict:
    return create_customer(enabled_api)
