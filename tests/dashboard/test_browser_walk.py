"""Every page each role reaches from its sidebar, in a real headless Chromium at 1400x900: an
owner, a teammate invited by that owner (from the invitation link to the first page), support
and ops. On each page (the sidebar's, one record of each list, each add page, each
confirmation) every visible field and button has a box, and nothing scrolls sideways; a
payin's status, amount and Refund are in the first screen.

Set COWRY_SHOTS_DIR to a directory to keep a screenshot of each page there (off by default)."""

import os
import re
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from urllib.parse import urlparse

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from merchants import services as merchant_services
from merchants.models import Authenticator
from merchants.team import teammate_invite
from payments.ledger.adjustments import wallet_credit
from payments.models import Payout
from tests.dashboard.test_browser_roles import PASSWORD, by, log_in, submit, wait_for
from tests.dashboard.test_two_factor import code_for
from tests.payments.conftest import (
    SILENT_PHONE,
    create_customer,
    create_quote,
    payin_body,
    payout_body,
)
from tests.transfers.conftest import SENDER_DETAILS, SN_DECLINED, transfer_body
from tests.transfers.conftest import create_customer as create_sender
from tests.transfers.conftest import create_quote as create_transfer_quote
from webhooks.services.endpoints import endpoint_add

pytestmark = pytest.mark.django_db(transaction=True)

SHOTS = os.environ.get("COWRY_SHOTS_DIR", "")

# Visible inputs, selects and textareas anywhere, and buttons of the page's forms, drawn
# without a box: no border of a colour other than the page's, no background of its own, or no
# size (a 1 px select under select2's box is the screen reader's); a field's box may be its
# wrapper's (a search input and its icon in one bordered box, no
# taller than a field). Each as "tag name/text".
UNBOXED = """
const page = getComputedStyle(document.body).backgroundColor;
const seen = e => {
  const r = e.getBoundingClientRect(), s = getComputedStyle(e);
  return r.width > 2 && r.height > 2 && s.visibility !== 'hidden' && s.display !== 'none'
    && e.offsetParent !== null;
};
const boxed = e => {
  const s = getComputedStyle(e), r = e.getBoundingClientRect();
  if (r.width < 8 || r.height < 8) return false;
  const border = parseFloat(s.borderTopWidth) > 0 && s.borderTopStyle !== 'none'
    && s.borderTopColor !== page && !s.borderTopColor.endsWith(', 0)');
  const fill = s.backgroundColor !== page && !s.backgroundColor.endsWith(', 0)')
    && s.backgroundColor !== 'transparent';
  return border || fill;
};
const boxedOrWrapped = e => {
  if (boxed(e)) return true;
  for (let box = e.parentElement, up = 0; box && up < 3; box = box.parentElement, up++) {
    if (box.getBoundingClientRect().height > 80) return false;
    if (boxed(box)) return true;
  }
  return false;
};
const fields = [...document.querySelectorAll('input, select, textarea')]
  .filter(e => e.type !== 'hidden');
const buttons = [...document.querySelectorAll(
  '#content-main button, #content-main input[type=submit], #content-main a.button,'
  + ' #record-actions a, form[method=post] button, form[method=post] [type=submit],'
  + ' #submit-row button, #submit-row a')];
return [...fields, ...buttons].filter(seen).filter(e => !boxedOrWrapped(e))
  .map(e => `${e.tagName.toLowerCase()} ${e.name || e.textContent.trim().slice(0, 30)}`);
"""
SIDEWAYS = "return [document.documentElement.scrollWidth, window.innerWidth];"
SIDEBAR = """
return [...document.querySelectorAll('#nav-sidebar-inner a[href^="/admin/"]')]
  .map(a => [a.textContent.trim(), a.getAttribute('href')]);
"""
IN_FIRST_SCREEN = """
const r = document.querySelector(arguments[0]).getBoundingClientRect();
return r.width > 0 && r.top >= 0 && r.bottom <= window.innerHeight;
"""
FIRST_RECORD = "#result_list tbody tr a[href*='/change/']"


class Walk:
    """One role's walk: each page checked once (and shot when COWRY_SHOTS_DIR is set)."""

    def __init__(self, browser, base: str, role: str) -> None:
        self.browser, self.base, self.role = browser, base, role
        self.seen: list[str] = []

    def check(self, path: str) -> None:
        if path in self.seen:
            return
        self.browser.get(f"{self.base}{path}")
        wait_for(self.browser, "#content, main, #login-form, form")
        self.here(path)

    def here(self, name: str) -> None:
        """The page the browser is on (one a form's POST answered), checked as `name`."""
        browser = self.browser
        self.seen.append(name)
        if SHOTS:
            Path(SHOTS).mkdir(parents=True, exist_ok=True)
            slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:70] or "home"
            shot = f"{self.role}-{len(self.seen):02d}-{slug}.png"
            browser.save_screenshot(str(Path(SHOTS) / shot))
        assert browser.execute_script(UNBOXED) == [], (self.role, name)
        width, window = browser.execute_script(SIDEWAYS)
        assert width <= window, (self.role, name, width)

    def links(self, css: str) -> list[str]:
        hrefs = [
            a.get_attribute("href") for a in self.browser.find_elements(by("CSS_SELECTOR"), css)
        ]
        return [urlparse(href).path for href in hrefs if href]

    def everything(self, *, extra: tuple[str, ...] = ()) -> list[str]:
        """The sidebar's pages, the first record and the add page of each list, then `extra`."""
        self.browser.get(f"{self.base}/admin/")
        sidebar = [path for _, path in self.browser.execute_script(SIDEBAR)]
        assert sidebar, self.role
        for path in sidebar:
            self.check(path)
            for record in self.links(FIRST_RECORD)[:1]:
                self.check(record)
            for add in self.links(f"a[href='{path}add/']")[:1]:
                self.check(add)
        for path in extra:
            self.check(path)
        return sidebar


@pytest.fixture
def world(enabled_merchant, enabled_api, django_capture_on_commit_callbacks):
    """A merchant with a float, a completed payin, a payout, one stuck at the provider, a
    completed and a failed transfer, a webhook endpoint and a key; its owner ama; support sam;
    ops olu."""
    wallet_credit(
        merchant=enabled_merchant,
        currency="XOF",
        amount=Decimal("500000"),
        reason="float",
        at=timezone.now(),
    )
    customer = create_customer(enabled_api)
    with django_capture_on_commit_callbacks(execute=True):
        payin = enabled_api.post("/payins", payin_body(create_quote(enabled_api), customer)).json()
        enabled_api.post("/payouts", payout_body(create_quote(enabled_api, "payout"), customer))
        stuck = enabled_api.post(
            "/payouts", payout_body(create_quote(enabled_api, "payout"), customer, SILENT_PHONE)
        ).json()
        sender = create_sender(enabled_api, **SENDER_DETAILS)
        for phone in (None, SN_DECLINED):
            quote = create_transfer_quote(enabled_api, customer_id=sender["id"])
            body = transfer_body(quote, sender, **({"recipient_phone": phone} if phone else {}))
            enabled_api.post("/transfers", body)
    past_timeout = timezone.now() - timedelta(seconds=1)
    Payout.objects.filter(pk=stuck["id"]).update(provider_timeout_at=past_timeout)
    endpoint_add(merchant=enabled_merchant, url="https://93.184.216.34/hook", now=timezone.now())
    merchant_services.staff_user_create(
        username="ama", password=PASSWORD, merchant=enabled_merchant, role="owner"
    )
    merchant_services.staff_user_create(username="sam", password=PASSWORD, support=True)
    get_user_model().objects.create_superuser("olu", "olu@example.com", PASSWORD)
    return {"payin": payin["id"], "key": enabled_api.api_key, "stuck": stuck["id"]}


def confirmations(world: dict) -> tuple[str, ...]:
    from merchants.models import ApiKey

    key = ApiKey.objects.get(key=world["key"]).pk
    return (
        f"/admin/payments/payin/{world['payin']}/refund/",
        f"/admin/merchants/apikey/{key}/rotate/",
        f"/admin/merchants/apikey/{key}/revoke/",
        "/admin/payments/wallet/statement/",
        "/admin/two-factor/setup/",
    )


def test_an_owner_walks_every_page_and_sees_a_payin_and_its_refund_first(
    live_server, browser, world
):
    browser.get(f"{live_server.url}/admin/login/")
    Walk(browser, live_server.url, "anonymous").check("/admin/login/")
    log_in(browser, live_server.url, "ama")
    walk = Walk(browser, live_server.url, "owner")
    sidebar = walk.everything(extra=confirmations(world))
    assert {"/admin/payments/payin/", "/admin/merchants/merchantmembership/"} <= set(sidebar)
    assert not {"/admin/payments/journalline/", "/admin/quotes/fxrate/"} & set(sidebar)

    walk.check(f"/admin/payments/payin/{world['payin']}/change/")
    browser.get(f"{live_server.url}/admin/payments/payin/{world['payin']}/change/")
    for css in ("#record-status", "#record-amount", "#record-actions a"):
        assert browser.execute_script(IN_FIRST_SCREEN, css), css
    assert browser.find_element(by("ID"), "record-status").text == "completed"
    assert browser.find_element(by("ID"), "record-amount").text == "10,000 XOF"
    assert browser.find_element(by("CSS_SELECTOR"), "#record-actions a").text == "Refund"


def test_an_invited_teammate_goes_from_the_link_to_the_first_page(live_server, browser, world):
    base = live_server.url
    log_in(browser, base, "ama")
    browser.get(f"{base}/admin/merchants/merchantmembership/add/")
    browser.find_element(by("NAME"), "username").send_keys("kofi")
    browser.find_element(by("NAME"), "email").send_keys("kofi@example.com")
    browser.find_element(by("NAME"), "_save").click()
    link = wait_for(browser, "#invite-url").text
    browser.delete_all_cookies()

    walk = Walk(browser, base, "invited")
    walk.check(urlparse(link).path)
    browser.get(link)
    wait_for(browser, "#accept-invite")
    walk.check(urlparse(browser.current_url).path)  # the link's page, token in the session
    browser.find_element(by("NAME"), "new_password1").send_keys("a long passphrase 42")
    browser.find_element(by("NAME"), "new_password2").send_keys("a long passphrase 42")
    submit(browser)
    wait_for(browser, "#login-form")
    browser.find_element(by("NAME"), "username").send_keys("kofi")
    browser.find_element(by("NAME"), "password").send_keys("a long passphrase 42")
    browser.find_element(by("CSS_SELECTOR"), "#login-form [type=submit]").click()
    wait_for(browser, "#merchant-summary")
    sidebar = walk.everything()
    assert "/admin/payments/payin/" in sidebar  # a viewer, the invitation's default


def test_a_teammate_enrols_a_second_factor_from_the_link_then_logs_in_with_a_code(
    live_server, browser, enabled_merchant
):
    """A team that requires two-factor: the invitation's page asks a password and the
    authenticator's code; the next login asks a code (here one of the recovery codes)."""
    base = live_server.url
    enabled_merchant.require_two_factor = True
    enabled_merchant.save(update_fields=["require_two_factor"])
    owner = merchant_services.staff_user_create(
        username="ama", password=PASSWORD, merchant=enabled_merchant, role="owner"
    )
    invitation = teammate_invite(
        merchant=enabled_merchant, by=owner, username="efua", email="e@example.com", role="viewer"
    )
    walk = Walk(browser, base, "enrolled")
    browser.get(f"{base}{invitation.path}")
    wait_for(browser, "#accept-invite")
    walk.here("/admin/invite/enrol/")
    device = Authenticator.objects.get(user__username="efua", confirmed=False)
    for name, value in (
        ("new_password1", "a long passphrase 42"),
        ("new_password2", "a long passphrase 42"),
        ("token", code_for(device)),
    ):
        browser.find_element(by("NAME"), name).send_keys(value)
    submit(browser)
    wait_for(browser, "#recovery-codes")
    walk.here("/admin/invite/recovery-codes/")
    codes = [e.text for e in browser.find_elements(by("CSS_SELECTOR"), ".recovery-code")]
    assert len(codes) == 10
    walk.check("/admin/")
    assert browser.find_element(by("ID"), "merchant-summary")

    browser.delete_all_cookies()
    browser.get(f"{base}/admin/login/")
    browser.find_element(by("NAME"), "username").send_keys("efua")
    browser.find_element(by("NAME"), "password").send_keys("a long passphrase 42")
    browser.find_element(by("CSS_SELECTOR"), "#login-form [type=submit]").click()
    token = wait_for(browser, "input[name=token]")
    assert urlparse(browser.current_url).path == "/admin/two-factor/verify/"
    walk.here("/admin/two-factor/verify/")
    token.send_keys(codes[0])
    browser.find_element(by("CSS_SELECTOR"), "#two-factor-verify [type=submit]").click()
    wait_for(browser, "#merchant-summary")


@pytest.mark.parametrize("username", ["sam", "olu"])
def test_support_and_ops_walk_every_page_and_confirmation(live_server, browser, world, username):
    from transfers.models import Transfer

    log_in(browser, live_server.url, username)
    walk = Walk(browser, live_server.url, {"sam": "support", "olu": "ops"}[username])
    failed = Transfer.objects.get(status="failed")
    sidebar = walk.everything(
        extra=(
            f"/admin/transfers/transfer/{failed.pk}/change/",
            f"/admin/transfers/transfer/{failed.pk}/relaunch/",
            f"/admin/payments/payout/{world['stuck']}/change/",
            f"/admin/payments/payout/{world['stuck']}/mark-failed/",
        )
    )
    assert "/admin/payments/providerdiscrepancy/" in sidebar
    assert "Mark the payout failed" in browser.page_source  # the walk's last page, not a 403
    if username == "olu":
        assert {"/admin/payments/journalline/", "/admin/quotes/fxrate/"} <= set(sidebar)
