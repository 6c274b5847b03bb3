"""Helpers for the extras tests: resources made through the real API."""

import contextlib
from decimal import Decimal

import pytest
from django.utils import timezone

from payments import services as payment_services
from tests.dashboard.conftest import staff_client  # noqa: F401 - dashboard logins
from tests.webhooks.conftest import receiver, webhook_settings  # noqa: F401 - HTTP receiver

SN_PHONE = "+221770001234"
DECLINED_PHONE = "+221770001000"
SILENT_PHONE = "+221770001999"


def create_customer(api, **fields) -> dict:
    body = {"first_name": "Awa", "last_name": "Diallo", "phone": SN_PHONE, **fields}
    response = api.post("/customers", body)
    assert response.status_code == 201, response.json()
    return response.json()


def create_quote(
    api,
    flow: str = "payin",
    *,
    amount: str = "10000",
    operator: str = "SN_ORANGE_MOMO",
    customer_id: str | None = None,
) -> dict:
    body = {
        "country_code": operator[:2],
        "operator_code": operator,
        "rail_type": "mobile_money",
        "send_amount": amount,
        "send_currency": "XAF" if operator.startswith("CM") else "XOF",
    }
    if customer_id:
        body["customer_id"] = customer_id
    response = api.post(f"/quotes/{flow}", body)
    assert response.status_code == 201, response.json()
    return response.json()


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


def fund(merchant, amount: str, currency: str = "XOF") -> None:
    payment_services.wallet_credit(
        merchant=merchant,
        currency=currency,
        amount=Decimal(amount),
        reason="test float",
        at=timezone.now(),
    )


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
