"""seed_demo sets up only what is missing: two runs at once make one demo merchant, and a run
leaves disabled what ops disabled for the demo merchant."""

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import transaction

from merchants.models import Merchant
from quotes.models import Corridor, FeeSchedule, MerchantCorridor, MerchantOperator, Operator
from tests import locks

pytestmark = pytest.mark.django_db

DEMO = "Demo Merchant"


def _seed() -> dict:
    out = StringIO()
    call_command("seed_demo", "--json", stdout=out)
    return json.loads(out.getvalue())


def _enabled(merchant_id) -> tuple[set, set]:
    return (
        set(
            MerchantOperator.objects.filter(merchant_id=merchant_id).values_list(
                "operator__code", flat=True
            )
        ),
        set(
            MerchantCorridor.objects.filter(merchant_id=merchant_id).values_list(
                "corridor__code", flat=True
            )
        ),
    )


def test_a_run_leaves_disabled_what_ops_disabled_for_the_demo_merchant():
    merchant_id = _seed()["merchant_id"]
    MerchantOperator.objects.filter(merchant_id=merchant_id, operator__code="SN_FREE_MOMO").delete()
    MerchantCorridor.objects.filter(
        merchant_id=merchant_id, corridor__code="CM-SN-XAF-XOF"
    ).delete()

    assert _seed()["merchant_id"] == merchant_id

    operators, corridors = _enabled(merchant_id)
    assert "SN_FREE_MOMO" not in operators and len(operators) == 11
    assert "CM-SN-XAF-XOF" not in corridors and len(corridors) == 24


def test_a_run_enables_for_the_demo_merchant_what_is_new_to_the_catalog():
    merchant_id = _seed()["merchant_id"]
    MerchantOperator.objects.filter(merchant_id=merchant_id, operator__code="SN_FREE_MOMO").delete()
    Operator.objects.filter(code="TG_TMONEY_MOMO").delete()  # not in the catalog yet
    Corridor.objects.filter(code="TG-TG-XOF-XOF").delete()

    _seed()

    operators, corridors = _enabled(merchant_id)
    assert "TG_TMONEY_MOMO" in operators and "TG-TG-XOF-XOF" in corridors
    assert "SN_FREE_MOMO" not in operators
    assert (len(operators), len(corridors)) == (11, 25)


def test_a_merchant_only_named_like_the_demo_is_not_it_and_does_not_stop_the_seed():
    other = Merchant.objects.create(name="demo  merchant")
    merchant_id = _seed()["merchant_id"]
    assert merchant_id != str(other.pk)
    assert Merchant.objects.get(pk=merchant_id).name == DEMO
    assert _enabled(other.pk) == (set(), set())


@pytest.mark.django_db(transaction=True)
def test_a_run_while_another_is_under_way_waits_and_finds_its_demo_merchant():
    """The demo merchant was deleted (its dashboard login stays); a run is under way when a
    second starts: the second waits for it and finds the merchant it made."""
    _seed()
    Merchant.objects.filter(name=DEMO).delete()
    outputs: list = []

    with transaction.atomic():
        first = _seed()
        racer = locks.start(_seed, outputs)
        locks.waiting_for_a_lock(1)
    racer.join()

    assert [output["merchant_id"] for output in outputs] == [first["merchant_id"]]
    assert list(Merchant.objects.filter(name=DEMO).values_list("pk", flat=True)) == [
        Merchant.objects.get(pk=first["merchant_id"]).pk
    ]


@pytest.mark.django_db(transaction=True)
def test_runs_released_together_on_a_fresh_database_make_one_demo_merchant():
    locks.at_once(_seed, 3)
    merchant = Merchant.objects.get(name=DEMO)
    assert _enabled(merchant.pk)[0] == set(Operator.objects.values_list("code", flat=True))
    assert merchant.api_keys.count() == 3
    assert FeeSchedule.objects.filter(merchant=None).count() == 3  # the catalog once, too
