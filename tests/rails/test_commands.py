"""The ops commands of provider connections and routes, and the routes' memo."""

import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection as db_connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from payments import provider
from rails import selectors, services
from rails.models import ProviderConnection
from tests.rails.conftest import CONNECTION, connection_add, tokens_forget

pytestmark = pytest.mark.django_db(transaction=True)

SECRETS = ("api_key", "subscription_key")


def _run(*args, stdin: str = "") -> str:
    out = io.StringIO()
    old = __import__("sys").stdin
    __import__("sys").stdin = io.StringIO(stdin)
    try:
        call_command(*args, stdout=out)
    finally:
        __import__("sys").stdin = old
    return out.getvalue()


def _secret_values(credentials: dict) -> list[str]:
    return [each[name] for each in credentials.values() for name in SECRETS]


def test_add_reads_the_credentials_on_stdin_and_never_prints_or_stores_them_in_clear(
    catalog, fake_mtn
):
    credentials = json.dumps(fake_mtn.credentials)
    shown = _run(
        "provider_connection", "add", "mtn-cm", "--kind", "mtn_momo",
        "--base-url", fake_mtn.url, "--target-environment", "sandbox",
        "--callback-base", "https://cowry.example", "--json",
        stdin=credentials,
    )  # fmt: skip
    shown += _run("provider_connection", "list")
    shown += _run("provider_connection", "list", "--json")
    stored = ProviderConnection.objects.get(name="mtn-cm")
    for secret in _secret_values(fake_mtn.credentials):
        assert secret not in shown
        assert secret not in stored.credentials
    assert json.loads(shown.splitlines()[0])["kind"] == "mtn_momo"
    assert selectors.connection_settings("mtn-cm").credentials == fake_mtn.credentials


@pytest.mark.parametrize(
    "stdin",
    ["not json", "{}", '{"collection": {}, "disbursement": {}}', '["a"]'],
)
def test_add_refuses_credentials_that_are_not_the_documented_object(catalog, stdin):
    with pytest.raises(CommandError) as refused:
        _run(
            "provider_connection", "add", "x", "--kind", "mtn_momo", "--base-url",
            "https://momo.example", "--target-environment", "sandbox", "--callback-base",
            "https://cowry.example", stdin=stdin,
        )  # fmt: skip
    assert stdin not in str(refused.value) or stdin == "{}"
    assert not ProviderConnection.objects.exists()


def test_update_with_new_credentials_drops_the_cached_tokens(catalog, fake_mtn):
    from django.core.cache import cache

    connection_add(fake_mtn, callback_base="https://cowry.example")
    cache.set(services.token_cache_key(CONNECTION, "collection"), {"token": "t", "fetched_at": 0})
    _run("provider_connection", "update", CONNECTION, "--credentials", "-",
         stdin=json.dumps(fake_mtn.credentials))  # fmt: skip
    assert cache.get(services.token_cache_key(CONNECTION, "collection")) is None


def test_routes_and_the_refused_removals(catalog, fake_mtn, enabled_merchant):
    connection_add(fake_mtn, callback_base="https://cowry.example")
    assert "CM_MTN_MOMO  simulator" in _run("route_operator", "--list")
    _run("route_operator", "CM_MTN_MOMO", CONNECTION)
    assert json.loads(_run("route_operator", "--list", "--json"))["routes"]["CM_MTN_MOMO"] == (
        CONNECTION
    )
    with pytest.raises(CommandError, match="route of CM_MTN_MOMO"):
        _run("provider_connection", "remove", CONNECTION)
    with pytest.raises(CommandError, match="No catalog operator"):
        _run("route_operator", "XX_NOPE_MOMO", CONNECTION)
    with pytest.raises(CommandError, match="No connection"):
        _run("route_operator", "CM_MTN_MOMO", "nope")
    _run("route_operator", "CM_MTN_MOMO", "simulator")
    assert provider.route("CM_MTN_MOMO") == "simulator"
    _run("provider_connection", "remove", CONNECTION)  # no route, no leg: removable
    assert not ProviderConnection.objects.exists()


def test_remove_is_refused_while_an_unfinished_leg_names_the_connection(
    catalog, fake_mtn, enabled_merchant, settings
):
    from tests.payments.conftest import create_customer, payin_body
    from tests.rails.conftest import CM_PHONE, cm_quote
    from tests.support import MerchantClient

    connection_add(fake_mtn, callback_base="https://cowry.example")
    services.operator_route_set(operator_code="CM_MTN_MOMO", name=CONNECTION, at=timezone.now())
    settings.ALLOW_PRIVATE_NETWORK_URLS = True
    fake_mtn.switches.pending = True  # MTN takes the payin and does not decide
    api = MerchantClient(enabled_merchant)
    customer = create_customer(api, phone=CM_PHONE)
    from payments.models import Payin

    api.post("/payins", payin_body(cm_quote(api), customer, CM_PHONE))
    payin = Payin.objects.get()
    assert (payin.status, payin.provider_connection) == ("pending", CONNECTION)
    _run("route_operator", "CM_MTN_MOMO", "simulator")
    with pytest.raises(CommandError, match="unfinished leg"):
        _run("provider_connection", "remove", CONNECTION)
    tokens_forget()


def test_routes_are_read_from_the_memo_and_a_change_reaches_it(catalog, fake_mtn):
    connection_add(fake_mtn, callback_base="https://cowry.example")
    provider.route("CM_MTN_MOMO")
    with CaptureQueriesContext(db_connection) as queries:
        for _ in range(50):
            assert provider.route("CM_MTN_MOMO") == "simulator"
    assert len(queries) == 0
    # another process's change: the version in the shared cache moves, the memo lapses
    ProviderConnection.objects.get(name=CONNECTION).routes.create(
        operator_code="CM_MTN_MOMO", updated_at=timezone.now()
    )
    from django.core.cache import cache

    cache.set(selectors.ROUTES_VERSION_KEY, "moved", None)
    selectors._memo.checked -= selectors.ROUTES_MEMO_SECONDS  # as ROUTES_MEMO_SECONDS later
    assert provider.route("CM_MTN_MOMO") == CONNECTION


def test_provider_check_ok_then_fail_with_wrong_credentials(catalog, fake_mtn, settings, caplog):
    settings.ALLOW_PRIVATE_NETWORK_URLS = True
    connection_add(fake_mtn, callback_base="https://cowry.example")
    out = _run("provider_check", CONNECTION, "--msisdn", "237670001234")
    assert out.splitlines() == [
        "OK   collection token: ok",
        "OK   disbursement token: ok",
        "OK   disbursement balance: 1000000 EUR",
        "OK   account holder: 237670001234 is active",
    ]
    assert fake_mtn.token_fetches == {"collection": 1, "disbursement": 1}
    _run("provider_check", CONNECTION)
    assert fake_mtn.token_fetches == {"collection": 2, "disbursement": 2}  # fresh each time

    wrong = json.loads(json.dumps(fake_mtn.credentials))
    wrong["disbursement"]["api_key"] = "not-the-key"
    _run("provider_connection", "update", CONNECTION, "--credentials", "-",
         stdin=json.dumps(wrong))  # fmt: skip
    with pytest.raises(SystemExit) as exit_status:
        _run("provider_check", CONNECTION)
    assert exit_status.value.code == 1
    assert "not-the-key" not in caplog.text
    tokens_forget()


def test_provider_check_prints_fail_and_why(catalog, fake_mtn, settings, capsys):
    settings.ALLOW_PRIVATE_NETWORK_URLS = True
    wrong = json.loads(json.dumps(fake_mtn.credentials))
    wrong["disbursement"]["api_key"] = "not-the-key"
    connection_add(fake_mtn, callback_base="https://cowry.example", credentials=wrong)
    fake_mtn.switches.inactive = {"237670001000"}
    out = io.StringIO()
    with pytest.raises(SystemExit) as exit_status:
        call_command("provider_check", CONNECTION, "--msisdn", "237670001000", stdout=out)
    assert exit_status.value.code == 1
    lines = out.getvalue().splitlines()
    assert lines[0] == "OK   collection token: ok"
    assert lines[1] == "FAIL disbursement token: credentials refused (HTTP 401 HTTP_401)"
    assert lines[2].startswith("FAIL disbursement balance: ")
    assert lines[3] == "FAIL account holder: refused (NOT_ACTIVE)"
    assert "not-the-key" not in out.getvalue()
    tokens_forget()
