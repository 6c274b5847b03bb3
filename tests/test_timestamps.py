"""Every timestamp leaves the service in one form: UTC, six fraction digits, "Z" (found in the
time audit: a time on a whole second lost its fraction, and a quote's locked pricing wrote
"+00:00", in the same response as "Z")."""

import json
import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from uuid import uuid4

import pytest
from django.conf import settings
from django.utils import timezone

from core.fields import TIMESTAMP_FORMAT, format_timestamp
from payments.models import Payin
from payments.statements import StatementLine, statement_csv
from tests.payments.conftest import SN_PHONE, create_customer
from tests.quotes.test_consume_and_expiry import make_quote
from tests.webhooks.conftest import record_event

pytestmark = pytest.mark.django_db

TIMESTAMP = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z")
# the names every timestamp of a body ends with (STYLE: datetimes end in _at)
TIME_KEY = re.compile(r".*_at")


def times_in(value, path="") -> dict[str, str]:
    """Every value under a key ending in _at, by its path."""
    found = {}
    if isinstance(value, dict):
        for key, item in value.items():
            if TIME_KEY.fullmatch(key) and item is not None:
                found[f"{path}.{key}"] = item
            found.update(times_in(item, f"{path}.{key}"))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found.update(times_in(item, f"{path}[{index}]"))
    return found


def whole_second() -> datetime:
    return timezone.now().replace(microsecond=0)


def test_the_format_is_one_form_whatever_the_offset_or_fraction():
    assert settings.REST_FRAMEWORK["DATETIME_FORMAT"] == TIMESTAMP_FORMAT
    at = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert format_timestamp(at) == "2026-01-02T03:04:05.000000Z"
    douala = at.astimezone(timezone.get_fixed_timezone(60))
    assert format_timestamp(douala) == "2026-01-02T03:04:05.000000Z"
    assert format_timestamp(at.replace(microsecond=7)) == "2026-01-02T03:04:05.000007Z"


def test_a_quote_made_on_a_whole_second_keeps_its_fraction(enabled_api, enabled_merchant):
    at = whole_second()
    quote = make_quote(enabled_merchant, now=at)
    body = enabled_api.get(f"/quotes/{quote.id}").json()
    assert body["created_at"] == format_timestamp(at)
    assert body["expires_at"] == format_timestamp(at + timedelta(minutes=15))
    assert all(TIMESTAMP.fullmatch(text) for text in times_in(body).values()), body


def test_a_payment_shows_its_locked_pricing_times_as_its_own(enabled_api, enabled_merchant):
    at = whole_second()
    quote = make_quote(enabled_merchant, now=at)
    customer = create_customer(enabled_api)
    response = enabled_api.post(
        "/payins",
        {"quote_id": str(quote.id), "customer_id": customer["id"], "source": {"phone": SN_PHONE}},
    )
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["pricing"]["locked_at"] == format_timestamp(at)
    assert (
        body["pricing"]["expires_at"] == enabled_api.get(f"/quotes/{quote.id}").json()["expires_at"]
    )
    times = times_in(body)
    assert {".pricing.locked_at", ".pricing.expires_at", ".created_at"} <= set(times)
    assert all(TIMESTAMP.fullmatch(text) for text in times.values()), times
    # a payment whose quote stored them as isoformat wrote them (before this fix) shows the same
    Payin.objects.filter(pk=body["id"]).update(
        pricing={
            **body["pricing"],
            "locked_at": at.isoformat(),
            "expires_at": (at + timedelta(minutes=15)).astimezone(UTC).isoformat(),
        }
    )
    again = enabled_api.get(f"/payins/{body['id']}").json()
    assert again["pricing"] == body["pricing"]


def test_a_webhook_body_shows_times_as_the_api_does(enabled_merchant):
    at = whole_second()
    event = record_event(
        enabled_merchant, snapshot={"status": "completed", "completed_at": at}, at=at
    )
    body = json.loads(event.body)
    assert body["created_at"] == format_timestamp(at)
    assert body["data"]["object"]["completed_at"] == format_timestamp(at)


def test_a_statement_shows_times_as_the_api_does():
    at = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    line = StatementLine(
        created_at=at,
        journal_id=uuid4(),
        kind="payin_completed",
        resource_type="payin",
        resource_id=uuid4(),
        provider_reference="sim-1",
        account="merchant_available",
        amount=Decimal("100"),
        fee=Decimal("0"),
        balance_after=Decimal("100"),
    )
    row = statement_csv([line]).splitlines()[1]
    assert row.startswith("2026-01-02T03:04:05.000000Z,")
