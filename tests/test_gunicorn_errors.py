"""What gunicorn answers itself, before Django sees a request, is JSON in the error shape too."""

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import requests

ROOT = Path(__file__).resolve().parent.parent
GUNICORN = Path(sys.executable).parent / "gunicorn"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _answering(url: str, process: subprocess.Popen, failure: Callable[[], str]) -> None:
    """Until gunicorn at `url` answers (any status); the test fails with `failure()` if it
    exits or has not answered within 30 s."""
    deadline = time.monotonic() + 30
    while True:
        try:
            requests.get(f"{url}/no-such-thing", timeout=2)
            return
        except requests.ConnectionError:
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(failure())
            time.sleep(0.2)


@pytest.fixture(scope="module")
def gunicorn_log(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("gunicorn") / "error.log"


@pytest.fixture(scope="module")
def gunicorn_url(gunicorn_log) -> Iterator[str]:
    port = _free_port()
    process = subprocess.Popen(
        [
            str(GUNICORN),
            "config.wsgi:application",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            "1",
            "--worker-class",
            "config.gunicorn_worker.JsonErrorSyncWorker",
            "--no-control-socket",
            "--error-logfile",
            str(gunicorn_log),
        ],
        cwd=ROOT,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        _answering(
            url, process, lambda: f"gunicorn did not start: {gunicorn_log.read_text()[-2000:]}"
        )
        yield url
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)


def _listed(status: int, code: str, reason: str) -> bool:
    """docs/errors.md lists the status with this code, and this reason under it."""
    reference = (ROOT / "docs" / "errors.md").read_text()
    return f"| {status} | `{code}` |" in reference and (
        f"| {status} | `{code}` | `{reason}` |" in reference
    )


def _assert_json_error(response: requests.Response, status: int, code: str, reason: str) -> None:
    assert response.status_code == status
    assert response.headers["Content-Type"] == "application/json"
    error = response.json()["error"]
    assert (error["code"], error["reason"]) == (code, reason)
    assert error["message"]
    assert "<html" not in response.text
    assert _listed(status, code, reason)


def _raw(gunicorn_url: str, request: bytes) -> requests.Response:
    """The answer to bytes sent as they are (requests would not send them malformed)."""
    port = int(gunicorn_url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
        connection.sendall(request)
        answer = b""
        while chunk := connection.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    response = requests.Response()
    response.status_code = int(status_line.split()[1])
    response.headers.update(line.split(": ", 1) for line in header_lines)
    response._content = body
    return response


def test_a_request_line_over_gunicorns_limit_is_a_json_414(gunicorn_url):
    response = requests.get(f"{gunicorn_url}/customers/{'a' * 5000}", timeout=10)
    _assert_json_error(response, 414, "uri_too_long", "uri_too_long")


def test_a_header_over_gunicorns_limit_is_a_json_431(gunicorn_url):
    response = requests.get(
        f"{gunicorn_url}/customers", headers={"X-Api-Key": "a" * 20_000}, timeout=10
    )
    _assert_json_error(response, 431, "request_header_fields_too_large", "headers_too_large")


@pytest.mark.parametrize(
    ("header", "status", "code", "reason"),
    [
        (b"Bad Header", 400, "bad_request", "malformed_request"),
        (b"Expect: something-else", 417, "expectation_failed", "expectation_failed"),
        (b"Transfer-Encoding: rot13", 501, "not_implemented", "not_implemented"),
    ],
)
def test_a_request_gunicorn_refuses_is_json_with_its_statuss_code(
    gunicorn_url, header, status, code, reason
):
    request = b"GET /customers HTTP/1.1\r\nHost: x\r\n" + header + b"\r\n\r\n"
    _assert_json_error(_raw(gunicorn_url, request), status, code, reason)


def test_a_malformed_secret_header_line_is_not_written_to_the_log_or_echoed(
    gunicorn_url, gunicorn_log
):
    """A colon missed in "X-Api-Secret: cs_..." made gunicorn quote the whole line."""
    secret = "cs_THISISTHESECRETVALUE0123456789abcdefghijkl"
    port = int(gunicorn_url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
        connection.sendall(
            b"GET /balances HTTP/1.1\r\nHost: x\r\nX-Api-Key: ck_0\r\n"
            + f"X-Api-Secret {secret}\r\nConnection: close\r\n\r\n".encode()
        )
        answer = b""
        while chunk := connection.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 400")
    assert b"X-Api-Secret (value not shown)" in answer
    deadline = time.monotonic() + 10
    while "X-Api-Secret" not in gunicorn_log.read_text() and time.monotonic() < deadline:
        time.sleep(0.1)
    log = gunicorn_log.read_text()
    assert "X-Api-Secret (value not shown)" in log
    assert secret not in log and secret.encode() not in answer


def test_the_procfiles_web_opens_no_control_socket(tmp_path):
    """gunicorn's control socket (a command interface to the master, at one path per user)
    is off: nothing here uses it, and every gunicorn of the user would share its path."""
    web = next(
        line.split(": ", 1)[1]
        for line in (ROOT / "Procfile").read_text().splitlines()
        if line.startswith("web: ")
    )
    port = _free_port()
    runtime = tmp_path / "run"
    runtime.mkdir()
    process = subprocess.Popen(
        ["bash", "-c", f"exec {web}"],
        cwd=ROOT,
        env={
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "PORT": str(port),
            "WEB_CONCURRENCY": "1",
            "HOME": str(tmp_path),
            "XDG_RUNTIME_DIR": str(runtime),
        },
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _answering(f"http://127.0.0.1:{port}", process, lambda: "the Procfile's web did not start")
        time.sleep(1)  # the master starts its control server after its workers
        assert sorted(p.name for p in tmp_path.rglob("*.ctl")) == []
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
