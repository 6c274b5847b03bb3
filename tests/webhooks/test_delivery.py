import gzip
import hashlib
import hmac
import json
import threading
import time
import tracemalloc
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from tests.webhooks.conftest import record_event, signing_secret
from webhooks import tasks
from webhooks.models import Delivery, DeliveryAttempt, DeliveryStatus, Event
from webhooks.services.delivery import (
    delivery_attempt,
    delivery_claim,
    delivery_record,
    lease_seconds,
)
from webhooks.services.endpoints import endpoint_add, endpoint_set, endpoint_update
from webhooks.services.events import due_now
from webhooks.services.resend import event_resend
from webhooks.services.sending import RESPONSE_PREFIX_BYTES, Outcome
from webhooks.services.sweeps import deliveries_dispatch_due, deliveries_send_due
from webhooks.verify import verify_signature

pytestmark = pytest.mark.django_db

PAYIN = {
    "id": None,
    "status": "completed",
    "send_amount": "1500",
    "send_currency": "XAF",
    "receive_amount": "1455",
    "receive_currency": "XAF",
    "country_code": "CM",
    "operator_code": "CM_MTN_MOMO",
    "rail_type": "mobile_money",
    "wallet_impact": {"credit_amount": "1455", "currency": "XAF"},
    "completed_at": "2026-01-02T03:04:05Z",
}
PAYOUT = {
    "id": None,
    "status": "completed",
    "send_amount": "1000",
    "send_currency": "XOF",
    "receive_amount": "1000",
    "receive_currency": "XOF",
    "operator_code": "SN_WAVE_MOMO",
    "wallet_impact": {"debit_amount": "1020", "currency": "XOF"},
    "completed_at": "2026-01-02T03:04:05Z",
}
TRANSFER = {
    "id": None,
    "status": "completed",
    "payin_status": "completed",
    "payout_status": "completed",
    "send_amount": "5000",
    "send_currency": "XAF",
    "receive_amount": "4900",
    "receive_currency": "XOF",
    "payin_amount": "5000",
    "payin_currency": "XAF",
    "payout_amount": "4900",
    "payout_currency": "XOF",
    "corridor_code": "CM-SN-XAF-XOF",
    "payer_operator_code": "CM_MTN_MOMO",
    "recipient_operator_code": "SN_WAVE_MOMO",
    "collection_reference": "sim-col-1",
    "disbursement_reference": "sim-dis-1",
    "collection_completed_at": "2026-01-02T03:04:05Z",
    "disbursement_completed_at": "2026-01-02T03:05:05Z",
}
EVENT_TYPES = [
    ("payin.completed", "payin", PAYIN),
    ("payin.failed", "payin", PAYIN),
    ("payout.completed", "payout", PAYOUT),
    ("payout.failed", "payout", PAYOUT),
    ("transfer.payin.completed", "transfer", TRANSFER),
    ("transfer.payin.failed", "transfer", TRANSFER),
    ("transfer.payout.completed", "transfer", TRANSFER),
    ("transfer.payout.failed", "transfer", TRANSFER),
    ("transfer.completed", "transfer", TRANSFER),
    ("transfer.failed", "transfer", TRANSFER),
]


def record(merchant, event_type="payin.completed", data_type="payin", snapshot=PAYIN, at=None):
    return record_event(merchant, event_type, data_type, snapshot, at)


def independent_signature(secret: str, timestamp: str, body: bytes) -> str:
    digest = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return "sha256=" + digest.hexdigest()


def assert_valid_request(received, *, secret, event, now=None):
    headers = received.headers
    assert headers["Content-Type"] == "application/json"
    assert sorted(name for name in headers if name.lower().startswith("x-cowry")) == [
        "X-Cowry-Event",
        "X-Cowry-Signature",
        "X-Cowry-Timestamp",
        "X-Cowry-Webhook-Id",
    ]
    assert "Cowry" in headers["User-Agent"]
    assert headers["X-Cowry-Event"] == event.event_type
    assert headers["X-Cowry-Webhook-Id"] == str(event.id)
    assert headers["X-Cowry-Timestamp"].isdigit()
    assert headers["X-Cowry-Signature"] == independent_signature(
        secret, headers["X-Cowry-Timestamp"], received.body
    )
    assert verify_signature(payload=received.body, headers=headers, secret=secret, now=now)


@pytest.mark.parametrize(("event_type", "data_type", "snapshot"), EVENT_TYPES)
def test_every_event_type_is_delivered_signed_with_its_snapshot(
    merchant,
    endpoint,
    receiver,
    django_capture_on_commit_callbacks,
    event_type,
    data_type,
    snapshot,
):
    with django_capture_on_commit_callbacks(execute=True):
        event = record(merchant, event_type, data_type, snapshot)

    assert len(receiver.requests) == 1
    received = receiver.requests[0]
    assert received.path == "/hook"
    assert_valid_request(received, secret=signing_secret(endpoint), event=event)
    body = json.loads(received.body)
    assert body == {
        "id": str(event.id),
        "event": event_type,
        "created_at": body["created_at"],
        "data": {
            "type": data_type,
            "id": str(event.data_id),
            "object": {**snapshot, "id": str(event.data_id)},
        },
    }
    assert body["id"] == received.headers["X-Cowry-Webhook-Id"]
    delivery = Delivery.objects.get(event=event)
    assert delivery.status == DeliveryStatus.SUCCEEDED
    assert delivery.attempts == 1
    attempt = delivery.attempt_log.get()
    assert attempt.response_status == 200
    assert attempt.duration_ms is not None
    assert attempt.error == ""
    assert attempt.response_body.startswith("answer 200 ")
    assert len(attempt.response_body) == 1024


def test_receiver_failing_twice_gets_the_same_event_three_times_freshly_signed(
    merchant, endpoint, receiver, django_capture_on_commit_callbacks
):
    receiver.plan = [500, 500, 200]
    start = timezone.now()
    with django_capture_on_commit_callbacks(execute=True):
        event = record(merchant, at=start)
    delivery = Delivery.objects.get(event=event)
    assert delivery.status == DeliveryStatus.PENDING
    assert delivery.last_error == "HTTP 500"

    second = delivery.next_attempt_at + timedelta(seconds=1)
    assert deliveries_send_due(now=second - timedelta(seconds=2)).attempted == 0  # not due yet
    assert deliveries_send_due(now=second).attempted == 1
    delivery.refresh_from_db()
    third = delivery.next_attempt_at + timedelta(seconds=1)
    assert deliveries_send_due(now=third).attempted == 1

    delivery.refresh_from_db()
    assert delivery.status == DeliveryStatus.SUCCEEDED
    assert delivery.attempts == 3
    assert [a.response_status for a in delivery.attempt_log.all()] == [500, 500, 200]
    assert len(receiver.requests) == 3
    assert {r.headers["X-Cowry-Webhook-Id"] for r in receiver.requests} == {str(event.id)}
    assert len({r.body for r in receiver.requests}) == 1
    timestamps = [int(r.headers["X-Cowry-Timestamp"]) for r in receiver.requests]
    assert timestamps == sorted(timestamps)
    assert len(set(timestamps)) == 3
    assert len({r.headers["X-Cowry-Signature"] for r in receiver.requests}) == 3
    for received, at in zip(receiver.requests, [start, second, third], strict=True):
        assert_valid_request(
            received, secret=signing_secret(endpoint), event=event, now=int(at.timestamp())
        )


def test_seven_failures_follow_the_schedule_then_mark_the_delivery_failed(
    merchant, endpoint, receiver, django_capture_on_commit_callbacks, settings
):
    receiver.default = 503
    with django_capture_on_commit_callbacks(execute=True):
        event = record(merchant)
    delivery = Delivery.objects.get(event=event)
    for number, delay in enumerate(settings.WEBHOOK_RETRY_SCHEDULE, start=1):
        attempt = delivery.attempt_log.get(number=number)
        assert delivery.status == DeliveryStatus.PENDING
        assert delivery.next_attempt_at == attempt.finished_at + timedelta(seconds=delay)
        assert deliveries_send_due(now=delivery.next_attempt_at).attempted == 1
        delivery.refresh_from_db()

    assert delivery.status == DeliveryStatus.FAILED
    assert delivery.attempts == 7
    assert delivery.next_attempt_at is None
    assert delivery.last_error == "HTTP 503"
    assert len(receiver.requests) == 7
    later = timezone.now() + timedelta(days=30)
    assert deliveries_send_due(now=later).attempted == 0
    assert deliveries_dispatch_due(now=later) == 0
    assert len(receiver.requests) == 7
    assert DeliveryAttempt.objects.filter(delivery=delivery).count() == 7


def test_a_timeout_is_a_failed_attempt(
    merchant, endpoint, receiver, django_capture_on_commit_callbacks, settings
):
    settings.WEBHOOK_TIMEOUT_SECONDS = 0.3
    receiver.plan = [("sleep", 1.5)]
    with django_capture_on_commit_callbacks(execute=True):
        event = record(merchant)

    delivery = Delivery.objects.get(event=event)
    assert delivery.status == DeliveryStatus.PENDING
    assert delivery.attempts == 1
    attempt = delivery.attempt_log.get()
    assert attempt.response_status is None
    assert attempt.error.startswith("Timed out")
    assert delivery.last_error == attempt.error
    assert delivery.next_attempt_at == attempt.finished_at + timedelta(seconds=60)


def test_a_receiver_dripping_its_answer_times_out_at_the_timeout_not_per_read(
    merchant, endpoint, receiver, django_capture_on_commit_callbacks, settings
):
    # Each header line comes well within the timeout; the whole answer would take 6 s.
    settings.WEBHOOK_TIMEOUT_SECONDS = 0.5
    receiver.plan = [("drip", 0.2, 30)]
    with django_capture_on_commit_callbacks(execute=True):
        event = record(merchant)

    attempt = DeliveryAttempt.objects.get(delivery__event=event)
    assert attempt.response_status is None
    assert attempt.error.startswith("Timed out")
    assert attempt.duration_ms < 3000  # gave up long before the receiver's 6 s were over
    assert Delivery.objects.get(event=event).status == DeliveryStatus.PENDING


def test_the_answer_of_a_receiver_that_closes_its_connection_is_read_whole(
    merchant, endpoint, receiver, django_capture_on_commit_callbacks
):
    # http.client closes a `Connection: close` response's connection before its body is read;
    # the body must still come through the deadline's reader.
    receiver.plan = [("closing", 200, b"received, thanks")]
    with django_capture_on_commit_callbacks(execute=True):
        event = record(merchant)

    attempt = DeliveryAttempt.objects.get(delivery__event=event)
    assert (attempt.response_status, attempt.response_body) == (200, "received, thanks")
    assert attempt.error == ""


def test_deliveries_reuse_a_kept_alive_connection_but_never_one_read_in_part(
    merchant, endpoint, receiver, django_capture_on_commit_callbacks
):
    # Two short answers read to the end, then one longer than what a delivery keeps: its rest
    # is never read, so the next delivery must come over a new connection and get its own body.
    receiver.plan = [("short", 200), ("short", 200), 200, ("short", 200)]
    events = []
    for _ in range(4):
        with django_capture_on_commit_callbacks(execute=True):
            events.append(record(merchant))

    ports = [request.client_port for request in receiver.requests]
    assert len(ports) == 4
    assert ports[0] == ports[1] == ports[2]
    assert ports[3] != ports[2]
    attempts = [DeliveryAttempt.objects.get(delivery__event=event) for event in events]
    assert [a.response_status for a in attempts] == [200, 200, 200, 200]
    assert [a.response_body for a in attempts] == [
        "short 200",
        "short 200",
        "answer 200 " + "x" * (RESPONSE_PREFIX_BYTES - len("answer 200 ")),
        "short 200",
    ]


def test_a_redirect_is_not_followed_and_counts_as_a_failure(
    merchant, endpoint, receiver, django_capture_on_commit_callbacks
):
    receiver.plan = [("redirect", "/elsewhere")]
    with django_capture_on_commit_callbacks(execute=True):
        event = record(merchant)

    assert [r.path for r in receiver.requests] == ["/hook"]
    delivery = Delivery.objects.get(event=event)
    assert delivery.status == DeliveryStatus.PENDING
    attempt = delivery.attempt_log.get()
    assert attempt.response_status == 302
    assert "redirect" in attempt.error
    assert "/elsewhere" in attempt.error


@pytest.mark.parametrize("status", [200, 202, 204, 299])
def test_any_2xx_acknowledges(merchant, endpoint, receiver, status):
    receiver.plan = [("body", status, b"")]
    event = record(merchant)

    assert deliveries_send_due().attempted == 1
    delivery = event.deliveries.get()
    assert (delivery.status, delivery.attempts, delivery.last_error) == ("succeeded", 1, "")
    assert delivery.attempt_log.get().response_status == status


@pytest.mark.parametrize("status", [101, 300, 304, 307, 308, 399, 400, 404, 499, 500, 503, 599])
def test_any_other_answer_is_a_failed_attempt_retried_after_a_minute(
    merchant, endpoint, receiver, status, settings
):
    receiver.plan = [("body", status, b""), ("body", 200, b"")]
    event = record(merchant)

    assert deliveries_send_due().attempted == 1
    delivery = event.deliveries.get()
    attempt = delivery.attempt_log.get()
    assert (delivery.status, attempt.response_status) == ("pending", status)
    assert delivery.last_error == attempt.error
    assert attempt.error.startswith(f"HTTP {status}")
    assert delivery.next_attempt_at == attempt.finished_at + timedelta(seconds=60)
    assert [r.path for r in receiver.requests] == ["/hook"]  # a 3xx is never followed


@pytest.mark.parametrize("interim", [[100], [102], [103], [102, 103, 103]])
def test_interim_answers_are_skipped_and_the_final_answer_counts(
    merchant, endpoint, receiver, interim
):
    """http.client reads past a 100 only: a 102 or 103 was taken for the answer, so a receiver
    that acknowledged after it was retried, and its 200, left on the kept-alive connection,
    was read by the next delivery sent on it as its own: an event the receiver refused (500)
    was recorded as acknowledged and never sent again."""
    receiver.plan = [("interim", interim, 0.3, 200), ("body", 500, b"refused")]
    acknowledged, refused = record(merchant), record(merchant)

    assert deliveries_send_due().attempted == 2

    first = acknowledged.deliveries.get()
    assert (first.status, first.attempt_log.get().response_status) == ("succeeded", 200)
    second = refused.deliveries.get()
    assert (second.status, second.attempts) == ("pending", 1)
    assert (second.attempt_log.get().response_status, second.last_error) == (500, "HTTP 500")
    assert second.attempt_log.get().response_body == "refused"
    assert len(receiver.requests) == 2


def test_a_101_is_a_failed_attempt_and_its_connection_is_not_used_again(
    merchant, endpoint, receiver
):
    """A 101 (an upgrade we never ask for) is a final answer, not a 2xx; what follows it on
    that connection is not HTTP meant for us, never read as the next delivery's answer."""
    receiver.plan = [("interim", [101], 0.3, 200), ("body", 500, b"refused")]
    upgraded, refused = record(merchant), record(merchant)

    assert deliveries_send_due().attempted == 2

    first = upgraded.deliveries.get()
    assert (first.status, first.last_error) == ("pending", "HTTP 101")
    second = refused.deliveries.get()
    assert (second.status, second.attempt_log.get().response_status) == ("pending", 500)
    ports = [r.client_port for r in receiver.requests]
    assert len(ports) == 2 and ports[0] != ports[1]


def test_a_receiver_answering_only_interim_answers_times_out(
    merchant, endpoint, receiver, settings
):
    settings.WEBHOOK_TIMEOUT_SECONDS = 0.5
    receiver.plan = [("interim", [103] * 3, 2.0, None)]
    event = record(merchant)

    assert deliveries_send_due().attempted == 1
    delivery = event.deliveries.get()
    assert (delivery.status, delivery.last_error) == ("pending", "Timed out after 0.5 s")
    assert delivery.attempt_log.get().response_status is None


def test_a_redirects_location_is_recorded_cut_short(
    merchant, endpoint, receiver, django_capture_on_commit_callbacks
):
    """The Location is the receiver's text like its body: a header line of 60 KB was kept
    whole in the attempt's error and the delivery's last error, at every attempt."""
    receiver.plan = [("redirect", "/elsewhere?" + "a" * 60_000)]
    with django_capture_on_commit_callbacks(execute=True):
        event = record(merchant)

    delivery = Delivery.objects.get(event=event)
    attempt = delivery.attempt_log.get()
    assert attempt.error.startswith("HTTP 302: redirect to '/elsewhere?aaa")
    assert len(attempt.error) <= 1000
    assert delivery.last_error == attempt.error


def _endless(block: bytes):
    while True:
        yield block


def test_a_long_or_compressed_answer_is_read_to_its_first_kib_only(
    merchant, endpoint, receiver, django_capture_on_commit_callbacks
):
    """A 64 MiB answer, then one of 64 MiB once decoded (gzip, 64 KiB sent): the attempt keeps
    the first KiB of the decoded text and hangs up on the rest."""
    member = gzip.compress(b"z" * (4 << 20))
    receiver.plan = [
        ("raw", 200, [("Content-Type", "text/plain")], b"y" * (64 << 20)),
        ("raw", 200, [("Content-Encoding", "gzip")], member * 16),
    ]
    tracemalloc.start()
    try:
        with django_capture_on_commit_callbacks(execute=True):
            events = [record(merchant), record(merchant)]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    attempts = [DeliveryAttempt.objects.get(delivery__event=event) for event in events]
    assert [(a.response_status, a.error) for a in attempts] == [(200, ""), (200, "")]
    assert [a.response_body for a in attempts] == ["y" * 1024, "z" * 1024]
    assert peak < 8 << 20  # neither answer was read whole
    for _ in range(100):  # the receiver notices within a write or two
        if receiver.endings[:1] == ["hung up"]:
            break
        time.sleep(0.1)
    assert receiver.endings[0] == "hung up"


def test_an_answer_whose_body_drips_times_out_at_the_timeout(
    merchant, endpoint, receiver, django_capture_on_commit_callbacks, settings
):
    # The headers come at once, then a byte of the body every 0.1 s: 3 s for the first KiB.
    settings.WEBHOOK_TIMEOUT_SECONDS = 0.5
    receiver.plan = [("drip-body", 0.1, b"d" * 30)]
    with django_capture_on_commit_callbacks(execute=True):
        event = record(merchant)

    attempt = DeliveryAttempt.objects.get(delivery__event=event)
    assert attempt.duration_ms < 2000
    assert attempt.response_status == 200
    assert attempt.response_body == ""  # the body did not come in time: none is kept


def test_an_event_recorded_while_the_broker_is_down_is_delivered_by_the_sweep(
    merchant, endpoint, receiver, django_capture_on_commit_callbacks, broker_down, caplog
):
    # The on-commit callback publishes the task to a stopped Redis: the message is lost.
    with broker_down(), django_capture_on_commit_callbacks(execute=True) as callbacks:
        event = record(merchant)
    assert len(callbacks) == 1
    assert receiver.requests == []
    delivery = Delivery.objects.get(event=event)
    assert delivery.status == DeliveryStatus.PENDING
    assert f"Broker unavailable; delivery {delivery.pk} left to the sweep" in caplog.text

    # The broker is back; the next beat sweeps after the hand-off is stale.
    later = timezone.now() + timedelta(seconds=lease_seconds() + 1)
    with django_capture_on_commit_callbacks(execute=True):
        assert deliveries_dispatch_due(now=later) == 1

    assert len(receiver.requests) == 1
    assert_valid_request(receiver.requests[0], secret=signing_secret(endpoint), event=event)
    assert Delivery.objects.get(event=event).status == DeliveryStatus.SUCCEEDED


def test_the_sweep_hands_a_due_delivery_to_the_broker_once_per_due_time(
    merchant, endpoint, receiver, django_capture_on_commit_callbacks, settings
):
    settings.WEBHOOK_RETRY_SCHEDULE = [3600] * 6  # retries too far off for a broker's ETA
    receiver.default = 500
    with django_capture_on_commit_callbacks(execute=True):
        event = record(merchant)
    delivery = Delivery.objects.get(event=event)
    assert deliveries_dispatch_due(now=delivery.next_attempt_at - timedelta(seconds=1)) == 0
    # The retry falls due (moved into the past instead of waiting a minute).
    due = timezone.now()
    Delivery.objects.filter(pk=delivery.pk).update(next_attempt_at=due)

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        assert deliveries_dispatch_due(now=due) == 1
        assert deliveries_dispatch_due(now=due + timedelta(seconds=30)) == 0
    assert len(callbacks) == 1
    assert len(receiver.requests) == 1  # the task message itself is what sends

    callbacks[0]()  # the worker picks the message up
    assert len(receiver.requests) == 2


def test_the_beat_task_runs_the_sweep(
    merchant, endpoint, receiver, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False):
        event = record(merchant, at=timezone.now() - timedelta(hours=1))
    with django_capture_on_commit_callbacks(execute=True):
        tasks.deliver_due_webhooks.delay()
    assert [r.headers["X-Cowry-Webhook-Id"] for r in receiver.requests] == [str(event.id)]


def test_a_crashed_workers_attempt_is_taken_over_after_its_lease(
    merchant, endpoint, receiver, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False):
        event = record(merchant)
    now = timezone.now()
    assert delivery_claim(delivery_id=event.deliveries.get().id, now=now) is not None
    # ... and the worker dies before sending. Nobody else may send within the lease:
    assert deliveries_send_due(now=now + timedelta(seconds=10)).attempted == 0

    later = now + timedelta(seconds=lease_seconds() + 1)
    assert deliveries_send_due(now=later).attempted == 1

    delivery = event.deliveries.get()
    assert delivery.status == DeliveryStatus.SUCCEEDED
    first, second = delivery.attempt_log.all()
    assert first.response_status is None
    assert "No result recorded" in first.error
    assert second.response_status == 200
    assert len(receiver.requests) == 1


def test_a_private_address_is_refused_when_private_urls_are_not_allowed(
    merchant, endpoint, receiver, django_capture_on_commit_callbacks, settings
):
    settings.ALLOW_PRIVATE_NETWORK_URLS = False
    with django_capture_on_commit_callbacks(execute=True):
        event = record(merchant)

    assert receiver.requests == []
    delivery = Delivery.objects.get(event=event)
    assert delivery.status == DeliveryStatus.PENDING
    attempt = delivery.attempt_log.get()
    assert attempt.response_status is None
    assert attempt.error.startswith("Blocked")


def test_a_refused_connection_is_recorded_as_such_not_as_a_timeout(
    merchant, endpoint, django_capture_on_commit_callbacks
):
    import socket

    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    endpoint_update(
        endpoint_id=endpoint.pk,
        url=f"http://127.0.0.1:{closed_port}/hook",
        enabled=True,
        event_types=[],
        now=timezone.now(),
    )
    with django_capture_on_commit_callbacks(execute=True):
        event = record(merchant)

    attempt = Delivery.objects.get(event=event).attempt_log.get()
    assert attempt.response_status is None
    assert attempt.error.startswith("Could not connect"), attempt.error


def test_events_are_kept_without_an_endpoint_and_nothing_is_sent(
    merchant, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        event = record(merchant)
    assert Event.objects.filter(pk=event.pk).exists()
    assert not Delivery.objects.exists()
    assert callbacks == []


def test_an_event_and_its_deliveries_are_two_statements_with_the_values_of_a_new_delivery(
    merchant, endpoint, django_assert_num_queries, django_capture_on_commit_callbacks
):
    other, _ = endpoint_add(
        merchant=merchant,
        url=endpoint.url + "/payouts",
        event_types=["payout.failed"],
        now=timezone.now(),
    )
    at = timezone.now()

    with django_capture_on_commit_callbacks() as callbacks, django_assert_num_queries(2):
        event = record(merchant, at=at)  # payin.completed: not for the payouts-only endpoint

    (delivery,) = Delivery.objects.filter(event=event)
    expected = Delivery(event=event, endpoint=endpoint, **due_now(at))
    fields = [f.attname for f in Delivery._meta.concrete_fields if f.attname != "id"]
    assert {f: getattr(delivery, f) for f in fields} == {f: getattr(expected, f) for f in fields}
    assert delivery.id is not None and delivery.id != other.id
    assert len(callbacks) == 1  # its task is enqueued after commit
    assert Event.objects.get(pk=event.pk).body == event.body and not event._state.adding


def test_a_disabled_endpoint_gets_no_delivery(
    merchant, endpoint, receiver, django_capture_on_commit_callbacks
):
    endpoint_update(endpoint_id=endpoint.pk, url=endpoint.url, enabled=False, now=timezone.now())
    with django_capture_on_commit_callbacks(execute=True):
        record(merchant)
    assert not Delivery.objects.exists()
    assert receiver.requests == []


def test_an_event_rolled_back_with_its_state_change_is_never_sent(
    merchant, endpoint, receiver, django_capture_on_commit_callbacks
):
    from django.db import transaction

    def change_state_and_fail():
        with transaction.atomic():
            record(merchant)
            raise RuntimeError("the state change failed")

    with django_capture_on_commit_callbacks(execute=True), pytest.raises(RuntimeError):
        change_state_and_fail()
    assert not Event.objects.exists()
    assert not Delivery.objects.exists()
    assert receiver.requests == []


def test_the_body_is_the_stored_bytes_on_every_attempt(
    merchant, endpoint, receiver, django_capture_on_commit_callbacks
):
    receiver.plan = [500, 200]
    snapshot = {**PAYIN, "note": "Café ünïcode", "nested": {"b": 1, "a": [1, 2]}}
    with django_capture_on_commit_callbacks(execute=True):
        event = record(merchant, snapshot=snapshot)
    delivery = event.deliveries.get()
    deliveries_send_due(now=delivery.next_attempt_at)
    first, second = receiver.requests
    assert first.body == second.body == Event.objects.get(pk=event.pk).body.encode("utf-8")
    assert json.loads(first.body)["data"]["object"]["note"] == "Café ünïcode"


def test_a_body_with_non_ascii_data_is_signed_over_its_utf8_bytes_the_same_on_every_attempt(
    merchant, endpoint, receiver
):
    """The signature over the raw body: "Aïssatou" and an emoji travel as UTF-8 (not \\u escapes),
    the same bytes on the first attempt, its retry and a re-send, each with its own timestamp
    and signature; the receiver helper accepts each as sent and nothing tampered with."""
    receiver.plan = [500, 200, 200]
    snapshot = {**PAYIN, "customer": {"name": "Aïssatou Ndiaye 🎉", "city": "Thiès"}}
    start = timezone.now().replace(microsecond=0)
    event = record(merchant, snapshot=snapshot, at=start)
    stored = Event.objects.get(pk=event.pk).body.encode("utf-8")
    assert "Aïssatou Ndiaye 🎉".encode() in stored and b"\\u" not in stored

    assert deliveries_send_due(now=start).attempted == 1  # 500
    retry = event.deliveries.get().next_attempt_at
    assert deliveries_send_due(now=retry).attempted == 1  # 200
    resent_at = retry + timedelta(minutes=3)
    event_resend(event_id=event.pk, now=resent_at)
    assert deliveries_send_due(now=resent_at).attempted == 1  # 200

    secret = signing_secret(endpoint)
    assert [r.body for r in receiver.requests] == [stored] * 3
    timestamps = [r.headers["X-Cowry-Timestamp"] for r in receiver.requests]
    assert timestamps == [str(int(at.timestamp())) for at in (start, retry, resent_at)]
    assert len({r.headers["X-Cowry-Signature"] for r in receiver.requests}) == 3
    for received, timestamp in zip(receiver.requests, timestamps, strict=True):
        assert received.headers["Content-Length"] == str(len(stored))
        assert_valid_request(received, secret=secret, event=event, now=int(timestamp))
        assert json.loads(received.body)["data"]["object"]["customer"]["name"] == (
            "Aïssatou Ndiaye 🎉"
        )
        headers, now = received.headers, int(timestamp)
        tampered = received.body.replace("Aïssatou".encode(), b"Aissatou")
        assert not verify_signature(payload=tampered, headers=headers, secret=secret, now=now)
        latin1 = received.body.decode("utf-8").encode("latin-1", errors="replace")
        assert not verify_signature(payload=latin1, headers=headers, secret=secret, now=now)
        moved = {**headers, "X-Cowry-Timestamp": str(now + 1)}
        assert not verify_signature(payload=received.body, headers=moved, secret=secret, now=now)
        for late in (now + 300, now - 300):  # the helper's tolerance, either way
            assert verify_signature(payload=received.body, headers=headers, secret=secret, now=late)
        for late in (now + 301, now - 301):
            assert not verify_signature(
                payload=received.body, headers=headers, secret=secret, now=late
            )


def test_each_retry_is_due_exactly_at_its_delay_and_the_seventh_failure_is_the_last(
    merchant, endpoint, receiver
):
    """docs/webhooks.md: 1 min, 5 min, 15 min, 1 h, 4 h, 12 h after failed attempts 1 to 6, not a
    microsecond sooner; the seventh failed attempt marks the delivery failed."""
    receiver.default = 500
    event = record(merchant)
    assert deliveries_send_due(now=event.created_at).attempted == 1
    delivery = event.deliveries.get()
    for failed, delay in enumerate([60, 300, 900, 3600, 14400, 43200], start=1):
        attempt = delivery.attempt_log.get(number=failed)
        due = attempt.finished_at + timedelta(seconds=delay)
        assert (delivery.status, delivery.attempts, delivery.next_attempt_at) == (
            "pending",
            failed,
            due,
        )
        assert deliveries_send_due(now=due - timedelta(microseconds=1)).attempted == 0
        assert deliveries_dispatch_due(now=due - timedelta(microseconds=1)) == 0
        assert deliveries_send_due(now=due).attempted == 1
        delivery.refresh_from_db()

    assert (delivery.status, delivery.attempts, delivery.next_attempt_at) == ("failed", 7, None)
    assert deliveries_send_due(now=timezone.now() + timedelta(days=365)).attempted == 0
    assert len(receiver.requests) == 7


@pytest.mark.django_db(transaction=True)
def test_two_workers_never_send_the_same_attempt(merchant, receiver, webhook_settings):
    endpoint_set(merchant=merchant, url=receiver.url, now=timezone.now())
    receiver.plan = [("sleep", 0.3)]
    event = record(merchant)  # autocommit: the on-commit task ran at once
    assert len(receiver.requests) == 1
    delivery = event.deliveries.get()
    Delivery.objects.filter(pk=delivery.pk).update(
        status=DeliveryStatus.PENDING, next_attempt_at=timezone.now()
    )
    receiver.requests.clear()
    receiver.plan = [("sleep", 0.3), ("sleep", 0.3)]

    barrier = threading.Barrier(4, timeout=60)
    results = []

    def worker():
        try:
            barrier.wait()
            results.append(delivery_attempt(delivery_id=delivery.pk))
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(receiver.requests) == 1
    assert sum(result is not None for result in results) == 1
    assert DeliveryAttempt.objects.filter(delivery=delivery).count() == 2


def test_due_deliveries_are_sent_in_turn_and_each_outcome_recorded(
    merchant, endpoint, receiver, settings
):
    settings.WEBHOOK_TIMEOUT_SECONDS = 0.3
    receiver.plan = [("short", 200), ("short", 500), ("sleep", 1.0), ("short", 204)]
    base = timezone.now() - timedelta(minutes=10)
    events = [record(merchant, at=base + timedelta(seconds=i)) for i in range(4)]

    assert deliveries_send_due().attempted == 4

    assert [r.headers["X-Cowry-Webhook-Id"] for r in receiver.requests] == [
        str(event.id) for event in events
    ]
    deliveries = [Delivery.objects.get(event=event) for event in events]
    assert [d.status for d in deliveries] == [
        DeliveryStatus.SUCCEEDED,
        DeliveryStatus.PENDING,
        DeliveryStatus.PENDING,
        DeliveryStatus.SUCCEEDED,
    ]
    attempts = [d.attempt_log.get() for d in deliveries]
    assert [a.response_status for a in attempts] == [200, 500, None, 204]
    assert attempts[2].error.startswith("Timed out")
    assert [d.last_error for d in deliveries] == ["", attempts[1].error, attempts[2].error, ""]
    for delivery, attempt in zip(deliveries, attempts, strict=True):
        assert attempt.finished_at >= attempt.started_at
        if delivery.status == DeliveryStatus.PENDING:
            assert delivery.next_attempt_at == attempt.finished_at + timedelta(seconds=60)
        else:
            assert delivery.delivered_at == attempt.finished_at
    # each sent when its turn came, not when the claim was made: the last waited for the timeout
    assert attempts[3].started_at >= attempts[2].started_at + timedelta(seconds=0.3)
    signed_at = [int(r.headers["X-Cowry-Timestamp"]) for r in receiver.requests]
    assert signed_at == sorted(signed_at)


def test_an_answer_with_nul_bytes_is_recorded(merchant, endpoint, receiver):
    receiver.plan = [("body", 200, b"ok\x00\xff done"), ("short", 200)]
    base = timezone.now() - timedelta(minutes=10)
    events = [record(merchant, at=base + timedelta(seconds=i)) for i in range(2)]

    assert deliveries_send_due().attempted == 2

    deliveries = [Delivery.objects.get(event=event) for event in events]
    assert [d.status for d in deliveries] == [DeliveryStatus.SUCCEEDED] * 2
    attempts = [d.attempt_log.get() for d in deliveries]
    assert [a.response_body for a in attempts] == ["ok\ufffd\ufffd done", "short 200"]


def test_an_outcome_recorded_after_the_lease_leaves_a_later_attempt_alone(merchant, endpoint):
    event = record(merchant)
    now = timezone.now()
    stale = delivery_claim(delivery_id=event.deliveries.get().id, now=now)
    later = now + timedelta(seconds=lease_seconds() + 1)
    taken_over = delivery_claim(delivery_id=stale.delivery_id, now=later)
    assert taken_over.number == 2

    late = Outcome(response_status=200, duration_ms=5, error="", response_body="ok")
    status = delivery_record(claim=stale, outcome=late, now=now)

    assert status == DeliveryStatus.DELIVERING
    delivery = event.deliveries.get()
    assert (delivery.status, delivery.attempts) == (DeliveryStatus.DELIVERING, 2)
    first = delivery.attempt_log.get(number=1)
    assert first.response_status == 200  # what it got is kept on its own attempt


def test_every_due_delivery_is_sent_once(merchant, endpoint, receiver):
    events = [record(merchant) for _ in range(3)]

    assert deliveries_send_due().attempted == 3
    assert sorted(r.headers["X-Cowry-Webhook-Id"] for r in receiver.requests) == sorted(
        str(event.id) for event in events
    )
    assert set(Delivery.objects.values_list("status", flat=True)) == {DeliveryStatus.SUCCEEDED}


@pytest.mark.django_db(transaction=True)
def test_deliveries_held_up_by_a_slow_receiver_send_nothing_to_an_endpoint_disabled_meanwhile(
    merchant, receiver, webhook_settings
):
    webhook_settings.WEBHOOK_TIMEOUT_SECONDS = 5
    endpoint, _ = endpoint_set(merchant=merchant, url=receiver.url, now=timezone.now())
    later = timezone.now() + timedelta(hours=1)  # not due yet: nothing is sent on commit
    events = [record(merchant, at=later + timedelta(seconds=i)) for i in range(4)]
    Delivery.objects.update(next_attempt_at=timezone.now())  # all due
    receiver.plan = [("sleep", 2)]

    def merchant_disables_it():
        try:
            time.sleep(0.5)  # while the first delivery waits for its answer
            endpoint_update(
                endpoint_id=endpoint.pk, url=endpoint.url, enabled=False, now=timezone.now()
            )
        finally:
            connection.close()

    disabling = threading.Thread(target=merchant_disables_it)
    disabling.start()
    assert deliveries_send_due().attempted == 1
    disabling.join()

    assert len(receiver.requests) == 1  # the three others are not claimed
    waiting = Delivery.objects.exclude(event_id=receiver.requests[0].headers["X-Cowry-Webhook-Id"])
    assert waiting.count() == 3
    assert set(waiting.values_list("status", "attempts")) == {(DeliveryStatus.PENDING, 0)}
    assert not DeliveryAttempt.objects.filter(delivery__in=waiting).exists()

    endpoint_update(endpoint_id=endpoint.pk, url=endpoint.url, enabled=True, now=timezone.now())
    receiver.plan = []
    deliveries_send_due()
    assert sorted(r.headers["X-Cowry-Webhook-Id"] for r in receiver.requests) == sorted(
        str(event.id) for event in events
    )
    assert set(Delivery.objects.values_list("status", flat=True)) == {DeliveryStatus.SUCCEEDED}


def test_each_failed_attempt_is_logged_with_its_ids_and_the_last_says_it_failed_for_good(
    merchant, endpoint, receiver, django_capture_on_commit_callbacks, caplog
):
    """A receiver answering 500 or down is visible in the logs: one warning per failed attempt
    naming the delivery, event, merchant and endpoint, never the URL or what it answered."""
    receiver.default = ("body", 500, b"card +221770001234 refused")
    caplog.set_level("WARNING", logger="cowry.webhooks")
    with django_capture_on_commit_callbacks(execute=True):
        event = record(merchant)
    delivery = Delivery.objects.get(event=event)
    while delivery.status == DeliveryStatus.PENDING:
        deliveries_send_due(now=delivery.next_attempt_at)
        delivery.refresh_from_db()

    lines = [r.getMessage() for r in caplog.records if r.name == "cowry.webhooks"]
    assert len(lines) == 7
    ids = (
        f"Webhook delivery {delivery.pk} (event {event.pk} payin.completed, merchant"
        f" {merchant.pk}, endpoint {endpoint.pk})"
    )
    assert lines[0].startswith(f"{ids} attempt 1 of 7 failed: HTTP 500; retried at ")
    assert lines[-1] == (
        f"{ids} attempt 7 of 7 failed: HTTP 500; failed for good: no retry left, the merchant"
        " may resend it"
    )
    assert not any("221770001234" in line or endpoint.url in line for line in lines)


def test_an_acknowledged_attempt_logs_nothing(
    merchant, endpoint, receiver, django_capture_on_commit_callbacks, caplog
):
    caplog.set_level("INFO", logger="cowry.webhooks")
    with django_capture_on_commit_callbacks(execute=True):
        record(merchant)
    assert Delivery.objects.get().status == DeliveryStatus.SUCCEEDED
    assert not [r for r in caplog.records if r.name == "cowry.webhooks"]


def test_an_event_stored_before_bodies_were_kept_is_sent_as_its_payload(
    merchant, endpoint, receiver, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False):
        event = record(merchant)
    Event.objects.filter(pk=event.pk).update(body="")
    event.refresh_from_db()

    assert delivery_attempt(delivery_id=event.deliveries.get().id) == DeliveryStatus.SUCCEEDED

    (request,) = receiver.requests
    assert json.loads(request.body) == event.payload
    assert request.body == json.dumps(event.payload, separators=(",", ":")).encode()
