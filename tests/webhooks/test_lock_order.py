"""Lock order between the webhook settings' writers: a merchant's row and its endpoints' rows.

set_webhook (and the API's re-send of failed deliveries, and an endpoint added) lock the
merchant's row first, then write an endpoint's row or a delivery referring to it. A writer that
locks an endpoint's row first must not then wait for the merchant's. Lined up here: a third
connection holds the merchant's row until the merchant-first writer waits for it and the
endpoint-first one, holding its endpoint, waits behind it; then lets go. PostgreSQL aborts one
of them ("deadlock detected") if each holds what the other waits for."""

import threading

import pytest
from django.db import connection
from django.utils import timezone

from merchants.models import Merchant
from tests.faults.conftest import admin_connection, backends_waiting_on_a_lock
from tests.webhooks.conftest import signing_secret
from tests.worker import wait_until
from webhooks import services
from webhooks.models import WebhookEndpoint


def _waiting(monitor) -> int:
    return len(backends_waiting_on_a_lock(monitor, pattern="%"))


def _line_up(merchant_first, endpoint_first) -> list[BaseException]:
    """Run `merchant_first` (a writer locking the merchant's row first) and `endpoint_first` (one
    locking an endpoint's row first) lined up as described above; the exceptions either
    raised (none: both went through)."""
    failures: list[BaseException] = []

    def run(work) -> None:
        try:
            work()
        except BaseException as exc:  # the test reports it
            failures.append(exc)
        finally:
            connection.close()

    merchant = Merchant.objects.get()
    holder, monitor = admin_connection(), admin_connection()
    threads = [
        threading.Thread(target=run, args=(work,)) for work in (merchant_first, endpoint_first)
    ]
    try:
        with holder.transaction():
            holder.execute(
                "SELECT id FROM merchants_merchant WHERE id = %s FOR UPDATE", [merchant.pk]
            )
            threads[0].start()
            assert wait_until(lambda: _waiting(monitor) == 1, timeout=30)
            threads[1].start()  # locks the endpoint; waits for the merchant's row, if it must
            assert wait_until(
                lambda: _waiting(monitor) == 2 or not threads[1].is_alive(), timeout=30
            )
    finally:
        holder.close()
        for thread in threads:
            thread.join(60)
        monitor.close()
    return failures


@pytest.mark.django_db(transaction=True)
def test_set_webhook_and_a_secret_rotation_at_once_do_not_deadlock(
    merchant, receiver, webhook_settings
):
    """The rotation (a dashboard action) locks only the endpoint's row: with the merchant's
    too, taken after the endpoint's, it held what set_webhook waited for and the reverse."""
    endpoint, _ = services.endpoint_set(merchant=merchant, url=receiver.url, now=timezone.now())
    rotated = []

    def set_webhook() -> None:
        services.endpoint_set(
            merchant=merchant, url=receiver.url, secret="s" * 32, now=timezone.now()
        )

    def rotate() -> None:
        rotated.append(services.endpoint_rotate_secret(endpoint_id=endpoint.pk, now=timezone.now()))

    failures = _line_up(set_webhook, rotate)

    assert failures == []
    assert len(rotated) == 1
    # both were made, the rotation (which had the endpoint) first
    assert signing_secret(WebhookEndpoint.objects.get(pk=endpoint.pk)) == "s" * 32
