"""Support finds a transfer in the dashboard by the provider reference pasted from a merchant's
ticket, of either leg or of any disbursement attempt: with no index on those columns, that
search read the whole table. The indexes leave out the rows with no reference. Built
CONCURRENTLY (outside a transaction): the tables take writes meanwhile."""

from django.db import migrations, models

from core.migration_operations import AddIndexConcurrently


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("transfers", "0007_dashboard_recent_index"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="transfer",
            index=models.Index(
                condition=~models.Q(collection_reference=""),
                fields=["collection_reference"],
                name="transfer_collection_ref",
            ),
        ),
        AddIndexConcurrently(
            model_name="transfer",
            index=models.Index(
                condition=~models.Q(disbursement_reference=""),
                fields=["disbursement_reference"],
                name="transfer_disbursement_ref",
            ),
        ),
        AddIndexConcurrently(
            model_name="transferdisbursementattempt",
            index=models.Index(
                condition=~models.Q(provider_reference=""),
                fields=["provider_reference"],
                name="transfer_attempt_provider_ref",
            ),
        ),
    ]
