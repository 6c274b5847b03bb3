from django.conf import settings
from django.contrib import admin
from django.urls import include, path, re_path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView
from rest_framework.permissions import AllowAny

from config import converters, views
from core.content import JsonErrors
from merchants import admin_team

converters.register()  # before the apps' URLs below use it

PUBLIC = {"authentication_classes": [], "permission_classes": [AllowAny]}


class SchemaView(JsonErrors, SpectacularAPIView):
    pass


class DocsView(JsonErrors, SpectacularSwaggerView):
    pass


class RedocView(JsonErrors, SpectacularRedocView):
    pass


urlpatterns = [
    path("health", views.health, name="health"),
    path("health/live", views.live, name="health-live"),
    path("schema", SchemaView.as_view(**PUBLIC), name="schema"),
    path("docs", DocsView.as_view(url_name="schema", **PUBLIC), name="docs"),
    path("redoc", RedocView.as_view(url_name="schema", **PUBLIC), name="redoc"),
    path(
        "admin/invite/<uidb64>/<token>/",
        admin_team.InviteAcceptView.as_view(),
        name="dashboard-invite",
    ),
    # The merchant's enabled operators and corridors belong to quotes now (docs/decisions.md,
    # Layout): their former dashboard addresses lead to them.
    re_path(
        r"^admin/merchants/(?P<model>merchantoperator|merchantcorridor)/(?P<rest>.*)$",
        RedirectView.as_view(url="/admin/quotes/%(model)s/%(rest)s", query_string=True),
    ),
    path("admin/", admin.site.urls),
    path("", include("customers.urls")),
    path("", include("kyc.urls")),
    path("", include("quotes.urls")),
    path("", include("payments.urls")),
    path("", include("transfers.urls")),
    path("", include("webhooks.urls")),
]

if settings.BENCH_FLOOR_ENABLED:  # `make bench` only: the floor of scenario D
    from bench import floor

    urlpatterns += [path("bench/floor", floor.BenchFloorView.as_view(), name="bench-floor")]

handler400 = "config.views.handler400"
handler403 = "config.views.handler403"
handler404 = "config.views.handler404"
handler500 = "config.views.handler500"
