"""A confirmation page on a record's page does its action once however often it is sent: its
one-time token is the action's idempotency key (merchants.object_actions)."""

import pytest
from django.contrib.admin.models import LogEntry

from tests.dashboard.conftest import page_token
from webhooks.models import Event

pytestmark = pytest.mark.django_db


def test_a_test_event_confirmed_twice_is_sent_once_and_the_second_submit_says_so(
    endpoint, receiver, admin_client, django_capture_on_commit_callbacks
):
    url = f"/admin/webhooks/webhookendpoint/{endpoint.pk}/send-test/"
    form = {"reason": "Receiver moved", "token": page_token(admin_client.get(url))}

    with django_capture_on_commit_callbacks(execute=True):
        first = admin_client.post(url, form, follow=True)
        second = admin_client.post(url, form, follow=True)  # a double click

    assert Event.objects.filter(event_type="webhook.test").count() == 1
    assert len(receiver.requests) == 1
    assert "queued for" in first.content.decode()
    assert "Already done from this page: Test event" in second.content.decode()
    assert LogEntry.objects.filter(change_message__startswith="Send a test event").count() == 1


def test_each_showing_of_the_page_is_a_new_confirmation(
    endpoint, receiver, admin_client, django_capture_on_commit_callbacks
):
    url = f"/admin/webhooks/webhookendpoint/{endpoint.pk}/send-test/"
    tokens = [page_token(admin_client.get(url)) for _ in range(2)]

    assert tokens[0] != tokens[1]
    with django_capture_on_commit_callbacks(execute=True):
        for token in tokens:
            admin_client.post(url, {"reason": "Twice on purpose", "token": token})
    assert Event.objects.filter(event_type="webhook.test").count() == 2


@pytest.mark.parametrize("token", [None, "", "not-a-token", "x" * 32 + "!"])
def test_a_submit_without_the_pages_token_does_nothing(endpoint, receiver, admin_client, token):
    url = f"/admin/webhooks/webhookendpoint/{endpoint.pk}/send-test/"
    form = {"reason": "Stale page"} | ({} if token is None else {"token": token})

    page = admin_client.post(url, form, follow=True).content.decode()

    assert "That confirmation page was out of date: nothing was done." in page
    assert not Event.objects.filter(event_type="webhook.test").exists()


def test_the_same_page_sent_with_another_reason_is_not_done_again(
    endpoint, receiver, admin_client, django_capture_on_commit_callbacks
):
    url = f"/admin/webhooks/webhookendpoint/{endpoint.pk}/send-test/"
    token = page_token(admin_client.get(url))
    with django_capture_on_commit_callbacks(execute=True):
        admin_client.post(url, {"reason": "First", "token": token})
        page = admin_client.post(url, {"reason": "Second", "token": token}, follow=True)

    assert "already confirmed with another reason" in page.content.decode()
    assert Event.objects.filter(event_type="webhook.test").count() == 1
