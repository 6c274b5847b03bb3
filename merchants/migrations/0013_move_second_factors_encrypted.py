"""Move every django-otp TOTP device and recovery-code set into merchants' own models, their
keys and codes encrypted (core.secrets_at_rest), and delete the plaintext rows."""

from django.db import migrations

from core import secrets_at_rest

_COPIED = ["user_id", "name", "confirmed", "throttling_failure_timestamp"]
_COPIED += ["throttling_failure_count"]
_TOTP = ["step", "t0", "digits", "tolerance", "drift", "last_t", "created_at", "last_used_at"]


def encrypt_second_factors(apps, schema_editor):
    TOTPDevice = apps.get_model("otp_totp", "TOTPDevice")
    StaticDevice = apps.get_model("otp_static", "StaticDevice")
    StaticToken = apps.get_model("otp_static", "StaticToken")
    Authenticator = apps.get_model("merchants", "Authenticator")
    RecoveryCodes = apps.get_model("merchants", "RecoveryCodes")
    Authenticator.objects.bulk_create(
        Authenticator(
            encrypted_key=secrets_at_rest.encrypt(device.key),
            **{field: getattr(device, field) for field in _COPIED + _TOTP},
        )
        for device in TOTPDevice.objects.all()
    )
    TOTPDevice.objects.all().delete()
    codes: dict[int, list[str]] = {}
    for device_id, token in StaticToken.objects.values_list("device_id", "token"):
        codes.setdefault(device_id, []).append(token)
    RecoveryCodes.objects.bulk_create(
        RecoveryCodes(
            encrypted_codes=secrets_at_rest.encrypt(" ".join(codes.get(device.pk, []))),
            **{field: getattr(device, field) for field in _COPIED},
        )
        for device in StaticDevice.objects.all()
    )
    StaticToken.objects.all().delete()
    StaticDevice.objects.all().delete()


class Migration(migrations.Migration):
    dependencies = [
        ("merchants", "0012_encrypted_second_factors"),
        ("otp_totp", "0003_add_timestamps"),
        ("otp_static", "0003_add_timestamps"),
    ]

    operations = [migrations.RunPython(encrypt_second_factors, migrations.RunPython.noop)]
