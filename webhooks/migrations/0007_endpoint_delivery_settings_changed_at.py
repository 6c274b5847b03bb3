from django.db import migrations, models


class Migration(migrations.Migration):
    """The failing-endpoint sweep's clock (endpoints_disable_failing) was `updated_at`, which
    every save moves. Existing endpoints start from their `updated_at`, what the sweep counted
    from until now: none is disabled sooner by this change."""

    dependencies = [
        ('webhooks', '0006_signing_secret_encrypt'),
    ]

    operations = [
        migrations.AddField(
            model_name='webhookendpoint',
            name='delivery_settings_changed_at',
            field=models.DateTimeField(null=True),
        ),
        migrations.RunSQL(
            "UPDATE webhooks_webhookendpoint SET delivery_settings_changed_at = updated_at",
            reverse_sql=migrations.RunSQL.noop,
        ),
        migrations.AlterField(
            model_name='webhookendpoint',
            name='delivery_settings_changed_at',
            field=models.DateTimeField(),
        ),
    ]
