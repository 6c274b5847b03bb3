import django.db.models.deletion
from django.db import migrations, models

MODELS = ("merchantoperator", "merchantcorridor")


def tables_take_over(apps, schema_editor):
    """Create the tables where merchants' 0002 never did (a new database); where it did, keep
    them and their rows, and move their content types (permissions, admin history) along."""
    existing = set(schema_editor.connection.introspection.table_names())
    for name in ("MerchantOperator", "MerchantCorridor"):
        model = apps.get_model("quotes", name)
        if model._meta.db_table not in existing:
            schema_editor.create_model(model)
    content_types = apps.get_model("contenttypes", "ContentType")
    db = schema_editor.connection.alias
    if not content_types.objects.using(db).filter(app_label="quotes", model__in=MODELS).exists():
        content_types.objects.using(db).filter(app_label="merchants", model__in=MODELS).update(
            app_label="quotes"
        )


def tables_give_back(apps, schema_editor):
    for name in ("MerchantCorridor", "MerchantOperator"):
        schema_editor.delete_model(apps.get_model("quotes", name))


class Migration(migrations.Migration):
    """The merchant's enabled operators and corridors, taken over from merchants (whose
    migrations may not depend on quotes) with their tables' names and rows."""

    dependencies = [
        ("contenttypes", "0002_remove_content_type_name"),
        ("merchants", "0001_initial"),
        ("quotes", "0008_catalog_currencies_checked"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="MerchantOperator",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("enabled_at", models.DateTimeField(auto_now_add=True)),
                        ("merchant", models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name="operator_links", to="merchants.merchant")),
                        ("operator", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="merchant_links", to="quotes.operator")),
                    ],
                    options={
                        "verbose_name": "enabled operator",
                        "db_table": "merchants_merchantoperator",
                        "constraints": [models.UniqueConstraint(fields=("merchant", "operator"), name="merchant_operator_once")],
                    },
                ),
                migrations.CreateModel(
                    name="MerchantCorridor",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("enabled_at", models.DateTimeField(auto_now_add=True)),
                        ("corridor", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="merchant_links", to="quotes.corridor")),
                        ("merchant", models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name="corridor_links", to="merchants.merchant")),
                    ],
                    options={
                        "verbose_name": "enabled corridor",
                        "db_table": "merchants_merchantcorridor",
                        "constraints": [models.UniqueConstraint(fields=("merchant", "corridor"), name="merchant_corridor_once")],
                    },
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(tables_take_over, tables_give_back),
    ]
