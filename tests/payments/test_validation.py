"""Every reason a payment creation is a 400, and that none of them changes anything."""

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from payments.models import Journal, Payin, Payout
from quotes.models import Quote
from tests.catalog import add_bank_operator
from tests.payments.conftest import (
    create_customer,
    create_quote,
    fund,
    payin_body,
    payout_body,
)
from tests.support import MerchantClient

pytestmark = pytest.mark.django_db


@pytest.fixture
def funded(enabled_merchant):
    fund(enabled_merchant, "100000")


def _assert_400(response, reason, field=None):
    assert response.status_code == 400, response.json()
    error = response.json()["error"]
    assert error["code"] == "bad_request"
    assert error["reason"] == reason
    if field is not None:
        path = field.split(".")
        fields = error["fields"]
        for part in path:
            assert part in fields, error
            fields = fields[part]


def _nothing_created():
    assert Payin.objects.count() == 0
    assert Payout.objects.count() == 0
    assert not Journal.objects.filter(kind__startswith="pay").exists()


@pytest.mark.parametrize("flow", ["payin", "payout"])
def test_expired_quote_is_400(enabled_api, customer, funded, flow):
    quote = create_quote(enabled_api, flow)
    Quote.objects.filter(pk=quote["id"]).update(expires_at=timezone.now() - timedelta(seconds=1))
    body = payin_body(quote, customer) if flow == "payin" else payout_body(quote, customer)
    _assert_400(enabled_api.post(f"/{flow}s", body), "quote_expired", "quote_id")
    _nothing_created()


@pytest.mark.parametrize("flow", ["payin", "payout"])
def test_quote_of_the_other_flow_is_400(enabled_api, customer, funded, flow):
    other_flow = "payout" if flow == "payin" else "payin"
    quote = create_quote(enabled_api, other_flow)
    body = payin_body(quote, customer) if flow == "payin" else payout_body(quote, customer)
    _assert_400(enabled_api.post(f"/{flow}s", body), "quote_flow_mismatch", "quote_id")
    _nothing_created()
    assert enabled_api.get(f"/quotes/{quote['id']}").json()["status"] == "active"


@pytest.mark.parametrize("flow", ["payin", "payout"])
def test_consumed_quote_is_400(enabled_api, customer, funded, flow):
    quote = create_quote(enabled_api, flow)
    body = payin_body(quote, customer) if flow == "payin" else payout_body(quote, customer)
    assert enabled_api.post(f"/{flow}s", body).status_code == 201
    _assert_400(enabled_api.post(f"/{flow}s", body), "quote_consumed", "quote_id")


@pytest.mark.parametrize("flow", ["payin", "payout"])
def test_unknown_and_other_merchants_quotes_are_400(enabled_api, customer, funded, flow):
    other = MerchantClient(enabled_api.merchant.__class__.objects.create(name="Other"))
    from tests.catalog import enable_everything

    enable_everything(other.merchant)
    foreign_quote = create_quote(other, flow)
    for quote_id in (foreign_quote["id"], str(uuid.uuid4())):
        quote = {"id": quote_id}
        body = payin_body(quote, customer) if flow == "payin" else payout_body(quote, customer)
        _assert_400(enabled_api.post(f"/{flow}s", body), "quote_not_found", "quote_id")
    _nothing_created()


@pytest.mark.parametrize("flow", ["payin", "payout"])
def test_quote_for_another_customer_is_400(enabled_api, customer, funded, flow):
    other_customer = create_customer(enabled_api, first_name="Binta")
    quote = create_quote(enabled_api, flow, customer_id=other_customer["id"])
    body = payin_body(quote, customer) if flow == "payin" else payout_body(quote, customer)
    _assert_400(enabled_api.post(f"/{flow}s", body), "quote_customer_mismatch", "customer_id")
    _nothing_created()


@pytest.mark.parametrize("flow", ["payin", "payout"])
def test_unknown_or_foreign_customer_is_400(enabled_api, other_api, customer, funded, flow):
    foreign = create_customer(other_api)
    # the customer is checked first, whatever the quote: one without a customer, one made for
    # another customer of the merchant, and one that does not exist
    quotes = [
        create_quote(enabled_api, flow),
        create_quote(enabled_api, flow, customer_id=customer["id"]),
        {"id": str(uuid.uuid4())},
    ]
    for quote in quotes:
        for unknown in (foreign, {"id": str(uuid.uuid4())}):
            body = payin_body(quote, unknown) if flow == "payin" else payout_body(quote, unknown)
            _assert_400(enabled_api.post(f"/{flow}s", body), "customer_not_found", "customer_id")
    _nothing_created()


@pytest.mark.parametrize("missing", ["quote_id", "customer_id", "source"])
def test_payin_missing_field_is_400(enabled_api, customer, missing):
    quote = create_quote(enabled_api, "payin")
    body = payin_body(quote, customer)
    del body[missing]
    _assert_400(enabled_api.post("/payins", body), "invalid_request", missing)
    _nothing_created()


@pytest.mark.parametrize("missing", ["quote_id", "customer_id", "recipient"])
def test_payout_missing_field_is_400(enabled_api, customer, funded, missing):
    quote = create_quote(enabled_api, "payout")
    body = payout_body(quote, customer)
    del body[missing]
    _assert_400(enabled_api.post("/payouts", body), "invalid_request", missing)
    _nothing_created()


def test_payin_source_without_phone_on_mobile_money_is_400(enabled_api, customer):
    quote = create_quote(enabled_api, "payin")
    body = payin_body(quote, customer)
    body["source"] = {}
    _assert_400(enabled_api.post("/payins", body), "invalid_request", "source.phone")
    _nothing_created()
    assert enabled_api.get(f"/quotes/{quote['id']}").json()["status"] == "active"


@pytest.mark.parametrize("field", ["bank_name", "bank_code", "account_name", "account_number"])
def test_payin_source_with_bank_fields_on_mobile_money_is_400(enabled_api, customer, field):
    quote = create_quote(enabled_api, "payin")
    body = payin_body(quote, customer)
    body["source"][field] = "x123"
    _assert_400(enabled_api.post("/payins", body), "invalid_request", f"source.{field}")
    _nothing_created()


@pytest.mark.parametrize(
    ("field", "value"),
    [("operator_code", "SN_FREE_MOMO"), ("country_code", "CI"), ("rail_type", "bank_transfer")],
)
@pytest.mark.parametrize(("flow", "party"), [("payin", "source"), ("payout", "recipient")])
def test_a_party_naming_other_routing_than_its_quote_is_400(
    enabled_api, customer, funded, flow, party, field, value
):
    quote = create_quote(enabled_api, flow)  # SN_ORANGE_MOMO, SN, mobile_money
    body = (payin_body if flow == "payin" else payout_body)(quote, customer)
    body[party][field] = value

    response = enabled_api.post(f"/{flow}s", body)

    _assert_400(response, "party_routing_mismatch", f"{party}.{field}")
    _nothing_created()
    assert enabled_api.get(f"/quotes/{quote['id']}").json()["status"] == "active"


@pytest.mark.parametrize(("flow", "party"), [("payin", "source"), ("payout", "recipient")])
def test_a_party_naming_its_quotes_routing_is_accepted(enabled_api, customer, funded, flow, party):
    quote = create_quote(enabled_api, flow)
    body = (payin_body if flow == "payin" else payout_body)(quote, customer)
    routing = {"country_code": "SN", "rail_type": "mobile_money", "operator_code": "SN_ORANGE_MOMO"}
    body[party].update(routing)

    response = enabled_api.post(f"/{flow}s", body)

    assert response.status_code == 201, response.json()
    assert {name: response.json()[party][name] for name in routing} == routing


@pytest.mark.parametrize("field", ["phone", "first_name", "last_name"])
def test_payout_recipient_missing_field_is_400(enabled_api, customer, funded, field):
    quote = create_quote(enabled_api, "payout")
    body = payout_body(quote, customer)
    del body["recipient"][field]
    _assert_400(enabled_api.post("/payouts", body), "invalid_request", f"recipient.{field}")
    _nothing_created()


def test_payout_recipient_with_bank_fields_on_mobile_money_is_400(enabled_api, customer, funded):
    quote = create_quote(enabled_api, "payout")
    body = payout_body(quote, customer, account_number="0001234")
    _assert_400(enabled_api.post("/payouts", body), "invalid_request", "recipient.account_number")
    _nothing_created()


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("phone", "not a phone"),
        ("email", "nope"),
        ("recipient_nationality_code", "XX"),
        ("recipient_type", "robot"),
        ("first_name", 42),
        ("first_name", "\u202eollaiD"),  # shown as "Diallo" to the provider and in the dashboard
        ("last_name", "Diallo\r\nX-Injected: 1"),
        ("last_name", "\u200b"),  # only invisible characters: blank
        ("email", "awa@ex\u202eelpmax.com"),  # a bidi override in the domain: shown reversed
        ("email", "awa@example.com\u200b"),  # a zero-width space: no mail server's address
        ("email", "awa@exam\u00adple.com"),  # a soft hyphen: shown as awa@example.com
        ("email", "awa@example\u3000.com"),
        ("email", 42),
    ],
)
def test_payout_recipient_invalid_values_are_400(enabled_api, customer, funded, field, value):
    quote = create_quote(enabled_api, "payout")
    body = payout_body(quote, customer, **{field: value})
    _assert_400(enabled_api.post("/payouts", body), "invalid_request", f"recipient.{field}")
    _nothing_created()


BANK_RECIPIENT = {
    "first_name": "Moussa",
    "last_name": "Ndiaye",
    "bank_name": "CBAO",
    "bank_code": "SN012",
    "account_name": "Moussa Ndiaye",
    "account_number": "SN08 SN01 0015 2000 0625 0000 3512",
}


def _bank_payout_body(api, customer, **recipient) -> dict:
    response = api.post(
        "/quotes/payout",
        {
            "country_code": "SN",
            "operator_code": "SN_CBAO_BANK",
            "rail_type": "bank_transfer",
            "send_amount": "10000",
            "send_currency": "XOF",
        },
    )
    assert response.status_code == 201, response.json()
    return {
        "quote_id": response.json()["id"],
        "customer_id": customer["id"],
        "recipient": {**BANK_RECIPIENT, **recipient},
    }


def test_bank_payout_keeps_the_account_identifiers_as_written(
    enabled_api, enabled_merchant, customer, funded
):
    add_bank_operator(enabled_merchant)
    body = _bank_payout_body(enabled_api, customer, account_number="0012-3456/78.90 12")

    response = enabled_api.post("/payouts", body)

    assert response.status_code == 201, response.json()
    recipient = response.json()["recipient"]
    assert (recipient["bank_code"], recipient["account_number"]) == ("SN012", "0012-3456/78.90 12")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        # fullwidth digits: shown as 012345 in the dashboard, no bank's account number
        ("account_number", "\uff10\uff11\uff12\uff13\uff14\uff15"),
        ("account_number", "\u0660\u0661\u0662\u0663\u0664\u0665"),  # Arabic-Indic digits
        ("account_number", "0012\u00a03456"),  # a no-break space between the groups
        ("account_number", "SN08 SN01 0015 2000 0625 0000 351\u0662"),
        ("account_number", "#"),
        ("bank_code", "SN\uff10\uff11\uff12"),
        ("bank_code", "SN012\U0001f3e6"),
        ("bank_code", "--"),
    ],
)
def test_bank_payout_account_identifiers_other_than_ascii_letters_and_digits_are_400(
    enabled_api, enabled_merchant, customer, funded, field, value
):
    add_bank_operator(enabled_merchant)
    body = _bank_payout_body(enabled_api, customer, **{field: value})

    _assert_400(enabled_api.post("/payouts", body), "invalid_request", f"recipient.{field}")
    _nothing_created()
    assert Quote.objects.get(pk=body["quote_id"]).status == "active"


def test_bank_payin_source_account_number_in_fullwidth_digits_is_400(
    enabled_api, enabled_merchant, customer
):
    add_bank_operator(enabled_merchant)
    quote = enabled_api.post(
        "/quotes/payin",
        {
            "country_code": "SN",
            "operator_code": "SN_CBAO_BANK",
            "rail_type": "bank_transfer",
            "send_amount": "10000",
            "send_currency": "XOF",
        },
    ).json()
    source = {key: value for key, value in BANK_RECIPIENT.items() if "name" not in key}
    source.update(bank_name="CBAO", account_name="Awa Diallo")
    body = {"quote_id": quote["id"], "customer_id": customer["id"], "source": source}
    fullwidth = {**body, "source": {**source, "account_number": "\uff10\uff11\uff12\uff13"}}

    _assert_400(enabled_api.post("/payins", fullwidth), "invalid_request", "source.account_number")
    _nothing_created()
    assert enabled_api.post("/payins", body).status_code == 201


@pytest.mark.parametrize("value", ["nope", 42, None])
def test_malformed_quote_id_is_400(enabled_api, customer, value):
    body = {"quote_id": value, "customer_id": customer["id"], "source": {"phone": "+221770001234"}}
    _assert_400(enabled_api.post("/payins", body), "invalid_request", "quote_id")


@pytest.mark.parametrize("flow", ["payin", "payout"])
@pytest.mark.parametrize("change", ["disabled_for_merchant", "deactivated_in_catalog"])
def test_operator_disabled_after_quoting_is_400(
    enabled_api, enabled_merchant, customer, funded, flow, change
):
    from quotes.models import MerchantOperator, Operator

    quote = create_quote(enabled_api, flow)
    if change == "disabled_for_merchant":
        MerchantOperator.objects.filter(
            merchant=enabled_merchant, operator__code="SN_ORANGE_MOMO"
        ).delete()
        reason = "operator_not_enabled"
    else:
        Operator.objects.filter(code="SN_ORANGE_MOMO").update(active=False)
        reason = "operator_inactive"
    body = payin_body(quote, customer) if flow == "payin" else payout_body(quote, customer)
    _assert_400(enabled_api.post(f"/{flow}s", body), reason, "quote_id")
    _nothing_created()
    assert enabled_api.get(f"/quotes/{quote['id']}").json()["status"] == "active"
