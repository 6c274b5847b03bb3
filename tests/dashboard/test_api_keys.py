import re
from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from merchants import services
from merchants.models import ApiKey, AuditLogEntry
from tests.webhooks.conftest import signing_secret

pytestmark = pytest.mark.django_db

KEY_ADD = "/admin/merchants/apikey/add/"


def _api_status(key: str, secret: str) -> int:
    client = APIClient()
    client.credentials(HTTP_X_API_KEY=key, HTTP_X_API_SECRET=secret)
    return client.get("/customers/00000000-0000-0000-0000-000000000000").status_code


def _secret_on(page: str) -> str | None:
    match = re.search(r'id="api-secret">(cs_[^<]+)<', page)
    return match.group(1) if match else None


def test_owner_creates_a_key_and_sees_the_secret_exactly_once(merchant, staff_client):
    browser = staff_client(merchant=merchant, role="owner")

    response = browser.post(KEY_ADD, {"label": "backend", "expires_at": ""}, follow=True)

    page = response.content.decode()
    secret = _secret_on(page)
    assert secret is not None
    assert "shown this once" in page
    api_key = ApiKey.objects.get(merchant=merchant, label="backend")
    assert _api_status(api_key.key, secret) == 404  # authenticated: the random id is not found
    reload = browser.get(response.redirect_chain[-1][0]).content.decode()
    assert _secret_on(reload) is None
    assert secret not in reload
    assert AuditLogEntry.objects.filter(merchant=merchant, action="api_key.created").count() == 1


def test_viewer_cannot_create_keys(merchant, staff_client):
    browser = staff_client(merchant=merchant, role="viewer")
    assert browser.post(KEY_ADD, {"label": "x"}).status_code == 403
    assert not ApiKey.objects.filter(merchant=merchant).exists()


def test_rotation_keeps_the_old_key_working_for_the_grace_period_then_expires(
    merchant, staff_client
):
    old = services.api_key_create(merchant=merchant, label="prod")
    browser = staff_client(merchant=merchant, role="developer")

    response = browser.post(
        f"/admin/merchants/apikey/{old.api_key.pk}/rotate/", {"grace_hours": 24}, follow=True
    )

    new_secret = _secret_on(response.content.decode())
    new_key = ApiKey.objects.filter(merchant=merchant).exclude(pk=old.api_key.pk).get()
    assert _api_status(new_key.key, new_secret) == 404
    assert _api_status(old.api_key.key, old.secret) == 404  # still inside the grace period
    old_row = ApiKey.objects.get(pk=old.api_key.pk)
    assert old_row.expires_at - timezone.now() > timedelta(hours=23)

    old_row.expires_at = timezone.now() - timedelta(seconds=1)  # the grace period is over
    old_row.save(update_fields=["expires_at"])  # (saved: a by-hand UPDATE shows within 30 s)
    assert _api_status(old.api_key.key, old.secret) == 401
    assert AuditLogEntry.objects.filter(merchant=merchant, action="api_key.rotated").count() == 1
    history = browser.get(f"/admin/merchants/apikey/{old.api_key.pk}/history/").content.decode()
    assert "Rotated; the old secret works 24 h more." in history


def test_rotation_with_zero_grace_stops_the_old_key_at_once(merchant, staff_client):
    old = services.api_key_create(merchant=merchant)
    browser = staff_client(merchant=merchant, role="owner")
    browser.post(f"/admin/merchants/apikey/{old.api_key.pk}/rotate/", {"grace_hours": 0})
    assert _api_status(old.api_key.key, old.secret) == 401


def test_revoke_from_the_dashboard_stops_the_key_at_once(merchant, staff_client):
    issued = services.api_key_create(merchant=merchant)
    browser = staff_client(merchant=merchant, role="owner")

    browser.post(f"/admin/merchants/apikey/{issued.api_key.pk}/revoke/")

    assert _api_status(issued.api_key.key, issued.secret) == 401
    entry = AuditLogEntry.objects.get(merchant=merchant, action="api_key.revoked")
    assert entry.actor_label == f"user-owner-{merchant.pk}"


def test_staff_of_another_merchant_gets_404_on_a_keys_pages(merchant, other_merchant, staff_client):
    issued = services.api_key_create(merchant=merchant)
    intruder = staff_client(merchant=other_merchant, role="owner")
    for suffix in ("change/", "rotate/", "revoke/", "secret/"):
        assert (
            intruder.get(f"/admin/merchants/apikey/{issued.api_key.pk}/{suffix}").status_code == 404
        )
    assert intruder.post(f"/admin/merchants/apikey/{issued.api_key.pk}/revoke/").status_code == 404
    assert _api_status(issued.api_key.key, issued.secret) == 404
    listing = intruder.get("/admin/merchants/apikey/").content.decode()
    assert issued.api_key.key not in listing


def test_key_pages_never_show_a_secret_hash(merchant, staff_client):
    issued = services.api_key_create(merchant=merchant)
    for browser in (staff_client(merchant=merchant, role="owner"), staff_client(support=True)):
        page = browser.get(f"/admin/merchants/apikey/{issued.api_key.pk}/change/").content.decode()
        assert issued.api_key.secret_hash not in page
        assert issued.secret not in page


def test_audit_log_is_readable_by_the_merchant_only(merchant, other_merchant, staff_client):
    issued = services.api_key_create(merchant=merchant)
    owner = staff_client(merchant=merchant, role="owner")
    owner.post(f"/admin/merchants/apikey/{issued.api_key.pk}/revoke/")
    assert issued.api_key.key in owner.get("/admin/merchants/auditlogentry/").content.decode()
    intruder = staff_client(merchant=other_merchant, role="owner")
    assert (
        issued.api_key.key not in intruder.get("/admin/merchants/auditlogentry/").content.decode()
    )


@pytest.mark.parametrize("role", ["owner", "developer"])
def test_merchant_staff_add_a_webhook_endpoint_and_see_its_secret_once(
    merchant, other_merchant, staff_client, role
):
    from webhooks.models import WebhookEndpoint

    browser = staff_client(merchant=merchant, role=role)

    added = browser.post(
        "/admin/webhooks/webhookendpoint/add/",
        {"url": "https://hooks.example.com/cowry", "event_types": []},
    )
    assert added.status_code == 302
    # the secret's message is kept in the session, not in a cookie (signed, not encrypted)
    assert "messages" not in added.cookies
    response = browser.get(added["Location"])

    assert response.status_code == 200
    endpoint = WebhookEndpoint.objects.get(url="https://hooks.example.com/cowry")
    assert endpoint.merchant == merchant
    assert not WebhookEndpoint.objects.filter(merchant=other_merchant).exists()
    page = response.content.decode()
    assert signing_secret(endpoint) in page and "shown this once" in page
    assert signing_secret(endpoint) not in browser.get(added["Location"]).content.decode()
    assert AuditLogEntry.objects.filter(merchant=merchant, action="webhook.updated").count() == 1


def test_a_key_is_rotated_once_a_second_rotation_is_refused(merchant, staff_client):
    old = services.api_key_create(merchant=merchant)
    browser = staff_client(merchant=merchant, role="owner")
    rotate = f"/admin/merchants/apikey/{old.api_key.pk}/rotate/"

    browser.post(rotate, {"grace_hours": 24})
    again = browser.post(rotate, {"grace_hours": 24}, follow=True)  # a double click

    assert "already rotated" in again.content.decode()
    assert ApiKey.objects.filter(merchant=merchant).count() == 2  # the old one and one new
    assert AuditLogEntry.objects.filter(merchant=merchant, action="api_key.rotated").count() == 1


def test_revoking_a_revoked_key_is_refused_and_not_recorded_again(merchant, staff_client):
    issued = services.api_key_create(merchant=merchant)
    browser = staff_client(merchant=merchant, role="owner")
    revoke = f"/admin/merchants/apikey/{issued.api_key.pk}/revoke/"

    browser.post(revoke)
    again = browser.post(revoke, follow=True)

    assert "already revoked" in again.content.decode()
    assert AuditLogEntry.objects.filter(merchant=merchant, action="api_key.revoked").count() == 1


@pytest.mark.parametrize("who", ["support", "viewer", "owner"])
def test_no_one_can_filter_a_list_by_a_secret(merchant, staff_client, who):
    from webhooks.services.endpoints import endpoint_set

    _endpoint, secret = endpoint_set(
        merchant=merchant, url="https://hooks.example.com/a", now=timezone.now()
    )
    services.api_key_create(merchant=merchant)
    browser = (
        staff_client(support=True)
        if who == "support"
        else staff_client(merchant=merchant, role=who)
    )
    # a prefix that matches and one that does not must look the same: refused, both
    for prefix in (secret[:8], "nope"):
        response = browser.get(
            "/admin/webhooks/webhookendpoint/", {"signing_secret__startswith": prefix}
        )
        assert response.status_code == 400
        response = browser.get("/admin/merchants/apikey/", {"secret_hash__startswith": prefix})
        assert response.status_code == 400


def test_changing_a_webhook_endpoint_in_the_dashboard_is_audited(merchant, staff_client):
    from webhooks.services.endpoints import endpoint_set

    endpoint, _ = endpoint_set(
        merchant=merchant, url="https://hooks.example.com/a", now=timezone.now()
    )
    browser = staff_client(merchant=merchant, role="developer")

    response = browser.post(
        f"/admin/webhooks/webhookendpoint/{endpoint.pk}/change/",
        {"url": "https://elsewhere.example.com/b", "event_types": [], "enabled": ""},
    )

    assert response.status_code == 302, response.content.decode()[:2000]
    entry = AuditLogEntry.objects.filter(merchant=merchant, action="webhook.updated").latest("id")
    assert entry.actor_label == f"user-developer-{merchant.pk}"
    assert entry.target == "https://elsewhere.example.com/b"
    assert entry.detail["enabled"] is False


def test_rotating_an_expiring_key_gives_a_replacement_with_the_same_lifetime(merchant):
    created = timezone.now()
    old = services.api_key_create_by(
        merchant=merchant, actor=None, expires_at=created + timedelta(days=30)
    )
    never = services.api_key_create_by(merchant=merchant, actor=None)
    later = created + timedelta(days=10)

    new = services.api_key_rotate(api_key_id=old.api_key.pk, actor=None, now=later)
    forever = services.api_key_rotate(api_key_id=never.api_key.pk, actor=None, now=later)

    lifetime = old.api_key.expires_at - ApiKey.objects.get(pk=old.api_key.pk).created_at
    assert ApiKey.objects.get(pk=new.api_key.pk).expires_at == later + lifetime
    assert ApiKey.objects.get(pk=forever.api_key.pk).expires_at is None


def test_saving_a_keys_page_does_not_mint_another_key(merchant, admin_client):
    """Ops had a Save button on a key's page: saving it issued a second, working key whose
    secret nobody was shown (an orphan credential, recorded as api_key.created)."""
    issued = services.api_key_create_by(merchant=merchant, actor=None, label="backend")
    page = f"/admin/merchants/apikey/{issued.api_key.pk}/change/"

    assert 'name="_save"' not in admin_client.get(page).content.decode()
    assert admin_client.post(page, {"_save": "Save"}).status_code == 403
    assert list(ApiKey.objects.filter(merchant=merchant)) == [issued.api_key]
    assert AuditLogEntry.objects.filter(merchant=merchant, action="api_key.created").count() == 1


def test_the_keys_history_names_the_key_added_and_never_its_secret(merchant, staff_client):
    from django.contrib.admin.models import ADDITION, LogEntry

    browser = staff_client(merchant=merchant, role="owner")
    page = browser.post(KEY_ADD, {"label": "backend"}, follow=True).content.decode()
    api_key = ApiKey.objects.get(merchant=merchant)

    entry = LogEntry.objects.get(object_id=str(api_key.pk), action_flag=ADDITION)
    assert entry.object_repr == api_key.key
    history = browser.get(f"/admin/merchants/apikey/{api_key.pk}/history/").content.decode()
    assert api_key.key in history
    assert _secret_on(page) not in history + entry.change_message


def _signing_secret_on(page: str) -> str:
    return re.search(r'class="signing-secret">(whsec_[^<]+)<', page).group(1)


def test_secrets_appear_only_on_their_owners_pages_never_in_logs_history_audit_or_sessions(
    merchant, other_merchant, staff_client, settings, caplog
):
    """Every way a secret is issued in the dashboard, with every log record captured."""
    import logging

    from django.contrib.admin.models import LogEntry
    from django.contrib.sessions.models import Session

    from webhooks.models import WebhookEndpoint

    settings.ALLOW_PRIVATE_NETWORK_URLS = True
    caplog.set_level(logging.DEBUG)
    owner = staff_client(merchant=merchant, role="owner")
    secrets = [_secret_on(owner.post(KEY_ADD, {"label": "k"}, follow=True).content.decode())]
    api_key = ApiKey.objects.get(merchant=merchant)
    rotated = owner.post(f"/admin/merchants/apikey/{api_key.pk}/rotate/", {"grace_hours": "1"})
    secrets.append(_secret_on(owner.get(rotated["Location"]).content.decode()))
    added = owner.post(
        "/admin/webhooks/webhookendpoint/add/",
        {"url": "https://127.0.0.1:9/h", "event_types": []},
        follow=True,
    )
    secrets.append(_signing_secret_on(added.content.decode()))
    endpoint = WebhookEndpoint.objects.get(merchant=merchant)
    owner.post(f"/admin/webhooks/webhookendpoint/{endpoint.pk}/reveal-secret/")
    rotation = owner.post(
        "/admin/webhooks/webhookendpoint/",
        {"action": "rotate_signing_secret", "_selected_action": [str(endpoint.pk)]},
        follow=True,
    )
    secrets.append(_signing_secret_on(rotation.content.decode()))
    endpoint.refresh_from_db()
    assert all(secrets) and secrets[-1] == signing_secret(endpoint)

    kept = [record.getMessage() + str(record.exc_text) for record in caplog.records]
    kept += [entry.object_repr + entry.change_message for entry in LogEntry.objects.all()]
    kept += [entry.target + str(entry.detail) for entry in AuditLogEntry.objects.all()]
    kept += [str(session.get_decoded()) for session in Session.objects.all()]
    for browser in (
        staff_client(merchant=other_merchant, role="owner"),
        staff_client(support=True),
    ):
        for page in ("/admin/", "/admin/merchants/apikey/", "/admin/merchants/auditlogentry/"):
            kept.append(browser.get(page).content.decode())
        kept.append(
            browser.get(f"/admin/webhooks/webhookendpoint/{endpoint.pk}/change/").content.decode()
        )
    for secret in secrets:
        assert not any(secret in text for text in kept)


def test_ops_revoke_a_merchants_key_but_never_mint_one_they_would_see(merchant, admin_client):
    issued = services.api_key_create_by(merchant=merchant, actor=None, label="backend")
    page = admin_client.get(f"/admin/merchants/apikey/{issued.api_key.pk}/change/")

    assert "/revoke/" in page.content.decode() and "/rotate/" not in page.content.decode()
    assert admin_client.get(KEY_ADD).status_code == 403
    rotate = f"/admin/merchants/apikey/{issued.api_key.pk}/rotate/"
    assert admin_client.post(rotate, {"grace_hours": 0}).status_code == 403
    assert list(ApiKey.objects.filter(merchant=merchant)) == [issued.api_key]
