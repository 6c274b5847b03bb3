"""The operators' contracts, where no other test pins them: the ops commands' `--json` keys,
human text and exit status, the seeded catalog exactly as written, the environment variables'
defaults and names (docs/operations.md, docs/api.md), and the idempotency fingerprint of the
parsed body."""

import json
import os
import socket
import subprocess
import sys
from decimal import Decimal
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.utils import timezone

from payments.ledger.adjustments import wallet_credit
from payments.models import Wallet
from quotes.models import Corridor, FeeSchedule, FxRate, Operator
from tests.worker import _database_url

ROOT = Path(__file__).resolve().parents[1]

# --- ops commands ----------------------------------------------------------------------------


def _json(*args) -> dict:
    out = StringIO()
    call_command(*args, "--json", stdout=out)
    text = out.getvalue()
    assert len(text.strip().splitlines()) == 1, text  # one JSON object
    return json.loads(text)


def _text(*args) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    text = out.getvalue()
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)  # human text by default
    return text


@pytest.mark.django_db
def test_every_ops_command_prints_the_json_keys_of_the_design_table():
    plain = _json("create_merchant", "Plain")
    assert set(plain) == {"merchant_id"}
    keyed = _json("create_merchant", "Keyed", "--all-operators", "--with-key")
    assert set(keyed) == {"merchant_id", "api_key", "api_secret"}
    merchant_id = keyed["merchant_id"]

    key = _json("create_api_key", merchant_id)
    assert set(key) == {"api_key", "api_secret", "expires_at"}
    assert key["expires_at"] is None  # no --expires-at: the key does not expire
    assert _json("revoke_api_key", key["api_key"]) == {"api_key": key["api_key"], "revoked": True}

    first = _json("set_webhook", merchant_id, "https://93.184.216.34/hook")
    assert set(first) == {"url", "signing_secret"}
    again = _json("set_webhook", merchant_id, "https://93.184.216.34/hook")
    assert first["signing_secret"] and again["signing_secret"] != first["signing_secret"]

    credited = _json("credit_wallet", merchant_id, "XAF", "5000.00", "--reason", "float")
    assert credited == {"currency": "XAF", "available": "5000"}

    staff = ("--password", "a-long-staff-password")
    assert _json(
        "create_staff_user", "amina", *staff, "--merchant", merchant_id, "--role", "viewer"
    ) == {"username": "amina", "merchant_id": merchant_id, "role": "viewer"}
    assert set(_json("create_staff_user", "ops", *staff, "--support")) == {
        "username",
        "merchant_id",
        "role",
    }

    # the table's keys, and the demo's dashboard login after them (a key added, none changed)
    assert set(_json("seed_demo")) == {
        "merchant_id",
        "api_key",
        "api_secret",
        "dashboard_username",
        "dashboard_password",
    }

    assert set(_json("expire_quotes")) == {"expired"}
    assert set(_json("deliver_webhooks")) == {"attempted", "delivered", "failed"}
    assert _json("check_ledger")["ok"] is True


@pytest.mark.django_db
def test_every_ops_command_prints_human_text_by_default():
    merchant_text = _text("create_merchant", "Acme", "--with-key")
    merchant_id = merchant_text.split(": ")[1].split()[0]
    assert "API key:" in merchant_text and "API secret:" in merchant_text
    key_text = _text("create_api_key", merchant_id, "--expires-at", "2999-01-01")
    api_key = key_text.split()[2]
    assert api_key.startswith("ck_") and "2999-01-01" in key_text
    assert api_key in _text("revoke_api_key", api_key)
    assert "Signing secret:" in _text("set_webhook", merchant_id, "https://93.184.216.34/h")
    assert "available: 700 XOF" in _text(
        "credit_wallet", merchant_id, "XOF", "700", "--reason", "float"
    )
    assert "amina" in _text(
        "create_staff_user", "amina", "--password", "a-long-staff-password", "--support"
    )
    assert "API key:" in _text("seed_demo")
    assert _text("expire_quotes") and _text("deliver_webhooks")
    assert _text("check_ledger").startswith("Ledger OK")


def _manage(*args: str) -> subprocess.CompletedProcess:
    """The command as scripts run it: its own process, on the test database."""
    env = {
        **os.environ,
        "DATABASE_URL": _database_url(),
        "DJANGO_SETTINGS_MODULE": "config.settings",
    }
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.django_db(transaction=True)
def test_a_failing_ops_command_exits_non_zero_with_one_clear_line_and_no_json(merchant):
    for args in [
        ("revoke_api_key", "ck_nope", "--json"),
        ("create_api_key", "00000000-0000-0000-0000-000000000000", "--json"),
        ("credit_wallet", str(merchant.pk), "XOF", "1500.5", "--reason", "float", "--json"),
        ("set_webhook", str(merchant.pk), "http://93.184.216.34/hook", "--json"),
    ]:
        result = _manage(*args)
        assert result.returncode == 1, (args, result.stdout, result.stderr)
        assert result.stdout == ""
        assert result.stderr.startswith("CommandError: "), result.stderr
        assert "Traceback" not in result.stderr

    wallet_credit(
        merchant=merchant, currency="XOF", amount=Decimal("100"), reason="x", at=timezone.now()
    )
    assert _manage("check_ledger", "--json").returncode == 0
    Wallet.objects.filter(merchant=merchant).update(available=Decimal("150"))
    breached = _manage("check_ledger", "--json")
    assert breached.returncode == 1
    assert json.loads(breached.stdout)["ok"] is False
    assert "Traceback" not in breached.stderr


# --- catalog ------------------------------------------------------------------------------

COVERAGE = {
    "CM": ("XAF", {"CM_MTN_MOMO", "CM_ORANGE_MOMO"}),
    "SN": ("XOF", {"SN_ORANGE_MOMO", "SN_FREE_MOMO", "SN_WAVE_MOMO"}),
    "BJ": ("XOF", {"BJ_MTN_MOMO", "BJ_MOOV_MOMO"}),
    "TG": ("XOF", {"TG_TMONEY_MOMO"}),
    "CI": ("XOF", {"CI_ORANGE_MOMO", "CI_MTN_MOMO", "CI_MOOV_MOMO", "CI_WAVE_MOMO"}),
}


@pytest.mark.django_db
def test_seed_demo_loads_the_catalog_of_design_exactly():
    call_command("seed_demo", stdout=StringIO())

    operators = {
        (o.code, o.country_code, o.currency, o.rail_type, o.min_amount, o.max_amount, o.active)
        for o in Operator.objects.all()
    }
    assert operators == {
        (code, country, currency, "mobile_money", 100, 1_000_000, True)
        for country, (currency, codes) in COVERAGE.items()
        for code in codes
    }
    corridors = {
        (
            c.code,
            c.payer_country,
            c.recipient_country,
            c.payer_currency,
            c.recipient_currency,
            c.corridor_type,
            c.requires_sender_details,
            c.active,
        )
        for c in Corridor.objects.all()
    }
    assert corridors == {
        (
            f"{payer}-{recipient}-{payer_currency}-{recipient_currency}",
            payer,
            recipient,
            payer_currency,
            recipient_currency,
            "domestic" if payer == recipient else "cross_border",
            payer != recipient,
            True,
        )
        for payer, (payer_currency, _) in COVERAGE.items()
        for recipient, (recipient_currency, _) in COVERAGE.items()
    }
    assert len(corridors) == 25
    assert {
        (r.source_currency, r.target_currency, r.rate) for r in FxRate.objects.filter(merchant=None)
    } == {("XAF", "XOF", Decimal(1)), ("XOF", "XAF", Decimal(1))}
    platform = FeeSchedule.objects.filter(merchant=None, operator=None, corridor=None, active=True)
    assert sorted(platform.values_list("flow_type", flat=True)) == ["payin", "payout", "transfer"]


# --- environment variables -------------------------------------------------------------------

DOCUMENTED_VARIABLES = (
    "DATABASE_URL",
    "CELERY_BROKER_URL",
    "REDIS_URL",
    "QUOTE_TTL_SECONDS",
    "PROVIDER_SIMULATION_DELAY_SECONDS",
    "KYC_REVIEW_DELAY_SECONDS",
    "WEBHOOK_RETRY_SCHEDULE",
    "WEBHOOK_TIMEOUT_SECONDS",
    "WEBHOOK_ALLOW_HTTP",
    "ALLOW_PRIVATE_NETWORK_URLS",
    "IDEMPOTENCY_KEY_TTL_SECONDS",
)


def _settings_with(variables: dict[str, str]) -> dict:
    """The settings a fresh process reads from exactly these documented variables (no .env)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in DOCUMENTED_VARIABLES and not k.startswith("DJANGO_")
    }
    env |= {"DJANGO_SETTINGS_MODULE": "config.settings", **variables}
    code = (
        "import json, django, dotenv; dotenv.load_dotenv = lambda *args, **kwargs: None; "
        "django.setup(); from django.conf import settings as s; "
        "from webhooks.services.delivery import max_attempts; "
        "db = s.DATABASES['default']; "
        "print(json.dumps({'db': [db['ENGINE'], str(db['NAME'])], "
        "'broker': s.CELERY_BROKER_URL, "
        "'broker_in': s.CELERY_BROKER_TRANSPORT_OPTIONS.get('data_folder_in'), "
        "'cache': s.CACHES['default']['BACKEND'], "
        f"**{{n: getattr(s, n) for n in {DOCUMENTED_VARIABLES[3:]!r}}}, "
        "'attempts': max_attempts(), 'var': str(s.VAR_DIR)}))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_the_design_variables_default_as_the_design_table_says():
    read = _settings_with({})
    var = read["var"]
    assert read["db"] == ["django.db.backends.postgresql", "cowry"]  # make run's own server
    assert read["broker"].startswith("filesystem")
    assert read["broker_in"].startswith(f"{var}/")
    assert read["cache"] == "django.core.cache.backends.locmem.LocMemCache"
    assert {k: read[k] for k in DOCUMENTED_VARIABLES[3:]} == {
        "QUOTE_TTL_SECONDS": 900,
        "PROVIDER_SIMULATION_DELAY_SECONDS": 1,
        "KYC_REVIEW_DELAY_SECONDS": 1,
        "WEBHOOK_RETRY_SCHEDULE": [60, 300, 900, 3600, 14400, 43200],
        "WEBHOOK_TIMEOUT_SECONDS": 10,
        "WEBHOOK_ALLOW_HTTP": False,
        "ALLOW_PRIVATE_NETWORK_URLS": False,
        "IDEMPOTENCY_KEY_TTL_SECONDS": 86400,
    }


def test_each_design_variable_is_read_under_its_name():
    read = _settings_with(
        {
            "DATABASE_URL": "postgres://someone@db.example:5433/cowry_x",
            "CELERY_BROKER_URL": "redis://127.0.0.1:6379/11",
            "REDIS_URL": "redis://127.0.0.1:6379/10",
            "QUOTE_TTL_SECONDS": "60",
            "PROVIDER_SIMULATION_DELAY_SECONDS": "0",
            "KYC_REVIEW_DELAY_SECONDS": "2.5",
            "WEBHOOK_RETRY_SCHEDULE": "5,10,15,20,25,30",
            "WEBHOOK_TIMEOUT_SECONDS": "3",
            "WEBHOOK_ALLOW_HTTP": "true",
            "ALLOW_PRIVATE_NETWORK_URLS": "true",
            "IDEMPOTENCY_KEY_TTL_SECONDS": "120",
        }
    )
    assert read["db"] == ["django.db.backends.postgresql", "cowry_x"]
    assert read["broker"] == "redis://127.0.0.1:6379/11"
    assert read["cache"] == "django.core.cache.backends.redis.RedisCache"
    assert {k: read[k] for k in DOCUMENTED_VARIABLES[3:]} == {
        "QUOTE_TTL_SECONDS": 60,
        "PROVIDER_SIMULATION_DELAY_SECONDS": 0,
        "KYC_REVIEW_DELAY_SECONDS": 2.5,
        "WEBHOOK_RETRY_SCHEDULE": [5, 10, 15, 20, 25, 30],
        "WEBHOOK_TIMEOUT_SECONDS": 3,
        "WEBHOOK_ALLOW_HTTP": True,
        "ALLOW_PRIVATE_NETWORK_URLS": True,
        "IDEMPOTENCY_KEY_TTL_SECONDS": 120,
    }
    assert read["attempts"] == 7  # the six gaps plus the first attempt (docs/webhooks.md)


# --- idempotency: the fingerprint is the parsed body ---------------------------------------


@pytest.mark.django_db
def test_the_same_body_written_differently_is_a_replay_not_a_conflict(api):
    def post(raw: str):
        return api.client.post(
            "/customers", raw, content_type="application/json", HTTP_IDEMPOTENCY_KEY="same"
        )

    first = post('{"first_name":"Awa","last_name":"Diop"}')
    again = post('{\n  "last_name": "Diop",\n  "first_name": "Awa"\n}')
    other = post('{"first_name":"Awa","last_name":"Ndiaye"}')

    assert first.status_code == again.status_code == 201
    assert again.json()["id"] == first.json()["id"]
    assert again.json()["_meta"]["idempotency_replayed"] is True
    assert other.status_code == 409
    assert other.json()["error"]["reason"] == "idempotency_key_reused"


# --- `make test` without its services ------------------------------------------------------


def test_make_tests_service_check_names_what_is_unreachable_without_a_traceback():
    with socket.socket() as sock:  # a port nothing listens on once closed
        sock.bind(("127.0.0.1", 0))
        closed = sock.getsockname()[1]
    env = {
        **os.environ,
        "DATABASE_URL": f"postgres://postgres@127.0.0.1:{closed}/cowry",
        "REDIS_URL": f"redis://127.0.0.1:{closed}/0",
    }
    check = [sys.executable, "bin/check_services.py"]
    down = subprocess.run(check, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert down.returncode == 1
    assert f"PostgreSQL is not reachable at 127.0.0.1:{closed}" in down.stderr
    assert f"Redis is not reachable at 127.0.0.1:{closed}" in down.stderr
    assert "Traceback" not in down.stderr

    up = subprocess.run(check, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert (up.returncode, up.stderr) == (0, "")


# --- the fixed paths -----------------------------------------------------------------------


@pytest.mark.django_db
def test_the_fixed_paths_answer_without_credentials(client, worker_heartbeat):
    assert client.get("/schema", {"format": "json"}).json()["openapi"].startswith("3.")
    docs = client.get("/docs")
    assert docs.status_code == 200 and docs["Content-Type"].startswith("text/html")
    assert client.get("/health").json()["status"] == "ok"
    dashboard = client.get("/admin/")
    assert dashboard.status_code == 302 and dashboard["Location"].startswith("/admin/login/")
