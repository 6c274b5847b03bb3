"""The failing-endpoint clock: an endpoint whose every delivery failed for 5 days is disabled,
counting only attempts made since the last change that could make its deliveries succeed
(created, moved, a new signing secret, switched back on). Changing what it subscribes to, or
saving it unchanged, does not restart that clock."""

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.webhooks.conftest import record_event
from webhooks.models import WebhookEndpoint
from webhooks.services.endpoints import endpoint_add, endpoint_set, endpoints_disable_failing
from webhooks.services.sweeps import deliveries_send_due

pytestmark = pytest.mark.django_db


def fail_at(merchant, when) -> None:
    """An event at `when`, its one attempt made then (and failed: the receiver answers 500)."""
    record_event(merchant, at=when)
    while deliveries_send_due(now=when).attempted:
        pass


@pytest.fixture
def failing(merchant, receiver, webhook_settings):
    """(an endpoint whose every delivery failed, 6 days ago and 2 hours ago, now)."""
    webhook_settings.WEBHOOK_RETRY_SCHEDULE = []  # one attempt: each failure is final
    receiver.default = 500
    now = timezone.now()
    endpoint, _ = endpoint_add(merchant=merchant, url=receiver.url, now=now - timedelta(days=7))
    fail_at(merchant, now - timedelta(days=6))
    fail_at(merchant, now - timedelta(hours=2))
    return endpoint, now


def save_in_dashboard(browser, endpoint, **changes):
    form = {
        "url": endpoint.url,
        "event_types": endpoint.event_types,  # the page's checkboxes
        "enabled": "on",
        **changes,
    }
    response = browser.post(f"/admin/webhooks/webhookendpoint/{endpoint.pk}/change/", form)
    assert response.status_code == 302, response.content.decode()[:2000]


@pytest.mark.parametrize(
    "changes",
    [
        {"event_types": ["payin.completed", "payout.failed"]},
        {},  # opened and saved as it was
    ],
    ids=["subscription", "unchanged"],
)
def test_a_save_that_cannot_make_it_succeed_does_not_restart_the_clock(
    merchant, failing, developer, changes
):
    endpoint, now = failing
    save_in_dashboard(developer, endpoint, **changes)
    fail_at(merchant, now + timedelta(hours=1))  # still failing after the save

    assert endpoints_disable_failing(now=now + timedelta(hours=2)) == 1

    endpoint.refresh_from_db()
    assert (endpoint.enabled, endpoint.disabled_reason) == (False, "failing")
    listing = developer.get("/admin/webhooks/webhookendpoint/").content.decode()
    assert "every delivery failed for 5 days" in listing


def test_moving_the_endpoint_restarts_the_clock(merchant, failing, developer, receiver):
    endpoint, now = failing
    save_in_dashboard(developer, endpoint, url=receiver.url + "/v2")
    fail_at(merchant, now + timedelta(hours=1))  # the new receiver fails too, for now

    assert endpoints_disable_failing(now=now + timedelta(hours=2)) == 0
    assert WebhookEndpoint.objects.get(pk=endpoint.pk).enabled is True

    # failing at the new address for five days more disables it
    fail_at(merchant, now + timedelta(days=6))
    assert endpoints_disable_failing(now=now + timedelta(days=6, hours=1)) == 1


def test_a_new_signing_secret_restarts_the_clock(merchant, failing, developer):
    """A receiver refusing every signature (it has another secret) can be fixed by a new one."""
    endpoint, now = failing
    response = developer.post(
        "/admin/webhooks/webhookendpoint/",
        {"action": "rotate_signing_secret", "_selected_action": [str(endpoint.pk)]},
    )
    assert response.status_code == 302
    fail_at(merchant, now + timedelta(hours=1))

    assert endpoints_disable_failing(now=now + timedelta(hours=2)) == 0
    assert WebhookEndpoint.objects.get(pk=endpoint.pk).enabled is True


def test_set_webhook_restarts_the_clock(merchant, failing, receiver):
    _endpoint, now = failing
    endpoint_set(merchant=merchant, url=receiver.url, now=timezone.now())
    fail_at(merchant, now + timedelta(hours=1))

    assert endpoints_disable_failing(now=now + timedelta(hours=2)) == 0


def test_switching_it_back_on_restarts_the_clock(merchant, failing, developer):
    endpoint, now = failing
    assert endpoints_disable_failing(now=now) == 1
    endpoint.refresh_from_db()

    save_in_dashboard(developer, endpoint)  # "enabled" ticked again
    fail_at(merchant, now + timedelta(hours=1))

    assert endpoints_disable_failing(now=now + timedelta(hours=2)) == 0
    endpoint.refresh_from_db()
    assert (endpoint.enabled, endpoint.disabled_reason) == (True, "")


def test_a_success_restarts_the_clock_whatever_was_saved(merchant, failing, developer, receiver):
    endpoint, now = failing
    receiver.default = 200
    record_event(merchant, at=now - timedelta(hours=1))
    deliveries_send_due(now=now - timedelta(hours=1))
    receiver.default = 500
    save_in_dashboard(developer, endpoint, event_types=["payin.completed"])
    fail_at(merchant, now + timedelta(hours=1))

    assert endpoints_disable_failing(now=now + timedelta(hours=2)) == 0
