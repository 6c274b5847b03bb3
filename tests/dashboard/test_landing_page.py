import io
import re
from decimal import Decimal

import pytest

from payments.ledger.adjustments import wallet_credit

pytestmark = pytest.mark.django_db


def test_merchant_staff_land_on_their_balances_and_todays_payments(
    merchant, other_merchant, staff_client
):
    from django.utils import timezone

    wallet_credit(
        merchant=merchant,
        currency="XOF",
        amount=Decimal("125000"),
        reason="float",
        at=timezone.now(),
    )
    wallet_credit(
        merchant=other_merchant,
        currency="XAF",
        amount=Decimal("999"),
        reason="float",
        at=timezone.now(),
    )
    browser = staff_client(merchant=merchant, role="viewer")

    page = browser.get("/admin/").content.decode()

    assert 'id="merchant-summary"' in page
    assert "XOF" in page
    assert "125,000" in page or "125000" in page
    assert "XAF" not in page.split('id="merchant-summary"')[1].split("</section>")[0]
    assert 'id="failing-deliveries"' in page


def test_support_staff_see_no_merchant_summary(staff_client):
    page = staff_client(support=True).get("/admin/").content.decode()
    assert 'id="merchant-summary"' not in page


def test_the_web_process_serves_the_dashboards_css_and_js(client):
    """DEBUG is off under `make run` and in production: the web process serves them itself."""
    page = client.get("/admin/login/").content.decode()
    for asset in re.findall(r'(?:href|src)="(/static/[^"]+)"', page):
        response = client.get(asset)
        assert response.status_code == 200, asset
        assert b"".join(response.streaming_content), asset


def test_ops_home_shows_the_last_ledger_check_the_command_or_beat_ran(db):
    from django.contrib.auth import get_user_model
    from django.core.cache import cache
    from django.core.management import call_command
    from django.test import Client

    from payments import tasks
    from payments.ledger.checks import LAST_CHECK_CACHE_KEY

    get_user_model().objects.create_superuser("ops-home", "o@example.com", "ops-password-long")
    client = Client()
    assert client.login(username="ops-home", password="ops-password-long")

    def ledger_card() -> str:
        page = client.get("/admin/").content.decode()
        return page.split('id="ledger-check"')[1].split("</section>")[0]

    assert "not run yet" in ledger_card()

    call_command("check_ledger", stdout=io.StringIO())
    card = ledger_card()
    assert "balanced" in card
    assert re.search(r"at \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", card)

    cache.delete(LAST_CHECK_CACHE_KEY)
    tasks.check_ledger()
    assert "balanced" in ledger_card()
