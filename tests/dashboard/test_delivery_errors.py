"""A delivery's recorded error in plain words for merchant staff; support and ops also read it
as recorded. What is stored, and what the API answers, stay as they were."""

import pytest

from webhooks.admin_deliveries import error_shown, plain_error

CONNECT = "Could not connect: _GuardedHTTPConnection(host='hooks.example', port=443): "


@pytest.mark.parametrize(
    ("recorded", "plain"),
    [
        ("", ""),
        ("HTTP 500", "HTTP 500"),
        ("HTTP 302: redirect to '/elsewhere' not followed", None),
        ("Timed out after 10 s", "Timed out after 10 s"),
        (
            "Timed out after 10 s: the host name did not resolve in time",
            "Timed out after 10 s: the host name did not resolve in time",
        ),
        (
            CONNECT + "Failed to establish a new connection: [Errno 111] Connection refused",
            "Connection refused",
        ),
        (
            "MaxRetryError: HTTPConnectionPool(host='10.0.0.1', port=80): Max retries exceeded"
            " with url: /hook (Caused by NewConnectionError('Failed to establish a new"
            " connection: [Errno 111] Connection refused'))",
            "Connection refused",
        ),
        (
            "NameResolutionError: HTTPSConnection(host='nowhere.invalid', port=443): Failed to"
            " resolve 'nowhere.invalid' ([Errno -2] Name or service not known)",
            "Host name not found",
        ),
        (
            "SSLError: [SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: self-signed"
            " certificate (_ssl.c:1006)",
            "TLS error: certificate not trusted",
        ),
        ("SSLError: [SSL: WRONG_VERSION_NUMBER] wrong version number", "TLS error"),
        (
            "ProtocolError: ('Connection aborted.', RemoteDisconnected('Remote end closed"
            " connection without response'))",
            "Connection closed without an answer",
        ),
        (
            "ProtocolError: ('Connection aborted.', ConnectionResetError(104))",
            "Connection closed without an answer",
        ),
        (CONNECT + "[Errno 101] Network is unreachable", "Network unreachable"),
        ("Blocked: Refusing to connect to non-public address: http://10.0.0.1/hook", None),
        ("No result recorded: the worker was lost or ran past its lease.", None),
        ("LocationParseError: Failed to parse: http://[::1", "Could not connect"),
    ],
)
def test_a_recorded_error_in_plain_words(recorded, plain):
    assert plain_error(recorded) == (recorded if plain is None else plain)


def test_support_and_ops_read_it_as_recorded_beneath():
    recorded = CONNECT + "Failed to establish a new connection: [Errno 111] Connection refused"

    assert error_shown(recorded, in_full=False) == "Connection refused"
    in_full = error_shown(recorded, in_full=True)
    assert in_full.startswith("Connection refused<br><code")
    assert "[Errno 111] Connection refused</code>" in in_full
    assert error_shown("HTTP 500", in_full=True) == "HTTP 500"  # nothing more to say
    assert error_shown("", in_full=True) == "—"
