"""A real headless Chromium (Debian's chromium and chromium-driver, bin/ensure_browser)."""

import shutil
from collections.abc import Iterator
from contextlib import contextmanager

import pytest


@contextmanager
def headless_chromium(*flags: str, width: int = 1400) -> Iterator[object]:
    """A Chromium WebDriver `width` px wide with these extra flags; skips the test when the
    browser is not installed."""
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
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--window-size={width},900",
        *flags,
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=chromedriver), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()
