"""The request id (django-guid): every response carries X-Request-Id, the client's when it sent
a sane one, and every log line written for the request carries it, the tasks it enqueues too."""

import re

from django.core.signals import request_finished
from django.http import HttpRequest, HttpResponse
from django_guid import clear_guid

# What the API echoes; anything else is replaced by a new id. django-guid would echo any value
# (VALIDATE_GUID off) or UUIDs only (on).
ACCEPTED = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
META_KEY = "HTTP_X_REQUEST_ID"


class DropUnsafeRequestId:
    """Before django-guid's middleware: an X-Request-Id the API does not echo is dropped, so
    django-guid gives the request a new id."""

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if not ACCEPTED.match(request.META.get(META_KEY, "")):
            request.META.pop(META_KEY, None)
        return self.get_response(request)


def _forget_request_id(**_: object) -> None:
    clear_guid()


# Once the response is closed (after gunicorn's access line, which carries the id), a line
# the worker process writes before its next request belongs to none.
request_finished.connect(_forget_request_id, dispatch_uid="cowry-forget-request-id")
