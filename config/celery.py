import os

from celery import Celery, signals

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("cowry")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@signals.task_prerun.connect
@signals.task_postrun.connect
def _database_connections_as_per_request(task=None, **kwargs) -> None:
    """Treat each task as Django treats a request: close a connection only when it is broken
    (health check) or older than CONN_MAX_AGE. Celery's own Django fixup would close it around
    every task (a new PostgreSQL backend, and no prepared statements, per task); it is kept
    from doing so by CELERY_DB_REUSE_MAX."""
    if task is not None and getattr(task.request, "is_eager", False):
        return  # inside the caller's transaction (tests, embedded mode): nothing to do
    from django.db import close_old_connections

    close_old_connections()
