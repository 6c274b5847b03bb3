"""Support's dashboard lists every merchant's payins, payouts and journals newest first
(created_at, id descending): with only the per-merchant indexes, each page read and sorted the
whole table. Built CONCURRENTLY (outside a transaction): the table takes writes meanwhile."""

from django.db import migrations, models

from core.migration_operations import AddIndexConcurrently


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("payments", "0006_help_texts_timeout_sweep"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="payin",
            index=models.Index(fields=["-created_at", "-id"], name="payin_recent"),
        ),
        AddIndexConcurrently(
            model_name="payout",
            index=models.Index(fields=["-created_at", "-id"], name="payout_recent"),
        ),
        AddIndexConcurrently(
            model_name="journal",
            index=models.Index(fields=["-created_at", "-id"], name="journal_recent"),
        ),
    ]
