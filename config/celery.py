import logging
import os

from celery import Celery, bootsteps, signals
from celery.worker.request import Request

from core.log_limits import OnChange

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("cowry")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
logger = logging.getLogger("cowry")


class RequestIdOnReceipt(Request):
    """A task message as the worker's main process takes it: the request id it carries
    (django-guid's header) is set while Celery logs "Task ... received", and cleared at
    task_received, sent right after that line (django-guid sets it only around the run)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        from django_guid import set_guid
        from django_guid.config import settings as guid_settings

        set_guid(self._request_dict.get(guid_settings.guid_header_name))


app.Task.Request = f"{__name__}:RequestIdOnReceipt"


@signals.task_received.connect
def _request_id_received(**kwargs) -> None:
    from django_guid import clear_guid

    clear_guid()  # the main process's next lines are not that task's


@signals.celeryd_init.connect  # early: the worker warns of running as root before its setup
@signals.setup_logging.connect
def _log_as_django_does(loglevel: int | None = None, **kwargs) -> None:
    """The worker and beat log through settings.LOGGING (JSON lines with the request id), not
    Celery's own plain-text handlers, at their --loglevel; their startup banner is printed."""
    from django.conf import settings

    from config import logging_config

    logging_config.configure(settings.LOGGING)
    if loglevel:
        logging.getLogger().setLevel(loglevel)


class Heartbeat(bootsteps.StartStopStep):
    """The worker's consumer records that it is alive every WORKER_HEARTBEAT_SECONDS, on its
    own event loop: a consumer that stopped taking tasks stops the heartbeat (config.health)."""

    requires = {"celery.worker.consumer.tasks:Tasks"}

    def __init__(self, parent, **kwargs) -> None:
        super().__init__(parent, **kwargs)
        self.timer_entry = None

    def start(self, parent) -> None:
        from django.conf import settings

        _heartbeat()
        self.timer_entry = parent.timer.call_repeatedly(
            settings.WORKER_HEARTBEAT_SECONDS, _heartbeat
        )

    def stop(self, parent) -> None:
        if self.timer_entry is not None:
            parent.timer.cancel(self.timer_entry)
            self.timer_entry = None


# Whether this worker's last heartbeat failed: a Redis outage is one warning, not a traceback
# every WORKER_HEARTBEAT_SECONDS, and its end one line.
_HEARTBEAT_FAILING = OnChange(False)


def _heartbeat() -> None:
    from config import health

    try:
        health.heartbeat_record()
    except Exception as exc:  # Redis away: /health says so; the next beat tries again
        if _HEARTBEAT_FAILING.changed(True):
            logger.warning(
                "Could not record the worker heartbeat (%s: %s); /health reports the worker"
                " as unknown until Redis answers (not logged again until then)",
                type(exc).__name__,
                exc,
            )
        return
    if _HEARTBEAT_FAILING.changed(False):
        logger.info("Worker heartbeat recorded again")


app.steps["consumer"].add(Heartbeat)


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
