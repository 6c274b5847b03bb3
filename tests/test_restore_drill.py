"""docs/deploy.md's tested restore: bin/restore-drill dumps the database, restores it into a
scratch database and finds every payment and the ledger as they were."""

import importlib.machinery
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
from django.db import connection
from psycopg.conninfo import make_conninfo

from tests.payments import conftest as ph
from tests.worker import _database_url

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "bin" / "restore-drill"


def _drill_module():
    loader = importlib.machinery.SourceFileLoader("restore_drill", str(SCRIPT))
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader(loader.name, loader))
    loader.exec_module(module)
    return module


def _payments(api, merchant, django_capture_on_commit_callbacks) -> None:
    customer = ph.create_customer(api)
    with django_capture_on_commit_callbacks(execute=True):
        for phone in (ph.SN_PHONE, ph.DECLINED_PHONE):
            body = ph.payin_body(ph.create_quote(api, "payin"), customer, phone)
            assert api.post("/payins", body).status_code == 201
        ph.fund(merchant, "50000")
        body = ph.payout_body(ph.create_quote(api, "payout"), customer)
        assert api.post("/payouts", body).status_code == 201


def test_the_drill_restores_every_payment_and_the_ledger_and_would_see_a_difference(
    enabled_api, enabled_merchant, django_capture_on_commit_callbacks, tmp_path
):
    _payments(enabled_api, enabled_merchant, django_capture_on_commit_callbacks)
    connection.close()  # nothing of ours open in the snapshot's way
    env = {**os.environ, "DATABASE_URL": _database_url()}
    done = subprocess.run(
        [sys.executable, SCRIPT, "--dump", tmp_path / "cowry.dump", "--keep"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "restore drill OK" in done.stdout and "Ledger OK" in done.stdout
    assert "'payments_payin': 2" in done.stdout and "'payments_payout': 1" in done.stdout
    assert (tmp_path / "cowry.dump").stat().st_size > 0

    # the comparison is of every row: one payin changed in the kept copy is seen
    drill = _drill_module()
    source = drill._libpq(_database_url())
    scratch = make_conninfo(**{**source, "dbname": f"{source['dbname']}_restore_drill"})
    try:
        with psycopg.connect(make_conninfo(**source)) as original, psycopg.connect(scratch) as copy:
            assert drill.fingerprint(original) == drill.fingerprint(copy)
            copy.execute(
                "UPDATE payments_payin SET failure_reason = 'edited' WHERE status = 'failed'"
            )
            assert (
                drill.fingerprint(original)["payments_payin"]
                != drill.fingerprint(copy)["payments_payin"]
            )
    finally:
        admin = make_conninfo(**{**source, "dbname": "postgres"})
        with psycopg.connect(admin, autocommit=True) as server:
            server.execute(f'DROP DATABASE IF EXISTS "{source["dbname"]}_restore_drill"')
