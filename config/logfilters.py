"""Logging filters that keep secrets out of log lines."""

import logging


class DropTemplateContext(logging.Filter):
    """django.template logs a failed variable lookup at DEBUG with an exception whose text is
    the whole template context, and the page that shows a new API secret once has the secret
    in its context. Keep the message, drop the exception."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.exc_info = None
        record.exc_text = None
        return True
