"""Support finds a payin or payout in the dashboard by the provider reference pasted from a
merchant's ticket: with no index on provider_reference, that search read the whole table. The
indexes leave out the rows with no reference yet (never submitted). Built CONCURRENTLY (outside
a transaction): the table takes writes meanwhile."""

from django.db import migrations, models

from core.migration_operations import AddIndexConcurrently


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("payments", "0007_dashboard_recent_indexes"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="payin",
            index=models.Index(
                condition=~models.Q(provider_reference=""),
                fields=["provider_reference"],
                name="payin_provider_reference",
            ),
        ),
        AddIndexConcurrently(
            model_name="payout",
            index=models.Index(
                condition=~models.Q(provider_reference=""),
                fields=["provider_reference"],
                name="payout_provider_reference",
            ),
        ),
    ]
