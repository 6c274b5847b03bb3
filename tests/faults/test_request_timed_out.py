"""A request killed by gunicorn's worker timeout mid-way: its Idempotency-Key is free again at
once (nothing of it was kept), and the retry under the key creates the one resource."""

import os
import signal
import subprocess
import threading
from collections.abc import Iterator

import pytest
import requests

from merchants.models import IdempotencyRecord
from payments.models import Payin, Payout
from tests.faults.conftest import admin_connection, backends_waiting_on_a_lock
from tests.payments.conftest import (
    create_customer,
    create_quote,
    fund,
    payin_body,
    payout_body,
)
from tests.support import MerchantClient
from tests.test_gunicorn_errors import GUNICORN, ROOT, _answering, _free_port
from tests.worker import _database_url, wait_until

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True)]

TIMEOUT_SECONDS = 2


@pytest.fixture
def gunicorn_url(tmp_path) -> Iterator[str]:
    """gunicorn on the test database, one sync worker killed after TIMEOUT_SECONDS on a
    request (SIGABRT, then a new worker)."""
    port, log = _free_port(), tmp_path / "gunicorn.log"
    process = subprocess.Popen(
        [
            str(GUNICORN),
            "config.wsgi:application",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            "1",
            "--timeout",
            str(TIMEOUT_SECONDS),
            "--worker-class",
            "config.gunicorn_worker.JsonErrorSyncWorker",
            "--no-control-socket",
            "--error-logfile",
            str(log),
        ],
        cwd=ROOT,
        env={
            **os.environ,
            "DATABASE_URL": _database_url(),
            "DJANGO_SETTINGS_MODULE": "config.settings",
        },
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        _answering(url, process, lambda: f"gunicorn did not start: {log.read_text()[-2000:]}")
        yield url
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)


@pytest.mark.parametrize("kind", ["payout", "payin"])
def test_a_request_killed_by_the_worker_timeout_leaves_its_key_free_and_nothing_written(
    enabled_merchant, gunicorn_url, kind
):
    """A payout waits for its wallet's lock inside its transaction; a payin's one held
    statement (quote, payin and the key's record) waits for its quote's row. The test holds
    that lock past gunicorn's timeout, so the worker is killed while the request waits."""
    api = MerchantClient(enabled_merchant)
    fund(enabled_merchant, "1000000")
    customer = create_customer(api)
    quote = create_quote(api, kind)
    if kind == "payout":
        body, created = payout_body(quote, customer), Payout.objects.all()
        lock = ("SELECT 1 FROM payments_wallet WHERE merchant_id = %s FOR UPDATE", "%wallet%")
        locked_id = enabled_merchant.pk
    else:
        body, created = payin_body(quote, customer), Payin.objects.all()
        lock = ("SELECT 1 FROM quotes_quote WHERE id = %s FOR UPDATE", "%quotes_quote%")
        locked_id = quote["id"]
    headers = {
        "X-Api-Key": api.api_key,
        "X-Api-Secret": api.api_secret,
        "Idempotency-Key": f"{kind}-1",
    }

    def send() -> requests.Response | None:
        try:
            return requests.post(f"{gunicorn_url}/{kind}s", json=body, headers=headers, timeout=30)
        except requests.ConnectionError:
            return None  # the killed worker may close the connection without an answer

    answers: list = []
    holder = admin_connection()
    holder.execute("BEGIN")
    holder.execute(lock[0], [locked_id])
    first = threading.Thread(target=lambda: answers.append(send()))
    first.start()
    try:
        monitor = admin_connection()
        waiting = wait_until(
            lambda: backends_waiting_on_a_lock(monitor, pattern=lock[1]), interval=0.01
        )
        assert waiting, "the request never waited for the lock"
        first.join(timeout=30)
    finally:
        holder.execute("COMMIT")
    assert answers and (answers[0] is None or answers[0].status_code == 500)
    assert not created.exists()
    assert not IdempotencyRecord.objects.filter(key=headers["Idempotency-Key"]).exists()

    retry = send()
    assert retry.status_code == 201, retry.text
    assert retry.json()["_meta"]["idempotency_replayed"] is False
    assert created.count() == 1
