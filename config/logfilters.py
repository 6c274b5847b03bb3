"""Logging filters that keep secrets out of log lines, and repeated lines out of the logs."""

import logging


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
