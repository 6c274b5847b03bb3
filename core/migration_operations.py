"""Migration operations shared by the apps: the migrations that build an index on a large,
busy table import CREATE INDEX CONCURRENTLY from here (such a migration is `atomic = False`)."""

from django.contrib.postgres.operations import AddIndexConcurrently

__all__ = ["AddIndexConcurrently"]
