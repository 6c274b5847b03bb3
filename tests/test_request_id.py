import logging

import pytest

from tests.logs import console_lines

pytestmark = pytest.mark.django_db


def test_every_response_carries_a_generated_request_id(api):
    first = api.get("/customers/00000000-0000-0000-0000-000000000000")
    second = api.get("/health")
    assert len(first["X-Request-Id"]) == 32
    assert first["X-Request-Id"] != second["X-Request-Id"]


def test_client_request_id_is_echoed(api):
    response = api.client.get("/health", HTTP_X_REQUEST_ID="merchant-trace-42")
    assert response["X-Request-Id"] == "merchant-trace-42"


@pytest.mark.parametrize("unsafe", ["bad id\nwith newline", "x" * 129, "", "a/b"])
def test_unsafe_client_request_id_is_replaced(api, unsafe):
    response = api.client.get("/health", HTTP_X_REQUEST_ID=unsafe)
    assert response["X-Request-Id"] != unsafe
    assert len(response["X-Request-Id"]) == 32


def test_the_request_id_header_is_the_only_one_added(api):
    response = api.client.get("/health")
    assert "Access-Control-Expose-Headers" not in response


def _lines_logged_by(logger_name: str, api, path: str, request_id: str) -> list[dict]:
    """The JSON lines `logger_name` wrote while the API served GET `path` with `request_id`."""
    api.client.raise_request_exception = False
    with console_lines() as lines:
        api.client.get(path, HTTP_X_REQUEST_ID=request_id)
    return [line for line in lines if line["logger"] == logger_name]


def test_log_lines_during_a_request_carry_its_id_as_json(api, settings):
    settings.ROOT_URLCONF = "tests.urls_errors"
    lines = _lines_logged_by("cowry.errors", api, "/test-explode", "trace-500")

    assert lines, "the 500 was logged"
    assert lines[0]["request_id"] == "trace-500"
    assert lines[0]["level"] == "ERROR"
    assert "RuntimeError" in lines[0]["exception"]
    assert lines[0]["time"].endswith("+00:00")
    assert set(lines[0]) == {"time", "level", "logger", "message", "request_id", "exception"}


def test_djangos_own_line_about_a_failed_request_carries_its_id(api, settings):
    # django.request logs a 5xx after the middleware has returned the response
    settings.ROOT_URLCONF = "tests.urls_errors"
    lines = _lines_logged_by("django.request", api, "/test-explode", "trace-500")

    assert lines, "django.request logged the 500"
    assert lines[-1]["request_id"] == "trace-500"


def test_a_line_after_the_request_carries_no_id(api):
    api.client.get("/health", HTTP_X_REQUEST_ID="trace-done")
    with console_lines() as lines:
        logging.getLogger("cowry").warning("between requests")
    assert lines == [
        {
            "time": lines[0]["time"],
            "level": "WARNING",
            "logger": "cowry",
            "message": "between requests",
            "request_id": None,
        }
    ]


def test_a_phone_number_in_a_line_shows_its_last_four_digits_only():
    with console_lines() as lines:
        logging.getLogger("cowry").warning(
            "Customer %s, or %s in a URL", "+237690001234", "%2B221770000001"
        )
    assert lines[0]["message"] == "Customer +********1234, or %2B********0001 in a URL"
