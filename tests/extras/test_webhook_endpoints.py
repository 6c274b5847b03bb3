"""Up to five endpoints per merchant, subscriptions, set_webhook on the primary, the sweep."""

import json
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone

from core.exceptions import DomainError
from tests.extras.test_events import deliver_all, record
from webhooks.models import Delivery, WebhookEndpoint
from webhooks.services.endpoints import (
    endpoint_add,
    endpoint_set,
    endpoint_update,
    endpoints_disable_failing,
)

pytestmark = pytest.mark.django_db


def test_each_event_goes_to_every_enabled_subscribed_endpoint(
    merchant,
    receiver,
    webhook_settings,
):
    now = timezone.now()
    endpoint_add(merchant=merchant, url=receiver.url + "/all", now=now)
    _, payouts_secret = endpoint_add(
        merchant=merchant,
        url=receiver.url + "/payouts",
        event_types=["payout.completed", "payout.failed"],
        now=now,
    )
    off, _ = endpoint_add(merchant=merchant, url=receiver.url + "/off", now=now)
    endpoint_update(endpoint_id=off.pk, url=off.url, enabled=False, now=now)

    payin = record(merchant, "payin.completed")
    payout = record(merchant, "payout.failed")
    deliver_all()

    got = sorted((r.path, json.loads(r.body)["id"]) for r in receiver.requests)
    assert got == sorted(
        [
            ("/hook/all", str(payin.id)),
            ("/hook/all", str(payout.id)),
            ("/hook/payouts", str(payout.id)),
        ]
    )
    signed = next(r for r in receiver.requests if r.path == "/hook/payouts")
    from webhooks import signing

    assert signed.headers["X-Cowry-Signature"] == signing.sign(
        secret=payouts_secret, timestamp=int(signed.headers["X-Cowry-Timestamp"]), body=signed.body
    )


def test_a_merchant_has_at_most_five_endpoints(merchant, webhook_settings):
    for i in range(5):
        endpoint_add(merchant=merchant, url=f"https://h{i}.example.com", now=timezone.now())

    with pytest.raises(DomainError) as refused:
        endpoint_add(merchant=merchant, url="https://h6.example.com", now=timezone.now())

    assert refused.value.reason == "too_many_webhook_endpoints"
    assert WebhookEndpoint.objects.filter(merchant=merchant).count() == 5


def test_unknown_event_types_are_refused(merchant):
    with pytest.raises(DomainError) as refused:
        endpoint_add(
            merchant=merchant,
            url="https://h.example.com",
            event_types=["payin.done"],
            now=timezone.now(),
        )

    assert refused.value.reason == "invalid_event_types"
    assert not WebhookEndpoint.objects.exists()


def test_set_webhook_updates_the_primary_endpoint_and_keeps_the_others(merchant):
    call_command("set_webhook", str(merchant.pk), "https://first.example.com", "--json")
    endpoint_add(
        merchant=merchant,
        url="https://second.example.com",
        event_types=["payin.failed"],
        now=timezone.now(),
    )

    call_command("set_webhook", str(merchant.pk), "https://moved.example.com", "--json")

    urls = list(
        WebhookEndpoint.objects.filter(merchant=merchant)
        .order_by("created_at")
        .values_list("url", "event_types")
    )
    assert urls == [
        ("https://moved.example.com", []),
        ("https://second.example.com", ["payin.failed"]),
    ]


def _fail_at(endpoint_url_merchant, when):
    merchant = endpoint_url_merchant
    event = record(merchant, at=when)
    deliver_all(now=when)
    return event


@pytest.fixture
def failing_for_six_days(merchant, receiver, webhook_settings):
    """(an endpoint whose every delivery failed, 6 days ago and 2 hours ago, now)."""
    webhook_settings.WEBHOOK_RETRY_SCHEDULE = []
    receiver.default = 500
    now = timezone.now()
    failing, _ = endpoint_add(merchant=merchant, url=receiver.url, now=now - timedelta(days=7))
    _fail_at(merchant, now - timedelta(days=6))
    _fail_at(merchant, now - timedelta(hours=2))
    return failing, now


def test_an_endpoint_failing_every_delivery_for_5_days_is_disabled(merchant, failing_for_six_days):
    failing, now = failing_for_six_days

    disabled = endpoints_disable_failing(now=now)

    failing.refresh_from_db()
    assert disabled == 1
    assert failing.enabled is False and failing.disabled_reason == "failing"
    assert failing.disabled_at == now
    # A disabled endpoint gets no new deliveries; enabling it again clears the reason.
    record(merchant)
    assert Delivery.objects.filter(endpoint=failing, status="pending").count() == 0
    endpoint_update(endpoint_id=failing.pk, url=failing.url, enabled=True, now=now)
    failing.refresh_from_db()
    assert failing.enabled is True and failing.disabled_reason == ""


def test_a_success_inside_the_window_keeps_the_endpoint(
    merchant,
    receiver,
    webhook_settings,
):
    webhook_settings.WEBHOOK_RETRY_SCHEDULE = []
    now = timezone.now()
    endpoint, _ = endpoint_add(merchant=merchant, url=receiver.url, now=now - timedelta(days=7))
    receiver.default = 500
    _fail_at(merchant, now - timedelta(days=6))
    receiver.default = 200
    _fail_at(merchant, now - timedelta(days=3))
    receiver.default = 500
    _fail_at(merchant, now - timedelta(hours=1))

    assert endpoints_disable_failing(now=now) == 0
    endpoint.refresh_from_db()
    assert endpoint.enabled is True


def test_failures_younger_than_5_days_keep_the_endpoint(
    merchant,
    receiver,
    webhook_settings,
):
    webhook_settings.WEBHOOK_RETRY_SCHEDULE = []
    receiver.default = 500
    now = timezone.now()
    endpoint_add(merchant=merchant, url=receiver.url, now=now - timedelta(days=7))
    _fail_at(merchant, now - timedelta(days=4))
    _fail_at(merchant, now - timedelta(hours=1))

    assert endpoints_disable_failing(now=now) == 0


def test_an_endpoint_re_enabled_is_not_disabled_again_for_what_failed_before(
    merchant, failing_for_six_days
):
    failing, now = failing_for_six_days
    assert endpoints_disable_failing(now=now - timedelta(hours=1)) == 1

    # the merchant fixes the receiver and switches the endpoint back on; nothing sent since
    endpoint_update(endpoint_id=failing.pk, url=failing.url, enabled=True, now=now)
    assert endpoints_disable_failing(now=now + timedelta(minutes=1)) == 0
    failing.refresh_from_db()
    assert failing.enabled is True
    # failing again afterwards, for five days more, disables it again
    _fail_at(merchant, now + timedelta(hours=1))
    _fail_at(merchant, now + timedelta(days=6))
    assert endpoints_disable_failing(now=now + timedelta(days=6, hours=1)) == 1


def test_the_sweep_is_scheduled(settings):
    entries = {e["task"] for e in settings.CELERY_BEAT_SCHEDULE.values()}
    assert "webhooks.tasks.disable_failing_endpoints" in entries


def test_the_admin_list_shows_a_disabled_endpoint_and_why(merchant, admin_client):
    endpoint, _ = endpoint_add(merchant=merchant, url="https://h.example.com", now=timezone.now())
    WebhookEndpoint.objects.filter(pk=endpoint.pk).update(enabled=False, disabled_reason="failing")

    page = admin_client.get(reverse("admin:webhooks_webhookendpoint_changelist")).content.decode()

    assert "every delivery failed for 5 days" in page


def test_the_admin_adds_a_second_subscribed_endpoint_without_replacing_the_first(
    merchant, admin_client
):
    first, _ = endpoint_set(merchant=merchant, url="https://a.example.com", now=timezone.now())

    refused = admin_client.post(
        "/admin/webhooks/webhookendpoint/add/",
        {"merchant": str(merchant.pk), "url": "https://b.example.com", "event_types": ["nope"]},
    )
    response = admin_client.post(
        "/admin/webhooks/webhookendpoint/add/",
        {
            "merchant": str(merchant.pk),
            "url": "https://b.example.com",
            "event_types": ["payout.failed"],  # the page's checkboxes
        },
    )

    assert refused.status_code == 200
    assert "nope is not one of the available choices" in refused.content.decode()
    assert response.status_code == 302
    endpoints = WebhookEndpoint.objects.filter(merchant=merchant).order_by("created_at")
    assert [(e.url, e.event_types) for e in endpoints] == [
        ("https://a.example.com", []),
        ("https://b.example.com", ["payout.failed"]),
    ]
    assert endpoints[0].pk == first.pk
