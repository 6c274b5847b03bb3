import uuid

import pytest

from customers.models import Customer
from quotes.models import Corridor, Quote
from tests.catalog import add_bank_operator
from tests.transfers.conftest import (
    CM_PHONE,
    SENDER_DETAILS,
    create_customer,
    create_quote,
    field_paths,
    transfer_body,
)
from transfers.models import Transfer

pytestmark = pytest.mark.django_db


def assert_rejected(response, reason: str, fields: set[str], quote_id: str | None = None) -> dict:
    assert response.status_code == 400, response.json()
    error = response.json()["error"]
    assert error["code"] == "bad_request"
    assert error["reason"] == reason
    assert fields <= field_paths(error["fields"]), error
    assert Transfer.objects.count() == 0
    if quote_id:
        assert Quote.objects.get(pk=quote_id).status == "active"  # not consumed
    return error


def test_cross_border_without_sender_details_names_each_missing_item(enabled_api):
    customer = create_customer(enabled_api)
    quote = create_quote(enabled_api, customer_id=customer["id"])

    error = assert_rejected(
        enabled_api.post("/transfers", transfer_body(quote, customer)),
        "sender_details_required",
        set(),
        quote["id"],
    )
    assert field_paths(error["fields"]) == {
        "customer.address_line1",
        "customer.city",
        "sender_occupation",
        "sender_source_of_funds",
    }


def test_sender_fields_stand_in_for_the_customers_occupation_and_source_of_funds(enabled_api):
    customer = create_customer(enabled_api, address_line1="1 av. Ahidjo", city="Yaoundé")
    quote = create_quote(enabled_api, customer_id=customer["id"])

    partial = enabled_api.post(
        "/transfers", transfer_body(quote, customer, sender_occupation="teacher")
    )
    error = assert_rejected(partial, "sender_details_required", set(), quote["id"])
    assert field_paths(error["fields"]) == {"sender_source_of_funds"}

    response = enabled_api.post(
        "/transfers",
        transfer_body(
            quote, customer, sender_occupation="teacher", sender_source_of_funds="savings"
        ),
    )
    assert response.status_code == 201, response.json()
    assert response.json()["sender_occupation"] == "teacher"
    assert response.json()["sender_source_of_funds"] == "savings"


def test_domestic_corridor_needs_no_sender_details(enabled_api):
    customer = create_customer(enabled_api)
    quote = create_quote(
        enabled_api,
        customer_id=customer["id"],
        corridor="CM-CM-XAF-XAF",
        payer_operator="CM_MTN_MOMO",
        recipient_operator="CM_ORANGE_MOMO",
    )
    body = transfer_body(quote, customer, recipient_phone="+237690001234")

    response = enabled_api.post("/transfers", body)

    assert response.status_code == 201, response.json()
    assert response.json()["corridor_type"] == "domestic"


def test_kyc_corridor_requires_an_approved_kyc(enabled_api):
    Corridor.objects.filter(code="CM-SN-XAF-XOF").update(requires_kyc=True)
    customer = create_customer(enabled_api, **SENDER_DETAILS)
    quote = create_quote(enabled_api, customer_id=customer["id"])

    error = assert_rejected(
        enabled_api.post("/transfers", transfer_body(quote, customer)),
        "kyc_not_approved",
        {"customer.kyc_status"},
        quote["id"],
    )
    assert field_paths(error["fields"]) == {"customer.kyc_status"}

    Customer.objects.filter(pk=customer["id"]).update(kyc_status="approved")
    response = enabled_api.post("/transfers", transfer_body(quote, customer))
    assert response.status_code == 201, response.json()


def test_missing_details_and_kyc_are_named_together(enabled_api):
    Corridor.objects.filter(code="CM-SN-XAF-XOF").update(requires_kyc=True)
    customer = create_customer(enabled_api, address_line1="1 rue", occupation="nurse")
    quote = create_quote(enabled_api, customer_id=customer["id"])

    error = assert_rejected(
        enabled_api.post("/transfers", transfer_body(quote, customer)),
        "sender_details_required",
        set(),
        quote["id"],
    )
    assert field_paths(error["fields"]) == {
        "customer.city",
        "sender_source_of_funds",
        "customer.kyc_status",
    }


@pytest.mark.parametrize(
    ("party", "override", "reason", "field"),
    [
        ("payer", {"country_code": "SN"}, "party_routing_mismatch", "payer.country_code"),
        (
            "payer",
            {"operator_code": "CM_ORANGE_MOMO"},
            "party_routing_mismatch",
            "payer.operator_code",
        ),
        ("payer", {"rail_type": "bank_transfer"}, "party_routing_mismatch", "payer.rail_type"),
        ("recipient", {"country_code": "CM"}, "party_routing_mismatch", "recipient.country_code"),
        (
            "recipient",
            {"operator_code": "SN_ORANGE_MOMO"},
            "party_routing_mismatch",
            "recipient.operator_code",
        ),
        ("payer", {"account_number": "0012"}, "invalid_request", "payer.account_number"),
        ("recipient", {"recipient_type": "business"}, "invalid_request", "recipient.business_name"),
    ],
)
def test_party_that_does_not_match_the_quote_is_rejected(
    enabled_api, customer, quote, party, override, reason, field
):
    body = transfer_body(quote, customer, **{party: override})

    assert_rejected(enabled_api.post("/transfers", body), reason, {field}, quote["id"])


def test_matching_routing_fields_are_accepted(enabled_api, customer, quote):
    body = transfer_body(
        quote,
        customer,
        payer={"country_code": "CM", "rail_type": "mobile_money", "operator_code": "CM_MTN_MOMO"},
        recipient={"country_code": "SN", "operator_code": "SN_WAVE_MOMO", "city": "Dakar"},
    )

    response = enabled_api.post("/transfers", body)

    assert response.status_code == 201, response.json()
    assert response.json()["recipient"]["city"] == "Dakar"


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda b: b.pop("payer"), "payer"),
        (lambda b: b.pop("recipient"), "recipient"),
        (lambda b: b.pop("quote_id"), "quote_id"),
        (lambda b: b.pop("customer_id"), "customer_id"),
        (lambda b: b["payer"].pop("phone"), "payer"),
        (lambda b: b["recipient"].update(phone="not a phone"), "recipient"),
        (lambda b: b.update(payment_reason_code=7), "payment_reason_code"),
        (lambda b: b.update(quote_id="nope"), "quote_id"),
        (lambda b: b["recipient"].update(first_name="\u202eollaiD"), "recipient"),
        (lambda b: b.update(sender_occupation="trader\nX-Injected: 1"), "sender_occupation"),
        (lambda b: b["recipient"].update(email="awa@ex\u202eelpmax.com"), "recipient"),
        (lambda b: b["recipient"].update(email="awa@exam\u00adple.com"), "recipient"),
    ],
)
def test_malformed_body_is_a_400_naming_the_field(enabled_api, customer, quote, mutate, field):
    body = transfer_body(quote, customer)
    mutate(body)

    response = enabled_api.post("/transfers", body)

    assert response.status_code == 400, response.json()
    assert field in response.json()["error"]["fields"]  # DRF nests: {"payer": {...}}
    assert Transfer.objects.count() == 0
    assert Quote.objects.get(pk=quote["id"]).status == "active"


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("account_number", "\uff10\uff11\uff12\uff13\uff14\uff15"),  # fullwidth: "012345"
        ("bank_code", "SN\u0660\u0661\u0662"),  # Arabic-Indic digits
    ],
)
def test_bank_recipient_identifiers_other_than_ascii_letters_and_digits_are_rejected(
    enabled_api, enabled_merchant, customer, field, value
):
    add_bank_operator(enabled_merchant)
    quote = create_quote(enabled_api, customer_id=customer["id"], recipient_operator="SN_CBAO_BANK")
    bank = {
        "bank_name": "CBAO",
        "bank_code": "SN012",
        "account_name": "Moussa Ndiaye",
        "account_number": "SN08 SN01 0015 2000 0625 0000 3512",
    }
    body = transfer_body(quote, customer, recipient={**bank, field: value})
    del body["recipient"]["phone"]
    accepted = transfer_body(quote, customer, recipient=bank)
    del accepted["recipient"]["phone"]

    assert_rejected(
        enabled_api.post("/transfers", body), "invalid_request", {f"recipient.{field}"}, quote["id"]
    )
    response = enabled_api.post("/transfers", accepted)
    assert response.status_code == 201, response.json()
    assert response.json()["recipient"]["account_number"] == bank["account_number"]


def test_quote_of_another_flow_is_rejected(enabled_api, customer):
    payin_quote = enabled_api.post(
        "/quotes/payin",
        {
            "country_code": "CM",
            "operator_code": "CM_MTN_MOMO",
            "rail_type": "mobile_money",
            "send_amount": "10000",
            "send_currency": "XAF",
        },
    ).json()

    response = enabled_api.post("/transfers", transfer_body(payin_quote, customer))

    assert_rejected(response, "quote_flow_mismatch", {"quote_id"}, payin_quote["id"])


def test_quote_of_another_customer_is_rejected(enabled_api, customer, quote):
    other = create_customer(enabled_api, **SENDER_DETAILS)

    response = enabled_api.post("/transfers", transfer_body(quote, other))

    assert_rejected(response, "quote_customer_mismatch", {"customer_id"}, quote["id"])


def test_consumed_quote_is_rejected(enabled_api, customer, quote):
    assert enabled_api.post("/transfers", transfer_body(quote, customer)).status_code == 201

    response = enabled_api.post("/transfers", transfer_body(quote, customer))

    assert response.status_code == 400
    assert response.json()["error"]["reason"] == "quote_consumed"
    assert Transfer.objects.count() == 1


def test_expired_quote_is_rejected(enabled_api, customer, quote):
    from datetime import timedelta

    from django.utils import timezone

    Quote.objects.filter(pk=quote["id"]).update(expires_at=timezone.now() - timedelta(seconds=1))

    response = enabled_api.post("/transfers", transfer_body(quote, customer))

    assert_rejected(response, "quote_expired", {"quote_id"})


def test_unknown_customer_is_rejected(enabled_api, customer, quote):
    body = transfer_body(quote, {"id": str(uuid.uuid4())})

    response = enabled_api.post("/transfers", body)

    assert response.status_code == 400
    assert response.json()["error"]["reason"] == "customer_not_found"
    assert Quote.objects.get(pk=quote["id"]).status == "active"


def test_corridor_disabled_after_quoting_is_rejected(
    enabled_api, enabled_merchant, customer, quote
):
    from quotes.models import MerchantCorridor

    MerchantCorridor.objects.filter(
        merchant=enabled_merchant, corridor__code="CM-SN-XAF-XOF"
    ).delete()

    response = enabled_api.post("/transfers", transfer_body(quote, customer))

    assert_rejected(response, "corridor_not_enabled", {"quote_id"}, quote["id"])


# --- another merchant's resources --------------------------------------------------------------


@pytest.fixture
def foreign_api(catalog):
    from tests.catalog import enable_everything
    from tests.factories import MerchantFactory
    from tests.support import MerchantClient

    merchant = MerchantFactory()
    enable_everything(merchant)
    return MerchantClient(merchant)


def test_another_merchants_transfer_is_not_found(enabled_api, foreign_api, customer, quote):
    transfer_id = enabled_api.post("/transfers", transfer_body(quote, customer)).json()["id"]

    response = foreign_api.get(f"/transfers/{transfer_id}")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"

    relaunch = foreign_api.post(f"/transfers/{transfer_id}/relaunch-payout")
    assert relaunch.status_code == 404
    assert Transfer.objects.get(pk=transfer_id).disbursement_attempt == 0


def test_unknown_or_malformed_transfer_id_is_not_found(enabled_api):
    assert enabled_api.get(f"/transfers/{uuid.uuid4()}").status_code == 404
    assert enabled_api.get("/transfers/not-a-uuid").status_code == 404
    assert enabled_api.post(f"/transfers/{uuid.uuid4()}/relaunch-payout").status_code == 404


def test_another_merchants_quote_cannot_pay_a_transfer(enabled_api, foreign_api, customer, quote):
    foreign_customer = create_customer(foreign_api, **SENDER_DETAILS)

    response = foreign_api.post(
        "/transfers",
        {
            "quote_id": quote["id"],
            "customer_id": foreign_customer["id"],
            "payer": {"phone": CM_PHONE},
            "recipient": {"first_name": "A", "last_name": "B", "phone": "+221770001234"},
        },
    )

    assert_rejected(response, "quote_not_found", {"quote_id"}, quote["id"])


def test_credentials_are_required(client, customer, quote):
    assert client.get(f"/transfers/{uuid.uuid4()}").status_code == 401
    assert client.post("/transfers", {}, content_type="application/json").status_code == 401
