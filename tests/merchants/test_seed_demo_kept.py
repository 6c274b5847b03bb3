"""`make run` seeds the demo merchant once: bin/run's seeding step, run again, keeps the API
key and the owner's password it issued, in a file only its owner reads."""

import importlib.machinery
import importlib.util
import json
import stat
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.test import Client

from merchants.models import ApiKey

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]


def _bin_run_seed() -> tuple[str, ...]:
    loader = importlib.machinery.SourceFileLoader("bin_run", str(ROOT / "bin" / "run"))
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader(loader.name, loader))
    loader.exec_module(module)
    return module.SEED


def _seed(command: tuple[str, ...], credentials: Path) -> tuple[dict, str]:
    name, option, _path = command
    out = StringIO()
    call_command(name, option, str(credentials), stdout=out)
    text = out.getvalue()
    return json.loads(credentials.read_text()), text


def _api_status(key: str, secret: str) -> int:
    return Client().get("/balances", HTTP_X_API_KEY=key, HTTP_X_API_SECRET=secret).status_code


def test_make_runs_seeding_step_twice_keeps_the_demo_key_and_password(tmp_path):
    command = _bin_run_seed()
    assert command[:2] == ("seed_demo", "--credentials-file")
    assert command[2] == str(ROOT / "var" / "demo-credentials.json")
    credentials = tmp_path / "var" / "demo-credentials.json"  # not make run's own file

    first, first_text = _seed(command, credentials)
    assert first["api_secret"] in first_text  # shown the first time
    assert stat.S_IMODE(credentials.stat().st_mode) == 0o600
    assert _api_status(first["api_key"], first["api_secret"]) == 200

    second, second_text = _seed(command, credentials)
    assert second == first
    assert first["api_secret"] not in second_text
    assert str(credentials) in second_text and "seed_demo" in second_text  # where, or new ones
    assert _api_status(first["api_key"], first["api_secret"]) == 200
    assert ApiKey.objects.count() == 1
    assert Client().login(username="demo-owner", password=first["dashboard_password"])


def test_credentials_that_stopped_working_are_replaced(tmp_path):
    command = _bin_run_seed()
    credentials = tmp_path / "demo-credentials.json"
    first, _ = _seed(command, credentials)
    call_command("revoke_api_key", first["api_key"], stdout=StringIO())
    credentials.chmod(0o644)
    second, text = _seed(command, credentials)
    assert second["api_key"] != first["api_key"] and second["api_secret"] in text
    assert _api_status(second["api_key"], second["api_secret"]) == 200
    assert stat.S_IMODE(credentials.stat().st_mode) == 0o600
    assert Client().login(username="demo-owner", password=second["dashboard_password"])
