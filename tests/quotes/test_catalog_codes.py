"""Catalog rows agree with themselves: an operator's code names its country and rail, a
corridor's its countries and currencies, and each currency is its country's money, so a quote
never shows a code or a currency that contradicts its route."""

from decimal import Decimal

import pytest
from django.db import IntegrityError
from django.urls import reverse

from quotes.models import Corridor, Operator

pytestmark = pytest.mark.django_db


def _operator_form(**fields) -> dict:
    return {
        "code": "SN_CBAO_BANK",
        "country_code": "SN",
        "currency": "XOF",
        "rail_type": "bank_transfer",
        "name": "CBAO",
        "min_amount": "100",
        "max_amount": "1000000",
        "status": "operational",
        "network_names": "",
        "active": "on",
        **fields,
    }


def _corridor_form(**fields) -> dict:
    return {
        "code": "CM-GA-XAF-XAF",
        "payer_country": "CM",
        "recipient_country": "GA",
        "payer_currency": "XAF",
        "recipient_currency": "XAF",
        "corridor_type": "cross_border",
        "active": "on",
        **fields,
    }


@pytest.mark.parametrize(
    "fields",
    [
        {"country_code": "CM"},  # the code names SN
        {"rail_type": "mobile_money"},  # the code ends in BANK
        {"code": "SN_CBAO_MOMO"},  # MOMO on a bank transfer
        {"code": "sn_cbao_bank"},
        {"code": "SN_BANK"},  # no operator between country and rail
    ],
)
def test_admin_refuses_an_operator_code_that_contradicts_its_fields(admin_client, fields):
    response = admin_client.post(reverse("admin:quotes_operator_add"), _operator_form(**fields))
    assert response.status_code == 200  # the form again, with the error
    form = response.context["adminform"].form
    assert "<COUNTRY>_<OPERATOR>_<RAIL>" in " ".join(form.non_field_errors())
    assert not Operator.objects.exists()


@pytest.mark.parametrize(
    "fields",
    [
        {"currency": "XAF"},  # Senegal pays in XOF
        {"code": "CM_CBAO_BANK", "country_code": "CM"},  # Cameroon pays in XAF
    ],
)
def test_admin_refuses_an_operator_in_another_countrys_currency(admin_client, fields):
    response = admin_client.post(reverse("admin:quotes_operator_add"), _operator_form(**fields))
    assert response.status_code == 200
    errors = " ".join(response.context["adminform"].form.non_field_errors())
    assert "XAF in the CEMAC, XOF in the UEMOA" in errors
    assert not Operator.objects.exists()


def test_admin_adds_an_operator_whose_code_matches(admin_client):
    response = admin_client.post(reverse("admin:quotes_operator_add"), _operator_form())
    assert response.status_code == 302
    assert Operator.objects.get(code="SN_CBAO_BANK").rail_type == "bank_transfer"


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"code": "ZZ"}, "<payer_country>-<recipient_country>"),
        ({"recipient_currency": "XOF"}, "<payer_country>-<recipient_country>"),
        ({"corridor_type": "domestic"}, "between two, cross-border"),
        (
            {"code": "CM-CM-XAF-XAF", "recipient_country": "CM"},
            "within one country is domestic",
        ),
        (
            {"code": "CM-GA-XAF-XOF", "recipient_currency": "XOF"},
            "XAF in the CEMAC, XOF in the UEMOA",
        ),
        (
            {"code": "CM-SN-XOF-XOF", "recipient_country": "SN", "payer_currency": "XOF"},
            "XAF in the CEMAC, XOF in the UEMOA",
        ),
    ],
)
def test_admin_refuses_a_corridor_code_or_type_that_contradicts_its_route(
    admin_client, fields, message
):
    response = admin_client.post(reverse("admin:quotes_corridor_add"), _corridor_form(**fields))
    assert response.status_code == 200
    assert message in " ".join(response.context["adminform"].form.non_field_errors())
    assert not Corridor.objects.exists()


def test_admin_adds_a_corridor_whose_code_matches(admin_client):
    response = admin_client.post(reverse("admin:quotes_corridor_add"), _corridor_form())
    assert response.status_code == 302
    assert Corridor.objects.get(code="CM-GA-XAF-XAF").corridor_type == "cross_border"


def test_the_database_refuses_a_mismatched_code_written_around_the_forms():
    with pytest.raises(IntegrityError, match="operator_code_names_country_and_rail"):
        Operator.objects.create(
            code="SN_X_MOMO",
            country_code="CM",
            currency="XAF",
            rail_type="mobile_money",
            name="X",
            min_amount=Decimal(100),
            max_amount=Decimal(1000),
        )
