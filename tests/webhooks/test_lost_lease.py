"""An attempt whose sender was lost (killed mid-attempt: its lease ran out) is counted, logged,
and the delivery is attempted again once the lease is over, without a further wait: the lease
(150 s by default) is already longer than the first retry's minute, the fault was ours, and an
attempt can outlive its lease only when its sender dies, never because a receiver hangs (an
attempt ends at WEBHOOK_TIMEOUT_SECONDS, a failed attempt on the normal schedule). So a
receiver that hangs is never hammered, and a delivery whose sender dies every time fails
after its seven attempts, at most one a lease."""

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.webhooks.conftest import record_event
from webhooks.models import Delivery, DeliveryStatus
from webhooks.services.delivery import delivery_claim, lease_seconds, max_attempts
from webhooks.services.endpoints import endpoint_update
from webhooks.services.sweeps import deliveries_dispatch_due, deliveries_send_due

pytestmark = pytest.mark.django_db

LOST = "No result recorded: the worker was lost or ran past its lease."


def test_a_lost_attempt_is_counted_and_the_next_one_comes_when_its_lease_is_over(
    merchant, endpoint, receiver, settings, caplog
):
    receiver.plan = [500]
    start = timezone.now()
    event = record_event(merchant, at=start)
    delivery = event.deliveries.get()
    assert delivery_claim(delivery_id=delivery.pk, now=start) is not None
    # ... and the sender dies before it records anything.
    lease_over = start + timedelta(seconds=lease_seconds())

    for now in (start + timedelta(seconds=61), lease_over - timedelta(seconds=1)):
        assert deliveries_send_due(now=now).attempted == 0
        assert deliveries_dispatch_due(now=now) == 0
    caplog.set_level("WARNING", logger="cowry.webhooks")
    assert deliveries_send_due(now=lease_over).attempted == 1

    delivery.refresh_from_db()
    assert caplog.records[0].getMessage() == (
        f"Webhook delivery {delivery.pk} (event {event.pk}, merchant {merchant.pk}, endpoint"
        f" {endpoint.pk}) attempt 1 of 7 closed as lost: no result recorded (worker lost or past"
        " its lease); due again at once"
    )
    assert caplog.records[0].levelname == "WARNING"
    lost, failed = delivery.attempt_log.all()
    assert (lost.number, lost.response_status, lost.error) == (1, None, LOST)
    assert (failed.number, failed.response_status) == (2, 500)
    assert delivery.attempts == 2
    # the failure of attempt 2 waits the schedule's second delay (5 minutes), like any other
    assert delivery.next_attempt_at == failed.finished_at + timedelta(
        seconds=settings.WEBHOOK_RETRY_SCHEDULE[1]
    )
    assert len(receiver.requests) == 1


def test_a_receiver_that_hangs_gets_one_request_per_scheduled_attempt(
    merchant, endpoint, receiver, settings
):
    settings.WEBHOOK_TIMEOUT_SECONDS = 0.3
    receiver.default = ("sleep", 1.0)  # every request: accepted, never answered in time
    start = timezone.now()
    event = record_event(merchant, at=start)
    delivery = event.deliveries.get()
    now = start

    for number, delay in enumerate([*settings.WEBHOOK_RETRY_SCHEDULE, None], start=1):
        assert deliveries_send_due(now=now).attempted == 1
        delivery.refresh_from_db()
        attempt = delivery.attempt_log.get(number=number)
        assert attempt.error == "Timed out after 0.3 s"
        if delay is None:
            break
        assert delivery.status == DeliveryStatus.PENDING
        assert delivery.next_attempt_at == attempt.finished_at + timedelta(seconds=delay)
        # nothing is sent again before the retry is due, however often the senders look
        for early in (now + timedelta(seconds=1), delivery.next_attempt_at - timedelta(seconds=1)):
            assert deliveries_send_due(now=early).attempted == 0
            assert deliveries_dispatch_due(now=early) == 0
        now = delivery.next_attempt_at

    assert delivery.status == DeliveryStatus.FAILED
    assert len(receiver.requests) == 7
    assert not delivery.attempt_log.filter(error=LOST).exists()


def test_a_delivery_whose_sender_is_lost_every_time_fails_after_seven_leases(
    merchant, endpoint, receiver
):
    start = timezone.now()
    event = record_event(merchant, at=start)
    delivery = event.deliveries.get()
    lease = timedelta(seconds=lease_seconds())

    now = start
    for _ in range(max_attempts()):
        assert delivery_claim(delivery_id=delivery.pk, now=now) is not None
        assert delivery_claim(delivery_id=delivery.pk, now=now + lease / 2) is None
        now += lease  # each sender dies; the next claim comes when its lease is over

    assert delivery_claim(delivery_id=delivery.pk, now=now) is None
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.last_error) == ("failed", 7, LOST)
    assert [a.error for a in delivery.attempt_log.all()] == [LOST] * 7
    assert receiver.requests == []


def _lost_while_disabled(merchant, endpoint):
    """A delivery claimed a lease and a moment ago whose sender died; its endpoint was disabled
    meanwhile. Returns the event, the delivery and when its lease was over."""
    start = timezone.now() - timedelta(seconds=lease_seconds() + 5)
    event = record_event(merchant, at=start)
    delivery = event.deliveries.get()
    assert delivery_claim(delivery_id=delivery.pk, now=start) is not None
    # ... the sender dies before it records anything, and the merchant switches the endpoint off
    endpoint_update(endpoint_id=endpoint.pk, url=endpoint.url, enabled=False, now=start)
    return event, delivery, start + timedelta(seconds=lease_seconds())


# the beat's sweep, and the `deliver_webhooks` command that does its work by hand
SWEEPS = [
    deliveries_dispatch_due,
    lambda **kwargs: deliveries_send_due(**kwargs).attempted,
]


@pytest.mark.parametrize("sweep", SWEEPS, ids=["beat", "command"])
def test_a_lost_attempt_to_a_disabled_endpoint_reads_pending_once_its_lease_is_over(
    merchant, endpoint, receiver, sweep
):
    """It read `delivering` for as long as the endpoint stayed off (days), though nothing was
    sending it: the claim that records a lost attempt takes only enabled endpoints."""
    _, delivery, lease_over = _lost_while_disabled(merchant, endpoint)

    assert sweep(now=lease_over - timedelta(seconds=1)) == 0
    delivery.refresh_from_db()
    assert delivery.status == DeliveryStatus.DELIVERING  # its lease is not over yet

    assert sweep(now=lease_over) == 0  # nothing is sent
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == (DeliveryStatus.PENDING, 1)
    assert delivery.next_attempt_at == lease_over  # due again at once, as a lost attempt is
    assert delivery.last_error == LOST
    (lost,) = delivery.attempt_log.all()
    assert (lost.number, lost.response_status, lost.finished_at, lost.error) == (
        1,
        None,
        lease_over,
        LOST,
    )
    # a week later, nothing more is written and nothing is sent while it is off
    week = lease_over + timedelta(days=7)
    assert deliveries_dispatch_due(now=week) == 0
    assert deliveries_send_due(now=week).attempted == 0
    assert Delivery.objects.get(pk=delivery.pk).updated_at == lease_over
    assert receiver.requests == []


def test_re_enabled_it_sends_the_lost_attempts_delivery_once_as_attempt_two(
    merchant, endpoint, receiver, django_capture_on_commit_callbacks
):
    event, delivery, _ = _lost_while_disabled(merchant, endpoint)
    deliveries_dispatch_due(now=timezone.now())
    assert Delivery.objects.get(pk=delivery.pk).status == DeliveryStatus.PENDING

    endpoint_update(endpoint_id=endpoint.pk, url=endpoint.url, enabled=True, now=timezone.now())
    with django_capture_on_commit_callbacks(execute=True):  # the beat's sweep hands it on
        assert deliveries_dispatch_due(now=timezone.now()) == 1
    assert deliveries_send_due().attempted == 0  # the sender finds nothing more to send

    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == (DeliveryStatus.SUCCEEDED, 2)
    assert [(a.number, a.response_status) for a in delivery.attempt_log.all()] == [
        (1, None),
        (2, 200),
    ]
    assert [r.headers["X-Cowry-Webhook-Id"] for r in receiver.requests] == [str(event.id)]


def test_a_seventh_attempt_lost_to_a_disabled_endpoint_fails_the_delivery(
    merchant, endpoint, receiver
):
    """As the claim of a lost attempt does: the seventh lost attempt is the last one."""
    _, delivery, lease_over = _lost_while_disabled(merchant, endpoint)
    Delivery.objects.filter(pk=delivery.pk).update(attempts=max_attempts())
    delivery.attempt_log.update(number=max_attempts())

    deliveries_dispatch_due(now=lease_over)

    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.next_attempt_at) == (
        DeliveryStatus.FAILED,
        7,
        None,
    )
    assert delivery.last_error == LOST
    assert delivery.attempt_log.get().error == LOST
    endpoint_update(endpoint_id=endpoint.pk, url=endpoint.url, enabled=True, now=timezone.now())
    assert deliveries_send_due(now=lease_over + timedelta(days=1)).attempted == 0
    assert receiver.requests == []
