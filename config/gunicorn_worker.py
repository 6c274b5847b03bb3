"""gunicorn's sync worker, with the errors gunicorn answers itself in the API's error shape.

gunicorn answers a request it cannot parse (a request line or a header over its limits, a
malformed request) before Django sees it, with an HTML page of its own. This worker class
(the Procfile's `--worker-class`) makes those answers JSON: `{"error": {"code", "message",
"reason"}}` with gunicorn's status (400, 414, 431, ...), the `code` of that status
(core.exceptions.CODE_BY_STATUS) and the reason below, both in docs/errors.md
(config.errors_reference reads REASON_BY_STATUS). Importing this module changes nothing; the
worker installs its writer when it starts. A malformed header line is named by
its first word only, in the log and the answer: gunicorn quoted the whole line, and in
"X-Api-Secret cs_..." (a colon missed) that is the secret.
"""

import json
import re

from gunicorn import util
from gunicorn.http.errors import InvalidHeader, InvalidHeaderName
from gunicorn.workers.sync import SyncWorker

from core.exceptions import CODE_BY_STATUS

# Each status gunicorn answers (gunicorn.workers.base.Worker.handle_error) and its reason.
REASON_BY_STATUS = {
    400: "malformed_request",
    403: "forbidden",
    414: "uri_too_long",
    417: "expectation_failed",
    431: "headers_too_large",
    500: "internal_error",
    501: "not_implemented",
}


def json_error_write(sock, status_int: int, reason: str, mesg: str) -> None:
    client_error = status_int < 500
    error = {
        "code": CODE_BY_STATUS.get(status_int, "bad_request" if client_error else "internal_error"),
        "message": mesg or reason,
        "reason": REASON_BY_STATUS.get(
            status_int, "malformed_request" if client_error else "internal_error"
        ),
    }
    body = json.dumps({"error": error}).encode("ascii")
    head = (
        f"HTTP/1.1 {status_int} {reason}\r\n"
        "Connection: close\r\n"
        "Content-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode("latin-1")
    util.write_nonblock(sock, head + body)


_HEADER_NAME = re.compile(r"[^\s:]{0,64}")


def _named_only(exc: Exception) -> Exception:
    """A malformed-header error that shows the header's name, not the rest of its line."""
    if isinstance(exc, InvalidHeader | InvalidHeaderName):
        name = _HEADER_NAME.match(str(exc.hdr)).group()
        hidden = f"{name} (value not shown)"
        if isinstance(exc, InvalidHeader):
            return InvalidHeader(hidden, req=exc.req)
        return InvalidHeaderName(hidden)
    return exc


class JsonErrorSyncWorker(SyncWorker):
    def init_process(self):
        # gunicorn's workers write these answers through util.write_error, looked up at each
        # call; patched here, in the worker process, so importing this module does nothing.
        util.write_error = json_error_write
        super().init_process()

    def handle_error(self, req, client, addr, exc):
        super().handle_error(req, client, addr, _named_only(exc))
