"""The whole API flow with every logger at DEBUG, and no API secret, webhook signing secret or
full phone number in any log line (message, arguments, exception text or extra fields)."""

import logging
import re
from collections.abc import Iterator

import pytest
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from merchants import services as merchant_services
from tests.payments.conftest import (
    SN_PHONE,
    create_customer,
    create_quote,
    fund,
    payin_body,
    payout_body,
)
from tests.support import MerchantClient
from webhooks.services.endpoints import endpoint_set

pytestmark = pytest.mark.django_db(transaction=True)


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        text = self.format(record)  # includes the formatted exception, if any
        self.lines.append(f"{text} {record.__dict__!r}")


@pytest.fixture
def every_log_line() -> Iterator[list[str]]:
    handler = _Capture()
    root = logging.getLogger()
    loggers = [root] + [
        logging.getLogger(name) for name in list(logging.root.manager.loggerDict) if name
    ]
    levels = [(logger, logger.level) for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.DEBUG)
    root.addHandler(handler)
    yield handler.lines
    root.removeHandler(handler)
    for logger, level in levels:
        logger.setLevel(level)


def _dashboard_key(merchant) -> tuple[str, str]:
    """An owner creates an API key in the dashboard; the secret is shown once on the page."""
    merchant_services.staff_user_create(
        username="owner-logs", password="pw-123456-staff", merchant=merchant, role="owner"
    )
    browser = Client()
    assert browser.login(username="owner-logs", password="pw-123456-staff")
    page = browser.post(
        "/admin/merchants/apikey/add/", {"label": "logs", "expires_at": ""}, follow=True
    ).content.decode()
    secret = re.search(r'id="api-secret">(cs_[^<]+)<', page).group(1)
    key = merchant.api_keys.get(label="logs").key
    return key, secret


def test_the_whole_flow_logs_no_api_secret_no_signing_secret_and_no_phone(
    enabled_merchant, hanging_receiver, webhook_endpoint, every_log_line, settings
):
    settings.PROVIDER_SIMULATION_DELAY_SECONDS = 0
    key, api_secret = _dashboard_key(enabled_merchant)
    _endpoint, signing_secret = endpoint_set(
        merchant=enabled_merchant, url=hanging_receiver.url, now=timezone.now()
    )
    api = MerchantClient(enabled_merchant)
    api.client.credentials(HTTP_X_API_KEY=key, HTTP_X_API_SECRET=api_secret)
    secrets = {api_secret, signing_secret, SN_PHONE.removeprefix("+")}

    customer = create_customer(api)
    payin = api.post("/payins", payin_body(create_quote(api, "payin"), customer))
    assert payin.status_code == 201
    fund(enabled_merchant, "100000")
    payout = api.post("/payouts", payout_body(create_quote(api, "payout", amount="5000"), customer))
    assert payout.status_code == 201
    assert api.get(f"/payins/{payin.json()['id']}").json()["status"] == "completed"
    assert api.get(f"/payouts/{payout.json()['id']}").json()["status"] == "completed"
    # Failures log too: a wrong secret, and a bad body.
    stranger = APIClient()
    stranger.credentials(HTTP_X_API_KEY=key, HTTP_X_API_SECRET=api_secret + "x")
    assert stranger.get("/payins").status_code == 401
    assert api.post("/payins", {"quote_id": "nope"}).status_code == 400
    # A phone that is logged (here by a test, tomorrow by a careless line) shows its end only.
    logging.getLogger("cowry").warning("Customer phone %s", SN_PHONE)

    delivered = [h["X-Cowry-Event"] for h, _ in hanging_receiver.requests]
    assert sorted(delivered) == ["payin.completed", "payout.completed"]
    assert every_log_line, "nothing was logged: the capture is broken"
    leaks = [line for line in every_log_line if any(secret in line for secret in secrets)]
    assert leaks == []
