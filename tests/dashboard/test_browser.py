"""The dashboard in a real headless Chromium: a merchant owner creates an API key, sees the
secret once, reloads and no longer sees it. A screenshot is kept in test-artifacts/."""

from pathlib import Path

import pytest

from merchants import services
from merchants.models import ApiKey

pytestmark = pytest.mark.django_db(transaction=True)

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


def test_owner_creates_a_key_and_sees_the_secret_only_once(live_server, browser, merchant):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    def wait_for(element_id: str):
        return WebDriverWait(browser, 20).until(
            expected_conditions.presence_of_element_located((By.ID, element_id))
        )

    services.staff_user_create(
        username="owner", password="pw-owner-123", merchant=merchant, role="owner"
    )
    browser.get(f"{live_server.url}/admin/login/")
    browser.find_element(By.NAME, "username").send_keys("owner")
    browser.find_element(By.NAME, "password").send_keys("pw-owner-123")
    browser.find_element(By.CSS_SELECTOR, "#login-form [type=submit]").click()
    wait_for("merchant-summary")  # logged in: the owner's home page has loaded

    browser.get(f"{live_server.url}/admin/merchants/apikey/add/")
    wait_for("id_label").send_keys("checkout backend")
    browser.find_element(By.NAME, "_save").click()

    secret = wait_for("api-secret").text
    assert secret.startswith("cs_")
    assert "shown this once" in browser.page_source
    ARTIFACTS.mkdir(exist_ok=True)
    browser.save_screenshot(str(ARTIFACTS / "dashboard-api-key-secret-once.png"))
    api_key = ApiKey.objects.get(merchant=merchant, label="checkout backend")
    assert services.api_key_authenticate(key=api_key.key, secret=secret) == api_key

    browser.refresh()
    wait_for("secret-gone")

    assert browser.find_elements(By.ID, "api-secret") == []
    assert secret not in browser.page_source
    assert browser.find_element(By.ID, "secret-gone").is_displayed()
    browser.save_screenshot(str(ARTIFACTS / "dashboard-api-key-after-reload.png"))
