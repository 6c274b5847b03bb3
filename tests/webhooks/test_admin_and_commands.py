import json
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.utils import timezone

from merchants import services as merchant_services
from merchants.models import AuditLogEntry
from tests.webhooks.conftest import record_event, signing_secret
from webhooks.models import Delivery, DeliveryStatus, Event, WebhookEndpoint
from webhooks.services.endpoints import endpoint_add
from webhooks.verify import verify_signature

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(db) -> Client:
    user = get_user_model().objects.create_superuser("root", "root@example.com", "pw")
    client = Client()
    client.force_login(user)
    return client


def _support_client() -> Client:
    merchant_services.staff_user_create(
        username="support-agent", password="pw-123456-staff", support=True
    )
    client = Client()
    assert client.login(username="support-agent", password="pw-123456-staff")
    return client


def _record(merchant) -> Event:
    return record_event(merchant, "payout.failed")


def _run(*args) -> dict:
    out = StringIO()
    call_command(*args, "--json", stdout=out)
    return json.loads(out.getvalue())


def test_resend_from_the_admin_arrives_with_the_same_event_id(
    merchant, endpoint, receiver, admin_client, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        event = _record(merchant)
    assert len(receiver.requests) == 1

    with django_capture_on_commit_callbacks(execute=True):
        response = admin_client.post(
            "/admin/webhooks/event/",
            {"action": "resend_events", "_selected_action": [str(event.pk)]},
        )
    assert response.status_code == 302

    assert len(receiver.requests) == 2
    first, second = receiver.requests
    assert second.headers["X-Cowry-Webhook-Id"] == str(event.pk)
    assert second.body == first.body
    assert verify_signature(
        payload=second.body, headers=second.headers, secret=signing_secret(endpoint)
    )
    assert Delivery.objects.filter(event=event, status=DeliveryStatus.SUCCEEDED).count() == 2
    entry = AuditLogEntry.objects.get(merchant=merchant, action="event.resent")
    assert (entry.target, entry.detail) == (str(event.pk), {"event_type": event.event_type})


def test_resend_without_an_endpoint_is_refused_with_a_message(merchant, admin_client):
    event = _record(merchant)
    response = admin_client.post(
        "/admin/webhooks/event/",
        {"action": "resend_events", "_selected_action": [str(event.pk)]},
        follow=True,
    )
    assert "no enabled webhook endpoint" in response.content.decode()
    assert not Delivery.objects.exists()
    assert not AuditLogEntry.objects.filter(action="event.resent").exists()


def test_send_test_event_from_the_admin_arrives_signed(
    merchant, endpoint, receiver, admin_client, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        admin_client.post(
            "/admin/webhooks/webhookendpoint/",
            {"action": "send_test_event", "_selected_action": [str(endpoint.pk)]},
        )
    assert len(receiver.requests) == 1
    received = receiver.requests[0]
    assert received.headers["X-Cowry-Event"] == "webhook.test"
    assert verify_signature(
        payload=received.body, headers=received.headers, secret=signing_secret(endpoint)
    )
    assert json.loads(received.body)["data"]["type"] == "test"


def test_re_sending_a_test_event_goes_to_its_endpoint_only(
    merchant, endpoint, receiver, admin_client, django_capture_on_commit_callbacks
):
    from django.utils import timezone

    from webhooks.services.endpoints import endpoint_add

    other, _ = endpoint_add(
        merchant=merchant, url=receiver.url + "-other", event_types=[], now=timezone.now()
    )
    with django_capture_on_commit_callbacks(execute=True):
        admin_client.post(
            "/admin/webhooks/webhookendpoint/",
            {"action": "send_test_event", "_selected_action": [str(endpoint.pk)]},
        )
    test_event = Event.objects.get(event_type="webhook.test")
    with django_capture_on_commit_callbacks(execute=True):
        admin_client.post(
            "/admin/webhooks/event/",
            {"action": "resend_events", "_selected_action": [str(test_event.pk)]},
        )

    assert [r.path for r in receiver.requests] == ["/hook", "/hook"]
    assert not Delivery.objects.filter(endpoint=other).exists()


def test_admin_pages_never_render_the_signing_secret(
    merchant, endpoint, receiver, admin_client, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        event = _record(merchant)
    delivery = event.deliveries.get()
    pages = [
        "/admin/webhooks/webhookendpoint/",
        f"/admin/webhooks/webhookendpoint/{endpoint.pk}/change/",
        "/admin/webhooks/event/",
        f"/admin/webhooks/event/{event.pk}/change/",
        "/admin/webhooks/delivery/",
        f"/admin/webhooks/delivery/{delivery.pk}/change/",
    ]
    for page in pages:
        response = admin_client.get(page)
        assert response.status_code == 200, page
        assert signing_secret(endpoint) not in response.content.decode(), page
        assert endpoint.signing_secret not in response.content.decode(), page  # nor as stored
    detail = admin_client.get(f"/admin/webhooks/event/{event.pk}/change/").content.decode()
    assert "answer 200" in detail  # the attempt log is shown inline


@pytest.mark.parametrize("viewer", ["admin_client", "developer", "support"])
def test_a_receivers_answer_is_shown_escaped_in_the_admin(
    merchant, endpoint, receiver, django_capture_on_commit_callbacks, request, viewer
):
    """The answer's first KiB and the Location of a redirect are the receiver's text, shown
    on the event's and the delivery's pages to ops, support and the merchant's staff (the
    attempts were shown to ops only): as text, never as markup."""
    receiver.plan = [
        (
            "raw",
            302,
            [("Location", "/<img src=x onerror=alert(1)>")],
            b"<script>alert('body')</script>",
        )
    ]
    with django_capture_on_commit_callbacks(execute=True):
        event = _record(merchant)
    delivery = Delivery.objects.get(event=event)
    attempt = delivery.attempt_log.get()
    assert attempt.response_body == "<script>alert('body')</script>"
    assert "<img src=x onerror=alert(1)>" in attempt.error

    browser = _support_client() if viewer == "support" else request.getfixturevalue(viewer)
    shown = ""
    for page in (
        f"/admin/webhooks/event/{event.pk}/change/",
        f"/admin/webhooks/delivery/{delivery.pk}/change/",
    ):
        response = browser.get(page)
        assert response.status_code == 200, page
        html = response.content.decode()
        assert "<script>alert(" not in html, page
        assert "<img src=x" not in html, page
        shown += html
    assert "&lt;img src=x onerror=alert(1)&gt;" in shown  # the error
    assert "&lt;script&gt;alert(" in shown  # the answer


def test_an_events_page_shows_the_receivers_stored_answer_whole_as_the_deliverys_page_does(
    merchant, endpoint, receiver, django_capture_on_commit_callbacks
):
    """The event's page cut the answer at 200 characters; the delivery's page showed the
    stored first KiB. Support reading either now sees the same text, escaped."""
    answer = "é" * 300 + "<b>ours?</b>" + "y" * 2000  # the markup past the 200th character
    receiver.plan = [("body", 500, answer.encode("utf-8"))]
    with django_capture_on_commit_callbacks(execute=True):
        event = _record(merchant)
    delivery = Delivery.objects.get(event=event)
    # its first KiB: 300 two-byte characters, the 12 of the markup, then 412 more
    assert delivery.attempt_log.get().response_body == "é" * 300 + "<b>ours?</b>" + "y" * 412

    shown = "é" * 300 + "&lt;b&gt;ours?&lt;/b&gt;" + "y" * 412 + "<"
    browser = _support_client()
    for page in (
        f"/admin/webhooks/event/{event.pk}/change/",
        f"/admin/webhooks/delivery/{delivery.pk}/change/",
    ):
        html = browser.get(page).content.decode()
        assert shown in html, page
        assert "<b>ours?</b>" not in html, page


def test_event_list_filters_by_merchant_status_and_type(
    merchant, other_merchant, endpoint, receiver, admin_client, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        mine = _record(merchant)
    theirs = _record(other_merchant)
    page = admin_client.get(
        "/admin/webhooks/event/",
        {
            "merchant__id__exact": str(merchant.pk),
            "event_type": "payout.failed",
            "deliveries__status": "succeeded",
        },
    ).content.decode()
    assert str(mine.pk) in page
    assert str(theirs.pk) not in page


def test_ops_rotate_the_secret_without_seeing_it_and_deliveries_sign_with_it(
    merchant, endpoint, receiver, admin_client, django_capture_on_commit_callbacks
):
    """Ops never see a signing secret in the dashboard: the merchant's managers Reveal it."""
    old_secret = signing_secret(endpoint)
    response = admin_client.post(
        "/admin/webhooks/webhookendpoint/",
        {"action": "rotate_signing_secret", "_selected_action": [str(endpoint.pk)]},
        follow=True,
    )
    endpoint.refresh_from_db()
    assert signing_secret(endpoint) != old_secret
    assert signing_secret(endpoint) not in response.content.decode()
    assert "owners and developers see it with Reveal" in response.content.decode()
    page = admin_client.get(f"/admin/webhooks/webhookendpoint/{endpoint.pk}/change/")
    assert signing_secret(endpoint) not in page.content.decode()

    with django_capture_on_commit_callbacks(execute=True):
        _record(merchant)
    received = receiver.requests[-1]
    secret = signing_secret(endpoint)
    assert verify_signature(payload=received.body, headers=received.headers, secret=secret)
    assert not verify_signature(payload=received.body, headers=received.headers, secret=old_secret)


def test_ops_add_an_endpoint_over_https_only_and_never_see_its_secret(
    merchant, admin_client, settings
):
    settings.WEBHOOK_ALLOW_HTTP = False
    response = admin_client.post(
        "/admin/webhooks/webhookendpoint/add/",
        {"merchant": str(merchant.pk), "url": "http://hooks.example.com/cowry"},
    )
    assert response.status_code == 200
    assert "must use https" in response.content.decode()
    assert not WebhookEndpoint.objects.exists()

    response = admin_client.post(
        "/admin/webhooks/webhookendpoint/add/",
        {"merchant": str(merchant.pk), "url": "https://hooks.example.com/cowry"},
        follow=True,
    )
    endpoint = WebhookEndpoint.objects.get(merchant=merchant)
    assert endpoint.url == "https://hooks.example.com/cowry"
    assert endpoint.enabled
    assert signing_secret(endpoint) not in response.content.decode()
    assert "owners and developers see it with Reveal" in response.content.decode()


# set_webhook / deliver_webhooks ----------------------------------------------------------


def test_set_webhook_prints_url_and_a_generated_secret(merchant, settings):
    data = _run("set_webhook", str(merchant.pk), "https://hooks.example.com/cowry")
    assert set(data) == {"url", "signing_secret"}
    assert data["url"] == "https://hooks.example.com/cowry"
    assert data["signing_secret"].startswith("whsec_")
    assert len(data["signing_secret"]) >= 40
    endpoint = WebhookEndpoint.objects.get(merchant=merchant)
    assert signing_secret(endpoint) == data["signing_secret"]
    assert endpoint.enabled

    again = _run("set_webhook", str(merchant.pk), "https://hooks.example.com/v2")
    assert again["signing_secret"] != data["signing_secret"]
    assert WebhookEndpoint.objects.filter(merchant=merchant).count() == 1
    assert WebhookEndpoint.objects.get(merchant=merchant).url == "https://hooks.example.com/v2"


def test_set_webhook_uses_the_given_secret(merchant):
    secret = "my-own-signing-secret-0123456789"
    data = _run("set_webhook", str(merchant.pk), "https://hooks.example.com/x", "--secret", secret)
    assert data == {"url": "https://hooks.example.com/x", "signing_secret": secret}


def test_set_webhook_reads_the_secret_from_stdin_given_a_dash(merchant):
    """`--secret -`: the secret stays out of the process list and the shell's history."""
    secret = "piped-signing-secret-0123456789"
    out = StringIO()
    call_command(
        "set_webhook", str(merchant.pk), "https://hooks.example.com/x", "--secret", "-", "--json",
        stdin=StringIO(secret + "\n"), stdout=out,
    )  # fmt: skip
    assert json.loads(out.getvalue())["signing_secret"] == secret
    assert signing_secret(WebhookEndpoint.objects.get(merchant=merchant)) == secret


def test_set_webhook_refuses_an_empty_stdin_and_changes_nothing(merchant):
    with pytest.raises(CommandError, match="16"):
        call_command(
            "set_webhook", str(merchant.pk), "https://hooks.example.com/x", "--secret", "-",
            stdin=StringIO(""),
        )  # fmt: skip
    assert not WebhookEndpoint.objects.filter(merchant=merchant).exists()


def test_set_webhook_human_output(merchant):
    out = StringIO()
    call_command("set_webhook", str(merchant.pk), "https://hooks.example.com/x", stdout=out)
    secret = signing_secret(WebhookEndpoint.objects.get(merchant=merchant))
    assert "https://hooks.example.com/x" in out.getvalue()
    assert secret in out.getvalue()


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://hooks.example.com/x", "https"),
        ("ftp://hooks.example.com/x", "https"),
        ("https://user:pw@hooks.example.com/x", "credentials"),
        ("https://127.0.0.1/x", "public address"),
        ("https://10.0.0.5/x", "public address"),
        ("https://[::1]/x", "public address"),
        ("https://169.254.169.254/latest/meta-data/", "public address"),
        ("https://100.64.0.1/x", "public address"),
        ("https://0.0.0.0/x", "public address"),
        ("https://[fc00::1]/x", "public address"),
        ("https://[fe80::1]/x", "public address"),
        ("https://[::ffff:127.0.0.1]/x", "public address"),
        ("https://[::ffff:a9fe:a9fe]/x", "public address"),
        ("https://2130706433/x", "valid URL"),  # 127.0.0.1 to the C library
        ("https://0x7f000001/x", "valid URL"),
        ("https://0177.0.0.1/x", "valid URL"),
        ("https://:pw@hooks.example.com/x", "valid URL"),
        ("javascript:alert(1)", "https"),
        ("file:///etc/passwd", "https"),
        ("https://hooks.example.com/" + "a" * 2048, "at most 2048"),
        ("https://", "valid URL"),
        ("not a url", "https"),
        ("https://hooks.example.com:65536/x", "port"),  # every delivery failed to parse it
        ("https://hooks.example.com:99999/x", "port"),
        ("https://hooks.example.com:0/x", "port"),
    ],
)
def test_set_webhook_refuses_bad_urls_and_changes_nothing(merchant, settings, url, message):
    settings.WEBHOOK_ALLOW_HTTP = False
    settings.ALLOW_PRIVATE_NETWORK_URLS = False
    with pytest.raises(CommandError, match=message):
        call_command("set_webhook", str(merchant.pk), url)
    assert not WebhookEndpoint.objects.exists()


def test_set_webhook_accepts_http_only_when_allowed(merchant, settings):
    settings.WEBHOOK_ALLOW_HTTP = True
    assert _run("set_webhook", str(merchant.pk), "http://hooks.example.com/x")["url"] == (
        "http://hooks.example.com/x"
    )
    with pytest.raises(CommandError, match="must use http or https"):
        call_command("set_webhook", str(merchant.pk), "ftp://hooks.example.com/x")


def test_set_webhook_refuses_a_short_secret(merchant):
    with pytest.raises(CommandError, match="at least 16"):
        call_command("set_webhook", str(merchant.pk), "https://h.example.com/", "--secret", "short")
    assert not WebhookEndpoint.objects.exists()


@pytest.mark.parametrize("merchant_id", ["00000000-0000-0000-0000-000000000000", "nope"])
def test_set_webhook_for_an_unknown_merchant_fails_clearly(db, merchant_id):
    with pytest.raises(CommandError, match="No merchant"):
        call_command("set_webhook", merchant_id, "https://hooks.example.com/x")


def test_deliver_webhooks_command_sends_due_deliveries_without_a_broker(
    merchant, endpoint, receiver, django_capture_on_commit_callbacks, broker_down, caplog
):
    with broker_down(), django_capture_on_commit_callbacks(execute=True):
        event = _record(merchant)  # its enqueue after commit fails: the broker is stopped
    assert receiver.requests == []
    delivery = event.deliveries.get()
    assert f"Broker unavailable; delivery {delivery.pk} left to the sweep" in caplog.text

    assert _run("deliver_webhooks") == {"attempted": 1, "delivered": 1, "failed": 0}
    assert [r.headers["X-Cowry-Webhook-Id"] for r in receiver.requests] == [str(event.pk)]
    assert _run("deliver_webhooks") == {"attempted": 0, "delivered": 0, "failed": 0}


def test_deliver_webhooks_says_how_many_attempts_delivered_and_failed(merchant, endpoint, receiver):
    receiver.plan = [200, 500]
    for _ in range(2):
        _record(merchant)
    assert _run("deliver_webhooks") == {"attempted": 2, "delivered": 1, "failed": 1}
    assert len(receiver.requests) == 2

    receiver.default = 500  # down: the merchant's matter, not a failed ops run (exit 0)
    _record(merchant)
    out = StringIO()
    call_command("deliver_webhooks", stdout=out)
    assert out.getvalue() == "Attempted 1 due webhook delivery(ies): 0 delivered, 1 failed.\n"
    assert len(receiver.requests) == 3
    assert set(Delivery.objects.values_list("status", flat=True)) == {"succeeded", "pending"}


@pytest.mark.parametrize("limit", ["-5", "0", "ten"])
def test_deliver_webhooks_refuses_a_limit_below_one(limit, capsys):
    with pytest.raises(CommandError, match="at least 1"):
        call_command("deliver_webhooks", "--limit", limit)


def test_an_events_page_shows_every_delivery_and_attempt_in_fixed_queries(
    merchant,
    receiver,
    webhook_settings,
    django_capture_on_commit_callbacks,
    django_assert_max_num_queries,
):
    """An endpoint and an attempt log were read per delivery on the event's page."""
    for n in range(4):
        endpoint_add(merchant=merchant, url=f"{receiver.url}?n={n}", now=timezone.now())
    receiver.plan = [("short", 500)] * 4
    with django_capture_on_commit_callbacks(execute=True):
        event = _record(merchant)
    support = _support_client()

    with django_assert_max_num_queries(10):
        page = support.get(f"/admin/webhooks/event/{event.pk}/change/")

    html = page.content.decode()
    assert html.count("short 500") == 4  # each delivery's attempt, with the receiver's answer
