"""The homes' charts are drawn from the payments: a merchant's payins per day (volume, success
rate) and payments per operator, ops' success rate and answer time per operator."""

import html
import json
import re
from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from payments import selectors
from payments.models import Payin
from tests.payments.conftest import (
    DECLINED_PHONE,
    create_customer,
    create_quote,
    payin_body,
)

pytestmark = pytest.mark.django_db


def chart_data(page: str, chart_id: str) -> dict:
    """The data the page gives the chart in the box `chart_id`."""
    box = page[page.index(f'id="{chart_id}"') :]
    return json.loads(html.unescape(re.search(r'data-value="([^"]*)"', box).group(1)))


@pytest.fixture
def payins_over_days(enabled_api, django_capture_on_commit_callbacks):
    """Payins made now, then dated: 5 days ago one of 5,000 XOF completed; 2 days ago two of
    10,000 completed and one failed; today one of 7,000 XOF completed (CI, MTN)."""
    customer = create_customer(enabled_api)
    now = timezone.now()
    plan = [
        (5, "5000", "SN_ORANGE_MOMO", None),
        (2, "10000", "SN_ORANGE_MOMO", None),
        (2, "10000", "SN_ORANGE_MOMO", None),
        (2, "3000", "SN_ORANGE_MOMO", DECLINED_PHONE),
        (0, "7000", "CI_MTN_MOMO", "+2250500001234"),
    ]
    for days_ago, amount, operator, phone in plan:
        quote = create_quote(enabled_api, "payin", amount=amount, operator=operator)
        body = payin_body(quote, customer, *([phone] if phone else []))
        with django_capture_on_commit_callbacks(execute=True):
            payin = enabled_api.post("/payins", body).json()
        Payin.objects.filter(pk=payin["id"]).update(created_at=now - timedelta(days=days_ago))
    return now


def test_a_merchants_payins_per_day_are_counted_from_the_database(
    enabled_merchant, payins_over_days, staff_client
):
    now = payins_over_days
    days = selectors.payin_days(merchant_id=enabled_merchant.pk, now=now)
    assert len(days) == 30 and days[-1].day == now.date()
    by_day = {(now.date() - day.day).days: day for day in days}
    assert (by_day[5].completed, by_day[5].volume, by_day[5].success_rate) == (
        1,
        {"XOF": Decimal("5000")},
        100.0,
    )
    assert (by_day[2].completed, by_day[2].failed, by_day[2].volume) == (
        2,
        1,
        {"XOF": Decimal("20000")},
    )
    assert by_day[2].success_rate == 66.7
    assert by_day[0].volume == {"XOF": Decimal("7000")}
    assert by_day[1].success_rate is None and by_day[1].volume == {}

    page = staff_client(merchant=enabled_merchant, role="owner").get("/admin/").content.decode()
    daily = chart_data(page, "chart-daily")
    volume, rate = daily["datasets"]
    assert daily["labels"][-1] == now.date().isoformat()[5:]
    assert volume["data"][-6:] == [5000.0, 0.0, 0.0, 20000.0, 0.0, 7000.0]
    assert rate["data"][-6:] == [100.0, None, None, 66.7, None, 100.0]

    by_operator = chart_data(page, "chart-operators")
    assert by_operator["labels"] == ["SN_ORANGE_MOMO", "CI_MTN_MOMO"]
    assert by_operator["datasets"][0]["data"] == [4, 1]  # payins
    assert by_operator["datasets"][1]["data"] == [0, 0]  # payouts


def test_ops_see_each_operators_success_rate_and_answer_time(
    enabled_merchant, payins_over_days, staff_client
):
    now = timezone.now()
    orange = list(Payin.objects.filter(operator_code="SN_ORANGE_MOMO", status="completed"))
    for payin, waited in zip(orange[:2], (30, 90), strict=True):
        Payin.objects.filter(pk=payin.pk).update(
            submitted_at=now - timedelta(hours=1, seconds=waited),
            completed_at=now - timedelta(hours=1),
        )
    Payin.objects.filter(pk=orange[2].pk).update(
        completed_at=now - timedelta(hours=30)  # answered before the last 24 hours
    )
    health = {row.operator_code: row for row in selectors.operator_health(now=now)}
    assert (health["SN_ORANGE_MOMO"].completed, health["SN_ORANGE_MOMO"].failed) == (2, 1)
    assert health["SN_ORANGE_MOMO"].success_rate == 66.7
    assert health["CI_MTN_MOMO"].success_rate == 100.0

    from django.contrib.auth import get_user_model
    from django.test import Client

    ops = get_user_model().objects.create_superuser("olu", "olu@example.com", "pw-123456-ops")
    client = Client()
    client.force_login(ops)
    page = client.get("/admin/").content.decode()
    success = chart_data(page, "chart-success")
    assert dict(zip(success["labels"], success["datasets"][0]["data"], strict=True)) == {
        "CI_MTN_MOMO": 100.0,
        "SN_ORANGE_MOMO": 66.7,
    }
    answer = chart_data(page, "chart-answer")
    answered = dict(zip(answer["labels"], answer["datasets"][0]["data"], strict=True))
    # the two timed answers (30 s and 90 s) and the failed one's own time, in the mean
    failed = Payin.objects.get(operator_code="SN_ORANGE_MOMO", status="failed")
    own = (failed.failed_at - failed.submitted_at).total_seconds()
    assert answered["SN_ORANGE_MOMO"] == round((30 + 90 + own) / 3, 1)


def test_a_home_without_payments_says_the_charts_are_empty(enabled_merchant, staff_client):
    page = staff_client(merchant=enabled_merchant, role="owner").get("/admin/").content.decode()
    assert "No payins in the last 30 days yet" in page
    assert "No payments in the last 30 days yet." in page
    assert 'class="chart"' not in page
