"""Support's dashboard lists every merchant's customers newest first (created_at, id descending):
with only the per-merchant indexes, each page read and sorted the whole table. Built
CONCURRENTLY (outside a transaction): the table takes writes meanwhile."""

from django.db import migrations, models

from core.migration_operations import AddIndexConcurrently


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("customers", "0003_fk_index_covered_by_composite"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="customer",
            index=models.Index(fields=["-created_at", "-id"], name="customer_recent"),
        ),
    ]
