import uuid

import pytest

from customers.models import Customer

pytestmark = pytest.mark.django_db

FULL = {
    "external_ref": "cust-001",
    "customer_type": "retail",
    "first_name": "Awa",
    "last_name": "Diallo",
    "business_name": "Awa Shop",
    "id_number": "SN123456",
    "id_type": "national_id",
    "email": "awa@example.com",
    "phone": "+221770000001",
    "country_code": "SN",
    "nationality_code": "SN",
    "date_of_birth": "1990-05-17",
    "address_line1": "12 Rue Carnot",
    "city": "Dakar",
    "occupation": "Trader",
    "source_of_funds": "salary",
}


def test_create_customer_returns_every_field(api):
    response = api.post("/customers", FULL, idempotency_key="c1")

    assert response.status_code == 201
    body = response.json()
    for field, value in FULL.items():
        assert body[field] == value
    uuid.UUID(body["id"])
    assert body["merchant_id"] == str(api.merchant.id)
    assert body["kyc_status"] == "not_started"
    assert body["status"] == "active"
    assert body["created_at"] and body["updated_at"]


def test_customer_type_defaults_to_individual_and_absent_fields_are_null(api):
    body = api.post("/customers", {"first_name": "Awa", "last_name": "Diallo"}).json()
    assert body["customer_type"] == "individual"
    assert body["email"] is None
    assert body["date_of_birth"] is None


def test_get_customer_returns_it(api):
    created = api.post("/customers", FULL).json()
    response = api.get(f"/customers/{created['id']}")
    assert response.status_code == 200
    assert {k: v for k, v in response.json().items() if k != "_meta"} == {
        k: v for k, v in created.items() if k != "_meta"
    }


def test_another_merchants_customer_is_404_like_a_random_id(api, other_api):
    created = api.post("/customers", FULL).json()
    foreign = other_api.get(f"/customers/{created['id']}")
    random = other_api.get(f"/customers/{uuid.uuid4()}")
    assert foreign.status_code == random.status_code == 404
    assert foreign.json() == random.json()


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("email", "not-an-email"),
        ("email", "awa@ex\u202eelpmax.com"),
        ("email", "awa@example.com\u200b"),
        ("email", 42),
        ("country_code", "SEN"),
        ("country_code", "XX"),
        ("country_code", "sn"),
        ("nationality_code", "S"),
        ("date_of_birth", "17/05/1990"),
        ("date_of_birth", "19900517"),
        ("date_of_birth", "1990-W20-4"),
        ("date_of_birth", "1990-5-17"),
        ("date_of_birth", "2999-01-01"),
        ("customer_type", "alien"),
        ("id_type", "library_card"),
        ("phone", "call me"),
        ("phone", "+221 77"),
        ("phone", "221+770000001"),
        ("phone", "+0221770000001"),
        ("phone", "+00221770000001"),
        ("phone", "+000000"),
        ("first_name", "x" * 101),
        ("external_ref", "r" * 129),
        ("first_name", ""),
        ("first_name", None),
        ("first_name", 42.5),
    ],
)
def test_invalid_field_is_400_naming_it_and_creates_nothing(api, field, value):
    response = api.post("/customers", {"first_name": "Awa", field: value})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "bad_request"
    assert field in error["fields"]
    assert Customer.objects.count() == 0


@pytest.mark.parametrize(
    "field",
    [
        "external_ref",
        "first_name",
        "last_name",
        "business_name",
        "id_number",
        "address_line1",
        "city",
        "occupation",
        "source_of_funds",
    ],
)
@pytest.mark.parametrize(
    "value",
    [
        "Awa\r\nDiallo",  # a forged line in a log or an export
        "Awa\tDiallo",
        "Awa\x07",
        "Awa\x7f",
        "Awa\x85Diallo",  # C1 NEL
        "Awa\x00",
        "\u202eollaiD",  # right-to-left override: shown as "Diallo"
        "Awa\u2066x\u2069",
        "\u200b",  # zero-width space only
        "\ufeff\u200f\u200b",
    ],
)
def test_text_with_control_or_only_invisible_characters_is_400(api, field, value):
    response = api.post("/customers", {"first_name": "Awa", field: value})
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert (error["code"], error["reason"]) == ("bad_request", "invalid_request")
    assert list(error["fields"]) == [field]
    assert Customer.objects.count() == 0


AISHA = "\u0639\u0627\u0626\u0634\u0629"  # in Arabic script


@pytest.mark.parametrize(
    "name", ["Aïssatou", "N\u2019Diaye", "O'Brien", AISHA, "\u200f" + AISHA, "Anne-Marie 😀"]
)
def test_names_in_any_script_with_marks_and_emoji_are_kept_as_sent(api, name):
    response = api.post("/customers", {"first_name": name, "external_ref": name})
    assert response.status_code == 201, response.content
    assert (response.json()["first_name"], response.json()["external_ref"]) == (name, name)


def test_body_that_is_not_an_object_is_400(api):
    response = api.post("/customers", ["not", "an", "object"])
    assert response.status_code == 400
    assert Customer.objects.count() == 0


@pytest.mark.parametrize(
    "written", ["+221 77 000 00 01", "+221-770-000-001", "+221 (77) 000.00.01", " +221770000001 "]
)
def test_a_phone_written_with_separators_is_stored_as_digits(api, written):
    response = api.post("/customers", {"first_name": "Awa", "phone": written})
    assert response.status_code == 201, response.content
    assert response.json()["phone"] == "+221770000001"
    customer_id = response.json()["id"]
    assert api.get(f"/customers/{customer_id}").json()["phone"] == "+221770000001"


def test_duplicate_external_ref_is_400_naming_the_field(api):
    api.post("/customers", {"external_ref": "dup"})
    response = api.post("/customers", {"external_ref": "dup", "first_name": "Other"})
    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["code"], error["reason"]) == ("bad_request", "duplicate_external_ref")
    assert "external_ref" in error["fields"]
    assert Customer.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_creations_racing_for_an_external_ref_past_the_check_are_400_naming_it(merchant):
    """Both pass the existence check while a first customer with the ref is not yet committed;
    their inserts wait on the unique index, then fail: a 400 each, never a 500."""
    from django.db import transaction

    from tests import locks
    from tests.support import MerchantClient

    clients = [MerchantClient(merchant) for _ in range(2)]
    responses: list = []
    with transaction.atomic():
        Customer.objects.create(merchant=merchant, external_ref="raced")
        racers = [
            locks.start(lambda c=c: c.post("/customers", {"external_ref": "raced"}), responses)
            for c in clients
        ]
        locks.waiting_for_a_lock(2)
    for racer in racers:
        racer.join()

    for response in responses:
        assert response.status_code == 400, response.content
        error = response.json()["error"]
        assert (error["code"], error["reason"]) == ("bad_request", "duplicate_external_ref")
        assert list(error["fields"]) == ["external_ref"]
    assert len(responses) == 2
    assert Customer.objects.filter(merchant=merchant, external_ref="raced").count() == 1


def test_another_merchant_may_reuse_an_external_ref(api, other_api):
    assert api.post("/customers", {"external_ref": "shared"}).status_code == 201
    assert other_api.post("/customers", {"external_ref": "shared"}).status_code == 201
