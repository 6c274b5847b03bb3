"""Every response carries X-Request-Id (the client's, when it sent a sane one), and every log
line written while serving the request carries it too."""

import contextvars
import json
import logging
import re
import uuid
from datetime import UTC, datetime

HEADER = "X-Request-Id"
_ACCEPTED = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")

current_request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="")


class RequestIdMiddleware:
    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request):
        incoming = request.headers.get(HEADER, "")
        request_id = incoming if _ACCEPTED.match(incoming) else uuid.uuid4().hex
        request.request_id = request_id
        token = current_request_id.set(request_id)
        try:
            response = self.get_response(request)
        finally:
            current_request_id.reset(token)
        response[HEADER] = request_id
        return response


class RequestIdFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        # django.request's line about a failed request comes after the middleware has returned;
        # it carries the request itself.
        request = getattr(record, "request", None)
        record.request_id = current_request_id.get() or getattr(request, "request_id", "")
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, request_id, and the exception."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": datetime.fromtimestamp(record.created, tz=UTC).isoformat(),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "request_id": getattr(record, "request_id", ""),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)
