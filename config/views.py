from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views import csrf, defaults
from django.views.decorators.csrf import csrf_exempt

from config import exceptions
from config.celery import app as celery_app


def _is_dashboard(request: HttpRequest) -> bool:
    return request.path.startswith("/admin/")


def handler404(request: HttpRequest, exception: Exception | None = None):
    if _is_dashboard(request):
        return defaults.page_not_found(request, exception)
    return exceptions.not_found_view(request, exception)


def handler500(request: HttpRequest):
    if _is_dashboard(request):
        return defaults.server_error(request)
    return exceptions.server_error_view(request)


def handler400(request: HttpRequest, exception: Exception | None = None):
    return exceptions.bad_request_view(request, exception)


def handler403(request: HttpRequest, exception: Exception | None = None):
    if _is_dashboard(request):
        return defaults.permission_denied(request, exception)
    return exceptions.permission_denied_view(request, exception)


def csrf_failure(request: HttpRequest, reason: str = ""):
    """Only the dashboard's forms use CSRF; anything else refused by it gets the error shape."""
    if _is_dashboard(request):
        return csrf.csrf_failure(request, reason)
    return exceptions.csrf_failure_view(request)


@csrf_exempt  # a plain Django view: without this a POST would get the CSRF failure
def health(request: HttpRequest) -> JsonResponse:
    """200 when the database and the broker both answer, 503 otherwise. No credentials needed."""
    if request.method not in ("GET", "HEAD"):
        response = exceptions.method_not_allowed_view(request)
        response["Allow"] = "GET, HEAD"
        return response
    checks: dict[str, str] = {}
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        checks["database"] = "ok"
    except Exception as exc:  # any failure means "not healthy", whatever the driver raised
        checks["database"] = f"error: {type(exc).__name__}"
    try:
        with celery_app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
        checks["broker"] = "ok"
    except Exception as exc:
        checks["broker"] = f"error: {type(exc).__name__}"
    healthy = all(value == "ok" for value in checks.values())
    body = {"status": "ok" if healthy else "unavailable", "version": "1.0.0", "checks": checks}
    return JsonResponse(body, status=200 if healthy else 503)
