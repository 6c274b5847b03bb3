import json

import pytest
from django.core.management import call_command

from merchants.models import Merchant
from quotes import catalog as quote_catalog
from quotes.models import (
    Corridor,
    FeeSchedule,
    FxRate,
    MerchantCorridor,
    MerchantOperator,
    Operator,
)

pytestmark = pytest.mark.django_db


def test_catalog_has_the_12_operators_and_25_corridors_of_design(catalog):
    assert Operator.objects.count() == 12
    assert set(Operator.objects.values_list("code", flat=True)) == {
        "CM_MTN_MOMO", "CM_ORANGE_MOMO", "SN_ORANGE_MOMO", "SN_FREE_MOMO", "SN_WAVE_MOMO",
        "BJ_MTN_MOMO", "BJ_MOOV_MOMO", "TG_TMONEY_MOMO", "CI_ORANGE_MOMO", "CI_MTN_MOMO",
        "CI_MOOV_MOMO", "CI_WAVE_MOMO",
    }  # fmt: skip
    for operator in Operator.objects.all():
        assert operator.code.startswith(f"{operator.country_code}_")
        assert operator.rail_type == "mobile_money"
        assert (operator.min_amount, operator.max_amount) == (100, 1_000_000)
    assert Corridor.objects.count() == 25
    assert Corridor.objects.filter(corridor_type="domestic").count() == 5
    cm_sn = Corridor.objects.get(code="CM-SN-XAF-XOF")
    assert (cm_sn.corridor_type, cm_sn.requires_sender_details, cm_sn.requires_kyc) == (
        "cross_border",
        True,
        False,
    )
    assert not Corridor.objects.get(code="SN-SN-XOF-XOF").requires_sender_details


def test_catalog_seed_is_idempotent_and_keeps_admin_edits(catalog):
    Operator.objects.filter(code="CM_MTN_MOMO").update(max_amount=500000)
    created = quote_catalog.catalog_seed()
    assert created == {"operators": 0, "corridors": 0, "fee_schedules": 0, "fx_rates": 0}
    assert Operator.objects.get(code="CM_MTN_MOMO").max_amount == 500000
    assert FeeSchedule.objects.filter(merchant=None).count() == 3
    assert FxRate.objects.get(source_currency="XAF", target_currency="XOF").rate == 1


def test_seed_demo_enables_everything_once(capsys):
    call_command("seed_demo", "--json")
    call_command("seed_demo", "--json")
    outputs = [json.loads(line) for line in capsys.readouterr().out.strip().splitlines()]
    assert outputs[0]["merchant_id"] == outputs[1]["merchant_id"]
    merchant = Merchant.objects.get(name="Demo Merchant")
    assert MerchantOperator.objects.filter(merchant=merchant).count() == 12
    assert MerchantCorridor.objects.filter(merchant=merchant).count() == 25
    assert Operator.objects.count() == 12


def test_create_merchant_with_all_operators_enables_the_catalog(capsys):
    call_command("create_merchant", "Acme", "--all-operators", "--json")
    merchant_id = json.loads(capsys.readouterr().out)["merchant_id"]
    assert MerchantOperator.objects.filter(merchant_id=merchant_id).count() == 12
    assert MerchantCorridor.objects.filter(merchant_id=merchant_id).count() == 25


def test_create_merchant_without_the_flag_enables_nothing(catalog, capsys):
    call_command("create_merchant", "Plain", "--json")
    merchant_id = json.loads(capsys.readouterr().out)["merchant_id"]
    assert not MerchantOperator.objects.filter(merchant_id=merchant_id).exists()
