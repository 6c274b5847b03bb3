"""The dashboard at 1400 px in a real headless Chromium: record pages show amounts and times
as the lists do, no page or table is wider than the screen, KYC is written in capitals, a
delivery's connection error reads in plain words for merchant staff (support also reads it as
recorded), and each role's home says whose it is. Screenshots are kept in test-artifacts/."""

import re
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from merchants import services as merchant_services
from merchants.models import ApiKey
from tests.dashboard.test_browser_roles import PASSWORD, by, log_in, shoot, wait_for
from tests.payments import conftest as payments
from tests.transfers.conftest import (
    SENDER_DETAILS,
    SN_DECLINED,
    create_customer,
    create_quote,
    transfer_body,
)
from tests.webhooks.conftest import webhook_settings  # noqa: F401 - plain HTTP to 127.0.0.1
from webhooks.models import Delivery
from webhooks.services.endpoints import endpoint_set

pytestmark = pytest.mark.django_db(transaction=True)

MERCHANT_NAME = "Boutique Awa Diallo et Fils SARL"
RAW_DECIMAL = re.compile(r"\b\d+\.\d\d\b")  # 4000.00: Django's own rendering of an amount
MICROSECONDS = re.compile(r"\d\d:\d\d:\d\d\.\d+")
ISO_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")
# The page, or any table in it, wider than the window or its own box: it scrolls sideways.
TOO_WIDE = """
const page = document.documentElement;
const wide = [...document.querySelectorAll('table')]
  .filter(t => t.offsetParent !== null)
  .filter(t => t.scrollWidth > t.parentElement.clientWidth + 1
            || t.getBoundingClientRect().right > page.clientWidth + 1)
  .map(t => (t.id || t.className || 'table') + ': ' + t.scrollWidth + ' in '
            + t.parentElement.clientWidth);
if (page.scrollWidth > page.clientWidth + 1) wide.push('page: ' + page.scrollWidth);
return wide;
"""
LISTS = ("payments/payout", "transfers/transfer", "merchants/apikey", "payments/payin")


@pytest.fixture
def records(enabled_merchant, enabled_api, webhook_settings):  # noqa: F811
    """A merchant with a long name and one of each record; its webhook endpoint listens
    nowhere, so every delivery failed with a connection error."""
    enabled_merchant.name = MERCHANT_NAME
    enabled_merchant.save(update_fields=["name"])
    endpoint_set(merchant=enabled_merchant, url="http://127.0.0.1:1/hook", now=timezone.now())
    payments.fund(enabled_merchant, "1250000")
    payer = payments.create_customer(enabled_api)
    quote = payments.create_quote(enabled_api, "payin", amount="4000")
    payin = enabled_api.post("/payins", payments.payin_body(quote, payer)).json()
    quote = payments.create_quote(enabled_api, "payout", amount="125000")
    payout = enabled_api.post("/payouts", payments.payout_body(quote, payer)).json()
    sender = create_customer(enabled_api, **SENDER_DETAILS)
    quote = create_quote(enabled_api, customer_id=sender["id"])
    transfer = enabled_api.post(
        "/transfers", transfer_body(quote, sender, recipient_phone=SN_DECLINED)
    ).json()
    now = timezone.now()
    issued = merchant_services.api_key_create(
        merchant=enabled_merchant,
        label="Checkout backend (production, West Africa)",
        expires_at=now + timedelta(days=30),
    )
    ApiKey.objects.filter(pk=issued.api_key.pk).update(last_used_at=now)
    delivery = Delivery.objects.filter(last_error__contains="Connection refused").first()
    assert delivery is not None
    return {
        "payin": f"payments/payin/{payin['id']}",
        "payout": f"payments/payout/{payout['id']}",
        "transfer": f"transfers/transfer/{transfer['id']}",
        "quote": f"quotes/quote/{quote['id']}",
        "endpoint": f"webhooks/webhookendpoint/{delivery.endpoint_id}",
        "delivery": f"webhooks/delivery/{delivery.pk}",
        "event": f"webhooks/event/{delivery.event_id}",
    }


def staff(merchant=None, *, username: str, **kwargs) -> str:
    if kwargs.pop("ops", False):
        get_user_model().objects.create_superuser(username, f"{username}@example.com", PASSWORD)
    else:
        merchant_services.staff_user_create(
            username=username, password=PASSWORD, merchant=merchant, **kwargs
        )
    return username


def page_text(browser, base: str, path: str, shot: str) -> str:
    """A page's text as shown (a body as sent, verbatim in <pre>, left out), once it is
    checked to be no wider than the window, nor any of its tables wider than its box."""
    browser.get(f"{base}/admin/{path}")
    wait_for(browser, "#content, main")
    assert browser.execute_script(TOO_WIDE) == [], path
    text = browser.find_element(by("TAG_NAME"), "body").text
    for sent in browser.find_elements(by("TAG_NAME"), "pre"):
        text = text.replace(sent.text, "")
    shoot(browser, shot)
    return text


def test_record_pages_show_amounts_as_the_lists_do(live_server, browser, enabled_merchant, records):
    log_in(browser, live_server.url, staff(enabled_merchant, username="ama", role="owner"))
    for name in ("payin", "payout", "transfer", "quote"):
        text = page_text(browser, live_server.url, f"{records[name]}/change/", f"owner-{name}")
        assert not RAW_DECIMAL.findall(text), (name, RAW_DECIMAL.findall(text))
        if name == "payin":
            assert "4,000 XOF" in text
        if name == "payout":
            assert "125,000 XOF" in text and "126,350 XOF" in text  # sent; debited


def test_every_time_is_shown_to_the_second(live_server, browser, enabled_merchant, records):
    log_in(browser, live_server.url, staff(enabled_merchant, username="ama", role="owner"))
    for name in ("endpoint", "quote", "transfer", "payin", "delivery", "event"):
        text = page_text(browser, live_server.url, f"{records[name]}/change/", f"owner-{name}")
        assert ISO_TIME.search(text), name
        assert not MICROSECONDS.findall(text), (name, MICROSECONDS.findall(text))


def test_kyc_is_written_in_capitals(live_server, browser, enabled_merchant, records):
    log_in(browser, live_server.url, staff(username="olu", ops=True))
    pages = {
        "home": "",
        "customers": "customers/customer/",
        "corridors": "quotes/corridor/",
        "quote": f"{records['quote']}/change/",
    }
    for name, path in pages.items():
        text = page_text(browser, live_server.url, path, f"ops-kyc-{name}")
        assert "KYC" in text and "Kyc" not in text, name
    assert "KYC documents" in text  # the sidebar


@pytest.mark.parametrize("role", ["support", "ops"])
def test_the_transfers_page_and_the_lists_fit_1400_px(live_server, browser, records, role):
    log_in(
        browser, live_server.url, staff(username=role, support=role == "support", ops=role == "ops")
    )
    for path in LISTS:
        text = page_text(browser, live_server.url, f"{path}/", f"{role}-{path.split('/')[1]}s")
        assert MERCHANT_NAME in text  # support acts knowing whose it is
    text = page_text(browser, live_server.url, f"{records['transfer']}/change/", f"{role}-transfer")
    legs = browser.find_element(by("XPATH"), "//table[.//th='collection']").text
    assert "SIM-" in legs and "provider_declined" in legs  # references and why it failed


def test_merchant_staff_read_a_connection_error_in_plain_words(
    live_server, browser, enabled_merchant, records
):
    log_in(browser, live_server.url, staff(enabled_merchant, username="ama", role="developer"))
    for name in ("delivery", "event"):
        text = page_text(browser, live_server.url, f"{records[name]}/change/", f"owner-{name}")
        assert "Connection refused" in text, name
        for raw in ("Errno", "HTTPConnection", "Failed to establish"):
            assert raw not in browser.page_source, (name, raw)


def test_support_also_reads_the_error_as_recorded(live_server, browser, records):
    log_in(browser, live_server.url, staff(username="sam", support=True))
    text = page_text(browser, live_server.url, f"{records['delivery']}/change/", "support-delivery")
    assert "Connection refused\nCould not connect: " in text
    assert "[Errno 111] Connection refused" in text


def test_each_roles_home_says_whose_it_is(live_server, browser, enabled_merchant, records):
    homes = {
        staff(enabled_merchant, username="ama", role="viewer"): (
            f"{MERCHANT_NAME}: merchant dashboard"
        ),
        staff(username="sam", support=True): "Support dashboard: what needs attention",
        staff(username="olu", ops=True): "Ops dashboard: the platform and what needs attention",
    }
    for username, title in homes.items():
        browser.delete_all_cookies()
        log_in(browser, live_server.url, username)
        page_text(browser, live_server.url, "", f"{username}-home")
        assert browser.title == f"{title} | Cowry"
        assert browser.find_element(by("TAG_NAME"), "h1").text == title
