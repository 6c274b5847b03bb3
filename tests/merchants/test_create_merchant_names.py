"""create_merchant refuses a name another merchant already has (a provisioning script re-run or
retried after a timeout made a second merchant and a second API key), unless told the second
business of that name is meant; two runs at once take turns."""

import contextlib
import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import transaction

from merchants import services
from merchants.models import ApiKey, AuditLogEntry, Merchant
from quotes.models import MerchantOperator
from tests import locks
from tests.test_design_contract import _manage

pytestmark = pytest.mark.django_db


def _create(*args) -> dict:
    out = StringIO()
    call_command("create_merchant", *args, "--json", stdout=out)
    return json.loads(out.getvalue())


@pytest.mark.parametrize(
    "again",
    ["Acme Shop", "acme shop", "  ACME SHOP  ", "Acme   Shop", "acme\tshop", "Acme\u00a0Shop"],
)
def test_a_name_another_merchant_has_is_refused_and_changes_nothing(again):
    first = _create("Acme Shop", "--with-key", "--all-operators")
    before = (
        ApiKey.objects.count(),
        AuditLogEntry.objects.count(),
        MerchantOperator.objects.count(),
    )

    with pytest.raises(CommandError) as refused:
        call_command("create_merchant", again, "--with-key", "--all-operators", "--json")

    message = str(refused.value)
    assert "A merchant named" in message and first["merchant_id"] in message
    assert "--allow-duplicate-name" in message and "Nothing was created" in message
    assert list(Merchant.objects.values_list("pk", flat=True)) == [
        services.merchant_get(merchant_id=first["merchant_id"]).pk
    ]
    after = (
        ApiKey.objects.count(),
        AuditLogEntry.objects.count(),
        MerchantOperator.objects.count(),
    )
    assert after == before


@pytest.mark.parametrize("other", ["Acme", "Acme Shops", "Acme Shop 2", "The Acme Shop"])
def test_a_name_only_like_another_is_created(other):
    _create("Acme Shop")
    assert Merchant.objects.get(pk=_create(other)["merchant_id"]).name == other


def test_allow_duplicate_name_creates_another_business_of_the_same_name():
    first = _create("Acme Shop")
    second = _create("acme shop", "--allow-duplicate-name", "--with-key")
    assert set(second) == {"merchant_id", "api_key", "api_secret"}
    assert second["merchant_id"] != first["merchant_id"]
    assert Merchant.objects.filter(name__iexact="acme shop").count() == 2


def test_existing_duplicates_are_all_named_in_the_refusal():
    """Data from before the check may already hold the name twice."""
    older = Merchant.objects.create(name="Twin")
    newer = Merchant.objects.create(name="TWIN ")
    with pytest.raises(CommandError, match=f"{older.pk}, {newer.pk}"):
        call_command("create_merchant", "twin")


@pytest.mark.django_db(transaction=True)
def test_the_refusal_from_its_own_process_is_one_line_on_stderr_and_exit_1():
    first = _manage("create_merchant", "Acme Shop", "--json")
    assert first.returncode == 0, first.stderr

    again = _manage("create_merchant", " acme  shop", "--with-key", "--json")

    assert again.returncode == 1
    assert again.stdout == ""
    assert again.stderr.startswith("CommandError: A merchant named 'acme  shop' already exists")
    assert len(again.stderr.strip().splitlines()) == 1 and "Traceback" not in again.stderr
    assert json.loads(first.stdout)["merchant_id"] in again.stderr
    assert Merchant.objects.count() == 1 and not ApiKey.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_runs_at_once_take_turns_and_only_the_first_creates():
    """A first run's creation not yet committed; two retries of it start meanwhile. They wait
    for it, then each finds its merchant and is refused."""
    outcomes: list = []

    def retry():
        try:
            return _create("ACME shop", "--with-key")
        except CommandError as refused:
            return refused

    with transaction.atomic():
        services.merchant_create(name="Acme Shop")
        racers = [locks.start(retry, outcomes) for _ in range(2)]
        locks.waiting_for_a_lock(2)
    for racer in racers:
        racer.join()

    assert len(outcomes) == 2
    assert all(isinstance(outcome, CommandError) for outcome in outcomes), outcomes
    assert Merchant.objects.count() == 1
    assert not ApiKey.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_runs_released_together_create_one_merchant():
    def run() -> None:
        with contextlib.suppress(CommandError):
            _create("Racer", "--with-key")

    locks.at_once(run, 3)
    assert Merchant.objects.filter(name="Racer").count() == 1
    assert ApiKey.objects.count() == 1
