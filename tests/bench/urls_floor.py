"""The project's URLs plus the floor route, as config/urls.py builds them with
BENCH_FLOOR_ENABLED=true (the setting is read once, at import)."""

from django.urls import path

from bench import floor
from config.urls import urlpatterns as project_urlpatterns

urlpatterns = [
    *project_urlpatterns,
    path("bench/floor", floor.BenchFloorView.as_view(), name="bench-floor"),
]
