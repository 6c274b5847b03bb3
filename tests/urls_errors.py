"""The real URLconf plus two views that fail, to prove that a crash still has the error shape."""

from django.urls import path
from rest_framework.views import APIView

from config.urls import handler400, handler403, handler404, handler500, urlpatterns  # noqa: F401


class ExplodingApiView(APIView):
    def get(self, request):
        raise RuntimeError("boom: X-Api-Secret must never leak into a response")


def exploding_django_view(request):
    raise RuntimeError("boom")


urlpatterns = [
    *urlpatterns,
    path("test-explode", ExplodingApiView.as_view()),
    path("test-explode-plain", exploding_django_view),
]
