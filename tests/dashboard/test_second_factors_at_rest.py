"""TOTP keys and recovery codes are stored encrypted with the keyring of the webhook signing
secrets: no table holds them in clear, the keyring's rotation re-encrypts them, and logins go on
working with the same authenticator and codes afterwards."""

import importlib
import json
from base64 import b32encode
from io import StringIO

import pytest
from cryptography.fernet import Fernet
from django.apps import apps
from django.core.management import call_command
from django.db import connection
from django_otp.plugins.otp_static.models import StaticDevice, StaticToken
from django_otp.plugins.otp_totp.models import TOTPDevice

from core import secrets_at_rest
from merchants.models import Authenticator, RecoveryCodes
from tests.dashboard.test_two_factor import code_for, fresh_login, set_up

pytestmark = pytest.mark.django_db

OLD_KEY, NEW_KEY = Fernet.generate_key().decode(), Fernet.generate_key().decode()


def every_row_as_text() -> str:
    """Every row of every table of the database, as PostgreSQL prints it (what a dump holds)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT quote_ident(table_name) FROM information_schema.tables"
            " WHERE table_schema = 'public' AND table_type = 'BASE TABLE'"
        )
        tables = [name for (name,) in cursor.fetchall()]
        rows = []
        for table in tables:
            cursor.execute(f"SELECT t::text FROM {table} t")  # table names from the catalog
            rows += [text for (text,) in cursor.fetchall()]
    return "\n".join(rows)


def plain_forms(device: Authenticator, codes: list[str]) -> list[str]:
    key = device.bin_key
    return [key.hex(), key.hex().upper(), b32encode(key).decode(), *codes]


def test_no_table_holds_a_totp_key_or_recovery_code_in_clear(merchant, staff_client):
    owner = staff_client(merchant=merchant, role="owner", username="owner-r1")
    device, codes = set_up(owner)
    assert len(codes) == 10

    dump = every_row_as_text()

    assert "owner-r1" in dump  # the dump is of this database
    for plain in plain_forms(device, codes):
        assert plain not in dump


def test_rotation_reencrypts_them_and_logins_go_on(merchant, staff_client, settings):
    settings.WEBHOOK_SECRETS_KEYS = [OLD_KEY]
    owner = staff_client(merchant=merchant, role="owner", username="owner-r2")
    device, codes = set_up(owner)
    key = device.bin_key.hex()

    settings.WEBHOOK_SECRETS_KEYS = [NEW_KEY, OLD_KEY]
    out = StringIO()
    call_command("reencrypt_webhook_secrets", "--json", stdout=out)
    factors = json.loads(out.getvalue())["second_factors"]
    assert factors == {"devices": 2, "reencrypted": 2, "already_current": 0, "unreadable": []}
    again = StringIO()
    call_command("reencrypt_webhook_secrets", "--json", stdout=again)
    assert json.loads(again.getvalue())["second_factors"]["already_current"] == 2

    settings.WEBHOOK_SECRETS_KEYS = [NEW_KEY]  # the old key is gone
    stored = Authenticator.objects.get(pk=device.pk)
    assert Fernet(NEW_KEY).decrypt(stored.encrypted_key.encode()).decode() == key
    recovery = RecoveryCodes.objects.get(user=device.user)
    assert sorted(Fernet(NEW_KEY).decrypt(recovery.encrypted_codes.encode()).split()) == sorted(
        code.encode() for code in codes
    )
    with_code = fresh_login("owner-r2")
    token = code_for(stored, steps_ahead=1)
    assert with_code.post("/admin/two-factor/verify/", {"token": token}).status_code == 302
    assert with_code.get("/admin/").status_code == 200
    with_recovery = fresh_login("owner-r2")
    assert with_recovery.post("/admin/two-factor/verify/", {"token": codes[3]}).status_code == 302
    assert with_recovery.get("/admin/").status_code == 200


def test_the_migration_moves_django_otps_plaintext_devices(django_user_model):
    """Devices set up before the encryption (django-otp's own tables) move into ours."""
    user = django_user_model.objects.create_user("before-0013", password="pw-123456-staff")
    totp = TOTPDevice.objects.create(user=user, name="authenticator", confirmed=True, last_t=7)
    static = StaticDevice.objects.create(user=user, name="recovery codes", confirmed=True)
    StaticToken.objects.bulk_create(
        [StaticToken(device=static, token=code) for code in ("aaaa1111", "bbbb2222")]
    )
    migration = importlib.import_module("merchants.migrations.0013_move_second_factors_encrypted")

    migration.encrypt_second_factors(apps, None)

    moved = Authenticator.objects.get(user=user)
    assert (moved.confirmed, moved.last_t, moved.bin_key) == (True, 7, totp.bin_key)
    assert secrets_at_rest.decrypt(moved.encrypted_key) == totp.key
    assert RecoveryCodes.objects.get(user=user).codes() == ["aaaa1111", "bbbb2222"]
    assert not TOTPDevice.objects.exists() and not StaticToken.objects.exists()
    assert totp.key not in every_row_as_text()
