"""GET /statements (CSV of the wallet's ledger lines) and the dashboard export."""

import csv
import io
from datetime import timedelta
from decimal import Decimal

import pytest
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from payments.ledger.adjustments import wallet_credit
from payments.models import Payin, Wallet
from payments.services.payouts import payout_create
from payments.statements import COLUMNS
from tests.extras.conftest import (
    SILENT_PHONE,
    create_customer,
    create_payin,
    create_payout,
    create_quote,
)

pytestmark = pytest.mark.django_db


def rows_of(response) -> list[dict]:
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/csv")
    reader = csv.DictReader(io.StringIO(response.content.decode()))
    assert tuple(reader.fieldnames) == COLUMNS
    return list(reader)


def today() -> str:
    return timezone.now().date().isoformat()


@pytest.fixture
def history(enabled_api, enabled_merchant, django_capture_on_commit_callbacks):
    """Last week an adjustment of 5000; today a completed payin and a pending payout."""
    wallet_credit(
        merchant=enabled_merchant,
        currency="XOF",
        amount=Decimal(5000),
        reason="opening float",
        at=timezone.now() - timedelta(days=7),
    )
    customer = create_customer(enabled_api)
    payin = create_payin(enabled_api, customer, settle=django_capture_on_commit_callbacks)
    payout = create_payout(enabled_api, customer, phone=SILENT_PHONE, amount="2000")
    return {"payin": payin, "payout": payout}


def test_statement_lists_the_wallet_lines_with_references_fees_and_running_balance(
    enabled_api, enabled_merchant, history
):
    rows = rows_of(
        enabled_api.get("/statements", **{"from": today(), "to": today(), "currency": "XOF"})
    )

    payin = Payin.objects.get(pk=history["payin"]["id"])
    assert [(r["kind"], r["account"]) for r in rows] == [
        ("payin_completed", "merchant_available"),
        ("payout_reserved", "merchant_available"),
        ("payout_reserved", "merchant_reserved"),
    ]
    credit, reserve, held = rows
    assert credit["resource_id"] == str(payin.id) and credit["resource_type"] == "payin"
    assert credit["provider_reference"] == payin.provider_reference != ""
    assert credit["amount"] == history["payin"]["receive_amount"]
    assert Decimal(credit["fee"]) == payin.total_fee
    assert Decimal(credit["balance_after"]) == 5000 + Decimal(credit["amount"])
    debit = history["payout"]["wallet_impact"]["debit_amount"]
    assert reserve["amount"] == f"-{debit}" and held["amount"] == debit
    wallet = Wallet.objects.get(merchant=enabled_merchant, currency="XOF")
    assert Decimal(reserve["balance_after"]) == wallet.available
    assert held["balance_after"] == reserve["balance_after"]


def test_a_payout_reserved_against_a_credit_that_landed_during_its_request_is_listed_after_it(
    enabled_api, enabled_merchant
):
    # The payout's request starts on an empty wallet; a credit (a payin completing) lands
    # while it runs, and the reservation relies on it. Dated by the request's start, the
    # reservation was listed first and the running balance went below zero.
    customer = create_customer(enabled_api)
    quote = create_quote(enabled_api, "payout", amount="1000")
    request_started = timezone.now()
    wallet_credit(
        merchant=enabled_merchant,
        currency="XOF",
        amount=Decimal(5000),
        reason="a payin completing",
        at=timezone.now(),
    )
    payout_create(
        merchant=enabled_merchant,
        quote_id=quote["id"],
        customer_id=customer["id"],
        recipient={"first_name": "Moussa", "last_name": "Ndiaye", "phone": SILENT_PHONE},
        now=request_started,
    )

    rows = rows_of(
        enabled_api.get("/statements", **{"from": today(), "to": today()}, currency="XOF")
    )
    available = [row for row in rows if row["account"] == "merchant_available"]
    assert [row["kind"] for row in available][-2:] == ["adjustment", "payout_reserved"]
    assert all(Decimal(row["balance_after"]) >= 0 for row in rows)


@pytest.mark.parametrize(
    ("reference", "shown"),
    [
        ('=HYPERLINK("http://x")', '\'=HYPERLINK("http://x")'),
        ("+1", "'+1"),
        ("-1", "'-1"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\t=1+1", "'\t=1+1"),
        ("\r=1+1", "'\r=1+1"),
        ("\n=1+1", "'\n=1+1"),
        ('a,"b"\r\nc', 'a,"b"\r\nc'),
        ("SIM-1 =1", "SIM-1 =1"),
    ],
)
def test_provider_references_are_quoted_and_never_start_a_formula(
    enabled_api, django_capture_on_commit_callbacks, reference, shown
):
    # The reference is the provider's text: a spreadsheet evaluates a cell starting with
    # = + - @, and skips a leading tab or line break before doing so.
    customer = create_customer(enabled_api)
    payin = create_payin(enabled_api, customer, settle=django_capture_on_commit_callbacks)
    Payin.objects.filter(pk=payin["id"]).update(provider_reference=reference)

    rows = rows_of(
        enabled_api.get("/statements", **{"from": today(), "to": today(), "currency": "XOF"})
    )

    assert [(row["kind"], row["provider_reference"]) for row in rows] == [
        ("payin_completed", shown)
    ]


def test_statement_range_is_whole_days(enabled_api, history):
    week_ago = (timezone.now() - timedelta(days=7)).date().isoformat()

    old = rows_of(
        enabled_api.get("/statements", **{"from": week_ago, "to": week_ago, "currency": "XOF"})
    )
    xaf = rows_of(
        enabled_api.get("/statements", **{"from": today(), "to": today(), "currency": "XAF"})
    )

    assert [(r["kind"], r["amount"], r["balance_after"]) for r in old] == [
        ("adjustment", "5000", "5000")
    ]
    assert xaf == []


def test_another_merchants_statement_is_empty(history, api):
    rows = rows_of(api.get("/statements", **{"from": today(), "to": today(), "currency": "XOF"}))

    assert rows == []


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"to": "2026-01-01", "currency": "XOF"}, "from"),
        ({"from": "2026-01-01", "currency": "XOF"}, "to"),
        ({"from": "2026-01-01", "to": "2026-01-31"}, "currency"),
        ({"from": "2026-01-01", "to": "2026-01-31", "currency": "EUR"}, "currency"),
        ({"from": "01/01/2026", "to": "2026-01-31", "currency": "XOF"}, "from"),
        ({"from": "2026-01-01", "to": "2026-02-01", "currency": "XOF"}, "to"),
        ({"from": "9999-12-31", "to": "9999-12-31", "currency": "XOF"}, "to"),
    ],
)
def test_bad_statement_parameters_are_a_json_400_naming_the_parameter(api, params, field):
    response = api.get("/statements", **params)

    assert response.status_code == 400
    assert response["Content-Type"] == "application/json"
    assert field in response.json()["error"]["fields"]


def test_a_to_before_from_is_an_empty_statement(enabled_api, history):
    """An empty range is no lines, not an error: the header row only, whatever the days hold."""
    now = timezone.now().date()
    week = {"from": (now - timedelta(days=7)).isoformat(), "to": now.isoformat()}
    reversed_week = {"from": week["to"], "to": week["from"]}

    assert rows_of(enabled_api.get("/statements", **week, currency="XOF"))
    response = enabled_api.get("/statements", **reversed_week, currency="XOF")
    assert rows_of(response) == []
    assert response.content.decode() == ",".join(COLUMNS) + "\r\n"


def test_31_days_is_the_longest_statement(api):
    response = api.get(
        "/statements", **{"from": "2026-01-01", "to": "2026-01-31", "currency": "XOF"}
    )

    assert rows_of(response) == []


def test_statement_needs_credentials_and_answers_json(db):
    response = APIClient().get("/statements", {"from": today(), "to": today(), "currency": "XOF"})

    assert response.status_code == 401
    assert response["Content-Type"] == "application/json"
    assert response.json()["error"]["code"] == "unauthorized"


def test_statement_is_declared_as_csv_in_the_schema(client):
    schema = client.get("/schema", {"format": "json"}).json()
    operation = schema["paths"]["/statements"]["get"]

    assert operation["operationId"] == "getStatement"
    assert list(operation["responses"]["200"]["content"]) == ["text/csv"]
    assert list(operation["responses"]["400"]["content"]) == ["application/json"]
    assert {p["name"] for p in operation["parameters"]} >= {"from", "to", "currency"}


def test_dashboard_export_gives_merchant_staff_their_own_merchant_only(
    enabled_merchant, history, staff_client, other_merchant
):
    other = staff_client(merchant=other_merchant, role="viewer", username="other-viewer")
    mine = staff_client(merchant=enabled_merchant, role="viewer", username="my-viewer")
    url = reverse("admin:payments_wallet_statement")
    params = {
        "merchant": str(enabled_merchant.pk),
        "currency": "XOF",
        "date_from": today(),
        "date_to": today(),
    }

    own_rows = rows_of(mine.get(url, params))
    foreign_rows = rows_of(other.get(url, params))

    assert len(own_rows) == 3
    assert foreign_rows == []  # the merchant parameter is ignored: their own (empty) wallet


def test_dashboard_export_for_support_and_range_errors(enabled_merchant, history, staff_client):
    support = staff_client(support=True)
    url = reverse("admin:payments_wallet_statement")

    form = support.get(url)
    rows = rows_of(
        support.get(
            url,
            {
                "merchant": str(enabled_merchant.pk),
                "currency": "XOF",
                "date_from": today(),
                "date_to": today(),
            },
        )
    )
    too_long = support.get(
        url,
        {
            "merchant": str(enabled_merchant.pk),
            "currency": "XOF",
            "date_from": "2026-01-01",
            "date_to": "2026-03-01",
        },
    )

    assert form.status_code == 200 and "Download CSV" in form.content.decode()
    assert len(rows) == 3
    assert too_long.status_code == 200 and "at most 31 days" in too_long.content.decode()


def test_dashboard_export_refuses_anonymous_users(client):
    response = client.get(reverse("admin:payments_wallet_statement"))

    assert response.status_code == 302 and "/admin/login/" in response["Location"]
