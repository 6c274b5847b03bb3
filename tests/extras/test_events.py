"""GET /events, GET /events/{id}, POST /events/{id}/resend, POST /events/resend-failed."""

import json
import uuid
from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from tests.extras.conftest import SN_PHONE, create_customer, create_payin
from webhooks.models import Delivery, DeliveryStatus
from webhooks.services.endpoints import endpoint_set
from webhooks.services.events import event_record
from webhooks.services.sweeps import deliveries_send_due

pytestmark = pytest.mark.django_db


def record(merchant, event_type="payin.completed", *, at=None, data_id=None):
    data_id = data_id or uuid.uuid4()
    return event_record(
        merchant_id=merchant.pk,
        event_type=event_type,
        data_type=event_type.split(".")[0],
        data_id=data_id,
        data_object={"id": str(data_id), "status": event_type.rsplit(".", 1)[1]},
        at=at or timezone.now(),
    )


def deliver_all(now=None):
    while deliveries_send_due(now=now or timezone.now()).attempted:
        pass


@pytest.fixture
def hook(merchant, receiver, webhook_settings):
    endpoint, _ = endpoint_set(merchant=merchant, url=receiver.url, now=timezone.now())
    return endpoint


def test_events_are_listed_newest_first_as_the_envelope_sent(api, hook, receiver):
    first = record(api.merchant, "payin.completed")
    second = record(api.merchant, "payout.failed")
    deliver_all()

    body = api.get("/events").json()

    assert [e["id"] for e in body["data"]] == [str(second.id), str(first.id)]
    sent = {json.loads(r.body)["id"]: json.loads(r.body) for r in receiver.requests}
    for item in body["data"]:
        envelope = {k: v for k, v in item.items() if k != "delivery_status"}
        assert envelope == sent[item["id"]]
        assert item["delivery_status"] == "succeeded"
    assert body["has_more"] is False


def test_event_detail_is_the_list_item_and_other_merchants_get_404(api, other_api):
    event = record(api.merchant)

    mine = api.get(f"/events/{event.id}")
    theirs = other_api.get(f"/events/{event.id}")

    assert mine.status_code == 200
    assert mine.json() == {**event.payload, "delivery_status": "none"}
    assert theirs.status_code == 404 and theirs.json()["error"]["reason"] == "event_not_found"
    assert api.get(f"/events/{uuid.uuid4()}").status_code == 404
    assert other_api.get("/events").json()["data"] == []


def test_event_filters(api, hook, receiver, webhook_settings):
    target = uuid.uuid4()
    old = record(api.merchant, "payin.completed", at=timezone.now() - timedelta(days=2))
    ok = record(api.merchant, "payin.completed", data_id=target)
    deliver_all()
    webhook_settings.WEBHOOK_RETRY_SCHEDULE = []  # one attempt: a failure is final
    receiver.default = 500
    failed = record(api.merchant, "payout.failed")
    deliver_all()
    receiver.default = 200
    hook.refresh_from_db()
    pending = record(api.merchant, "transfer.completed")

    def ids(**params):
        response = api.get("/events", **params)
        assert response.status_code == 200, response.json()
        return [e["id"] for e in response.json()["data"]]

    assert ids(type="payout.failed") == [str(failed.id)]
    assert ids(data_id=str(target)) == [str(ok.id)]
    assert ids(delivery_status="failed") == [str(failed.id)]
    assert ids(delivery_status="pending") == [str(pending.id)]
    assert ids(delivery_status="succeeded") == [str(ok.id), str(old.id)]
    assert ids(created_lt=(timezone.now() - timedelta(days=1)).isoformat()) == [str(old.id)]
    assert str(old.id) not in ids(created_gte=(timezone.now() - timedelta(days=1)).isoformat())


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"delivery_status": "lost"}, "delivery_status"),
        ({"type": "payin"}, "type"),  # the resource's type, not an event name
        ({"data_id": "12"}, "data_id"),
        ({"limit": "500"}, "limit"),
        ({"cursor": "nope"}, "cursor"),
    ],
)
def test_invalid_event_filters_are_400_naming_the_parameter(api, params, field):
    response = api.get("/events", **params)

    assert response.status_code == 400
    assert field in response.json()["error"]["fields"]


def test_a_payin_event_is_listed_for_its_resource(
    enabled_api, enabled_merchant, django_capture_on_commit_callbacks
):
    customer = create_customer(enabled_api)
    payin = create_payin(
        enabled_api, customer, phone=SN_PHONE, settle=django_capture_on_commit_callbacks
    )

    events = enabled_api.get("/events", data_id=payin["id"]).json()["data"]

    assert [e["event"] for e in events] == ["payin.completed"]
    assert events[0]["data"]["type"] == "payin" and events[0]["data"]["id"] == payin["id"]
    assert events[0]["delivery_status"] == "none"


def test_resend_delivers_the_same_event_again(api, hook, receiver):
    event = record(api.merchant)
    deliver_all()

    response = api.post(f"/events/{event.id}/resend")
    deliver_all()

    assert response.status_code == 202
    assert response.json()["id"] == str(event.id)
    assert response.json()["delivery_status"] == "pending"
    assert response.json()["_meta"]["idempotency_replayed"] is False
    assert [r.body for r in receiver.requests] == [event.body.encode()] * 2
    assert {r.headers["X-Cowry-Webhook-Id"] for r in receiver.requests} == {str(event.id)}
    assert api.get(f"/events/{event.id}").json()["delivery_status"] == "succeeded"


def test_resend_replayed_with_the_same_key_makes_one_delivery(api, hook):
    event = record(api.merchant)
    deliver_all()  # delivered: a re-send makes a new delivery

    first = api.post(f"/events/{event.id}/resend", idempotency_key="resend-1")
    again = api.post(f"/events/{event.id}/resend", idempotency_key="resend-1")

    assert first.status_code == again.status_code == 202
    assert again.json()["_meta"]["idempotency_replayed"] is True
    assert Delivery.objects.filter(event=event).count() == 2  # the original and one re-send


@pytest.mark.parametrize("body", [{"foo": 1}, [1, 2]])
def test_resend_takes_no_body_fields_and_sends_nothing_for_one(api, hook, body):
    event = record(api.merchant)
    deliver_all()

    response = api.post(f"/events/{event.id}/resend", body)

    assert response.status_code == 400, response.json()
    assert response.json()["error"]["reason"] == "invalid_request"
    assert Delivery.objects.filter(event=event).count() == 1
    assert api.post(f"/events/{event.id}/resend", {}).status_code == 202


def test_resend_without_an_endpoint_is_409_and_creates_nothing(api):
    event = record(api.merchant)

    response = api.post(f"/events/{event.id}/resend")

    assert response.status_code == 409
    assert response.json()["error"]["reason"] == "no_webhook_endpoint"
    assert not Delivery.objects.exists()


def test_resend_of_another_merchants_event_is_404(api, other_api, hook):
    event = record(api.merchant)

    response = other_api.post(f"/events/{event.id}/resend")

    assert response.status_code == 404
    assert Delivery.objects.filter(event=event).count() == 1


def test_resend_needs_an_idempotency_key(api, hook):
    event = record(api.merchant)

    response = api.post(f"/events/{event.id}/resend", idempotency_key=None)

    assert response.status_code == 400
    assert response.json()["error"]["reason"] == "idempotency_key_missing"


def test_resend_failed_resends_each_failed_delivery_since_once(
    api,
    hook,
    receiver,
    webhook_settings,
):
    webhook_settings.WEBHOOK_RETRY_SCHEDULE = []
    receiver.default = 500
    before = record(api.merchant, at=timezone.now() - timedelta(days=3))
    deliver_all(now=timezone.now() - timedelta(days=3))
    since = timezone.now() - timedelta(hours=1)
    failed = [record(api.merchant), record(api.merchant, "payout.failed")]
    deliver_all()
    delivered = record(api.merchant)
    receiver.default = 200
    deliver_all()
    requests_before = len(receiver.requests)

    response = api.post("/events/resend-failed", {"since": since.isoformat()})
    deliver_all()
    again = api.post("/events/resend-failed", {"since": since.isoformat()})

    assert response.status_code == 202 and response.json()["resent"] == 2
    assert again.json()["resent"] == 0
    resent_ids = {json.loads(r.body)["id"] for r in receiver.requests[requests_before:]}
    assert resent_ids == {str(e.id) for e in failed}
    assert Delivery.objects.filter(event=before).count() == 1
    assert Delivery.objects.filter(event=delivered).count() == 1
    for event in failed:
        assert api.get(f"/events/{event.id}").json()["delivery_status"] == "succeeded"


def test_resend_failed_needs_a_valid_since(api):
    for body in ({}, {"since": "last week"}):
        response = api.post("/events/resend-failed", body)
        assert response.status_code == 400
        assert "since" in response.json()["error"]["fields"]


def test_resend_failed_touches_only_the_merchants_own(
    api, other_api, hook, receiver, webhook_settings
):
    webhook_settings.WEBHOOK_RETRY_SCHEDULE = []
    receiver.default = 500
    record(api.merchant)
    deliver_all()

    response = other_api.post(
        "/events/resend-failed", {"since": (timezone.now() - timedelta(days=1)).isoformat()}
    )

    assert response.json()["resent"] == 0
    assert Delivery.objects.filter(status=DeliveryStatus.FAILED).count() == 1
    assert Delivery.objects.count() == 1


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", "/events"),
        ("get", f"/events/{uuid.uuid4()}"),
        ("post", f"/events/{uuid.uuid4()}/resend"),
        ("post", "/events/resend-failed"),
    ],
)
def test_events_need_credentials(db, method, path):
    response = getattr(APIClient(), method)(path, {}, format="json")

    assert response.status_code == 401


def test_an_events_page_costs_a_fixed_number_of_queries(api, hook, django_assert_max_num_queries):
    for _ in range(8):
        record(api.merchant)
    first = api.get("/events", limit=3).json()

    with django_assert_max_num_queries(5):
        response = api.get("/events", limit=3, cursor=first["next_cursor"])

    assert len(response.json()["data"]) == 3
