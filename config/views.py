from django.http import HttpRequest, JsonResponse
from django.views import csrf, defaults
from django.views.decorators.csrf import csrf_exempt

from config import health as health_checks
from core import exceptions


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


def _get_or_head_only(request: HttpRequest) -> JsonResponse | None:
    if request.method in ("GET", "HEAD"):
        return None
    response = exceptions.method_not_allowed_view(request)
    response["Allow"] = "GET, HEAD"
    return response


@csrf_exempt  # a plain Django view: without this a POST would get the CSRF failure
def health(request: HttpRequest) -> JsonResponse:
    """200 `{"status": "ok"}` when the database and the broker answer, 503 `"unavailable"`
    otherwise; Redis and the workers' heartbeat are in `checks` and, when not "ok", in
    `degraded`, without changing the code (config.health). No credentials needed."""
    refused = _get_or_head_only(request)
    if refused is not None:
        return refused
    healthy, body = health_checks.report()
    return JsonResponse(body, status=200 if healthy else 503)


@csrf_exempt
def live(request: HttpRequest) -> JsonResponse:
    """Liveness, for the load balancer: 200 while this process answers, whatever it depends on."""
    refused = _get_or_head_only(request)
    return refused if refused is not None else JsonResponse({"status": "ok"})
