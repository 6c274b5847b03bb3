import json
import logging

import pytest

from config.request_id import JsonFormatter, RequestIdFilter

pytestmark = pytest.mark.django_db


def test_every_response_carries_a_generated_request_id(api):
    first = api.get("/customers/00000000-0000-0000-0000-000000000000")
    second = api.get("/health")
    assert len(first["X-Request-Id"]) == 32
    assert first["X-Request-Id"] != second["X-Request-Id"]


def test_client_request_id_is_echoed(api):
    response = api.client.get("/health", HTTP_X_REQUEST_ID="merchant-trace-42")
    assert response["X-Request-Id"] == "merchant-trace-42"


def test_unsafe_client_request_id_is_replaced(api):
    response = api.client.get("/health", HTTP_X_REQUEST_ID="bad id\nwith newline")
    assert response["X-Request-Id"] != "bad id\nwith newline"
    assert len(response["X-Request-Id"]) == 32


def _lines_logged_by(logger_name: str, api, path: str, request_id: str) -> list[dict]:
    """The JSON lines `logger_name` wrote while the API served GET `path` with `request_id`."""
    records: list[logging.LogRecord] = []

    class Capture(logging.Handler):
        def emit(self, record):
            records.append(record)

    handler = Capture()
    handler.addFilter(RequestIdFilter())
    logger = logging.getLogger(logger_name)
    logger.addHandler(handler)
    try:
        api.client.raise_request_exception = False
        api.client.get(path, HTTP_X_REQUEST_ID=request_id)
    finally:
        logger.removeHandler(handler)
    return [json.loads(JsonFormatter().format(record)) for record in records]


def test_log_lines_during_a_request_carry_its_id_as_json(api, settings):
    settings.ROOT_URLCONF = "tests.urls_errors"
    lines = _lines_logged_by("cowry.errors", api, "/test-explode", "trace-500")

    assert lines, "the 500 was logged"
    assert lines[0]["request_id"] == "trace-500"
    assert lines[0]["level"] == "ERROR"
    assert "RuntimeError" in lines[0]["exception"]


def test_djangos_own_line_about_a_failed_request_carries_its_id(api, settings):
    # django.request logs a 5xx after the middleware has returned the response
    settings.ROOT_URLCONF = "tests.urls_errors"
    lines = _lines_logged_by("django.request", api, "/test-explode", "trace-500")

    assert lines, "django.request logged the 500"
    assert lines[-1]["request_id"] == "trace-500"
