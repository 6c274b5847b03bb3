"""Amounts on the pages staff edit, and on the homes, at 1400 px in a real headless Chromium:
an input holds "100", not "100.00", and saves what was typed ("1500.50" is 1500.50); a read-only
amount, an operator's limits in their list and a home's balances read as the lists show them,
"1,234.5 XOF", never rounded. Screenshots are kept in test-artifacts/."""

from decimal import Decimal

import pytest

from payments.models import Wallet
from quotes.models import FeeSchedule, Operator
from tests.dashboard.test_browser_record_pages import staff
from tests.dashboard.test_browser_roles import by, log_in, shoot, wait_for
from tests.payments.conftest import fund

pytestmark = pytest.mark.django_db(transaction=True)

LIMITS = ("min_amount", "max_amount")


def inputs(browser, *names: str) -> list[str]:
    return [browser.find_element(by("NAME"), name).get_attribute("value") for name in names]


def read_only(browser, label: str) -> str:
    """A read-only field's value as shown beside its label on a record page."""
    row = f"//div[div/label[normalize-space()='{label}']]"
    return browser.find_element(by("XPATH"), f"{row}//div[contains(@class, 'readonly')]").text


@pytest.fixture
def fees(enabled_merchant) -> FeeSchedule:
    return FeeSchedule.objects.create(
        merchant=enabled_merchant,
        flow_type="payout",
        percentage=Decimal("1.5"),
        fixed_amount=Decimal("100"),
        minimum_fee=Decimal("250"),
        maximum_fee=Decimal("10000"),
    )


def test_ops_edit_amounts_as_the_api_writes_them_and_save_what_they_typed(
    live_server, browser, fees
):
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    base = live_server.url
    operator = Operator.objects.get(code="SN_ORANGE_MOMO")
    log_in(browser, base, staff(username="olu", ops=True))

    browser.get(f"{base}/admin/quotes/operator/{operator.pk}/change/")
    assert inputs(browser, *LIMITS) == ["100", "1000000"]
    shoot(browser, "ops-operator-change")

    names = ["percentage", "fixed_amount", "minimum_fee", "maximum_fee"]
    browser.get(f"{base}/admin/quotes/feeschedule/{fees.pk}/change/")
    assert inputs(browser, *names) == ["1.5", "100", "250", "10000"]
    minimum = browser.find_element(by("NAME"), "minimum_fee")
    minimum.clear()
    minimum.send_keys("1500.50")
    browser.find_element(by("NAME"), "_continue").click()
    WebDriverWait(browser, 20).until(expected_conditions.staleness_of(minimum))  # saved, shown
    fees.refresh_from_db()
    assert (fees.percentage, fees.fixed_amount, fees.minimum_fee, fees.maximum_fee) == (
        Decimal("1.5"),
        Decimal("100"),
        Decimal("1500.50"),
        Decimal("10000"),
    )
    assert inputs(browser, *names) == ["1.5", "100", "1500.5", "10000"]
    shoot(browser, "ops-fee-schedule-saved")


def test_support_read_an_operators_limits_as_the_lists_show_amounts(live_server, browser, catalog):
    base = live_server.url
    operator = Operator.objects.get(code="CM_MTN_MOMO")
    log_in(browser, base, staff(username="sam", support=True))

    browser.get(f"{base}/admin/quotes/operator/{operator.pk}/change/")
    wait_for(browser, "#content, main")
    shown = [read_only(browser, label) for label in ("Min amount", "Max amount")]
    assert shown == ["100 XAF", "1,000,000 XAF"]
    assert inputs(browser, "status") == ["operational"]  # the one field support changes
    shoot(browser, "support-operator-change")

    browser.get(f"{base}/admin/quotes/operator/?q=CM_MTN_MOMO")
    row = wait_for(browser, "#result_list tbody tr")
    cells = [row.find_element(by("CSS_SELECTOR"), f"td.field-{name}").text for name in LIMITS]
    assert cells == ["100 XAF", "1,000,000 XAF"]


def test_the_homes_show_a_balances_fraction_as_the_lists_do(live_server, browser, enabled_merchant):
    fund(enabled_merchant, "5000")
    Wallet.objects.filter(merchant=enabled_merchant).update(
        available=Decimal("1234.50"), reserved=Decimal("10000.25")
    )
    base = live_server.url

    log_in(browser, base, staff(enabled_merchant, username="ama", role="owner"))
    card = wait_for(browser, "#merchant-summary").text
    assert "1,234.5 XOF\nReserved for payouts: 10,000.25 XOF" in card
    shoot(browser, "owner-home-fraction")

    browser.delete_all_cookies()
    log_in(browser, base, staff(username="olu", ops=True))
    totals = wait_for(browser, "#platform-totals").text
    assert "1,234.5 XOF\nreserved 10,000.25 XOF" in totals
    shoot(browser, "ops-home-fraction")
