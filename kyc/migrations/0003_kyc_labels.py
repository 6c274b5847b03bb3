"""The dashboard writes KYC in capitals: labels only, no change to the database."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("kyc", "0002_fk_index_covered_by_composite"),
    ]

    operations = [
        migrations.AlterModelOptions(
            name="kycdocument",
            options={"ordering": ["created_at", "position"], "verbose_name": "KYC document"},
        ),
        migrations.AlterModelOptions(
            name="kycstatuschange",
            options={"ordering": ["-created_at", "-id"], "verbose_name": "KYC status change"},
        ),
        migrations.AlterModelOptions(
            name="kycsubmission",
            options={"ordering": ["-number"], "verbose_name": "KYC submission"},
        ),
    ]
