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


def test_log_lines_during_a_request_carry_its_id_as_json(api, settings):
    settings.ROOT_URLCONF = "tests.urls_errors"
    records: list[logging.LogRecord] = []

    class Capture(logging.Handler):
        def emit(self, record):
            records.append(record)

    handler = Capture()
    handler.addFilter(RequestIdFilter())
    logger = logging.getLogger("cowry.errors")
    logger.addHandler(handler)
    try:
        api.client.raise_request_exception = False
        api.client.get("/test-explode", HTTP_X_REQUEST_ID="trace-500")
    finally:
        logger.removeHandler(handler)

    assert records, "the 500 was logged"
    line = json.loads(JsonFormatter().format(records[0]))
    assert line["request_id"] == "trace-500"
    assert line["level"] == "ERROR"
    assert "RuntimeError" in line["exception"]


def test_djangos_own_line_about_a_failed_request_carries_its_id(api, settings):
    # django.request logs a 5xx after the middleware has returned the response
    settings.ROOT_URLCONF = "tests.urls_errors"
    records: list[logging.LogRecord] = []

    class Capture(logging.Handler):
        def emit(self, record):
            records.append(record)

    handler = Capture()
    handler.addFilter(RequestIdFilter())
    logger = logging.getLogger("django.request")
    logger.addHandler(handler)
    try:
        api.client.raise_request_exception = False
        api.client.get("/test-explode", HTTP_X_REQUEST_ID="trace-500")
    finally:
        logger.removeHandler(handler)

    assert records, "django.request logged the 500"
    assert json.loads(JsonFormatter().format(records[-1]))["request_id"] == "trace-500"
