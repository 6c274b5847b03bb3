"""A new API secret or webhook signing secret waits for the page that shows it in the session,
whose row lives in the database up to 12 h: encrypted there, and never shown after
core.secret_once.SECRET_ONCE_SECONDS."""

import json
import re

import pytest
from django.conf import settings
from django.contrib.sessions.models import Session
from django.utils import timezone

from core import secret_once
from merchants import services
from tests.dashboard.conftest import page_token
from tests.webhooks.conftest import signing_secret
from webhooks.services.endpoints import endpoint_add

pytestmark = pytest.mark.django_db

NEW_SECRETS = "/admin/webhooks/webhookendpoint/new-secrets/"


def _session_at_rest(client) -> str:
    """The client's session row as stored, and what it holds decoded."""
    row = Session.objects.get(session_key=client.cookies[settings.SESSION_COOKIE_NAME].value)
    return row.session_data + json.dumps(row.get_decoded())


def _api_secret_on(page) -> str | None:
    match = re.search(r'id="api-secret">(cs_[^<]+)<', page.content.decode())
    return match.group(1) if match else None


def _secret_now(endpoint) -> str:
    endpoint.refresh_from_db()
    return signing_secret(endpoint)


def _endpoint(merchant):
    endpoint, _secret = endpoint_add(
        merchant=merchant, url="https://hooks.example.com/cowry", now=timezone.now()
    )
    return endpoint


def test_a_new_api_secret_is_encrypted_in_the_session_and_shown_once(merchant, staff_client):
    owner = staff_client(merchant=merchant, role="owner")

    added = owner.post("/admin/merchants/apikey/add/", {"label": "backend", "expires_at": ""})
    at_rest = _session_at_rest(owner)
    secret = _api_secret_on(owner.get(added["Location"]))

    assert secret is not None
    assert secret not in at_rest
    assert secret_once.SESSION_KEY in at_rest  # it was held, as a token
    assert _api_secret_on(owner.get(added["Location"])) is None


def test_a_rotated_api_secret_not_shown_in_time_is_never_shown(merchant, staff_client, monkeypatch):
    old = services.api_key_create(merchant=merchant)
    developer = staff_client(merchant=merchant, role="developer")
    monkeypatch.setattr(secret_once, "SECRET_ONCE_SECONDS", 0)  # the redirect followed too late

    rotated = developer.post(
        f"/admin/merchants/apikey/{old.api_key.pk}/rotate/", {"grace_hours": 0}
    )
    page = developer.get(rotated["Location"])

    assert _api_secret_on(page) is None
    assert 'id="secret-gone"' in page.content.decode()
    assert secret_once.SESSION_KEY not in _session_at_rest(developer)  # dropped once read


def test_a_rotated_signing_secret_is_encrypted_in_the_session_and_shown_once(
    merchant, staff_client
):
    endpoint = _endpoint(merchant)
    developer = staff_client(merchant=merchant, role="developer")
    url = f"/admin/webhooks/webhookendpoint/{endpoint.pk}/rotate-secret/"

    form = {"reason": "Receiver moved", "token": page_token(developer.get(url))}
    rotated = developer.post(url, form)
    secret = _secret_now(endpoint)

    assert secret not in _session_at_rest(developer)
    assert rotated["Location"] == NEW_SECRETS
    page = developer.get(NEW_SECRETS).content.decode()
    assert secret in page and "shown this once" in page
    assert "is signed with its new secret from now on" in page  # the action's message too
    assert secret not in developer.get(NEW_SECRETS).content.decode()


def test_signing_secrets_of_a_bulk_rotation_wait_encrypted_and_expire(
    merchant, staff_client, monkeypatch
):
    endpoints = [_endpoint(merchant), _endpoint(merchant)]
    owner = staff_client(merchant=merchant, role="owner")
    rotate = {"action": "rotate_signing_secret", "_selected_action": [e.pk for e in endpoints]}

    rotated = owner.post("/admin/webhooks/webhookendpoint/", rotate)
    secrets = [_secret_now(endpoint) for endpoint in endpoints]
    assert not any(secret in _session_at_rest(owner) for secret in secrets)
    assert rotated["Location"] == NEW_SECRETS
    page = owner.get(NEW_SECRETS).content.decode()
    assert all(secret in page for secret in secrets)

    monkeypatch.setattr(secret_once, "SECRET_ONCE_SECONDS", 0)
    owner.post("/admin/webhooks/webhookendpoint/", rotate)
    page = owner.get(NEW_SECRETS).content.decode()
    assert not any(_secret_now(endpoint) in page for endpoint in endpoints)
    assert 'id="secret-gone"' in page
