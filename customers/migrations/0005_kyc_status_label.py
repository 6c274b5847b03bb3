"""The dashboard writes KYC in capitals: labels only, no change to the database."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("customers", "0004_dashboard_recent_index"),
    ]

    operations = [
        migrations.AlterField(
            model_name="customer",
            name="kyc_status",
            field=models.CharField(
                choices=[
                    ("not_started", "Not Started"),
                    ("pending", "Pending"),
                    ("approved", "Approved"),
                    ("rejected", "Rejected"),
                ],
                default="not_started",
                max_length=16,
                verbose_name="KYC status",
            ),
        ),
    ]
