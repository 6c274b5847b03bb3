"""Scenario D, the floor: the same stack as the API (middleware, API-key authentication, the
per-key rate limit, the JSON parser and renderer) doing exactly one INSERT. Routed only when
settings.BENCH_FLOOR_ENABLED is true; the table is created by the bench harness
(bench/stack.py), so the service's own schema is untouched."""

from django.db import connection
from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

FLOOR_TABLE_SQL = """
CREATE TABLE IF NOT EXISTS bench_floor (
    id bigserial PRIMARY KEY,
    merchant_id uuid NOT NULL,
    note text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL
)
"""


class BenchFloorView(APIView):
    @extend_schema(exclude=True)  # a bench instrument, not part of the merchant API
    def post(self, request: Request) -> Response:
        note = str(request.data.get("note", ""))[:64] if isinstance(request.data, dict) else ""
        with connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO bench_floor (merchant_id, note, created_at) VALUES (%s, %s, %s) "
                "RETURNING id",
                [request.user.id, note, timezone.now()],
            )
            (row_id,) = cursor.fetchone()
        return Response({"id": row_id}, status=status.HTTP_201_CREATED)
