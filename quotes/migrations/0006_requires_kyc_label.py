"""The dashboard writes KYC in capitals: labels only, no change to the database."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("quotes", "0005_operator_prediction"),
    ]

    operations = [
        migrations.AlterField(
            model_name="corridor",
            name="requires_kyc",
            field=models.BooleanField(default=False, verbose_name="requires KYC"),
        ),
    ]
