"""The dashboard in a real headless Chromium at 1400 px, one walk per role: a merchant owner
(home, lists, a teammate invited, two-factor set up, a refund), support (worklist to a failed
transfer, its payout relaunched from its page, the action in its history), ops (platform totals).
Screenshots are kept in test-artifacts/."""

import base64
import re
from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django_otp.oath import totp

from merchants import services as merchant_services
from merchants.models import MerchantMembership
from payments.ledger.adjustments import wallet_credit
from tests.dashboard.conftest import ARTIFACTS
from tests.transfers.conftest import (
    SENDER_DETAILS,
    SN_DECLINED,
    create_customer,
    create_quote,
    transfer_body,
)
from transfers.models import Transfer

pytestmark = pytest.mark.django_db(transaction=True)

PASSWORD = "pw-123456-staff"

# Every element of the home summary whose text is wider than its box (a header one letter a
# line, a number split in two): none may be.
CLIPPED = """
return [...document.querySelectorAll(arguments[0] + ' *')]
  .filter(e => e.children.length === 0 && e.textContent.trim())
  .filter(e => e.scrollWidth > e.clientWidth + 1 || e.getClientRects().length > 1)
  .map(e => e.textContent.trim());
"""
# The changelist's table wider than its container: the list scrolls sideways.
OVERFLOW = """
const table = document.querySelector('#result_list');
return table ? [table.scrollWidth, table.parentElement.clientWidth] : null;
"""


def by(kind: str):
    from selenium.webdriver.common.by import By

    return getattr(By, kind)


def wait_for(browser, css: str):
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(browser, 20).until(
        expected_conditions.presence_of_element_located((by("CSS_SELECTOR"), css))
    )


def log_in(browser, base: str, username: str) -> None:
    browser.get(f"{base}/admin/login/")
    browser.find_element(by("NAME"), "username").send_keys(username)
    browser.find_element(by("NAME"), "password").send_keys(PASSWORD)
    browser.find_element(by("CSS_SELECTOR"), "#login-form [type=submit]").click()
    wait_for(browser, "#main, main")


def shoot(browser, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    height = browser.execute_script("return document.body.scrollHeight")
    browser.set_window_size(1400, min(max(height, 900), 3000))
    browser.save_screenshot(str(ARTIFACTS / f"dashboard-{name}.png"))
    browser.set_window_size(1400, 900)


def submit(browser) -> None:
    form = browser.find_elements(by("CSS_SELECTOR"), "form[method=post]")[-1]
    form.find_element(by("CSS_SELECTOR"), "[type=submit]").click()


def test_a_merchant_owner_walks_home_lists_team_and_two_factor(
    live_server, browser, enabled_merchant, enabled_api
):
    from django.utils import timezone

    wallet_credit(
        merchant=enabled_merchant,
        currency="XOF",
        amount=Decimal("1250000"),
        reason="float",
        at=timezone.now(),
    )
    create_customer(enabled_api, **SENDER_DETAILS)
    merchant_services.staff_user_create(
        username="ama", password=PASSWORD, merchant=enabled_merchant, role="owner"
    )
    base = live_server.url

    log_in(browser, base, "ama")
    wait_for(browser, "#merchant-summary")
    assert "1,250,000 XOF" in browser.find_element(by("ID"), "merchant-summary").text
    assert browser.execute_script(CLIPPED, "#merchant-summary") == []
    shoot(browser, "owner-home")

    for path in (
        "payments/payin",
        "payments/payout",
        "transfers/transfer",
        "customers/customer",
        "webhooks/event",
        "webhooks/delivery",
        "merchants/apikey",
        "merchants/merchantmembership",
    ):
        browser.get(f"{base}/admin/{path}/")
        wait_for(browser, "#changelist-form, #content, main")
        width = browser.execute_script(OVERFLOW)
        assert width is None or width[0] <= width[1] + 1, (path, width)
        assert "Merchant" not in [
            th.text for th in browser.find_elements(by("CSS_SELECTOR"), "#result_list th")
        ], path
    shoot(browser, "owner-customers")

    browser.get(f"{base}/admin/merchants/merchantmembership/add/")
    wait_for(browser, "#id_username").send_keys("kofi")
    browser.find_element(by("ID"), "id_email").send_keys("kofi@example.com")
    browser.execute_script("document.getElementById('id_role').value = 'developer'")
    browser.find_element(by("NAME"), "_save").click()
    invite = wait_for(browser, "#invite-url").text
    assert "/admin/invite/" in invite
    assert MerchantMembership.objects.get(user__username="kofi").role == "developer"
    shoot(browser, "owner-invited")

    browser.get(f"{base}/admin/two-factor/setup/")
    secret = wait_for(browser, "#totp-secret").text
    key = base64.b32decode(secret)
    qr = browser.find_element(by("ID"), "totp-qr")
    assert browser.execute_script("return arguments[0].complete && arguments[0].naturalWidth", qr)
    shoot(browser, "owner-two-factor-setup")
    browser.find_element(by("NAME"), "token").send_keys(f"{totp(key):06d}")
    submit(browser)
    wait_for(browser, ".recovery-code")  # the click returns before the next page is there
    codes = [c.text for c in browser.find_elements(by("CSS_SELECTOR"), ".recovery-code")]
    assert len(codes) == 10 and all(re.fullmatch(r"\w+", code) for code in codes)
    shoot(browser, "owner-recovery-codes")


def test_support_relaunches_a_failed_transfers_payout_from_its_page(
    live_server, browser, enabled_api
):
    customer = create_customer(enabled_api, **SENDER_DETAILS)
    quote = create_quote(enabled_api, customer_id=customer["id"])
    created = enabled_api.post(
        "/transfers", transfer_body(quote, customer, recipient_phone=SN_DECLINED)
    )
    assert created.status_code == 201, created.json()
    transfer = Transfer.objects.get(pk=created.json()["id"])
    assert (transfer.status, transfer.payin_status) == ("failed", "completed")
    merchant_services.staff_user_create(username="sam", password=PASSWORD, support=True)
    base = live_server.url

    log_in(browser, base, "sam")
    card = wait_for(browser, "#worklist .worklist-item")
    assert card.text.splitlines()[:2] == ["Failed transfers holding collected funds", "1"]
    shoot(browser, "support-worklist")
    card.click()
    wait_for(browser, "#result_list")
    browser.find_element(by("CSS_SELECTOR"), f"#result_list a[href*='{transfer.pk}']").click()
    relaunch = wait_for(browser, "a[href$='/relaunch/']")
    shoot(browser, "support-failed-transfer")

    relaunch.click()
    consequence = wait_for(browser, "#consequence").text
    assert consequence.startswith("9,800 XOF is sent again to the same recipient")
    browser.find_element(by("NAME"), "reason").send_keys("Recipient fixed their wallet (ticket 42)")
    shoot(browser, "support-relaunch-confirm")
    submit(browser)
    wait_for(browser, "a[href$='/relaunch/']")  # back on the transfer's page
    transfer.refresh_from_db()
    assert transfer.disbursement_attempt == 2

    browser.get(f"{base}/admin/transfers/transfer/{transfer.pk}/history/")
    history = wait_for(browser, "#content, main").text
    assert "Relaunch the payout. Reason: Recipient fixed their wallet (ticket 42)" in history
    assert "sam" in history
    label_shown = "return getComputedStyle(arguments[0], '::before').display"
    for cell in browser.find_elements(by("CSS_SELECTOR"), "tbody [data-label]"):
        assert browser.execute_script(label_shown, cell) == "none"  # the header says it once
    shoot(browser, "support-transfer-history")


def test_ops_see_the_platforms_totals(live_server, browser, enabled_merchant):
    from django.utils import timezone

    wallet_credit(
        merchant=enabled_merchant,
        currency="XAF",
        amount=Decimal("500000"),
        reason="float",
        at=timezone.now(),
    )
    get_user_model().objects.create_superuser("olu", "olu@example.com", PASSWORD)

    log_in(browser, live_server.url, "olu")
    totals = wait_for(browser, "#platform-totals").text
    assert "500,000 XAF" in totals
    assert "Ledger check" in totals
    assert browser.find_elements(by("CSS_SELECTOR"), "#worklist .worklist-item")
    assert not browser.find_elements(by("CSS_SELECTOR"), ".module caption")  # the sidebar has them
    shoot(browser, "ops-home")


def test_an_owner_refunds_part_of_a_completed_payin_from_its_page(
    live_server, browser, enabled_merchant, enabled_api
):
    from tests.payments import conftest as payments

    customer = payments.create_customer(enabled_api)
    response = enabled_api.post(
        "/payins", payments.payin_body(payments.create_quote(enabled_api, "payin"), customer)
    )
    payin = enabled_api.get(f"/payins/{response.json()['id']}").json()
    assert payin["status"] == "completed"
    merchant_services.staff_user_create(
        username="ama", password=PASSWORD, merchant=enabled_merchant, role="owner"
    )
    base = live_server.url

    log_in(browser, base, "ama")
    browser.get(f"{base}/admin/payments/payin/{payin['id']}/refund/")
    amount = wait_for(browser, "input[name=amount]")
    assert "border" in amount.get_attribute("class")  # the dashboard's own inputs, visible
    assert (
        "leaves your wallet's available balance now"
        in browser.find_element(by("ID"), "consequence").text
    )
    amount.send_keys("4000")
    browser.find_element(by("NAME"), "reason").send_keys("Two items returned")
    shoot(browser, "owner-refund-confirm")
    submit(browser)
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(browser, 20).until(expected_conditions.url_contains("/payments/refund/"))
    refunds = enabled_api.get("/refunds", payin_id=payin["id"]).json()["data"]
    assert [(r["amount"], r["reason"]) for r in refunds] == [("4000", "Two items returned")]
    shoot(browser, "owner-refund-done")
