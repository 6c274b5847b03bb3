"""Encrypt the signing secrets stored in clear (core.secrets_at_rest, WEBHOOK_SECRETS_KEYS);
backwards, decrypt them again."""

from django.db import migrations

from core import secrets_at_rest


def encrypt_plaintext_secrets(apps, schema_editor) -> int:
    """Encrypt every secret still in clear under the first key; returns how many. A token is
    left alone, so a second run changes nothing (and one under a key no longer listed is never
    encrypted again, which would make its "secret" the old token)."""
    WebhookEndpoint = apps.get_model("webhooks", "WebhookEndpoint")
    encrypted = 0
    for pk, stored in WebhookEndpoint.objects.values_list("pk", "signing_secret").iterator():
        if not secrets_at_rest.in_clear(stored):
            continue
        WebhookEndpoint.objects.filter(pk=pk).update(
            signing_secret=secrets_at_rest.encrypt(stored)
        )
        encrypted += 1
    return encrypted


def decrypt_secrets(apps, schema_editor) -> int:
    """Put every secret back in clear (the keys must open them all: an unreadable one stops
    the migration); returns how many. One already in clear (set by a process still on the old
    code after the migration ran, as during a deploy rolled back) stays as it is."""
    WebhookEndpoint = apps.get_model("webhooks", "WebhookEndpoint")
    decrypted = 0
    for pk, stored in WebhookEndpoint.objects.values_list("pk", "signing_secret").iterator():
        if secrets_at_rest.in_clear(stored):
            continue
        WebhookEndpoint.objects.filter(pk=pk).update(
            signing_secret=secrets_at_rest.decrypt(stored)
        )
        decrypted += 1
    return decrypted


class Migration(migrations.Migration):

    dependencies = [
        ('webhooks', '0005_signing_secret_encrypted_width'),
    ]

    operations = [
        migrations.RunPython(encrypt_plaintext_secrets, decrypt_secrets, elidable=False),
    ]
