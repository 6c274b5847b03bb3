"""Webhook signing secrets are stored encrypted (Fernet, WEBHOOK_SECRETS_KEYS): a copy of the
database does not hold them, and everything a merchant or an ops engineer sees is unchanged."""

import base64
import importlib
import json
import logging
import os
import subprocess
import sys
from datetime import timedelta
from io import StringIO
from pathlib import Path

import pytest
from cryptography.fernet import Fernet, InvalidToken
from django.apps import apps
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.test import Client
from django.utils import timezone

from merchants.models import AuditLogEntry
from tests.webhooks.conftest import record_event
from tests.webhooks.test_delivery import assert_valid_request
from webhooks.models import Delivery, DeliveryAttempt, DeliveryStatus, WebhookEndpoint
from webhooks.services.delivery import UNREADABLE_SECRET_ERROR, delivery_claim, lease_seconds
from webhooks.services.endpoints import endpoint_add, endpoint_rotate_secret, endpoint_set
from webhooks.services.sweeps import deliveries_send_due

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]
OLD_KEY = Fernet.generate_key().decode()
NEW_KEY = Fernet.generate_key().decode()
GIVEN_SECRET = "whsec_given-by-the-merchant-0123456789"


def stored_secret(endpoint_id) -> str:
    """The column as a database dump has it."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT signing_secret FROM webhooks_webhookendpoint WHERE id = %s", [endpoint_id]
        )
        return cursor.fetchone()[0]


def assert_encrypted(stored: str, secret: str, *, key: str) -> None:
    assert secret not in stored
    clear = secret.encode()
    for encoded in (
        base64.b64encode(clear),
        base64.urlsafe_b64encode(clear),
        base64.b32encode(clear),
        clear.hex().encode(),
    ):
        assert encoded.decode().rstrip("=") not in stored
    raw = base64.urlsafe_b64decode(stored)
    assert raw[0] == 0x80  # the Fernet version byte
    assert secret.encode() not in raw
    assert Fernet(key).decrypt(stored.encode()).decode() == secret
    with pytest.raises(InvalidToken):
        Fernet(Fernet.generate_key()).decrypt(stored.encode())


def _set_webhook_command(merchant) -> tuple[str, str]:
    out = StringIO()
    call_command(
        "set_webhook", str(merchant.pk), "https://hooks.example.com/a", "--json", stdout=out
    )
    printed = json.loads(out.getvalue())
    return WebhookEndpoint.objects.get(merchant=merchant).pk, printed["signing_secret"]


def _set_twice(merchant) -> tuple[str, str]:
    endpoint_set(merchant=merchant, url="https://hooks.example.com/a", now=timezone.now())
    endpoint, secret = endpoint_set(
        merchant=merchant,
        url="https://hooks.example.com/b",
        secret=GIVEN_SECRET,
        now=timezone.now(),
    )
    return endpoint.pk, secret


def _add(merchant) -> tuple[str, str]:
    endpoint, secret = endpoint_add(
        merchant=merchant, url="https://hooks.example.com/a", now=timezone.now()
    )
    return endpoint.pk, secret


def _rotate(merchant) -> tuple[str, str]:
    endpoint, _ = endpoint_add(
        merchant=merchant, url="https://hooks.example.com/a", now=timezone.now()
    )
    return endpoint.pk, endpoint_rotate_secret(endpoint_id=endpoint.pk, now=timezone.now())


@pytest.mark.parametrize("write", [_set_webhook_command, _set_twice, _add, _rotate])
def test_the_stored_signing_secret_is_a_fernet_token_of_it_never_the_secret(
    merchant, settings, write
):
    settings.WEBHOOK_SECRETS_KEYS = [NEW_KEY, OLD_KEY]

    endpoint_id, secret = write(merchant)

    assert_encrypted(stored_secret(endpoint_id), secret, key=NEW_KEY)


def test_the_longest_secret_in_four_byte_characters_fits_and_signs(
    merchant, receiver, webhook_settings, django_capture_on_commit_callbacks
):
    secret = "\U0001f511" * 200  # 200 printable characters, 800 bytes of UTF-8
    endpoint_set(merchant=merchant, url=receiver.url, secret=secret, now=timezone.now())
    with django_capture_on_commit_callbacks(execute=True):
        event = record_event(merchant)

    assert_valid_request(receiver.requests[0], secret=secret, event=event)


@pytest.mark.parametrize("path", ["sender", "sweep", "lost worker"])
def test_a_delivery_is_signed_with_the_secret_the_merchant_was_given(
    merchant, receiver, webhook_settings, django_capture_on_commit_callbacks, path
):
    _, secret = endpoint_set(
        merchant=merchant, url=receiver.url, secret=GIVEN_SECRET, now=timezone.now()
    )
    with django_capture_on_commit_callbacks(execute=path == "sender"):
        event = record_event(merchant)
    now = timezone.now()
    if path == "sweep":
        assert deliveries_send_due(now=now).attempted == 1
    elif path == "lost worker":  # the claim made through the ORM
        assert delivery_claim(delivery_id=event.deliveries.get().id, now=now)
        now += timedelta(seconds=lease_seconds() + 1)
        assert deliveries_send_due(now=now).attempted == 1

    assert len(receiver.requests) == 1
    assert_valid_request(
        receiver.requests[0],
        secret=secret,
        event=event,
        now=None if path == "sender" else int(now.timestamp()),
    )
    assert Delivery.objects.get(event=event).status == DeliveryStatus.SUCCEEDED


def _lose_the_key(endpoint, settings) -> None:
    settings.WEBHOOK_SECRETS_KEYS = [NEW_KEY]  # deployed without the key it was stored under


def _corrupt_the_value(endpoint, settings) -> None:
    WebhookEndpoint.objects.filter(pk=endpoint.pk).update(
        signing_secret=endpoint.signing_secret[:-8]
    )


@pytest.mark.parametrize("path", ["sender", "sweep"])
@pytest.mark.parametrize("breakage", [_lose_the_key, _corrupt_the_value])
def test_a_secret_no_key_decrypts_is_never_sent_and_the_delivery_waits_for_the_fix(
    merchant,
    api,
    receiver,
    webhook_settings,
    django_capture_on_commit_callbacks,
    caplog,
    path,
    breakage,
):
    webhook_settings.WEBHOOK_SECRETS_KEYS = [OLD_KEY]
    endpoint, secret = endpoint_set(
        merchant=merchant, url=receiver.url, secret=GIVEN_SECRET, now=timezone.now()
    )
    breakage(endpoint, webhook_settings)
    stored = stored_secret(endpoint.pk)

    with caplog.at_level(logging.ERROR, logger="cowry.webhooks"):
        with django_capture_on_commit_callbacks(execute=path == "sender"):
            event = record_event(merchant)
        now = timezone.now()
        if path == "sweep":
            assert deliveries_send_due(now=now).attempted == 0
        # Retried every minute, more often than the seven attempts a receiver gets: never failed.
        for minute in range(1, 9):
            assert deliveries_send_due(now=now + timedelta(seconds=61 * minute)).attempted == 0

    assert receiver.requests == []
    delivery = Delivery.objects.get(event=event)
    assert (delivery.status, delivery.attempts) == (DeliveryStatus.PENDING, 0)
    assert delivery.last_error == UNREADABLE_SECRET_ERROR
    assert not DeliveryAttempt.objects.filter(delivery=delivery).exists()
    assert api.get(f"/events/{event.pk}").json()["delivery_status"] == "pending"
    errors = [record.getMessage() for record in caplog.records if record.levelname == "ERROR"]
    once_a_minute = (
        f"Webhook endpoint {endpoint.pk} (merchant {merchant.pk}): 1 delivery(ies) not sent, its"
        " signing secret cannot be decrypted with any key of WEBHOOK_SECRETS_KEYS; retried every"
        " 60 s (logged once a minute per endpoint)"
    )
    assert errors == [once_a_minute] * 9
    assert not [line for line in caplog.text.splitlines() if secret in line or stored in line]

    # Ops put the key back (or set the secret anew): the delivery goes out, correctly signed.
    if breakage is _lose_the_key:
        webhook_settings.WEBHOOK_SECRETS_KEYS = [NEW_KEY, OLD_KEY]
    else:
        endpoint_set(merchant=merchant, url=receiver.url, secret=GIVEN_SECRET, now=timezone.now())
    later = now + timedelta(minutes=20)
    assert deliveries_send_due(now=later).attempted == 1
    assert_valid_request(
        receiver.requests[0], secret=secret, event=event, now=int(later.timestamp())
    )
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == (DeliveryStatus.SUCCEEDED, 1)


def test_an_unreadable_secret_is_one_error_a_minute_per_endpoint_however_many_wait(
    merchant, receiver, webhook_settings, caplog
):
    """Many deliveries held for one endpoint: one line a minute naming the endpoint and how many
    wait, not one per delivery per minute."""
    webhook_settings.WEBHOOK_SECRETS_KEYS = [OLD_KEY]
    endpoint, secret = endpoint_set(
        merchant=merchant, url=receiver.url, secret=GIVEN_SECRET, now=timezone.now()
    )
    _lose_the_key(endpoint, webhook_settings)
    for _ in range(5):
        record_event(merchant)  # on-commit enqueue not run: the sweep sends them
    now = timezone.now()

    with caplog.at_level(logging.ERROR, logger="cowry.webhooks"):
        assert deliveries_send_due(now=now).attempted == 0
        assert deliveries_send_due(now=now + timedelta(seconds=30)).attempted == 0  # none due
        assert deliveries_send_due(now=now + timedelta(seconds=61)).attempted == 0

    errors = [record.getMessage() for record in caplog.records if record.levelname == "ERROR"]
    assert len(errors) == 2
    assert all(
        error.startswith(f"Webhook endpoint {endpoint.pk} (merchant {merchant.pk}): 5 delivery")
        for error in errors
    )
    assert secret not in caplog.text and stored_secret(endpoint.pk) not in caplog.text
    assert receiver.requests == []


@pytest.fixture
def owner_browser(merchant):
    from merchants import services as merchant_services

    merchant_services.staff_user_create(
        username="owner-reveal", password="pw-123456-staff", merchant=merchant, role="owner"
    )
    browser = Client()
    assert browser.login(username="owner-reveal", password="pw-123456-staff")
    return browser


def test_the_reveal_page_shows_the_secret_in_clear_and_records_it(merchant, owner_browser):
    endpoint, secret = endpoint_set(
        merchant=merchant, url="https://hooks.example.com/a", now=timezone.now()
    )
    page = owner_browser.post(f"/admin/webhooks/webhookendpoint/{endpoint.pk}/reveal-secret/")

    assert f'<code id="signing-secret">{secret}</code>' in page.content.decode()
    assert stored_secret(endpoint.pk) not in page.content.decode()
    assert AuditLogEntry.objects.filter(action="webhook.secret_revealed").count() == 1


def test_the_reveal_page_says_when_the_secret_cannot_be_read_and_records_no_reveal(
    merchant, owner_browser, settings, caplog
):
    settings.WEBHOOK_SECRETS_KEYS = [OLD_KEY]
    endpoint, secret = endpoint_set(
        merchant=merchant, url="https://hooks.example.com/a", now=timezone.now()
    )
    settings.WEBHOOK_SECRETS_KEYS = [NEW_KEY]

    with caplog.at_level(logging.ERROR, logger="cowry.webhooks"):
        page = owner_browser.post(f"/admin/webhooks/webhookendpoint/{endpoint.pk}/reveal-secret/")

    assert page.status_code == 200
    assert "cannot be read" in page.content.decode()
    assert 'id="signing-secret"' not in page.content.decode()
    assert not AuditLogEntry.objects.filter(action="webhook.secret_revealed").exists()
    assert str(endpoint.pk) in caplog.text and secret not in caplog.text


# The data migration ----------------------------------------------------------------------

migration = importlib.import_module("webhooks.migrations.0006_signing_secret_encrypt")


def test_the_data_migration_encrypts_secrets_stored_in_clear_once_and_back(merchant, settings):
    settings.WEBHOOK_SECRETS_KEYS = [NEW_KEY]
    first, _ = endpoint_add(
        merchant=merchant, url="https://hooks.example.com/a", now=timezone.now()
    )
    second, _ = endpoint_add(
        merchant=merchant, url="https://hooks.example.com/b", now=timezone.now()
    )
    clear = {first.pk: GIVEN_SECRET, second.pk: "\u00e9t\u00e9-signing-secret-\U0001f511"}
    for pk, secret in clear.items():  # as the rows were before this change
        WebhookEndpoint.objects.filter(pk=pk).update(signing_secret=secret)

    assert migration.encrypt_plaintext_secrets(apps, connection.schema_editor()) == 2
    for pk, secret in clear.items():
        assert_encrypted(stored_secret(pk), secret, key=NEW_KEY)
    after = {pk: stored_secret(pk) for pk in clear}

    assert migration.encrypt_plaintext_secrets(apps, connection.schema_editor()) == 0
    assert {pk: stored_secret(pk) for pk in clear} == after

    assert migration.decrypt_secrets(apps, connection.schema_editor()) == 2
    assert {pk: stored_secret(pk) for pk in clear} == clear


def test_the_data_migration_backwards_keeps_a_secret_already_in_clear(merchant, settings):
    """A deploy rolled back: a process still on the old code stored a secret in clear after
    the migration ran; going back to 0004 decrypts the rest and keeps it as it is."""
    settings.WEBHOOK_SECRETS_KEYS = [NEW_KEY]
    encrypted, secret = endpoint_add(
        merchant=merchant, url="https://hooks.example.com/a", now=timezone.now()
    )
    in_clear, _ = endpoint_add(
        merchant=merchant, url="https://hooks.example.com/b", now=timezone.now()
    )
    WebhookEndpoint.objects.filter(pk=in_clear.pk).update(signing_secret=GIVEN_SECRET)

    assert migration.decrypt_secrets(apps, connection.schema_editor()) == 1

    assert stored_secret(encrypted.pk) == secret
    assert stored_secret(in_clear.pk) == GIVEN_SECRET


def test_the_data_migration_leaves_a_token_under_a_key_no_longer_listed(merchant, settings):
    """Encrypting that token again would make the old token the endpoint's "secret": deliveries
    signed with it would go out with a wrong signature instead of waiting for the key."""
    endpoint, _ = endpoint_add(
        merchant=merchant, url="https://hooks.example.com/a", now=timezone.now()
    )
    token = stored_secret(endpoint.pk)
    settings.WEBHOOK_SECRETS_KEYS = [NEW_KEY]  # the key of `token` is gone

    assert migration.encrypt_plaintext_secrets(apps, connection.schema_editor()) == 0
    assert stored_secret(endpoint.pk) == token


# reencrypt_webhook_secrets ---------------------------------------------------------------


def _reencrypt() -> tuple[dict, str]:
    """The command's summary of the signing secrets (second factors: tests/dashboard)."""
    out = StringIO()
    try:
        call_command("reencrypt_webhook_secrets", "--json", stdout=out)
    except CommandError as exc:
        return _signing_secrets(json.loads(out.getvalue())), str(exc)
    return _signing_secrets(json.loads(out.getvalue())), ""


def _signing_secrets(summary: dict) -> dict:
    assert summary.pop("second_factors")["unreadable"] == []
    return summary


def test_reencrypt_moves_every_secret_to_the_new_first_key_and_old_ones_work_until_then(
    merchant, receiver, webhook_settings, django_capture_on_commit_callbacks
):
    webhook_settings.WEBHOOK_SECRETS_KEYS = [OLD_KEY]
    endpoint, secret = endpoint_set(merchant=merchant, url=receiver.url, now=timezone.now())
    _, other_secret = endpoint_add(
        merchant=merchant, url="https://hooks.example.com/b", now=timezone.now()
    )

    # A new key goes first; rows under the old key are still read (and signed with).
    webhook_settings.WEBHOOK_SECRETS_KEYS = [NEW_KEY, OLD_KEY]
    with django_capture_on_commit_callbacks(execute=True):
        event = record_event(merchant, "payout.completed")
    assert_valid_request(receiver.requests[-1], secret=secret, event=event)

    summary, failure = _reencrypt()
    assert (summary, failure) == (
        {"endpoints": 2, "reencrypted": 2, "already_current": 0, "unreadable": []},
        "",
    )
    for pk, plain in (
        (endpoint.pk, secret),
        (WebhookEndpoint.objects.exclude(pk=endpoint.pk).get().pk, other_secret),
    ):
        assert_encrypted(stored_secret(pk), plain, key=NEW_KEY)

    # The old key can go now: nothing changed for the merchant.
    webhook_settings.WEBHOOK_SECRETS_KEYS = [NEW_KEY]
    with django_capture_on_commit_callbacks(execute=True):
        event = record_event(merchant, "payout.completed")
    assert_valid_request(receiver.requests[-1], secret=secret, event=event)

    again, failure = _reencrypt()
    assert (again, failure) == (
        {"endpoints": 2, "reencrypted": 0, "already_current": 2, "unreadable": []},
        "",
    )


def test_reencrypt_names_a_secret_no_key_decrypts_and_exits_non_zero(merchant, settings):
    settings.WEBHOOK_SECRETS_KEYS = [OLD_KEY]
    lost, _ = endpoint_add(merchant=merchant, url="https://hooks.example.com/a", now=timezone.now())
    settings.WEBHOOK_SECRETS_KEYS = [NEW_KEY]
    endpoint_add(merchant=merchant, url="https://hooks.example.com/b", now=timezone.now())
    before = stored_secret(lost.pk)

    summary, failure = _reencrypt()

    assert summary == {
        "endpoints": 2,
        "reencrypted": 0,
        "already_current": 1,
        "unreadable": [str(lost.pk)],
    }
    assert "1 signing secret(s) could not be decrypted" in failure
    assert stored_secret(lost.pk) == before


def test_reencrypt_encrypts_a_secret_left_in_clear_by_code_older_than_the_migration(
    merchant, receiver, webhook_settings, django_capture_on_commit_callbacks
):
    """Migrations run before the processes restart: a web process still on the old code that
    sets a secret after 0006 ran stores it in clear. Its deliveries wait (no key opens it);
    reencrypt_webhook_secrets encrypts it, and they go out signed with it, nothing for the
    merchant to change."""
    webhook_settings.WEBHOOK_SECRETS_KEYS = [NEW_KEY]
    endpoint, _ = endpoint_set(merchant=merchant, url=receiver.url, now=timezone.now())
    corrupt, _ = endpoint_add(
        merchant=merchant, url="https://hooks.example.com/b", now=timezone.now()
    )
    WebhookEndpoint.objects.filter(pk=endpoint.pk).update(signing_secret=GIVEN_SECRET)
    broken = stored_secret(corrupt.pk)[:-8]  # a damaged token is never taken for a secret
    WebhookEndpoint.objects.filter(pk=corrupt.pk).update(signing_secret=broken)
    event = record_event(merchant, "payout.completed")
    assert deliveries_send_due(now=timezone.now()).attempted == 0  # held

    summary, failure = _reencrypt()

    assert summary == {
        "endpoints": 2,
        "reencrypted": 1,
        "already_current": 0,
        "unreadable": [str(corrupt.pk)],
    }
    assert "1 signing secret(s) could not be decrypted" in failure
    assert_encrypted(stored_secret(endpoint.pk), GIVEN_SECRET, key=NEW_KEY)
    assert stored_secret(corrupt.pk) == broken
    later = timezone.now() + timedelta(minutes=2)
    assert deliveries_send_due(now=later).attempted == 1
    assert_valid_request(
        receiver.requests[0], secret=GIVEN_SECRET, event=event, now=int(later.timestamp())
    )


def test_reencrypt_human_output(merchant, settings):
    endpoint_add(merchant=merchant, url="https://hooks.example.com/a", now=timezone.now())
    out = StringIO()
    call_command("reencrypt_webhook_secrets", stdout=out)
    assert "Re-encrypted 0 of 1 webhook signing secret(s) under the first key; 1 already were." in (
        out.getvalue()
    )


# Production settings ---------------------------------------------------------------------


def _import_production_settings(**overrides: str) -> subprocess.CompletedProcess:
    environment = {
        name: value
        for name, value in os.environ.items()
        if name not in ("WEBHOOK_SECRETS_KEYS", "DJANGO_SETTINGS_MODULE")
    }
    environment.update(
        SECRET_KEY=base64.urlsafe_b64encode(os.urandom(48)).decode(),
        ALLOWED_HOSTS="api.cowry.example",
        DATABASE_URL="postgres://cowry@db.internal:5432/cowry",
        REDIS_URL="redis://redis.internal:6379/0",
        CELERY_BROKER_URL="redis://redis.internal:6379/1",
        **overrides,
    )
    return subprocess.run(
        [sys.executable, "-c", "import config.settings_production"],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize("keys", [None, ""], ids=["unset", "empty"])
def test_production_settings_refuse_to_start_without_a_real_webhook_secrets_key(keys):
    started = _import_production_settings(
        **({} if keys is None else {"WEBHOOK_SECRETS_KEYS": keys})
    )

    assert started.returncode != 0
    assert "ImproperlyConfigured: Set WEBHOOK_SECRETS_KEYS" in started.stderr


@pytest.mark.parametrize(
    "keys",
    ["not-a-fernet-key", f"{NEW_KEY},{OLD_KEY[:-2]}"],
    ids=["not a key", "a truncated old key after a real one"],
)
def test_production_settings_refuse_to_start_with_a_value_that_is_not_a_fernet_key(keys):
    # Started, every claimed delivery would stay `delivering` with an attempt spent and every
    # endpoint write would be a 500: the first use of the keys raises, not the start.
    started = _import_production_settings(WEBHOOK_SECRETS_KEYS=keys)

    assert started.returncode != 0
    assert "ImproperlyConfigured: WEBHOOK_SECRETS_KEYS" in started.stderr
    assert "not a Fernet key" in started.stderr
    assert keys.split(",")[-1] not in started.stderr  # a key is never printed


def test_production_settings_start_with_real_keys():
    started = _import_production_settings(WEBHOOK_SECRETS_KEYS=f"{NEW_KEY},{OLD_KEY}")

    assert (started.returncode, started.stderr) == (0, "")
