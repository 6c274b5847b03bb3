"""Logging filters that keep secrets out of log lines, and repeated lines and stacks that are
not ours out of the logs."""

import logging
import re

from django.conf import settings


class DropTemplateContext(logging.Filter):
    """django.template logs a failed variable lookup at DEBUG with an exception whose text is
    the whole template context, and the page that shows a new API secret once has the secret
    in its context. Keep the message, drop the exception."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.exc_info = None
        record.exc_text = None
        return True


class DropHealthUnavailable(logging.Filter):
    """django.request logs every 5xx at ERROR: during an outage, a line per load-balancer probe
    of /health. The outage is logged once by config.health; drop /health's 503s here."""

    def filter(self, record: logging.LogRecord) -> bool:
        request = getattr(record, "request", None)
        return not (
            getattr(record, "status_code", None) == 503
            and getattr(request, "path", None) == "/health"
        )


# celery.beat's format for a due task it could not send, and the error it wraps.
_BEAT_SEND_ERROR = "Message Error: %s\n%s"
_SCHEDULED_TASK = re.compile(r"^Couldn't apply scheduled task (?P<entry>.+?): ")


class OneLineBeatSendError(logging.Filter):
    """celery.beat logs a due task it could not send (the broker away: each due task, each tick)
    with beat's own call stack in the message and the error's traceback: neither is about our
    code. One line instead: the schedule entry, its task and the error."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg != _BEAT_SEND_ERROR or not record.args:
            return True
        error = record.args[0]
        cause = getattr(error, "__cause__", None) or getattr(error, "__context__", None) or error
        match = _SCHEDULED_TASK.match(str(error))
        entry = match["entry"] if match else "a due task"
        task = settings.CELERY_BEAT_SCHEDULE.get(entry, {}).get("task")
        record.msg = "Beat could not send %s: %s: %s (skipped until its next run)"
        record.args = (f"{entry} ({task})" if task else entry, type(cause).__name__, cause)
        record.exc_info = record.exc_text = record.stack_info = None
        return True
