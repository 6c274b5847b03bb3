import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from rest_framework.test import APIClient

from merchants.models import ApiKey, AuditLogEntry, Merchant

pytestmark = pytest.mark.django_db


def _run(*args) -> dict:
    out = StringIO()
    call_command(*args, "--json", stdout=out)
    return json.loads(out.getvalue())


def _status_with(api_key: str, api_secret: str) -> int:
    client = APIClient()
    client.credentials(HTTP_X_API_KEY=api_key, HTTP_X_API_SECRET=api_secret)
    return client.post(
        "/customers", {"first_name": "A"}, format="json", HTTP_IDEMPOTENCY_KEY="k"
    ).status_code


def test_create_merchant_with_key_gives_working_credentials():
    data = _run("create_merchant", "Acme", "--with-key")
    assert Merchant.objects.get(pk=data["merchant_id"]).name == "Acme"
    assert _status_with(data["api_key"], data["api_secret"]) == 201


def test_create_api_key_then_revoke_it():
    merchant_id = _run("create_merchant", "Acme")["merchant_id"]
    key = _run("create_api_key", merchant_id, "--expires-at", "2999-01-01T00:00:00Z")
    assert key["expires_at"].startswith("2999-01-01")
    assert _status_with(key["api_key"], key["api_secret"]) == 201

    assert _run("revoke_api_key", key["api_key"]) == {"api_key": key["api_key"], "revoked": True}
    assert _status_with(key["api_key"], key["api_secret"]) == 401


def test_key_and_webhook_changes_made_by_ops_are_in_the_merchants_audit_log():
    merchant_id = _run("create_merchant", "Acme", "--with-key")["merchant_id"]
    key = _run("create_api_key", merchant_id, "--label", "batch job")["api_key"]
    _run("revoke_api_key", key)
    _run("revoke_api_key", key)  # already revoked: nothing changes, nothing more recorded
    _run("set_webhook", merchant_id, "https://93.184.216.34/hook")
    entries = AuditLogEntry.objects.filter(merchant_id=merchant_id).order_by("id")
    assert [(entry.actor_label, entry.action) for entry in entries] == [
        ("system", "api_key.created"),
        ("system", "api_key.created"),
        ("system", "api_key.revoked"),
        ("system", "webhook.updated"),
    ]
    assert entries[1].target == entries[2].target == key
    assert entries[3].target == "https://93.184.216.34/hook"
    assert "whsec" not in json.dumps([entry.detail for entry in entries])


@pytest.mark.parametrize("expiry", ["2020-01-01T00:00:00Z", "2020-01-01"])
def test_create_api_key_refuses_an_expiry_in_the_past(expiry):
    merchant_id = _run("create_merchant", "Acme")["merchant_id"]
    with pytest.raises(CommandError, match="future"):
        call_command("create_api_key", merchant_id, "--expires-at", expiry)
    assert not ApiKey.objects.exists()


def test_create_api_key_for_unknown_merchant_fails_clearly():
    with pytest.raises(CommandError, match="No merchant"):
        call_command("create_api_key", "00000000-0000-0000-0000-000000000000")


@pytest.mark.parametrize("written", ["2999-01-01", "2999-01-01T00:00:00"])
def test_create_api_key_takes_an_expiry_without_offset_as_utc(written):
    merchant_id = _run("create_merchant", "Acme")["merchant_id"]
    key = _run("create_api_key", merchant_id, "--expires-at", written)
    assert key["expires_at"] == "2999-01-01T00:00:00+00:00"
    assert ApiKey.objects.get(key=key["api_key"]).expires_at.isoformat() == key["expires_at"]


@pytest.mark.parametrize(
    "command",
    [
        ("create_api_key", "nope"),
        ("credit_wallet", "nope", "XOF", "100", "--reason", "test"),
        ("debit_wallet", "nope", "XOF", "100", "--reason", "test"),
        (
            "create_staff_user",
            "u1",
            "--password",
            "pw-123456-staff",
            "--merchant",
            "nope",
            "--role",
            "owner",
        ),
    ],
)
def test_a_malformed_merchant_id_is_no_merchant_not_a_traceback(command):
    with pytest.raises(CommandError, match="No merchant"):
        call_command(*command)


def test_seed_demo_is_idempotent_and_prints_a_new_key_each_time():
    first = _run("seed_demo")
    second = _run("seed_demo")
    assert first["merchant_id"] == second["merchant_id"]
    assert first["api_key"] != second["api_key"]
    assert Merchant.objects.filter(name="Demo Merchant").count() == 1
    assert ApiKey.objects.filter(merchant_id=first["merchant_id"]).count() == 2
    assert _status_with(second["api_key"], second["api_secret"]) == 201


@pytest.mark.parametrize(
    ("command", "message"),
    [
        (("create_merchant", "M" * 201), "at most 200 characters"),
        (("create_api_key", "{merchant}", "--label", "L" * 101), "at most 100 characters"),
        (
            ("create_staff_user", "u" * 151, "--password", "pw-123456-staff", "--support"),
            "at most 150 characters",
        ),
    ],
)
def test_an_overlong_name_is_refused_clearly_not_a_database_traceback(command, message):
    from django.contrib.auth import get_user_model

    merchant_id = _run("create_merchant", "Acme")["merchant_id"]
    with pytest.raises(CommandError, match=message):
        call_command(*(arg.replace("{merchant}", merchant_id) for arg in command))
    assert Merchant.objects.count() == 1
    assert not ApiKey.objects.exists()
    assert not get_user_model().objects.exists()


def test_commands_that_set_something_are_safe_to_run_twice():
    """A script retried after a timeout: the same merchant staff, webhook and ledger state."""
    from django.contrib.auth import get_user_model
    from django.test import Client

    from merchants.models import MerchantMembership
    from webhooks.models import WebhookEndpoint

    merchant_id = _run("create_merchant", "Acme")["merchant_id"]
    staff = ("create_staff_user", "amina", "--password", "s3cret-pw-staff", "--merchant")
    webhook = ("set_webhook", merchant_id, "https://93.184.216.34/hook", "--secret", "s" * 32)
    for _ in range(2):
        assert _run(*staff, merchant_id, "--role", "developer")["role"] == "developer"
        assert _run(*webhook) == {"url": "https://93.184.216.34/hook", "signing_secret": "s" * 32}
        assert _run("check_ledger")["ok"] is True

    assert get_user_model().objects.filter(username="amina").count() == 1
    assert MerchantMembership.objects.get(user__username="amina").role == "developer"
    assert Client().login(username="amina", password="s3cret-pw-staff")
    assert WebhookEndpoint.objects.filter(merchant_id=merchant_id).count() == 1


def test_create_staff_user_reads_a_password_of_dash_from_standard_input():
    from django.contrib.auth import get_user_model
    from django.test import Client

    out = StringIO()
    typed = StringIO("a passphrase kept off argv\n")
    call_command(
        "create_staff_user",
        "ana",
        "--password",
        "-",
        "--support",
        "--json",
        stdin=typed,
        stdout=out,
    )
    assert json.loads(out.getvalue()) == {"username": "ana", "merchant_id": None, "role": "support"}
    assert Client().login(username="ana", password="a passphrase kept off argv")
    with pytest.raises(CommandError, match="at least 12 characters"):  # nothing typed
        call_command("create_staff_user", "bo", "--password", "-", "--support", stdin=StringIO())
    assert not get_user_model().objects.filter(username="bo").exists()
