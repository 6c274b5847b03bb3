"""The bench floor (scenario D): off by default; when routed, the API's authentication and one
INSERT into the harness's table."""

import pytest
from django.db import connection

from bench.floor import FLOOR_TABLE_SQL

pytestmark = pytest.mark.django_db


@pytest.fixture
def floor_table():
    with connection.cursor() as cursor:
        cursor.execute(FLOOR_TABLE_SQL)
    yield
    with connection.cursor() as cursor:
        cursor.execute("DROP TABLE bench_floor")


def _rows() -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT merchant_id, note FROM bench_floor ORDER BY id")
        return cursor.fetchall()


def test_the_floor_is_not_routed_by_default(api):
    response = api.post("/bench/floor", {"note": "x"})
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_the_floor_is_absent_from_the_schema(client):
    paths = client.get("/schema?format=json").json()["paths"]
    assert not any(p.startswith("/bench") for p in paths)


@pytest.mark.urls("tests.bench.urls_floor")
def test_the_floor_authenticates_then_inserts_one_row(api, merchant, floor_table):
    response = api.post("/bench/floor", {"note": "floor"})
    assert response.status_code == 201, response.json()
    assert isinstance(response.json()["id"], int)
    assert _rows() == [(merchant.id, "floor")]


@pytest.mark.urls("tests.bench.urls_floor")
def test_the_floor_refuses_missing_credentials_and_writes_nothing(client, floor_table):
    response = client.post("/bench/floor", {"note": "x"}, content_type="application/json")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthorized"
    assert _rows() == []
