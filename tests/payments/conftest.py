"""Helpers for the payments tests: quotes and customers through the real API."""

from decimal import Decimal

import pytest
from django.utils import timezone

from payments import provider
from payments.ledger.adjustments import wallet_credit
from payments.provider import sandbox_gateway
from payments.provider.simulator import SimulatorGateway
from tests.faults.conftest import (  # noqa: F401 - the broker's Redis, stopped for a moment
    broker_down,
    isolated_broker,
    private_redis,
)
from tests.webhooks.conftest import receiver, webhook_settings  # noqa: F401 - a local receiver
from tests.worker import celery_worker_process  # noqa: F401 - the real-worker fixture

SN_PHONE = "+221770001234"
DECLINED_PHONE = "+221770001000"
SILENT_PHONE = "+221770001999"


DISBURSEMENTS_DOWN = "disbursements-down"


@sandbox_gateway(DISBURSEMENTS_DOWN)
class DisbursementsDownGateway(SimulatorGateway):
    """The simulator, unreachable for disbursements (the call's answer never comes back): set
    PAYMENTS_PROVIDER_GATEWAY to DISBURSEMENTS_DOWN."""

    def submit_disbursement(self, **kwargs):
        raise provider.ProviderUnavailable("connection reset")


COLLECTIONS_DOWN = "collections-down"


@sandbox_gateway(COLLECTIONS_DOWN)
class CollectionsDownGateway(SimulatorGateway):
    """The simulator, unreachable for collections: set PAYMENTS_PROVIDER_GATEWAY to
    COLLECTIONS_DOWN."""

    def submit_collection(self, **kwargs):
        raise provider.ProviderUnavailable("connection reset")


COLLECTIONS_COUNTED = "collections-counted"


@sandbox_gateway(COLLECTIONS_COUNTED)
class CollectionsCountedGateway(SimulatorGateway):
    """The simulator, keeping the reference of each collection call in `calls` (cleared by the
    test): set PAYMENTS_PROVIDER_GATEWAY to COLLECTIONS_COUNTED."""

    calls: list[str] = []

    def submit_collection(self, **kwargs):
        self.calls.append(kwargs["reference"])
        return super().submit_collection(**kwargs)


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
    """A mobile money quote on `operator` (its country from the code, XAF for Cameroon)."""
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


def fund(merchant, amount: str, currency: str = "XOF") -> None:
    wallet_credit(
        merchant=merchant,
        currency=currency,
        amount=Decimal(amount),
        reason="test float",
        at=timezone.now(),
    )


def payin_body(quote: dict, customer: dict, phone: str = SN_PHONE) -> dict:
    return {"quote_id": quote["id"], "customer_id": customer["id"], "source": {"phone": phone}}


def payout_body(quote: dict, customer: dict, phone: str = SN_PHONE, **recipient) -> dict:
    return {
        "quote_id": quote["id"],
        "customer_id": customer["id"],
        "payment_reason_code": "SALARY",
        "recipient": {
            "recipient_type": "individual",
            "first_name": "Moussa",
            "last_name": "Ndiaye",
            "phone": phone,
            **recipient,
        },
    }


@pytest.fixture
def customer(enabled_api) -> dict:
    return create_customer(enabled_api)
