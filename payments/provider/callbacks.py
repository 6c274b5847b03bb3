"""The callback endpoint of the real operator APIs (`POST|PUT /provider-callbacks/<connection>/
<leg>/<reference>?s=<secret>`, the URL the adapter sent as X-Callback-Url; the secret is in the
query, which no access log line prints). The body is only a
hint: nothing in it is trusted or stored. A wrong secret is a 403 and a malformed body a 400,
both without a database write or a call to the operator; anything else is a 200, and the
operator's status endpoint is read by a task, whose answer goes through the one transition
path (a duplicate, late or unknown callback then changes nothing)."""

import hmac
import json
import logging

from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from core import jobs
from core.exceptions import error_body
from payments import provider
from rails import selectors as rails_selectors

logger = logging.getLogger("cowry.provider")

CALLBACK_BODY_MAX = 64 * 1024
SECRET_PARAMETER = "s"  # noqa: S105 - the name of the query parameter


def _refused(status: int, message: str, reason: str) -> JsonResponse:
    return JsonResponse(error_body(status, message, reason=reason), status=status)


def _secret_valid(connection: str, secret: str) -> bool:
    try:
        expected = rails_selectors.connection_settings(connection).callback_secret
    except KeyError:
        expected = ""
    # Compared even for an unknown connection, so the timing tells nothing.
    return hmac.compare_digest(expected.encode() or b"\0", secret.encode()) and bool(expected)


@csrf_exempt
def provider_callback(
    request: HttpRequest, connection: str, leg: str, reference: str
) -> JsonResponse:
    if request.method not in ("POST", "PUT"):
        return _refused(405, "This method is not allowed here.", "method_not_allowed")
    if not _secret_valid(connection, request.GET.get(SECRET_PARAMETER, "")):
        logger.warning("Provider callback refused: wrong secret for connection %r", connection)
        return _refused(403, "Forbidden.", "forbidden")
    if leg not in provider.CALLBACK_LEGS or len(request.body) > CALLBACK_BODY_MAX:
        return _refused(400, "The request is invalid.", "bad_request")
    try:
        body = json.loads(request.body)
    except ValueError:
        body = None
    if not isinstance(body, dict):
        return _refused(400, "The body is not a JSON object.", "malformed_json")
    jobs.enqueue(
        "payments.tasks.provider_callback_check",
        connection=connection,
        leg=leg,
        reference=reference,
    )
    return JsonResponse({"status": "received"})
