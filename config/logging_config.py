"""Log lines as an operator queries them: one JSON object per line with time, level, logger,
message and request_id (python-json-logger; the id is django-guid's), the same for the web
(Django and gunicorn, config.gunicorn_conf), the Celery worker and beat (config.celery)."""

import logging
import logging.config
import re
from typing import Any

from pythonjsonlogger.json import JsonFormatter

# What a line carries; a record's other attributes (django.request's request object, the
# arguments of a task Celery logs) are left out, as they may hold a customer's details.
FIELDS = frozenset({"time", "level", "logger", "message", "request_id", "exception", "stack"})


class JsonLines(JsonFormatter):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(
            "{levelname}{name}{message}{request_id}",
            style="{",
            timestamp="time",
            rename_fields={
                "levelname": "level",
                "name": "logger",
                "exc_info": "exception",
                "stack_info": "stack",
            },
            **kwargs,
        )

    def add_fields(self, log_data: dict, record: logging.LogRecord, message_dict: dict) -> None:
        super().add_fields(log_data, record, message_dict)
        for field in log_data.keys() - FIELDS:
            del log_data[field]


def configure(config: dict) -> None:
    """settings.LOGGING_CONFIG, and the worker's and beat's (config.celery): a warning is a log
    line too, not text on stderr."""
    logging.config.dictConfig(config)
    logging.captureWarnings(True)


# A phone number written with its country code (+, or %2B in a query string), 6 to 15 digits.
_PHONE = re.compile(r"(\+|%2B)(\d{2,11})(\d{4})(?!\d)", re.IGNORECASE)


def mask_phones(text: str) -> str:
    """Every phone number in `text` with its last four digits only: +237*****0001."""
    return _PHONE.sub(lambda m: f"{m[1]}{'*' * len(m[2])}{m[3]}", text)


# A teammate's invitation link (merchants.team, config.urls: admin/invite/<uid>/<token>/) in a
# request line gunicorn writes: whoever reads the logs could choose the teammate's password.
_INVITE_TOKEN = re.compile(r"(/admin/invite/[^/\s]+/)(?!choose-password/)[^/\s\"?]+")


def mask_invite_tokens(text: str) -> str:
    return _INVITE_TOKEN.sub(r"\1***", text)


class MaskPrivate(logging.Filter):
    """No full phone number and no invitation token in a line, whichever logger wrote it."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        masked = mask_invite_tokens(mask_phones(message))
        if masked != message:
            record.msg, record.args = masked, None
        return True
