"""GET /operators and /corridors (what this merchant can use now), operator status."""

from decimal import Decimal

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from quotes.models import Corridor, FeeSchedule, MerchantCorridor, MerchantOperator, Operator, Quote
from tests.catalog import TRANSFER_QUOTE

pytestmark = pytest.mark.django_db


def test_operators_list_what_the_merchant_has_enabled_and_active(enabled_api, enabled_merchant):
    MerchantOperator.objects.filter(
        merchant=enabled_merchant, operator__code="CI_WAVE_MOMO"
    ).delete()
    Operator.objects.filter(code="TG_TMONEY_MOMO").update(active=False)

    response = enabled_api.get("/operators")

    assert response.status_code == 200
    codes = [item["code"] for item in response.json()["data"]]
    assert len(codes) == 10 and codes == sorted(codes)
    assert "CI_WAVE_MOMO" not in codes and "TG_TMONEY_MOMO" not in codes


def test_operator_item_carries_limits_status_and_the_fees_that_apply(enabled_api, enabled_merchant):
    operator = Operator.objects.get(code="CM_MTN_MOMO")
    FeeSchedule.objects.create(
        merchant=enabled_merchant,
        flow_type="payout",
        operator=operator,
        percentage=Decimal("1.25"),
        fixed_amount=Decimal(50),
        minimum_fee=Decimal(100),
        maximum_fee=Decimal(5000),
    )

    items = {item["code"]: item for item in enabled_api.get("/operators").json()["data"]}

    item = items["CM_MTN_MOMO"]
    assert {k: item[k] for k in item if k != "fees"} == {
        "code": "CM_MTN_MOMO",
        "country_code": "CM",
        "currency": "XAF",
        "rail_type": "mobile_money",
        "name": operator.name,
        "min_amount": "100",
        "max_amount": "1000000",
        "status": "operational",
    }
    assert item["fees"]["payout"] == {
        "percentage": "1.25",
        "fixed": "50",
        "min": "100",
        "max": "5000",
    }
    platform = FeeSchedule.objects.get(merchant=None, flow_type="payin", operator=None)
    assert item["fees"]["payin"]["percentage"] == f"{platform.percentage.normalize():f}"
    # Another operator keeps the platform payout schedule.
    assert items["SN_WAVE_MOMO"]["fees"]["payout"] != item["fees"]["payout"]


def test_corridors_list_requirements_and_transfer_fees(enabled_api, enabled_merchant):
    MerchantCorridor.objects.filter(
        merchant=enabled_merchant, corridor__code="CM-SN-XAF-XOF"
    ).delete()
    Corridor.objects.filter(code="SN-CI-XOF-XOF").update(requires_kyc=True)

    response = enabled_api.get("/corridors")

    items = {item["code"]: item for item in response.json()["data"]}
    assert response.status_code == 200 and len(items) == 24
    assert "CM-SN-XAF-XOF" not in items
    sn_ci = items["SN-CI-XOF-XOF"]
    assert sn_ci["requires_kyc"] is True and sn_ci["requires_sender_details"] is True
    assert sn_ci["corridor_type"] == "cross_border"
    assert (sn_ci["payer_country"], sn_ci["recipient_country"]) == ("SN", "CI")
    assert (sn_ci["payer_currency"], sn_ci["recipient_currency"]) == ("XOF", "XOF")
    assert items["SN-SN-XOF-XOF"]["corridor_type"] == "domestic"
    assert set(sn_ci["fees"]) == {"percentage", "fixed", "min", "max"}


def test_a_merchant_with_nothing_enabled_sees_empty_lists(api, catalog):
    assert api.get("/operators").json() == {"data": []}
    assert api.get("/corridors").json() == {"data": []}


def test_configuration_lists_cost_a_fixed_number_of_queries(
    enabled_api, django_assert_max_num_queries
):
    with django_assert_max_num_queries(6):
        assert len(enabled_api.get("/operators").json()["data"]) == 12
    with django_assert_max_num_queries(6):
        assert len(enabled_api.get("/corridors").json()["data"]) == 25


@pytest.mark.parametrize("path", ["/operators", "/corridors"])
def test_configuration_needs_credentials(db, path):
    assert APIClient().get(path).status_code == 401


def _quote(api, operator="SN_ORANGE_MOMO"):
    return api.post(
        "/quotes/payin",
        {
            "country_code": operator[:2],
            "operator_code": operator,
            "rail_type": "mobile_money",
            "send_amount": "5000",
            "send_currency": "XOF",
        },
    )


def test_a_closed_operator_refuses_quotes_and_shows_closed(enabled_api):
    Operator.objects.filter(code="SN_ORANGE_MOMO").update(status="closed")

    response = _quote(enabled_api)

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["reason"] == "operator_closed" and "operator_code" in error["fields"]
    assert not Quote.objects.exists()
    items = {i["code"]: i for i in enabled_api.get("/operators").json()["data"]}
    assert items["SN_ORANGE_MOMO"]["status"] == "closed"


def test_a_closed_operator_refuses_transfer_quotes_naming_the_leg(enabled_api):
    Operator.objects.filter(code="SN_WAVE_MOMO").update(status="closed")

    response = enabled_api.post("/quotes/transfer", TRANSFER_QUOTE)

    assert response.status_code == 400
    assert response.json()["error"]["reason"] == "operator_closed"
    assert "recipient_operator_code" in response.json()["error"]["fields"]


def test_a_delayed_operator_still_quotes(enabled_api):
    Operator.objects.filter(code="SN_ORANGE_MOMO").update(status="delayed")

    assert _quote(enabled_api).status_code == 201


def test_support_staff_set_an_operator_status_in_the_admin_and_nothing_else(catalog, staff_client):
    client = staff_client(support=True)
    operator = Operator.objects.get(code="SN_ORANGE_MOMO")
    url = reverse("admin:quotes_operator_change", args=[operator.pk])

    assert client.get(reverse("admin:quotes_operator_changelist")).status_code == 200
    response = client.post(url, {"status": "closed", "active": "", "min_amount": "1"})

    assert response.status_code == 302
    operator.refresh_from_db()
    assert operator.status == "closed"
    assert operator.active is True and operator.min_amount == Decimal(100)
    assert client.get(reverse("admin:quotes_operator_add")).status_code == 403


def test_merchant_staff_cannot_touch_operators(enabled_merchant, staff_client):
    client = staff_client(merchant=enabled_merchant, role="owner")
    operator = Operator.objects.get(code="SN_ORANGE_MOMO")

    response = client.post(
        reverse("admin:quotes_operator_change", args=[operator.pk]), {"status": "closed"}
    )

    assert response.status_code == 403
    operator.refresh_from_db()
    assert operator.status == "operational"
