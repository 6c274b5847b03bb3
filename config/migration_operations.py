"""Migration operations shared by the apps."""

from django.contrib.postgres import operations as postgres_operations
from django.db.migrations.operations import AddIndex


class AddIndexConcurrently(postgres_operations.AddIndexConcurrently):
    """CREATE INDEX CONCURRENTLY on PostgreSQL, where the table is large and keeps taking
    writes while the index is built (the migration must be `atomic = False`); a plain CREATE
    INDEX on SQLite, a developer's database, which has no such statement."""

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor == "postgresql":
            super().database_forwards(app_label, schema_editor, from_state, to_state)
        else:
            AddIndex.database_forwards(self, app_label, schema_editor, from_state, to_state)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor == "postgresql":
            super().database_backwards(app_label, schema_editor, from_state, to_state)
        else:
            AddIndex.database_backwards(self, app_label, schema_editor, from_state, to_state)
