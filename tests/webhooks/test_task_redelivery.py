"""Webhook tasks delivered several times at once (acks_late redelivery after a worker died,
the due sweep of two beats handing the same delivery out): each attempt is made by one worker,
and the receiver gets the event once per attempt, always with the same id.

Real threads on their own connections run the task bodies at the same moment (a barrier);
the webhooks go over real sockets to a local receiver."""

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.locks import at_once
from tests.webhooks.conftest import record_event
from webhooks import tasks
from webhooks.models import Delivery
from webhooks.services.delivery import delivery_claim, lease_seconds

pytestmark = pytest.mark.django_db(transaction=True)

RUNS = 3
LOST = "No result recorded: the worker was lost or ran past its lease."


def _recorded_not_yet_sent(merchant, *, due_at):
    """An event whose delivery its after-commit task found not due (recorded an hour ahead),
    then made due at `due_at`: it waits for the tasks the test delivers."""
    event = record_event(merchant, at=timezone.now() + timedelta(hours=1))
    event.deliveries.update(next_attempt_at=due_at)
    return event


def test_a_due_delivery_handed_out_three_times_at_once_is_sent_once(merchant, endpoint, receiver):
    event = _recorded_not_yet_sent(merchant, due_at=timezone.now())
    delivery = event.deliveries.get()

    at_once(lambda: tasks.deliver_webhook(delivery_id=str(delivery.pk)), RUNS)

    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == ("succeeded", 1)
    assert [r.headers["X-Cowry-Webhook-Id"] for r in receiver.requests] == [str(event.id)]


def test_a_lost_attempt_taken_over_by_three_tasks_at_once_is_sent_again_once(
    merchant, endpoint, receiver
):
    start = timezone.now() - timedelta(seconds=lease_seconds() + 1)
    event = _recorded_not_yet_sent(merchant, due_at=start)
    delivery = event.deliveries.get()
    assert delivery_claim(delivery_id=delivery.pk, now=start) is not None
    # ... its sender dies; the lease is over now, and tasks for it come from the due sweeps
    # of two beats and a redelivery.
    assert receiver.requests == []

    at_once(lambda: tasks.deliver_webhook(delivery_id=str(delivery.pk)), RUNS)

    delivery = Delivery.objects.get(pk=delivery.pk)
    assert (delivery.status, delivery.attempts) == ("succeeded", 2)
    lost, sent = delivery.attempt_log.order_by("number")
    assert (lost.number, lost.error) == (1, LOST)
    assert (sent.number, sent.response_status) == (2, 200)
    assert [r.headers["X-Cowry-Webhook-Id"] for r in receiver.requests] == [str(event.id)]
