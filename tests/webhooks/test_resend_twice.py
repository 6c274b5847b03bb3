"""A re-send submitted twice (a double click, a client retrying under a new Idempotency-Key,
two support agents at once) sends the event once: the second finds the first still pending
and answers with it."""

import threading

import pytest
from django.test import Client
from django.utils import timezone

from merchants import services as merchant_services
from merchants.models import AuditLogEntry
from tests.support import MerchantClient
from tests.webhooks.conftest import racing_behind_a_held_row, record_event
from webhooks.models import Delivery
from webhooks.services.endpoints import endpoint_set
from webhooks.services.sweeps import deliveries_send_due

pytestmark = pytest.mark.django_db


def deliver_all(now=None) -> None:
    while deliveries_send_due(now=now or timezone.now()).attempted:
        pass


def webhook_ids(receiver) -> list[str]:
    return [r.headers["X-Cowry-Webhook-Id"] for r in receiver.requests]


def test_a_re_send_posted_twice_under_two_keys_sends_the_event_once_more(api, endpoint, receiver):
    event = record_event(api.merchant)
    deliver_all()

    first = api.post(f"/events/{event.id}/resend", idempotency_key="click-1")
    second = api.post(f"/events/{event.id}/resend", idempotency_key="click-2")
    deliver_all()

    assert first.status_code == second.status_code == 202
    assert first.json()["id"] == second.json()["id"] == str(event.id)
    assert second.json()["delivery_status"] == "pending"
    assert second.json()["_meta"]["idempotency_replayed"] is False
    assert webhook_ids(receiver) == [str(event.id)] * 2  # the original and one re-send
    assert api.get(f"/events/{event.id}").json()["delivery_status"] == "succeeded"


def test_a_re_send_clicked_twice_in_the_dashboard_sends_the_event_once_more(
    merchant, endpoint, receiver
):
    merchant_services.staff_user_create(username="agent", password="pw-123456-staff", support=True)
    browser = Client()
    assert browser.login(username="agent", password="pw-123456-staff")
    event = record_event(merchant)
    deliver_all()

    for _ in range(2):
        response = browser.post(
            "/admin/webhooks/event/",
            {"action": "resend_events", "_selected_action": [str(event.pk)]},
        )
        assert response.status_code == 302
    deliver_all()

    assert webhook_ids(receiver) == [str(event.id)] * 2
    # both clicks were made, and are in the merchant's audit log
    assert AuditLogEntry.objects.filter(merchant=merchant, action="event.resent").count() == 2


def test_a_re_send_after_the_first_was_sent_sends_again(api, endpoint, receiver):
    event = record_event(api.merchant)
    deliver_all()

    api.post(f"/events/{event.id}/resend")
    deliver_all()
    api.post(f"/events/{event.id}/resend")
    deliver_all()

    assert webhook_ids(receiver) == [str(event.id)] * 3


@pytest.mark.django_db(transaction=True)
def test_two_re_sends_at_the_same_moment_send_the_event_once_more(
    merchant, receiver, webhook_settings
):
    """Both requests are in before either writes: a lock, not the timing, keeps them to one
    delivery. The test holds the endpoint's row, so the first to insert its delivery waits (its
    foreign key) until the other is waiting too."""
    endpoint, _ = endpoint_set(merchant=merchant, url=receiver.url, now=timezone.now())
    event = record_event(merchant)  # autocommit: sent at once
    assert webhook_ids(receiver) == [str(event.id)]
    clients = [MerchantClient(merchant) for _ in range(2)]
    receiver.plan = [("sleep", 1.0)]  # the first re-send is still going out when the other looks
    barrier = threading.Barrier(2, timeout=60)

    def click(client):
        barrier.wait()
        return client.post(f"/events/{event.id}/resend")

    responses = racing_behind_a_held_row(
        [lambda c=c: click(c) for c in clients],
        lock_sql="SELECT id FROM webhooks_webhookendpoint WHERE id = %s FOR UPDATE",
        params=[endpoint.pk],
    )

    assert sorted(r.status_code for r in responses) == [202, 202]
    assert Delivery.objects.filter(event=event).count() == 2  # the original and one re-send
    deliver_all()
    assert webhook_ids(receiver) == [str(event.id)] * 2
