"""Every API error leaves through here as
{"error": {"code", "message", "reason"?, "fields"?, "details"?}}."""

import logging
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig
from django.db import InterfaceError, OperationalError, connections, transaction
from django.http import Http404, HttpRequest, JsonResponse
from rest_framework import exceptions as drf_exceptions
from rest_framework.response import Response

logger = logging.getLogger("cowry.errors")

AUTH_CHALLENGE = 'ApiKey realm="cowry"'  # X-Api-Key and X-Api-Secret (docs/api.md, Authentication)

# What a 503 for an unreachable database tells the client to wait before retrying.
DATABASE_RETRY_AFTER_SECONDS = 5
# PostgreSQL states that say the connection, not the statement, failed: class 08 (connection
# exception) and the server shutting down, terminating the backend or not accepting connections.
_CONNECTION_LOST_SQLSTATES = ("08", "57P01", "57P02", "57P03")

CODE_BY_STATUS = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    414: "uri_too_long",  # gunicorn's refusals (config.gunicorn_worker), before Django
    415: "unsupported_media_type",
    417: "expectation_failed",
    429: "rate_limited",
    431: "request_header_fields_too_large",
    500: "internal_error",
    501: "not_implemented",
    503: "service_unavailable",
}


class DomainError(Exception):
    """A business rule said no. Subclasses set status, reason and a default message."""

    status: int = 400
    reason: str = ""
    message: str = "The request could not be processed."

    def __init__(
        self,
        message: str | None = None,
        *,
        reason: str | None = None,
        fields: dict | None = None,
        details: dict[str, str] | None = None,
    ) -> None:
        self.message = message or self.message
        if reason:
            self.reason = reason
        self.fields = fields
        self.details = details  # the figures of a refusal about an amount, as strings
        super().__init__(self.message)


class NotFound(DomainError):
    status = 404
    reason = "not_found"
    message = "The resource does not exist."


def error_body(
    status: int,
    message: str,
    *,
    reason: str = "",
    fields: dict | None = None,
    details: dict | None = None,
) -> dict[str, Any]:
    error: dict[str, Any] = {"code": CODE_BY_STATUS.get(status, "error"), "message": message}
    if reason:
        error["reason"] = reason
    if fields:
        error["fields"] = fields
    if details:
        error["details"] = details
    return {"error": error}


def _flatten_validation_detail(detail: Any) -> dict[str, Any]:
    if isinstance(detail, dict):
        return {key: _flatten_messages(value) for key, value in detail.items()}
    return {"non_field_errors": _flatten_messages(detail)}


def _flatten_messages(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _flatten_messages(inner) for key, inner in value.items()}
    if isinstance(value, list):
        if all(isinstance(item, str) for item in value):
            return [str(item) for item in value]
        if any(isinstance(item, dict) and item for item in value):
            return {str(i): _flatten_messages(item) for i, item in enumerate(value) if item}
        return [str(item) for item in value]
    return [str(value)]


def _validation_message(fields: dict[str, Any]) -> str:
    def first(value: Any, path: str) -> str:
        if isinstance(value, dict):
            key, inner = next(iter(value.items()))
            sub = key if path == "" else f"{path}.{key}"
            return first(inner, sub)
        if isinstance(value, list) and value:
            return f"{path}: {value[0]}" if path and path != "non_field_errors" else str(value[0])
        return str(value)

    return first(fields, "") if fields else "The request is invalid."


def build_error_response(exc: Exception) -> Response | None:
    headers: dict[str, str] = {}
    if isinstance(exc, DomainError):
        body = error_body(
            exc.status, exc.message, reason=exc.reason, fields=exc.fields, details=exc.details
        )
        status = exc.status
    elif isinstance(exc, drf_exceptions.ValidationError):
        fields = _flatten_validation_detail(exc.detail)
        body = error_body(400, _validation_message(fields), reason="invalid_request", fields=fields)
        status = 400
    elif isinstance(exc, RequestDataTooBig):
        body = error_body(
            400,
            f"The request body is larger than {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes.",
            reason="body_too_large",
        )
        status = 400
    elif isinstance(exc, drf_exceptions.ParseError):
        body = error_body(400, f"Malformed JSON body: {exc.detail}", reason="malformed_json")
        status = 400
    elif isinstance(exc, drf_exceptions.NotAuthenticated | drf_exceptions.AuthenticationFailed):
        body = error_body(401, str(exc.detail), reason="invalid_credentials")
        status = 401
        # RFC 9110: a 401 names the scheme to authenticate with (DRF sets it on the exception).
        headers["WWW-Authenticate"] = getattr(exc, "auth_header", None) or AUTH_CHALLENGE
    elif isinstance(exc, Http404 | drf_exceptions.NotFound):
        body = error_body(404, "The resource does not exist.", reason="not_found")
        status = 404
    elif isinstance(exc, DjangoPermissionDenied):
        body = error_body(403, "You do not have permission to perform this action.")
        status = 403
    elif isinstance(exc, drf_exceptions.Throttled):
        status = 429
        body = error_body(429, "Too many requests.", reason="rate_limited")
        if exc.wait is not None:  # whole seconds already (DRF rounds the wait up)
            headers["Retry-After"] = str(max(1, int(exc.wait)))
    elif isinstance(exc, drf_exceptions.MethodNotAllowed):
        body = error_body(405, str(exc.detail), reason="method_not_allowed")
        status = 405
    elif isinstance(exc, drf_exceptions.UnsupportedMediaType):
        body = error_body(415, str(exc.detail), reason="unsupported_media_type")
        status = 415
    elif isinstance(exc, drf_exceptions.APIException):
        status = exc.status_code
        detail = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
        body = error_body(status, str(detail))
        if getattr(exc, "wait", None):
            headers["Retry-After"] = str(int(exc.wait))
    else:
        return None
    return Response(body, status=status, headers=headers)


def database_unreachable(exc: BaseException) -> bool:
    """The database could not be reached, or dropped the connection: Django's InterfaceError (a
    closed connection), or an OperationalError from psycopg's connection layer (no SQLSTATE: it
    could not connect, or the server went away) or with a connection-loss SQLSTATE. A statement
    that failed on a working connection (a deadlock, a timeout) is not this."""
    if isinstance(exc, InterfaceError):
        return True
    if not isinstance(exc, OperationalError):
        return False
    sqlstate = getattr(exc.__cause__, "sqlstate", None)
    return sqlstate is None or sqlstate.startswith(_CONNECTION_LOST_SQLSTATES)


def api_exception_handler(exc: Exception, context: dict) -> Response:
    response = build_error_response(exc)
    if response is None:
        request = context.get("request")
        logger.exception(
            "Unhandled error on %s %s",
            getattr(request, "method", "?"),
            getattr(request, "path", "?"),
            exc_info=exc,
        )
        if database_unreachable(exc):
            response = Response(
                error_body(
                    503,
                    "The database is unreachable; retry later.",
                    reason="service_unavailable",
                ),
                status=503,
                headers={"Retry-After": str(DATABASE_RETRY_AFTER_SECONDS)},
            )
        else:
            response = Response(
                error_body(500, "An internal error occurred.", reason="internal_error"),
                status=500,
            )
    # Like DRF: with ATOMIC_REQUESTS the request's transaction must not commit half a change.
    for connection in connections.all(initialized_only=True):
        if connection.settings_dict.get("ATOMIC_REQUESTS") and connection.in_atomic_block:
            transaction.set_rollback(True, using=connection.alias)
    return response


def json_error_view(status: int, message: str, reason: str):
    def view(request: HttpRequest, exception: Exception | None = None) -> JsonResponse:
        return JsonResponse(error_body(status, message, reason=reason), status=status)

    return view


not_found_view = json_error_view(404, "The resource does not exist.", "not_found")
server_error_view = json_error_view(500, "An internal error occurred.", "internal_error")
bad_request_view = json_error_view(400, "The request is invalid.", "bad_request")
permission_denied_view = json_error_view(403, "Forbidden.", "forbidden")
method_not_allowed_view = json_error_view(
    405, "This method is not allowed here.", "method_not_allowed"
)
csrf_failure_view = json_error_view(403, "CSRF verification failed.", "csrf_failed")
