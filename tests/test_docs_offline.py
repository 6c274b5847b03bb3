"""/docs renders in a headless Chromium with the network off: every asset comes from
the service itself (drf-spectacular-sidecar), none from a CDN."""

from urllib.parse import urlsplit

import pytest

from tests.browsers import headless_chromium

pytestmark = pytest.mark.django_db(transaction=True)

# Every name resolves to nothing and every proxied request goes to a closed port: only the
# live server on the loopback answers.
OFFLINE_FLAGS = (
    "--proxy-server=http://127.0.0.1:9",
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1",
)


@pytest.fixture
def offline_browser():
    with headless_chromium(*OFFLINE_FLAGS, width=1280) as driver:
        yield driver


def _operation_count(client) -> int:
    schema = client.get("/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    return sum(1 for item in schema["paths"].values() for op in item.values() if "responses" in op)


def _resource_hosts(browser) -> set[str]:
    urls = browser.execute_script(
        "return performance.getEntriesByType('resource').map(e => e.name)"
    )
    return {urlsplit(url).netloc for url in urls}


def test_the_network_is_really_off(live_server, offline_browser):
    from selenium.common.exceptions import WebDriverException

    with pytest.raises(WebDriverException, match="net::ERR_"):
        offline_browser.get("https://cdn.jsdelivr.net/npm/swagger-ui-dist@5/swagger-ui.css")


def test_swagger_ui_renders_every_operation_offline(live_server, offline_browser, client):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    expected = _operation_count(client)
    offline_browser.get(f"{live_server.url}/docs")
    WebDriverWait(offline_browser, 30).until(
        lambda b: len(b.find_elements(By.CSS_SELECTOR, ".opblock")) >= expected
    )
    paths = {
        element.get_attribute("data-path")
        for element in offline_browser.find_elements(By.CSS_SELECTOR, ".opblock-summary-path")
    }
    assert {"/customers", "/payins", "/quotes/payin", "/transfers/{transfer_id}"} <= paths
    assert "insufficient_balance" in offline_browser.page_source  # the error reference
    assert _resource_hosts(offline_browser) == {urlsplit(live_server.url).netloc}


def _top(browser, xpath: str) -> int:
    from selenium.webdriver.common.by import By

    return browser.find_element(By.XPATH, xpath).location["y"]


def test_swagger_ui_shows_the_endpoints_first_then_webhooks_and_the_error_reference(
    live_server, offline_browser
):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    offline_browser.get(f"{live_server.url}/docs")
    WebDriverWait(offline_browser, 30).until(
        lambda b: b.find_elements(By.XPATH, "//*[contains(text(), 'payin.completed')]")
    )
    first_operation = _top(offline_browser, "(//*[contains(@class, 'opblock-summary')])[1]")
    errors = _top(offline_browser, "//code[text()='insufficient_balance']")
    signing = _top(offline_browser, "//*[contains(text(), 'HMAC-SHA256')]")
    assert first_operation < 1000  # no wall of tables before the first endpoint
    assert first_operation < signing < errors
    page = offline_browser.page_source
    for event in ("payin.failed", "payout.completed", "transfer.payout.failed", "refund.failed"):
        assert event in page
    assert "Sandbox phone numbers" in page  # the merchant guide


def test_redoc_renders_the_webhooks_and_the_reference_offline(live_server, offline_browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    offline_browser.get(f"{live_server.url}/redoc")
    WebDriverWait(offline_browser, 60).until(
        lambda b: b.find_elements(By.XPATH, "//*[contains(text(), 'transfer.payin.completed')]")
    )
    page = offline_browser.page_source
    assert "insufficient_balance" in page and "HMAC-SHA256" in page
    assert "Sandbox phone numbers" in page
    # every script and style from the service; Redoc's attribution logo (an img of
    # cdn.redoc.ly) is refused by the page's Content-Security-Policy
    urls = offline_browser.execute_script(
        "return performance.getEntriesByType('resource')"
        ".filter(e => e.initiatorType !== 'img').map(e => e.name)"
    )
    assert {urlsplit(url).netloc for url in urls} == {urlsplit(live_server.url).netloc}
