"""A delivery's attempts and an event's deliveries at 1400 px in a real headless Chromium: each
table fits its box beside the sidebar (it scrolled sideways), a long URL, a recorded error
and the receiver's answer wrapped in their columns. Screenshots are kept in test-artifacts/."""

import re

import pytest
from django.utils import timezone

from tests.dashboard.test_browser_record_pages import staff
from tests.dashboard.test_browser_roles import by, log_in, shoot, wait_for
from tests.webhooks.conftest import receiver, record_event, webhook_settings  # noqa: F401
from webhooks.models import Delivery
from webhooks.services.endpoints import endpoint_add

pytestmark = pytest.mark.django_db(transaction=True)

LONG_PATH = "/merchants/boutique-awa-diallo-et-fils/callbacks/cowry-payments?token=" + "a7" * 30
ISO_TIME = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"
# The table's width beyond its box and the page's beyond the window, in px: 0 when it fits.
OVERFLOW = """
const table = document.getElementById(arguments[0]);
const page = document.documentElement;
return [table.scrollWidth - table.parentElement.clientWidth,
        page.scrollWidth - page.clientWidth];
"""


@pytest.fixture
def deliveries(merchant, receiver, webhook_settings):  # noqa: F811
    """One event to two endpoints at long URLs: the receiver answers 500 with a body longer
    than the KiB kept (no space in it), the other listens nowhere (a long recorded error)."""
    answered = f"{receiver.url}{LONG_PATH}"
    refused = f"http://127.0.0.1:1{LONG_PATH}"
    for url in (answered, refused):
        endpoint_add(merchant=merchant, url=url, now=timezone.now())
    receiver.plan = [500]
    event = record_event(merchant, "payout.failed")
    by_url = {d.endpoint.url: d for d in Delivery.objects.filter(event=event)}
    assert by_url[answered].attempts == by_url[refused].attempts == 1
    return {"event": event, "answered": by_url[answered], "refused": by_url[refused]}


def cells(browser, table_id: str) -> list[list[str]]:
    """The table's rows as their cells' text, once it is checked to fit its box at 1400 px."""
    table = wait_for(browser, f"#{table_id}")
    assert browser.execute_script(OVERFLOW, table_id) == [0, 0], table_id
    rows = table.find_elements(by("CSS_SELECTOR"), "tr.form-row")
    return [[td.text for td in row.find_elements(by("TAG_NAME"), "td")] for row in rows]


def one_line(text: str) -> str:
    return "".join(text.split())


def viewer(merchant, role: str) -> str:
    if role == "support":
        return staff(username="sam", support=True)
    return staff(merchant, username="dev", role="developer")


@pytest.mark.parametrize("role", ["support", "developer"])
def test_a_deliverys_attempts_fit_1400_px(live_server, browser, merchant, deliveries, role):
    log_in(browser, live_server.url, viewer(merchant, role))

    answered = deliveries["answered"]
    browser.get(f"{live_server.url}/admin/webhooks/delivery/{answered.pk}/change/")
    [[number, url, sent, error, answer]] = cells(browser, "attempt_log-data")
    shoot(browser, f"{role}-delivery-attempts")
    assert (number, one_line(url), error) == ("1", answered.endpoint.url, "HTTP 500")
    assert re.fullmatch(rf"{ISO_TIME}\n\d+ ms", sent), sent
    assert one_line(answer) == "HTTP500answer500" + "x" * (1024 - len("answer 500 "))

    refused = deliveries["refused"]
    browser.get(f"{live_server.url}/admin/webhooks/delivery/{refused.pk}/change/")
    [[_, url, _, error, answer]] = cells(browser, "attempt_log-data")
    assert (one_line(url), answer) == (refused.endpoint.url, "—")
    if role == "support":  # as recorded beneath
        assert error.startswith("Connection refused\nCould not connect: ")
    else:
        assert error == "Connection refused"


@pytest.mark.parametrize("role", ["support", "developer"])
def test_an_events_deliveries_fit_1400_px(live_server, browser, merchant, deliveries, role):
    log_in(browser, live_server.url, viewer(merchant, role))

    browser.get(f"{live_server.url}/admin/webhooks/event/{deliveries['event'].pk}/change/")
    rows = {one_line(row[0]): row for row in cells(browser, "deliveries-data")}
    shoot(browser, f"{role}-event-deliveries")

    answered, refused = deliveries["answered"], deliveries["refused"]
    _, state, error, attempts = rows[answered.endpoint.url]
    assert re.fullmatch(rf"Pending, 1 attempt\nnext {ISO_TIME}", state), state
    assert error == "HTTP 500"
    assert re.fullmatch(rf"#1 {ISO_TIME}, \d+ ms: HTTP 500\nanswer 500 x+", attempts), attempts
    _, state, error, attempts = rows[refused.endpoint.url]
    assert re.fullmatch(rf"#1 {ISO_TIME}, \d+ ms: Connection refused", attempts), attempts
    assert error.startswith("Connection refused")
    assert ("Could not connect: " in error) == (role == "support")
    link = browser.find_element(by("LINK_TEXT"), refused.endpoint.url)
    assert link.get_attribute("href").endswith(f"/admin/webhooks/delivery/{refused.pk}/change/")
