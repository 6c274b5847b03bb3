"""Re-sending an event (POST /events/{id}/resend, the dashboard's "Re-send"): a re-send takes
the place of a delivery of the event still waiting for its retry, so the receiver gets the
event now and not once more hours later, and the event no longer shows `pending` once it is
acknowledged."""

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from tests.webhooks.conftest import record_event
from webhooks.models import DeliveryAttempt
from webhooks.services.endpoints import endpoint_add, endpoint_set
from webhooks.services.resend import event_resend
from webhooks.services.sweeps import deliveries_send_due

pytestmark = pytest.mark.django_db


def deliver_all(now=None) -> None:
    while deliveries_send_due(now=now or timezone.now()).attempted:
        pass


def webhook_ids(receiver) -> list[str]:
    return [r.headers["X-Cowry-Webhook-Id"] for r in receiver.requests]


def _failing_for_half_an_hour(merchant, receiver):
    """An event whose receiver failed its first four attempts over the last half hour: the
    original delivery waits for its fifth, due in about 50 minutes (1 min, 5, 15, then 1 h)."""
    receiver.plan = [500, 500, 500, 500]
    start = timezone.now() - timedelta(minutes=30)
    event = record_event(merchant, at=start)
    deliver_all(now=start)
    for _ in range(3):
        deliver_all(now=event.deliveries.get().next_attempt_at)
    original = event.deliveries.get()
    assert (original.status, original.attempts) == ("pending", 4)
    assert original.next_attempt_at > timezone.now() + timedelta(minutes=45)
    return event


def test_a_re_send_takes_the_place_of_the_retry_the_original_delivery_waits_for(
    api, endpoint, receiver
):
    event = _failing_for_half_an_hour(api.merchant, receiver)
    assert api.get(f"/events/{event.id}").json()["delivery_status"] == "pending"

    # The merchant fixes the receiver and re-sends the event.
    response = api.post(f"/events/{event.id}/resend")
    deliver_all()

    assert response.status_code == 202
    assert response.json()["delivery_status"] == "pending"
    assert webhook_ids(receiver) == [str(event.id)] * 5  # four failures, then the re-send
    assert api.get(f"/events/{event.id}").json()["delivery_status"] == "succeeded"
    # The retry the original delivery was waiting for never comes: no second copy hours later.
    deliver_all(now=timezone.now() + timedelta(days=1))
    assert len(receiver.requests) == 5
    attempts = DeliveryAttempt.objects.filter(delivery__event=event).order_by("started_at")
    assert [a.response_status for a in attempts] == [500, 500, 500, 500, 200]


def test_a_re_send_from_the_dashboard_takes_the_place_of_the_retry_too(
    merchant, endpoint, receiver, developer
):
    event = _failing_for_half_an_hour(merchant, receiver)

    response = developer.post(
        "/admin/webhooks/event/",
        {"action": "resend_events", "_selected_action": [str(event.pk)]},
    )
    deliver_all()
    deliver_all(now=timezone.now() + timedelta(days=1))

    assert response.status_code == 302
    assert webhook_ids(receiver) == [str(event.id)] * 5
    assert set(event.deliveries.values_list("status", flat=True)) == {"succeeded"}


def test_a_re_send_goes_now_to_each_endpoint_once(api, endpoint, receiver):
    """One endpoint still retrying the event, one subscribed since: each gets it once, now."""
    receiver.plan = [500]
    start = timezone.now() - timedelta(seconds=10)
    event = record_event(api.merchant, at=start)
    deliver_all(now=start)  # the primary failed; its retry is due in 50 s
    endpoint_add(merchant=api.merchant, url=receiver.url + "/new", now=timezone.now())

    assert api.post(f"/events/{event.id}/resend").status_code == 202
    deliver_all()
    deliver_all(now=timezone.now() + timedelta(days=1))

    assert sorted(r.path for r in receiver.requests) == ["/hook", "/hook", "/hook/new"]
    assert api.get(f"/events/{event.id}").json()["delivery_status"] == "succeeded"


def test_a_re_send_of_an_event_already_delivered_sends_it_again(api, endpoint, receiver):
    event = record_event(api.merchant)
    deliver_all()

    assert api.post(f"/events/{event.id}/resend").status_code == 202
    deliver_all()

    assert webhook_ids(receiver) == [str(event.id)] * 2
    assert api.get(f"/events/{event.id}").json()["delivery_status"] == "succeeded"


@pytest.mark.django_db(transaction=True)
def test_a_re_send_while_an_attempt_is_under_way_sends_nothing_more(
    merchant, receiver, webhook_settings
):
    """The attempt under way is the re-send: a second request alongside it would only be a
    copy (and, were that attempt to fail, its retry a copy much later)."""
    webhook_settings.WEBHOOK_TIMEOUT_SECONDS = 5
    endpoint_set(merchant=merchant, url=receiver.url, now=timezone.now())
    receiver.plan = [("sleep", 1.5)]
    recorded = []

    def payment_completes():
        try:  # autocommit: the sender is woken, and sends, in this thread
            recorded.append(record_event(merchant))
        finally:
            connection.close()

    sending = threading.Thread(target=payment_completes)
    sending.start()
    deadline = timezone.now() + timedelta(seconds=10)
    while not receiver.requests and timezone.now() < deadline:
        threading.Event().wait(0.02)
    assert len(receiver.requests) == 1  # the receiver is taking its time to answer
    event_id = receiver.requests[0].headers["X-Cowry-Webhook-Id"]

    event_resend(event_id=event_id, now=timezone.now())
    sending.join()

    assert webhook_ids(receiver) == [event_id]
    assert set(recorded[0].deliveries.values_list("status", flat=True)) == {"succeeded"}
