"""Support's dashboard lists every merchant's transfers newest first (created_at, id descending):
with only the per-merchant indexes, each page read and sorted the whole table. Built
CONCURRENTLY (outside a transaction): the table takes writes meanwhile."""

from django.db import migrations, models

from core.migration_operations import AddIndexConcurrently


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("transfers", "0006_disbursement_attempts_fill"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="transfer",
            index=models.Index(fields=["-created_at", "-id"], name="transfer_recent"),
        ),
    ]
