"""Lock order between the webhook settings' writers: a merchant's row and its endpoints' rows.

set_webhook (and the API's re-send of failed deliveries, and an endpoint added) lock the
merchant's row first, then write an endpoint's row or a delivery referring to it. A writer that
locks an endpoint's row first must not then wait for the merchant's. Lined up here: a third
connection holds the merchant's row until the merchant-first writer waits for it and the
endpoint-first one, holding its endpoint, waits behind it; then lets go. PostgreSQL aborts one
of them ("deadlock detected") if each holds what the other waits for."""

import threading

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from django.utils import timezone

from merchants import services as merchant_services
from merchants.models import AuditLogEntry, Merchant
from tests.faults.conftest import admin_connection, backends_waiting_on_a_lock
from tests.locks import start, waiting_for_a_lock
from tests.webhooks.conftest import record_event, signing_secret
from tests.worker import wait_until
from webhooks.models import Delivery, DeliveryStatus, WebhookEndpoint
from webhooks.services.endpoints import endpoint_rotate_secret, endpoint_set
from webhooks.services.resend import events_resend_failed


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
    endpoint, _ = endpoint_set(merchant=merchant, url=receiver.url, now=timezone.now())
    rotated = []

    def set_webhook() -> None:
        endpoint_set(merchant=merchant, url=receiver.url, secret="s" * 32, now=timezone.now())

    def rotate() -> None:
        rotated.append(endpoint_rotate_secret(endpoint_id=endpoint.pk, now=timezone.now()))

    failures = _line_up(set_webhook, rotate)

    assert failures == []
    assert len(rotated) == 1
    # both were made, the rotation (which had the endpoint) first
    assert signing_secret(WebhookEndpoint.objects.get(pk=endpoint.pk)) == "s" * 32


def _dashboard_save(merchant, endpoint):
    """The developer's save of the endpoint in the dashboard, as a callable: endpoint_update
    and its audit entry in the admin's transaction, whose commit locks the merchant's key (the
    entry's foreign key)."""
    username = f"dev-{merchant.pk}"
    merchant_services.staff_user_create(
        username=username, password="pw-123456-staff", merchant=merchant, role="developer"
    )
    browser = Client()
    assert browser.login(username=username, password="pw-123456-staff")

    def save() -> None:
        response = browser.post(
            f"/admin/webhooks/webhookendpoint/{endpoint.pk}/change/",
            {"url": "http://127.0.0.1:9/moved", "event_types": [], "enabled": "on"},
        )
        assert response.status_code == 302

    return save


@pytest.mark.django_db(transaction=True)
def test_set_webhook_and_a_dashboard_save_of_the_endpoint_at_once_do_not_deadlock(
    merchant, receiver, webhook_settings
):
    """set_webhook's lock of the merchant's row lets the save's commit lock its key: taken FOR
    UPDATE, it waited for the endpoint the save held while the save waited for it."""
    endpoint, _ = endpoint_set(merchant=merchant, url=receiver.url, now=timezone.now())
    save = _dashboard_save(merchant, endpoint)

    def set_webhook() -> None:
        endpoint_set(merchant=merchant, url=receiver.url, now=timezone.now())

    failures = _line_up(set_webhook, save)

    assert failures == []
    # both were made, the dashboard's save (which had the endpoint) first
    assert WebhookEndpoint.objects.get(pk=endpoint.pk).url == receiver.url
    assert AuditLogEntry.objects.filter(merchant=merchant, action="webhook.updated").count() == 3


@pytest.mark.django_db(transaction=True)
def test_a_resend_of_failed_deliveries_and_a_dashboard_save_at_once_do_not_deadlock(
    merchant, receiver, webhook_settings
):
    """The re-send's delivery locks the endpoint's key at its commit, behind the save; the
    save's commit then needs the merchant's key, which the re-send's lock of the merchant's row
    (FOR UPDATE) held from it."""
    endpoint, _ = endpoint_set(merchant=merchant, url=receiver.url, now=timezone.now())
    event = record_event(merchant)
    since = timezone.now()
    Delivery.objects.filter(event=event).update(status=DeliveryStatus.FAILED, created_at=since)
    save = _dashboard_save(merchant, endpoint)
    resent = []

    def resend_failed() -> None:  # POST /events/resend-failed, past its Idempotency-Key claim
        resent.append(events_resend_failed(merchant=merchant, since=since, now=since))

    failures = _line_up(resend_failed, save)

    assert failures == []
    assert resent == [1]
    assert Delivery.objects.filter(event=event, status=DeliveryStatus.PENDING).count() == 1
    assert WebhookEndpoint.objects.get(pk=endpoint.pk).url == "http://127.0.0.1:9/moved"


@pytest.mark.django_db(transaction=True)
def test_a_dashboard_save_of_an_endpoint_does_not_hold_up_the_events_fanned_out_to_it(
    merchant, receiver, webhook_settings, developer, endpoint
):
    """The endpoint's writers lock its row FOR NO KEY UPDATE: a payment's event, whose delivery
    to the endpoint locks the endpoint's key at insert, goes through while a save is still in
    its transaction (here it waits for the staff user's row, which its admin log entry needs).
    FOR UPDATE made every such payment's commit wait for the save."""
    user_id = get_user_model().objects.get(username=f"dev-{merchant.pk}").pk
    saved, recorded = [], []
    holder = admin_connection()
    try:
        with holder.transaction():
            holder.execute("SELECT id FROM auth_user WHERE id = %s FOR UPDATE", [user_id])
            saving = start(
                lambda: developer.post(
                    f"/admin/webhooks/webhookendpoint/{endpoint.pk}/change/",
                    {"url": receiver.url, "event_types": ["payin.completed"], "enabled": "on"},
                ),
                saved,
            )
            waiting_for_a_lock(1)
            recording = start(lambda: record_event(merchant), recorded)
            assert wait_until(lambda: bool(recorded), timeout=10), "the event waited for the save"
    finally:
        holder.close()
    for thread in (saving, recording):
        thread.join(30)

    assert saved[0].status_code == 302
    assert WebhookEndpoint.objects.get(pk=endpoint.pk).event_types == ["payin.completed"]
    assert Delivery.objects.filter(event=recorded[0], endpoint=endpoint).count() == 1
