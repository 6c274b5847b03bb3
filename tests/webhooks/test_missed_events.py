"""Events an endpoint missed while it was disabled: an event fans out to the enabled endpoints
only, so one recorded while an endpoint was off (switched off by the merchant, or by the
failing-endpoint sweep) never got a delivery to it. POST /events/resend-failed sends each such
event to it once, with the failed deliveries it re-sends: same ids and bodies, signed."""

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from core.fields import format_timestamp
from tests.extras.conftest import create_customer, create_payin
from tests.support import MerchantClient
from tests.webhooks.conftest import racing_behind_a_held_row, record_event
from webhooks import verify
from webhooks.models import Delivery, Event
from webhooks.services.endpoints import (
    endpoint_add,
    endpoint_set,
    endpoint_update,
    endpoints_disable_failing,
)
from webhooks.services.events import endpoint_send_test_event
from webhooks.services.resend import endpoint_recovery_since
from webhooks.services.sweeps import deliveries_send_due

pytestmark = pytest.mark.django_db


def deliver_all(now=None) -> None:
    while deliveries_send_due(now=now or timezone.now()).attempted:
        pass


def switch(endpoint, *, enabled: bool, now=None) -> None:
    endpoint_update(
        endpoint_id=endpoint.pk, url=endpoint.url, enabled=enabled, now=now or timezone.now()
    )


def complete_payin(api, customer, settle) -> Event:
    """A payin made through the API and completed by the provider: its payin.completed event."""
    payin = create_payin(api, customer, settle=settle)
    return Event.objects.get(data_id=payin["id"], event_type="payin.completed")


def resend_failed(api, since) -> int:
    response = api.post("/events/resend-failed", {"since": format_timestamp(since)})
    assert response.status_code == 202, response.json()
    return response.json()["resent"]


def sent_ids(receiver, start: int = 0) -> list[str]:
    return [r.headers["X-Cowry-Webhook-Id"] for r in receiver.requests[start:]]


@pytest.fixture
def hook(enabled_merchant, receiver, webhook_settings):
    """(the merchant's endpoint, enabled, created an hour ago; its signing secret)."""
    return endpoint_set(
        merchant=enabled_merchant, url=receiver.url, now=timezone.now() - timedelta(hours=1)
    )


def test_the_events_of_payments_completed_while_the_endpoint_was_disabled_are_sent_once(
    enabled_api, hook, receiver, django_capture_on_commit_callbacks
):
    endpoint, secret = hook
    customer = create_customer(enabled_api)
    delivered = complete_payin(enabled_api, customer, django_capture_on_commit_callbacks)
    deliver_all()
    switch(endpoint, enabled=False)
    missed = [
        complete_payin(enabled_api, customer, django_capture_on_commit_callbacks) for _ in range(2)
    ]
    assert not Delivery.objects.filter(event__in=missed).exists()
    switch(endpoint, enabled=True)
    before = len(receiver.requests)

    resent = resend_failed(enabled_api, timezone.now() - timedelta(days=1))
    deliver_all()

    assert resent == 2
    assert sorted(sent_ids(receiver, before)) == sorted(str(e.id) for e in missed)
    by_id = {r.headers["X-Cowry-Webhook-Id"]: r for r in receiver.requests[before:]}
    for event in missed:
        request = by_id[str(event.id)]
        assert request.body == event.body.encode()  # the body recorded when it happened
        assert json.loads(request.body)["id"] == str(event.id)
        assert request.headers["X-Cowry-Event"] == "payin.completed"
        assert verify.verify_signature(payload=request.body, headers=request.headers, secret=secret)
        assert enabled_api.get(f"/events/{event.id}").json()["delivery_status"] == "succeeded"
    assert Delivery.objects.filter(event=delivered).count() == 1  # delivered: not sent again

    again = resend_failed(enabled_api, timezone.now() - timedelta(days=1))
    deliver_all()

    assert again == 0
    assert len(receiver.requests) == before + 2


def test_an_endpoint_disabled_by_the_sweep_gets_its_failed_and_missed_events_once_re_enabled(
    merchant, receiver, webhook_settings, developer
):
    """The whole story: the receiver failed for 5 days, the hourly sweep disabled the endpoint,
    events happened meanwhile; the developer switches it back on in the dashboard, which says
    which call recovers them and from when, and that call sends each event once."""
    webhook_settings.WEBHOOK_RETRY_SCHEDULE = []  # one attempt: a failure is final
    receiver.default = 500
    now = timezone.now()
    disabled_at = now - timedelta(hours=1)
    endpoint, secret = endpoint_set(
        merchant=merchant, url=receiver.url, now=now - timedelta(days=7)
    )
    failed = []
    for when in (disabled_at - timedelta(days=5, minutes=30), now - timedelta(hours=2)):
        failed.append(record_event(merchant, at=when))
        deliver_all(now=when)
    assert endpoints_disable_failing(now=disabled_at) == 1
    missed = [
        record_event(merchant, "payout.completed", at=now - timedelta(minutes=minutes))
        for minutes in (30, 20)
    ]
    receiver.default = 200

    page = developer.post(
        f"/admin/webhooks/webhookendpoint/{endpoint.pk}/change/",
        {"url": endpoint.url, "event_types": [], "enabled": "on"},
        follow=True,
    )
    shown = " ".join(str(message) for message in page.context["messages"])
    since = format_timestamp(
        endpoint_recovery_since(disabled_at=disabled_at, disabled_reason="failing")
    )
    assert f'POST /events/resend-failed with {{"since": "{since}"}}' in shown, shown
    before = len(receiver.requests)

    response = MerchantClient(merchant).post("/events/resend-failed", {"since": since})
    deliver_all()

    assert response.json()["resent"] == 4
    assert sorted(sent_ids(receiver, before)) == sorted(str(e.id) for e in failed + missed)
    for request in receiver.requests[before:]:
        assert verify.verify_signature(payload=request.body, headers=request.headers, secret=secret)


def test_an_event_older_than_the_endpoint_is_never_sent_to_it(api, receiver, webhook_settings):
    now = timezone.now()
    older = record_event(api.merchant, at=now - timedelta(hours=2))  # no endpoint yet
    endpoint, _ = endpoint_add(
        merchant=api.merchant, url=receiver.url, now=now - timedelta(hours=1)
    )
    switch(endpoint, enabled=False)
    missed = record_event(api.merchant)
    switch(endpoint, enabled=True)

    resent = resend_failed(api, now - timedelta(days=1))
    deliver_all()

    assert resent == 1
    assert sent_ids(receiver) == [str(missed.id)]
    assert not Delivery.objects.filter(event=older).exists()


def test_only_events_since_since_are_sent(api, receiver, webhook_settings):
    now = timezone.now()
    endpoint, _ = endpoint_add(merchant=api.merchant, url=receiver.url, now=now - timedelta(days=3))
    switch(endpoint, enabled=False, now=now - timedelta(days=2))
    earlier = record_event(api.merchant, at=now - timedelta(days=2))
    later = record_event(api.merchant, at=now - timedelta(hours=1))
    switch(endpoint, enabled=True)

    resent = resend_failed(api, now - timedelta(days=1))
    deliver_all()

    assert resent == 1
    assert sent_ids(receiver) == [str(later.id)]
    assert not Delivery.objects.filter(event=earlier).exists()


def test_an_endpoint_gets_only_the_missed_events_it_subscribes_to_and_no_test_event(
    api, receiver, webhook_settings
):
    """Each endpoint its own subscription; a test event was for one endpoint only, so the
    other, disabled when it was sent, never missed it."""
    now = timezone.now() - timedelta(hours=1)
    payins, _ = endpoint_add(
        merchant=api.merchant,
        url=receiver.url + "/payins",
        event_types=["payin.completed"],
        now=now,
    )
    everything, _ = endpoint_add(merchant=api.merchant, url=receiver.url + "/all", now=now)
    switch(payins, enabled=False)
    switch(everything, enabled=False)
    payin = record_event(api.merchant, "payin.completed")
    payout = record_event(api.merchant, "payout.failed")
    switch(payins, enabled=True)
    test = endpoint_send_test_event(endpoint_id=payins.pk, now=timezone.now())
    deliver_all()
    switch(everything, enabled=True)
    before = len(receiver.requests)

    resent = resend_failed(api, now - timedelta(days=1))
    deliver_all()

    assert resent == 3
    got = sorted((r.path, r.headers["X-Cowry-Webhook-Id"]) for r in receiver.requests[before:])
    assert got == sorted(
        [
            ("/hook/payins", str(payin.id)),
            ("/hook/all", str(payin.id)),
            ("/hook/all", str(payout.id)),
        ]
    )
    assert Delivery.objects.filter(event_id=test.event_id).count() == 1  # its own endpoint's


def test_another_merchants_missed_events_are_never_touched(
    api, other_api, receiver, webhook_settings
):
    now = timezone.now() - timedelta(hours=1)
    mine, _ = endpoint_add(merchant=api.merchant, url=receiver.url + "/mine", now=now)
    theirs, _ = endpoint_add(merchant=other_api.merchant, url=receiver.url + "/theirs", now=now)
    for endpoint in (mine, theirs):
        switch(endpoint, enabled=False)
    my_event = record_event(api.merchant)
    their_events = [record_event(other_api.merchant) for _ in range(3)]
    for endpoint in (mine, theirs):
        switch(endpoint, enabled=True)

    resent = resend_failed(api, now - timedelta(days=1))
    deliver_all()

    assert resent == 1
    assert [(r.path, r.headers["X-Cowry-Webhook-Id"]) for r in receiver.requests] == [
        ("/hook/mine", str(my_event.id))
    ]
    assert not Delivery.objects.filter(event__in=their_events).exists()
    assert resend_failed(other_api, now - timedelta(days=1)) == 3


def test_a_disabled_endpoint_gets_nothing_and_keeps_its_missed_events_for_later(
    api, receiver, webhook_settings
):
    endpoint, _ = endpoint_add(
        merchant=api.merchant, url=receiver.url, now=timezone.now() - timedelta(hours=1)
    )
    switch(endpoint, enabled=False)
    event = record_event(api.merchant)
    since = timezone.now() - timedelta(days=1)

    assert resend_failed(api, since) == 0
    switch(endpoint, enabled=True)
    assert resend_failed(api, since) == 1
    deliver_all()
    assert sent_ids(receiver) == [str(event.id)]


def test_resend_failed_takes_a_fixed_number_of_queries_however_many_events_were_missed(
    api, receiver, webhook_settings, django_assert_num_queries
):
    """The merchant's turn, its idempotency claim and answer, the enabled endpoints, the failed
    deliveries, one read of the missed events per endpoint, one insert: never one per event."""
    webhook_settings.WEBHOOK_RETRY_SCHEDULE = []  # one attempt: a failure is final
    endpoint, _ = endpoint_add(
        merchant=api.merchant, url=receiver.url, now=timezone.now() - timedelta(hours=1)
    )
    since = timezone.now() - timedelta(days=1)

    def miss(count: int) -> None:
        """One failed delivery, then `count` events missed."""
        deliver_all()  # the re-sends before, acknowledged
        receiver.default = 500
        record_event(api.merchant)
        deliver_all()
        receiver.default = 200
        switch(endpoint, enabled=False)
        for _ in range(count):
            record_event(api.merchant)
        switch(endpoint, enabled=True)

    api.get("/events")  # the key's last use recorded (once a minute at most)
    miss(1)
    with django_assert_num_queries(11):
        assert resend_failed(api, since) == 2
    miss(25)
    with django_assert_num_queries(11):
        assert resend_failed(api, since) == 26
    with django_assert_num_queries(10):  # nothing left: no insert
        assert resend_failed(api, since) == 0


@pytest.mark.django_db(transaction=True)
def test_two_calls_at_the_same_moment_send_each_missed_event_once(
    merchant, receiver, webhook_settings
):
    """Both requests are in, past their Idempotency-Key claims, before either reads: the test
    holds the merchant's row the way they take it, so both wait at their turn, then lets go."""
    endpoint, _ = endpoint_add(
        merchant=merchant, url=receiver.url, now=timezone.now() - timedelta(hours=1)
    )
    switch(endpoint, enabled=False)
    missed = [record_event(merchant) for _ in range(3)]  # autocommit, and no delivery
    switch(endpoint, enabled=True)
    since = format_timestamp(timezone.now() - timedelta(days=1))
    clients = [MerchantClient(merchant) for _ in range(2)]
    responses = racing_behind_a_held_row(
        [lambda c=c: c.post("/events/resend-failed", {"since": since}) for c in clients],
        lock_sql="SELECT id FROM merchants_merchant WHERE id = %s FOR NO KEY UPDATE",
        params=[merchant.pk],
    )

    assert sorted(r.status_code for r in responses) == [202, 202]
    assert sorted(r.json()["resent"] for r in responses) == [0, 3]
    deliver_all()
    assert sorted(sent_ids(receiver)) == sorted(str(e.id) for e in missed)
    assert Delivery.objects.count() == 3


def test_switching_an_endpoint_back_on_in_the_dashboard_sends_nothing_by_itself(
    merchant, receiver, webhook_settings, developer
):
    endpoint, _ = endpoint_add(
        merchant=merchant, url=receiver.url, now=timezone.now() - timedelta(hours=1)
    )
    switch(endpoint, enabled=False)
    record_event(merchant)

    developer.post(
        f"/admin/webhooks/webhookendpoint/{endpoint.pk}/change/",
        {"url": endpoint.url, "event_types": [], "enabled": "on"},
    )
    deliver_all()

    assert not Delivery.objects.exists()
    assert receiver.requests == []
