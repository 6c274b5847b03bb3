"""Helpers for the transfers tests: customers, quotes and transfers through the real API."""

import pytest

from payments.ledger.checks import ledger_check
from tests.dashboard.conftest import staff_client  # noqa: F401 - dashboard logins
from tests.faults.conftest import (  # noqa: F401 - the broker's Redis, stopped or read
    broker_down,
    broker_queues,
    isolated_broker,
    private_redis,
)
from tests.webhooks.conftest import receiver, webhook_settings  # noqa: F401 - HTTP receiver
from transfers.models import Transfer
from webhooks.models import Event

CM_PHONE = "+237670001234"
SN_PHONE = "+221770001234"
SN_OTHER_PHONE = "+221770005678"
DECLINED_SUFFIX = "000"
SILENT_SUFFIX = "999"
CM_DECLINED = "+237670001000"
SN_DECLINED = "+221770001000"
SN_SILENT = "+221770001999"
CM_SILENT = "+237670001999"

SENDER_DETAILS = {
    "address_line1": "12 rue Joss",
    "city": "Douala",
    "occupation": "trader",
    "source_of_funds": "salary",
}


def create_customer(api, **fields) -> dict:
    body = {"first_name": "Awa", "last_name": "Diallo", "phone": CM_PHONE, **fields}
    response = api.post("/customers", body)
    assert response.status_code == 201, response.json()
    return response.json()


def create_quote(
    api,
    *,
    customer_id: str | None,
    corridor: str = "CM-SN-XAF-XOF",
    payer_operator: str = "CM_MTN_MOMO",
    recipient_operator: str = "SN_WAVE_MOMO",
    payin_amount: str = "10000",
) -> dict:
    payin_currency = corridor.split("-")[2]
    body = {
        "corridor_code": corridor,
        "payer_operator_code": payer_operator,
        "recipient_operator_code": recipient_operator,
        "payin_amount": payin_amount,
        "payin_currency": payin_currency,
        "payout_currency": corridor.split("-")[3],
    }
    if customer_id:
        body["customer_id"] = customer_id
    response = api.post("/quotes/transfer", body)
    assert response.status_code == 201, response.json()
    return response.json()


def transfer_body(
    quote: dict,
    customer: dict,
    *,
    payer_phone: str = CM_PHONE,
    recipient_phone: str = SN_PHONE,
    payer: dict | None = None,
    recipient: dict | None = None,
    **extra,
) -> dict:
    return {
        "quote_id": quote["id"],
        "customer_id": customer["id"],
        "payment_reason_code": "FAMILY_SUPPORT",
        "payer": {"phone": payer_phone, **(payer or {})},
        "recipient": {
            "recipient_type": "individual",
            "first_name": "Moussa",
            "last_name": "Ndiaye",
            "phone": recipient_phone,
            **(recipient or {}),
        },
        **extra,
    }


def ledger_is_clean() -> bool:
    report = ledger_check()
    assert report["breaches"] == []
    return report["ok"]


@pytest.fixture
def customer(enabled_api) -> dict:
    return create_customer(enabled_api, **SENDER_DETAILS)


@pytest.fixture
def quote(enabled_api, customer) -> dict:
    return create_quote(enabled_api, customer_id=customer["id"])


@pytest.fixture
def run(django_capture_on_commit_callbacks):
    """run(fn): call fn and then everything it enqueued after commit (provider legs included),
    the way a worker would."""

    def call(fn, *args, **kwargs):
        with django_capture_on_commit_callbacks(execute=True):
            return fn(*args, **kwargs)

    call.capture = django_capture_on_commit_callbacks
    return call


def events_of(transfer_id) -> list[str]:
    return list(
        Event.objects.filter(data_id=transfer_id)
        .order_by("created_at")
        .values_list("event_type", flat=True)
    )


@pytest.fixture
def disbursing(enabled_api, customer, quote, run) -> Transfer:
    """A transfer whose collection completed and whose disbursement the provider received but
    never answers (the sandbox's silent recipient)."""
    response = run(
        enabled_api.post, "/transfers", transfer_body(quote, customer, recipient_phone=SN_SILENT)
    )
    transfer = Transfer.objects.get(pk=response.json()["id"])
    assert transfer.status == "disbursing" and transfer.disbursement_reference
    return transfer


def field_paths(fields: dict, prefix: str = "") -> set[str]:
    """The error's fields as dotted paths: {"payer": {"phone": [...]}} -> {"payer.phone"}."""
    paths: set[str] = set()
    for key, value in fields.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict):
            paths |= field_paths(value, f"{path}.")
        else:
            paths.add(path)
    return paths
