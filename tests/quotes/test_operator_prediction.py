"""POST /operators/predict: a phone number's catalog operator, from the network phonenumbers
names for its prefix and the catalog's network names (data ops edit in the admin)."""

import phonenumbers
import pytest
from phonenumbers import carrier
from rest_framework.test import APIClient

from quotes.models import MerchantOperator, Operator
from tests.catalog import load_catalog
from tests.factories import MerchantFactory
from tests.support import MerchantClient

# A real number range of each network (the national numbering plans, as phonenumbers knows them:
# Benin's 10-digit plan of 2024, Côte d'Ivoire's of 2021).
NUMBERS = {
    "CM_MTN_MOMO": ["+237670001234", "+237650001234", "+237680001234"],
    "CM_ORANGE_MOMO": ["+237690001234", "+237655001234", "+237640001234"],
    "SN_ORANGE_MOMO": ["+221770001234", "+221780001234"],
    "SN_FREE_MOMO": ["+221760001234"],
    "BJ_MTN_MOMO": ["+2290197001234", "+2290166001234"],
    "BJ_MOOV_MOMO": ["+2290195001234", "+2290160001234"],
    "TG_TMONEY_MOMO": ["+22890001234", "+22870001234"],
    "CI_ORANGE_MOMO": ["+2250707001234"],
    "CI_MTN_MOMO": ["+2250505001234"],
    "CI_MOOV_MOMO": ["+2250101001234"],
}
ALSO_USABLE = {"CM": [], "SN": ["SN_WAVE_MOMO"], "BJ": [], "TG": [], "CI": ["CI_WAVE_MOMO"]}
NETWORK_INDEPENDENT = {"SN_WAVE_MOMO", "CI_WAVE_MOMO"}

pytestmark = pytest.mark.django_db


def predict(api, phone):
    return api.post("/operators/predict", {"phone": phone}, idempotency_key=None)


def assert_error(response, reason: str) -> None:
    assert response.status_code == 400, response.json()
    error = response.json()["error"]
    assert (error["code"], error["reason"]) == ("bad_request", reason)
    assert error["message"]
    assert list(error["fields"]) == ["phone"]


def test_every_catalog_operator_is_predicted_or_offered_beside_the_prediction(catalog):
    codes = set(Operator.objects.values_list("code", flat=True))
    assert len(codes) == 12
    assert codes == set(NUMBERS) | NETWORK_INDEPENDENT


@pytest.mark.parametrize(
    ("operator_code", "phone"),
    [(code, phone) for code, phones in NUMBERS.items() for phone in phones],
)
def test_a_number_of_each_network_predicts_its_operator(enabled_api, operator_code, phone):
    response = predict(enabled_api, phone)

    assert response.status_code == 200, response.json()
    country = operator_code[:2]
    assert response.json() == {
        "phone": phone,
        "country_code": country,
        "operator_code": operator_code,
        "rail_type": "mobile_money",
        "operator_status": "operational",
        "enabled": True,
        "also_usable": ALSO_USABLE[country],
    }


@pytest.mark.parametrize("operator_code", sorted(NETWORK_INDEPENDENT))
def test_a_network_independent_wallet_is_never_predicted_but_offered(enabled_api, operator_code):
    country = operator_code[:2]
    predicted = set()
    for code, phones in NUMBERS.items():
        if code.startswith(country):
            for phone in phones:
                body = predict(enabled_api, phone).json()
                predicted.add(body["operator_code"])
                assert body["also_usable"] == [operator_code]
    assert operator_code not in predicted
    assert len(predicted) == len([c for c in NUMBERS if c.startswith(country)])


def test_the_number_is_answered_in_e164_whatever_separators_it_was_written_with(enabled_api):
    response = predict(enabled_api, "+237 67-000 (12) 34")

    assert response.status_code == 200, response.json()
    assert (response.json()["phone"], response.json()["operator_code"]) == (
        "+237670001234",
        "CM_MTN_MOMO",
    )


@pytest.mark.parametrize(
    "phone",
    [
        "+33612345678",  # France (SFR)
        "+2348031234567",  # Nigeria (MTN Nigeria: an MTN, but not a country of the catalog)
        "+254712345678",  # Kenya (Safaricom)
        "+237660001234",  # Cameroon, Nexttel: a network without an operator in the catalog
        "+22899001234",  # Togo, Moov Africa: idem
        "+221700001234",  # Senegal, Expresso: idem
        "+237222001234",  # Cameroon, a Camtel landline: no mobile network
    ],
)
def test_a_valid_number_outside_the_catalog_is_operator_unknown(enabled_api, phone):
    number = phonenumbers.parse(phone)
    assert phonenumbers.is_valid_number(number)  # the number is real: only the catalog lacks it

    assert_error(predict(enabled_api, phone), "operator_unknown")


@pytest.mark.parametrize(
    "phone",
    [
        "garbage",
        "",
        "   ",
        "+",
        "237670001234",  # no + and country code: which country is it?
        "+23767000123",  # one digit short
        "+2376700012345",  # one digit too many
        "+22997001234",  # Benin's former 8-digit plan, retired for the 10-digit one
        "+237 67 000 12 34 ext. wat",
        "+237 67 000 12 34 ext 5",  # a valid number with an extension: not a wallet's
        "+237670001234;ext=5",
        "++237670001234",
        "tel:+237670001234",
        "+237670001234 +",
        "+0123456789",
        "9" * 300,
    ],
)
def test_what_is_not_a_valid_number_is_phone_invalid(enabled_api, phone):
    assert_error(predict(enabled_api, phone), "phone_invalid")


@pytest.mark.parametrize("body", [{}, {"phone": 237670001234}, {"phone": None}, {"phone": []}])
def test_a_missing_or_non_string_phone_is_the_validation_error_of_every_endpoint(enabled_api, body):
    response = enabled_api.post("/operators/predict", body, idempotency_key=None)

    assert response.status_code == 400, response.json()
    error = response.json()["error"]
    assert (error["code"], error["reason"]) == ("bad_request", "invalid_request")
    assert list(error["fields"]) == ["phone"]


def test_an_operator_the_merchant_has_not_enabled_is_predicted_but_not_enabled(catalog):
    merchant = MerchantFactory()
    MerchantOperator.objects.create(
        merchant=merchant, operator=Operator.objects.get(code="SN_ORANGE_MOMO")
    )
    api = MerchantClient(merchant)

    orange = predict(api, "+221770001234").json()
    free = predict(api, "+221760001234").json()

    assert (orange["operator_code"], orange["enabled"]) == ("SN_ORANGE_MOMO", True)
    assert (free["operator_code"], free["enabled"]) == ("SN_FREE_MOMO", False)
    assert free["also_usable"] == ["SN_WAVE_MOMO"]  # the catalog's, enabled or not


def test_an_operator_switched_off_in_the_catalog_is_not_enabled_nor_offered(enabled_api):
    Operator.objects.filter(code__in=["CI_MTN_MOMO", "CI_WAVE_MOMO"]).update(active=False)

    body = predict(enabled_api, "+2250505001234").json()

    assert (body["operator_code"], body["enabled"], body["also_usable"]) == (
        "CI_MTN_MOMO",
        False,
        [],
    )


def test_the_operator_status_is_the_one_support_set(enabled_api):
    Operator.objects.filter(code="TG_TMONEY_MOMO").update(status="closed")

    body = predict(enabled_api, "+22890001234").json()

    assert (body["operator_code"], body["operator_status"]) == ("TG_TMONEY_MOMO", "closed")
    listed = {o["code"]: o["status"] for o in enabled_api.get("/operators").json()["data"]}
    assert listed["TG_TMONEY_MOMO"] == body["operator_status"]


def test_without_credentials_it_is_a_401(catalog):
    response = APIClient().post("/operators/predict", {"phone": "+221770001234"}, format="json")

    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthorized"


def test_it_creates_nothing_and_needs_no_idempotency_key(enabled_api):
    first = predict(enabled_api, "+221770001234")
    again = enabled_api.post("/operators/predict", {"phone": "+221770001234"})  # with a key

    assert first.status_code == again.status_code == 200
    assert first.json() == again.json()  # no _meta: nothing was stored under the key


def test_the_seeded_network_names_are_the_ones_phonenumbers_reports(catalog):
    for code, phones in NUMBERS.items():
        names = {n.casefold() for n in Operator.objects.get(code=code).network_names}
        for phone in phones:
            assert carrier.name_for_number(phonenumbers.parse(phone), "en").casefold() in names


def _admin_form(operator: Operator, **fields) -> dict:
    return {
        "code": operator.code,
        "country_code": operator.country_code,
        "currency": operator.currency,
        "rail_type": operator.rail_type,
        "name": operator.name,
        "min_amount": "100",
        "max_amount": "1000000",
        "active": "on",
        "status": operator.status,
        "network_names": ",".join(operator.network_names),
        **fields,
    }


def test_ops_map_a_network_to_an_operator_in_the_admin_and_prediction_follows(
    enabled_api, admin_client
):
    """Nexttel is not in the catalog; ops add its network name to CM_ORANGE_MOMO's (say an
    agreement routes Nexttel numbers through Orange) in the Operator admin."""
    assert_error(predict(enabled_api, "+237660001234"), "operator_unknown")
    operator = Operator.objects.get(code="CM_ORANGE_MOMO")
    form = _admin_form(operator, network_names="Orange,NEXTTEL")

    response = admin_client.post(f"/admin/quotes/operator/{operator.pk}/change/", form)

    assert response.status_code == 302, response.content.decode()[:2000]
    operator.refresh_from_db()
    assert operator.network_names == ["Orange", "NEXTTEL"]
    assert predict(enabled_api, "+237660001234").json()["operator_code"] == "CM_ORANGE_MOMO"


def test_a_network_independent_wallet_cannot_also_claim_a_network(catalog):
    from django.db import IntegrityError, transaction

    with pytest.raises(IntegrityError), transaction.atomic():
        Operator.objects.filter(code="SN_WAVE_MOMO").update(network_names=["Orange"])


def test_the_admin_refuses_a_network_name_another_operator_of_the_country_lists(admin_client):
    load_catalog()
    operator = Operator.objects.get(code="CI_MOOV_MOMO")
    form = _admin_form(operator, network_names="Moov,mtn")

    response = admin_client.post(f"/admin/quotes/operator/{operator.pk}/change/", form)

    assert response.status_code == 200  # the form again, with the error
    assert "CI_MTN_MOMO already lists MTN." in response.content.decode()
    operator.refresh_from_db()
    assert operator.network_names == ["Moov"]


def test_the_admin_refuses_network_names_on_a_network_independent_wallet(admin_client):
    load_catalog()
    operator = Operator.objects.get(code="SN_WAVE_MOMO")
    form = _admin_form(operator, network_names="Expresso", network_independent="on")

    response = admin_client.post(f"/admin/quotes/operator/{operator.pk}/change/", form)

    assert response.status_code == 200
    assert "A wallet usable with any network lists no network names." in response.content.decode()
    operator.refresh_from_db()
    assert (operator.network_names, operator.network_independent) == ([], True)


def test_a_prediction_is_one_query_beside_authentication(enabled_api, django_assert_num_queries):
    enabled_api.get("/operators")  # the key's last_used_at, written once

    with django_assert_num_queries(1):  # the operators (the API key is cached with its merchant)
        response = predict(enabled_api, "+2250707001234")

    assert response.json()["operator_code"] == "CI_ORANGE_MOMO"
