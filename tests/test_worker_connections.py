"""The Celery worker keeps its PostgreSQL connection across tasks, as the web keeps it across
requests (CONN_MAX_AGE), instead of a new backend for every task."""

import pytest
from django.db import connection

from payments.models import Payin
from tests.payments.conftest import create_customer, create_quote, payin_body
from tests.support import MerchantClient
from tests.worker import _database_url, celery_worker, wait_until

APPLICATION = "cowry-test-worker"


def _worker_backends() -> set[int]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = %s", [APPLICATION]
        )
        return {pid for (pid,) in cursor.fetchall()}


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_the_worker_reuses_its_database_connection_from_task_to_task(enabled_merchant):
    api = MerchantClient(enabled_merchant)
    customer = create_customer(api)
    after_each_task: list[set[int]] = []
    env = {
        "CONN_MAX_AGE": "600",
        "DATABASE_URL": _database_url(application_name=APPLICATION),
    }
    with celery_worker(extra_env=env) as worker:
        for _ in range(8):  # one after the other: each payin is its own submitter task
            payin_id = api.post("/payins", payin_body(create_quote(api, "payin"), customer))
            payin_id = payin_id.json()["id"]

            def completed(payin_id=payin_id) -> bool:
                assert worker.poll() is None, "the worker died"
                return Payin.objects.get(pk=payin_id).status == "completed"

            assert wait_until(completed, timeout=30)
            after_each_task.append(_worker_backends())

    # connected after every task (not closed at its end), and always the same backend
    first = after_each_task[0]
    assert len(first) == 1 and after_each_task == [first] * 8, after_each_task


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_killed_worker_connection_is_replaced_at_the_next_task(enabled_merchant):
    """Killed between two tasks: the next task gets a new connection."""
    api = MerchantClient(enabled_merchant)
    customer = create_customer(api)
    env = {
        "CONN_MAX_AGE": "600",
        "DATABASE_URL": _database_url(application_name=APPLICATION),
    }

    def create_and_complete(worker) -> str:
        payin_id = api.post("/payins", payin_body(create_quote(api, "payin"), customer))
        payin_id = payin_id.json()["id"]

        def completed() -> bool:
            assert worker.poll() is None, "the worker died"
            return Payin.objects.get(pk=payin_id).status == "completed"

        assert wait_until(completed, timeout=30)
        return payin_id

    with celery_worker(extra_env=env) as worker:
        create_and_complete(worker)
        (killed,) = _worker_backends()
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(%s)", [killed])

        create_and_complete(worker)  # no restart: the next task reconnects

        assert _worker_backends() - {killed}
