"""Support's dashboard lists every merchant's webhook events and deliveries newest first
(created_at, id descending): with only the per-merchant indexes, each page read and sorted the
whole table. Built CONCURRENTLY (outside a transaction): the table takes writes meanwhile."""

from django.db import migrations, models

from core.migration_operations import AddIndexConcurrently


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("webhooks", "0007_endpoint_delivery_settings_changed_at"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="event",
            index=models.Index(fields=["-created_at", "-id"], name="event_recent"),
        ),
        AddIndexConcurrently(
            model_name="delivery",
            index=models.Index(fields=["-created_at", "-id"], name="delivery_recent"),
        ),
    ]
