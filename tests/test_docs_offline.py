"""/docs renders in a headless Chromium with the network off: every asset comes from
the service itself (drf-spectacular-sidecar), none from a CDN."""

import shutil
from urllib.parse import urlsplit

import pytest

pytestmark = pytest.mark.django_db(transaction=True)

# Every name resolves to nothing and every proxied request goes to a closed port: only the
# live server on the loopback answers.
OFFLINE_FLAGS = (
    "--proxy-server=http://127.0.0.1:9",
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1",
)


@pytest.fixture
def offline_browser():
    chromium = shutil.which("chromium")
    chromedriver = shutil.which("chromedriver")
    if not (chromium and chromedriver):
        pytest.skip("Debian's chromium and chromium-driver are not installed (bin/ensure_browser)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1280,900",
        *OFFLINE_FLAGS,
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=chromedriver), options=options)
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()


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
