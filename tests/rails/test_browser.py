"""Ops read the provider connections on their home in a real headless Chromium."""

import re

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from rails import selectors, services
from tests.browsers import headless_chromium
from tests.dashboard.test_browser_roles import PASSWORD, log_in, shoot, wait_for
from tests.rails.conftest import CONNECTION, connection_add

pytestmark = pytest.mark.django_db(transaction=True)


def test_ops_see_each_connection_on_their_home(live_server, catalog, fake_mtn, settings):
    settings.ALLOW_PRIVATE_NETWORK_URLS = True
    connection_add(fake_mtn, callback_base=live_server.url)
    services.operator_route_set(operator_code="CM_MTN_MOMO", name=CONNECTION, at=timezone.now())
    services.operator_route_set(operator_code="CI_MTN_MOMO", name=CONNECTION, at=timezone.now())
    selectors.memo_forget()
    from rails.mtn_momo import MtnClient

    MtnClient(selectors.connection_settings(CONNECTION)).token("collection")  # a token cached
    get_user_model().objects.create_superuser("ops-rails", "o@example.com", PASSWORD)
    with headless_chromium() as browser:
        log_in(browser, live_server.url, "ops-rails")
        section = wait_for(browser, "#provider-connections").text
        shoot(browser, "ops-home-provider-connections")
    assert "mtn-cm" in section
    assert "mtn_momo, target environment sandbox" in section
    assert "Operators: CI_MTN_MOMO, CM_MTN_MOMO" in section
    assert "No recent errors" in section
    assert re.search(r"Token age: collection \d+ s, disbursement none", section)
    assert "simulator" in section
    for each in fake_mtn.credentials.values():
        assert each["api_key"] not in section and each["subscription_key"] not in section
