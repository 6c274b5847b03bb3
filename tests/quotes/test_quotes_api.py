import uuid
from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from quotes.models import (
    Corridor,
    FeeSchedule,
    FxRate,
    MerchantCorridor,
    MerchantOperator,
    Operator,
    Quote,
)
from tests.catalog import PAYIN_QUOTE, TRANSFER_QUOTE
from tests.factories import CustomerFactory, MerchantFactory
from tests.support import MerchantClient

pytestmark = pytest.mark.django_db

PAYIN, TRANSFER = PAYIN_QUOTE, TRANSFER_QUOTE


def assert_rejected(response, reason, field=None):
    assert response.status_code == 400, response.json()
    error = response.json()["error"]
    assert error["code"] == "bad_request"
    assert error["reason"] == reason
    if field is not None:
        assert field in error["fields"], error
    assert Quote.objects.count() == 0


# --- the three flows --------------------------------------------------------------------------


def test_payin_quote_credits_send_minus_fee(enabled_api):
    response = enabled_api.post("/quotes/payin", PAYIN)

    assert response.status_code == 201, response.json()
    body = response.json()
    # platform payin fee: 1.5%, min 50, max 15000
    assert body["flow_type"] == "payin"
    assert body["status"] == "active"
    assert body["send_amount"] == "10000"
    assert body["send_currency"] == "XAF"
    assert body["total_fee"] == "150"
    assert body["receive_amount"] == "9850"
    assert body["receive_currency"] == "XAF"
    assert body["wallet_impact"] == {"credit_amount": "9850", "currency": "XAF"}
    assert body["country_code"] == "CM"
    assert body["operator_code"] == "CM_MTN_MOMO"
    assert body["rail_type"] == "mobile_money"
    assert body["corridor_code"] is None
    assert body["customer_id"] is None


def test_quote_lives_for_the_configured_ttl(enabled_api, settings):
    settings.QUOTE_TTL_SECONDS = 900
    body = enabled_api.post("/quotes/payin", PAYIN).json()
    quote = Quote.objects.get(pk=body["id"])
    assert quote.expires_at - quote.created_at == timedelta(seconds=900)


def test_payout_quote_debits_send_plus_fee(enabled_api):
    body = enabled_api.post(
        "/quotes/payout",
        {**PAYIN, "country_code": "SN", "operator_code": "SN_ORANGE_MOMO", "send_currency": "XOF"},
    ).json()
    # platform payout fee: 1% + 100, min 100, max 10000 -> 100 + 100 = 200
    assert body["flow_type"] == "payout"
    assert body["send_amount"] == "10000"
    assert body["receive_amount"] == "10000"
    assert body["total_fee"] == "200"
    assert body["wallet_impact"] == {"debit_amount": "10200", "currency": "XOF"}


def test_fee_is_rounded_up_to_the_unit(enabled_api):
    body = enabled_api.post("/quotes/payin", {**PAYIN, "send_amount": "10001"}).json()
    assert body["total_fee"] == "151"  # 150.015 rounded up
    assert body["receive_amount"] == "9850"


@pytest.mark.parametrize(
    ("flow", "amount", "fee", "receive"),
    [
        # payin 1.5%, min 50, max 15000
        ("payin", "100", "50", "50"),  # the minimum is half the amount
        ("payin", "3333", "50", "3283"),  # 49.995: the minimum
        ("payin", "3334", "51", "3283"),  # 50.01 up
        ("payin", "1000000", "15000", "985000"),  # exactly at the cap
        # payout 1% + 100, min 100, max 10000: the fee may pass the amount
        ("payout", "100", "101", "100"),
        ("payout", "990000", "10000", "990000"),  # exactly at the cap
        ("payout", "990001", "10000", "990001"),  # 10000.01: capped
    ],
)
def test_seeded_fees_at_their_boundaries(enabled_api, flow, amount, fee, receive):
    body = enabled_api.post(f"/quotes/{flow}", {**PAYIN, "send_amount": amount}).json()
    assert (body["total_fee"], body["receive_amount"]) == (fee, receive)


@pytest.mark.parametrize(
    ("payin", "fee", "payout"),
    [
        ("5000", "100", "4900"),  # 2% is the minimum exactly
        ("5001", "101", "4900"),  # 100.02 up
        ("1000000", "20000", "980000"),  # 2% of the operator maximum is the cap exactly
    ],
)
def test_seeded_transfer_fee_at_its_boundaries(enabled_api, payin, fee, payout):
    body = enabled_api.post("/quotes/transfer", TRANSFER | {"payin_amount": payin}).json()
    assert (body["send_amount"], body["total_fee"], body["receive_amount"]) == (payin, fee, payout)


def test_amount_with_zero_decimals_is_accepted(enabled_api):
    body = enabled_api.post("/quotes/payin", {**PAYIN, "send_amount": "10000.00"}).json()
    assert body["send_amount"] == "10000"


def test_transfer_quote_from_payin_amount(enabled_api):
    response = enabled_api.post("/quotes/transfer", TRANSFER)

    assert response.status_code == 201, response.json()
    body = response.json()
    # platform transfer fee: 2%, min 100, max 20000; XAF->XOF rate 1
    assert body["flow_type"] == "transfer"
    assert body["send_amount"] == "10000"
    assert body["send_currency"] == "XAF"
    assert body["total_fee"] == "200"
    assert body["receive_amount"] == "9800"
    assert body["receive_currency"] == "XOF"
    assert body["corridor_code"] == "CM-SN-XAF-XOF"
    assert body["corridor_type"] == "cross_border"
    assert body["payer_operator_code"] == "CM_MTN_MOMO"
    assert body["recipient_operator_code"] == "SN_WAVE_MOMO"
    assert body["country_code"] is None and body["operator_code"] is None
    assert body["wallet_impact"] == {
        "collect_amount": "10000",
        "collect_currency": "XAF",
        "disburse_amount": "9800",
        "disburse_currency": "XOF",
        "fee_amount": "200",
        "fee_currency": "XAF",
    }
    quote = Quote.objects.get(pk=body["id"])
    assert quote.fx_rate == Decimal("1")
    assert quote.pricing["fx"]["rate"] == "1"
    assert quote.pricing["payin_amount"] == "10000"
    assert quote.pricing["payout_amount"] == "9800"


def test_transfer_quote_with_fixed_payout_solves_the_payin(enabled_api):
    body = enabled_api.post(
        "/quotes/transfer",
        {k: v for k, v in TRANSFER.items() if k != "payin_amount"} | {"payout_amount": "9800"},
    ).json()
    assert body["send_amount"] == "10000"
    assert body["receive_amount"] == "9800"
    assert body["total_fee"] == "200"


def test_transfer_fixed_payout_needs_no_payin_currency(enabled_api):
    body = {k: v for k, v in TRANSFER.items() if k not in ("payin_amount", "payin_currency")}
    response = enabled_api.post("/quotes/transfer", body | {"payout_amount": "5000"})
    assert response.status_code == 201, response.json()
    assert response.json()["send_currency"] == "XAF"


def test_transfer_send_fields_are_synonyms_of_payin_fields(enabled_api):
    body = {k: v for k, v in TRANSFER.items() if k not in ("payin_amount", "payin_currency")}
    response = enabled_api.post(
        "/quotes/transfer", body | {"send_amount": "10000", "send_currency": "XAF"}
    )
    assert response.status_code == 201, response.json()
    assert response.json()["receive_amount"] == "9800"


def test_domestic_transfer_needs_no_fx_rate(enabled_api):
    FxRate.objects.all().delete()
    response = enabled_api.post(
        "/quotes/transfer",
        TRANSFER
        | {
            "corridor_code": "SN-SN-XOF-XOF",
            "payer_operator_code": "SN_FREE_MOMO",
            "payin_currency": "XOF",
        },
    )
    assert response.status_code == 201, response.json()
    assert response.json()["corridor_type"] == "domestic"


def test_merchant_fx_margin_is_applied_and_locked(enabled_api):
    FxRate.objects.create(
        merchant=enabled_api.merchant,
        source_currency="XAF",
        target_currency="XOF",
        rate=Decimal("1"),
        margin_percent=Decimal("1"),
    )
    body = enabled_api.post("/quotes/transfer", TRANSFER).json()
    # (10000 - 200) x 0.99 = 9702
    assert body["receive_amount"] == "9702"
    quote = Quote.objects.get(pk=body["id"])
    assert quote.pricing["fx"]["margin_percent"] == "1"
    assert quote.fx_rate == Decimal("0.99")


def test_what_the_fx_rounding_keeps_is_recorded_on_the_quote(enabled_api):
    FxRate.objects.create(
        merchant=enabled_api.merchant,
        source_currency="XAF",
        target_currency="XOF",
        rate=Decimal("1"),
        margin_percent=Decimal("1.5"),
    )
    fixed_payout = {
        key: value for key, value in TRANSFER.items() if key not in ("payin_amount", "send_amount")
    } | {"payout_amount": "9800", "payout_currency": "XOF"}
    body = enabled_api.post("/quotes/transfer", fixed_payout).json()
    # the smallest payin reaching 9800 at 0.985: (10154 - 204) x 0.985 = 9800.75
    assert (body["send_amount"], body["total_fee"], body["receive_amount"]) == (
        "10154",
        "204",
        "9800",
    )
    assert Quote.objects.get(pk=body["id"]).pricing["fx"]["rounding_residual"] == "0.75"
    body = enabled_api.post("/quotes/transfer", TRANSFER).json()
    # (10000 - 200) x 0.985 = 9653, exactly
    assert Quote.objects.get(pk=body["id"]).pricing["fx"]["rounding_residual"] == "0"
    body = enabled_api.post("/quotes/transfer", TRANSFER | {"payin_amount": "10003"}).json()
    # (10003 - 201) x 0.985 = 9654.97: the recipient gets 9654
    assert body["receive_amount"] == "9654"
    assert Quote.objects.get(pk=body["id"]).pricing["fx"]["rounding_residual"] == "0.97"


def test_the_locked_rate_is_rounded_down_never_paying_out_a_unit_more(enabled_api):
    corridor = Corridor.objects.get(code="CM-SN-XAF-XOF")
    FeeSchedule.objects.create(
        merchant=enabled_api.merchant, flow_type="transfer", corridor=corridor
    )  # no fee
    FxRate.objects.create(
        merchant=enabled_api.merchant,
        source_currency="XAF",
        target_currency="XOF",
        rate=Decimal("0.6307402154"),
        margin_percent=Decimal("1.7305"),
    )
    body = enabled_api.post("/quotes/transfer", TRANSFER | {"payin_amount": "999977"}).json()
    # 0.6307402154 x (1 - 1.7305%) = 0.619825255972503 -> 0.6198252559 (to nearest: ...560);
    # 999977 x 0.619825255972503 = 619810.99999...: the recipient gets 619810, not 619811
    assert Quote.objects.get(pk=body["id"]).fx_rate == Decimal("0.6198252559")
    assert body["receive_amount"] == "619810"


def test_merchant_fee_schedule_overrides_the_platform_default(enabled_api):
    FeeSchedule.objects.create(
        merchant=enabled_api.merchant,
        flow_type="payin",
        percentage=Decimal("1"),
        fixed_amount=Decimal("25"),
    )
    body = enabled_api.post("/quotes/payin", PAYIN).json()
    assert body["total_fee"] == "125"


def test_operator_specific_fee_schedule_beats_the_flow_wide_one(enabled_api):
    FeeSchedule.objects.create(
        merchant=enabled_api.merchant,
        flow_type="payin",
        percentage=Decimal("1"),
        fixed_amount=Decimal("0"),
    )
    FeeSchedule.objects.create(
        merchant=enabled_api.merchant,
        flow_type="payin",
        operator=Operator.objects.get(code="CM_MTN_MOMO"),
        percentage=Decimal("0"),
        fixed_amount=Decimal("75"),
    )
    assert enabled_api.post("/quotes/payin", PAYIN).json()["total_fee"] == "75"
    other = {**PAYIN, "operator_code": "CM_ORANGE_MOMO"}
    assert enabled_api.post("/quotes/payin", other).json()["total_fee"] == "100"


def test_fee_schedules_of_others_other_flows_or_inactive_ones_are_passed_over(enabled_api):
    own = FeeSchedule.objects.create(
        merchant=enabled_api.merchant, flow_type="payin", percentage=Decimal("1.2345")
    )
    # newer than the merchant's own: each would win if it were taken for one that applies
    FeeSchedule.objects.create(
        merchant=MerchantFactory(), flow_type="payin", fixed_amount=Decimal("900")
    )
    FeeSchedule.objects.create(
        merchant=enabled_api.merchant, flow_type="payout", fixed_amount=Decimal("800")
    )
    FeeSchedule.objects.create(
        merchant=enabled_api.merchant, flow_type="payin", fixed_amount=Decimal("700"), active=False
    )

    body = enabled_api.post("/quotes/payin", PAYIN).json()

    assert body["total_fee"] == "124"  # 123.45 rounded up to the franc
    fee = Quote.objects.get(pk=body["id"]).pricing["fee"]
    assert (fee["schedule_id"], fee["scope"], fee["percentage"]) == (own.pk, "merchant", "1.2345")
    payout = enabled_api.post("/quotes/payout", PAYIN).json()
    assert payout["total_fee"] == "800"  # the merchant's payout schedule, for a payout


def test_quote_locks_its_pricing_against_later_fee_changes(enabled_api):
    created = enabled_api.post("/quotes/payin", PAYIN).json()
    FeeSchedule.objects.filter(merchant=None, flow_type="payin").update(percentage=Decimal("5"))

    again = enabled_api.get(f"/quotes/{created['id']}").json()
    assert again["total_fee"] == "150"
    quote = Quote.objects.get(pk=created["id"])
    assert quote.pricing["fee"]["percentage"] == "1.5"
    assert quote.pricing["total_fee"] == "150"


def test_quote_for_own_customer_carries_customer_id(enabled_api):
    customer = CustomerFactory(merchant=enabled_api.merchant)
    body = enabled_api.post("/quotes/payin", {**PAYIN, "customer_id": str(customer.id)}).json()
    assert body["customer_id"] == str(customer.id)


# --- GET ------------------------------------------------------------------------------------


def test_get_quote_returns_it_without_meta(enabled_api):
    created = enabled_api.post("/quotes/payin", PAYIN).json()
    response = enabled_api.get(f"/quotes/{created['id']}")
    assert response.status_code == 200
    body = response.json()
    assert "_meta" not in body
    assert body == {k: v for k, v in created.items() if k != "_meta"}


def test_another_merchants_quote_is_404_like_a_random_id(enabled_api, catalog):
    other = MerchantFactory()
    from tests.catalog import enable_everything

    enable_everything(other)
    other_api = MerchantClient(other)
    created = other_api.post("/quotes/payin", PAYIN).json()

    theirs = enabled_api.get(f"/quotes/{created['id']}")
    random = enabled_api.get(f"/quotes/{uuid.uuid4()}")
    assert theirs.status_code == random.status_code == 404
    assert theirs.json() == random.json()
    assert theirs.json()["error"]["code"] == "not_found"


def test_malformed_quote_id_is_404(enabled_api):
    response = enabled_api.get("/quotes/not-a-uuid")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_quote_past_expiry_reads_expired_before_the_sweep(enabled_api):
    created = enabled_api.post("/quotes/payin", PAYIN).json()
    Quote.objects.filter(pk=created["id"]).update(expires_at=timezone.now() - timedelta(seconds=1))

    body = enabled_api.get(f"/quotes/{created['id']}").json()
    assert body["status"] == "expired"
    assert Quote.objects.get(pk=created["id"]).status == "active"  # the sweep has not run


def test_quotes_require_credentials(client):
    assert client.post("/quotes/payin", PAYIN, content_type="application/json").status_code == 401
    assert client.get(f"/quotes/{uuid.uuid4()}").status_code == 401


# --- idempotency ----------------------------------------------------------------------------


def test_replay_returns_the_same_quote_with_meta(enabled_api):
    first = enabled_api.post("/quotes/payin", PAYIN, idempotency_key="q-1")
    second = enabled_api.post("/quotes/payin", PAYIN, idempotency_key="q-1")

    assert first.status_code == second.status_code == 201
    assert first.json()["_meta"] == {"idempotency_key": "q-1", "idempotency_replayed": False}
    assert second.json()["_meta"] == {"idempotency_key": "q-1", "idempotency_replayed": True}
    assert second.json()["id"] == first.json()["id"]
    assert Quote.objects.count() == 1


def test_same_key_with_another_body_is_409(enabled_api):
    enabled_api.post("/quotes/payin", PAYIN, idempotency_key="q-2")
    response = enabled_api.post(
        "/quotes/payin", {**PAYIN, "send_amount": "20000"}, idempotency_key="q-2"
    )
    assert response.status_code == 409
    assert response.json()["error"]["reason"] == "idempotency_key_reused"
    assert Quote.objects.count() == 1


def test_quote_post_without_idempotency_key_is_400(enabled_api):
    response = enabled_api.post("/quotes/payin", PAYIN, idempotency_key=None)
    assert_rejected(response, "idempotency_key_missing")


def test_transfer_quote_replay(enabled_api):
    first = enabled_api.post("/quotes/transfer", TRANSFER, idempotency_key="t-1").json()
    second = enabled_api.post("/quotes/transfer", TRANSFER, idempotency_key="t-1").json()
    assert second["id"] == first["id"] and second["_meta"]["idempotency_replayed"] is True


# --- payin/payout validation: one test per reason ------------------------------------------


@pytest.mark.parametrize("path", ["/quotes/payin", "/quotes/payout"])
def test_operator_in_another_country_is_rejected(enabled_api, path):
    response = enabled_api.post(path, {**PAYIN, "country_code": "SN", "send_currency": "XOF"})
    assert_rejected(response, "operator_country_mismatch", "operator_code")


def test_currency_other_than_the_operators_is_rejected(enabled_api):
    response = enabled_api.post("/quotes/payin", {**PAYIN, "send_currency": "XOF"})
    assert_rejected(response, "currency_mismatch", "send_currency")


def test_rail_other_than_the_operators_is_rejected(enabled_api):
    response = enabled_api.post("/quotes/payin", {**PAYIN, "rail_type": "bank_transfer"})
    assert_rejected(response, "rail_mismatch", "rail_type")


def test_unknown_operator_is_rejected(enabled_api):
    response = enabled_api.post("/quotes/payin", {**PAYIN, "operator_code": "CM_NOPE_MOMO"})
    assert_rejected(response, "unknown_operator", "operator_code")


def test_operator_not_enabled_for_the_merchant_is_rejected(api, catalog):
    response = api.post("/quotes/payin", PAYIN)
    assert_rejected(response, "operator_not_enabled", "operator_code")
    assert "CM_MTN_MOMO" in response.json()["error"]["message"]


def test_operator_disabled_for_one_merchant_only(enabled_api):
    MerchantOperator.objects.filter(
        merchant=enabled_api.merchant, operator__code="CM_MTN_MOMO"
    ).delete()
    assert_rejected(enabled_api.post("/quotes/payin", PAYIN), "operator_not_enabled")
    assert (
        enabled_api.post("/quotes/payin", {**PAYIN, "operator_code": "CM_ORANGE_MOMO"}).status_code
        == 201
    )


def test_inactive_operator_is_rejected(enabled_api):
    Operator.objects.filter(code="CM_MTN_MOMO").update(active=False)
    response = enabled_api.post("/quotes/payin", PAYIN)
    assert_rejected(response, "operator_inactive", "operator_code")


def test_amount_below_the_operator_minimum_is_rejected(enabled_api):
    response = enabled_api.post("/quotes/payin", {**PAYIN, "send_amount": "99"})
    assert_rejected(response, "amount_below_minimum", "send_amount")


def test_amount_above_the_operator_maximum_is_rejected(enabled_api):
    response = enabled_api.post("/quotes/payout", {**PAYIN, "send_amount": "1000001"})
    assert_rejected(response, "amount_above_maximum", "send_amount")


def test_operator_limits_are_inclusive(enabled_api):
    assert (
        enabled_api.post("/quotes/payout", {**PAYIN, "send_amount": "1000000"}).status_code == 201
    )
    assert enabled_api.post("/quotes/payout", {**PAYIN, "send_amount": "100"}).status_code == 201


def test_amount_with_a_minor_unit_is_rejected(enabled_api):
    response = enabled_api.post("/quotes/payin", {**PAYIN, "send_amount": "1500.5"})
    assert_rejected(response, "invalid_amount_precision", "send_amount")


@pytest.mark.parametrize("amount", ["-1500", "", "1e4", "1,500", 1500, None])
def test_malformed_amount_is_rejected(enabled_api, amount):
    response = enabled_api.post("/quotes/payin", {**PAYIN, "send_amount": amount})
    assert_rejected(response, "invalid_request", "send_amount")


def test_payin_whose_fee_eats_the_amount_is_rejected(enabled_api):
    FeeSchedule.objects.filter(merchant=None, flow_type="payin").update(minimum_fee=Decimal("500"))
    response = enabled_api.post("/quotes/payin", {**PAYIN, "send_amount": "500"})
    assert_rejected(response, "amount_too_small_for_fees", "send_amount")


def test_unknown_customer_is_rejected(enabled_api):
    response = enabled_api.post("/quotes/payin", {**PAYIN, "customer_id": str(uuid.uuid4())})
    assert_rejected(response, "customer_not_found", "customer_id")


@pytest.mark.parametrize(
    "operator_code", ["SN_ORANGE_MOMO", "SN_NO_SUCH_OPERATOR", "CI_ORANGE_MOMO"]
)
def test_an_unknown_customer_is_named_before_anything_about_the_operator(
    enabled_api, operator_code
):
    body = {**PAYIN, "operator_code": operator_code, "customer_id": str(uuid.uuid4())}
    assert_rejected(enabled_api.post("/quotes/payin", body), "customer_not_found", "customer_id")
    assert not Quote.objects.exists()


def test_another_merchants_customer_is_rejected_like_an_unknown_one(enabled_api):
    theirs = CustomerFactory()
    response = enabled_api.post("/quotes/payin", {**PAYIN, "customer_id": str(theirs.id)})
    assert_rejected(response, "customer_not_found", "customer_id")


@pytest.mark.parametrize(
    "field", ["country_code", "operator_code", "rail_type", "send_amount", "send_currency"]
)
def test_missing_required_field_is_rejected(enabled_api, field):
    body = {k: v for k, v in PAYIN.items() if k != field}
    assert_rejected(enabled_api.post("/quotes/payin", body), "invalid_request", field)


def test_unsupported_currency_is_rejected(enabled_api):
    assert_rejected(
        enabled_api.post("/quotes/payin", {**PAYIN, "send_currency": "EUR"}),
        "invalid_request",
        "send_currency",
    )


def test_country_code_must_be_iso(enabled_api):
    assert_rejected(
        enabled_api.post("/quotes/payin", {**PAYIN, "country_code": "ZZ"}),
        "invalid_request",
        "country_code",
    )


# --- transfer validation --------------------------------------------------------------------


def test_unknown_corridor_is_rejected(enabled_api):
    response = enabled_api.post("/quotes/transfer", {**TRANSFER, "corridor_code": "CM-FR-XAF-EUR"})
    assert_rejected(response, "unknown_corridor", "corridor_code")


def test_corridor_not_enabled_for_the_merchant_is_rejected(enabled_api):
    MerchantCorridor.objects.filter(
        merchant=enabled_api.merchant, corridor__code="CM-SN-XAF-XOF"
    ).delete()
    response = enabled_api.post("/quotes/transfer", TRANSFER)
    assert_rejected(response, "corridor_not_enabled", "corridor_code")
    assert "CM-SN-XAF-XOF" in response.json()["error"]["message"]


def test_inactive_corridor_is_rejected(enabled_api):
    Corridor.objects.filter(code="CM-SN-XAF-XOF").update(active=False)
    assert_rejected(
        enabled_api.post("/quotes/transfer", TRANSFER), "corridor_inactive", "corridor_code"
    )


def test_payer_operator_outside_the_corridor_is_rejected(enabled_api):
    response = enabled_api.post(
        "/quotes/transfer", {**TRANSFER, "payer_operator_code": "BJ_MTN_MOMO"}
    )
    assert_rejected(response, "payer_operator_mismatch", "payer_operator_code")


def test_recipient_operator_outside_the_corridor_is_rejected(enabled_api):
    response = enabled_api.post(
        "/quotes/transfer", {**TRANSFER, "recipient_operator_code": "CI_WAVE_MOMO"}
    )
    assert_rejected(response, "recipient_operator_mismatch", "recipient_operator_code")


def test_transfer_operator_not_enabled_is_rejected_naming_the_field(enabled_api):
    MerchantOperator.objects.filter(
        merchant=enabled_api.merchant, operator__code="SN_WAVE_MOMO"
    ).delete()
    response = enabled_api.post("/quotes/transfer", TRANSFER)
    assert_rejected(response, "operator_not_enabled", "recipient_operator_code")


def test_unknown_payer_operator_is_rejected_naming_the_field(enabled_api):
    response = enabled_api.post("/quotes/transfer", {**TRANSFER, "payer_operator_code": "XX"})
    assert_rejected(response, "unknown_operator", "payer_operator_code")


def test_payin_currency_other_than_the_corridors_is_rejected(enabled_api):
    response = enabled_api.post("/quotes/transfer", {**TRANSFER, "payin_currency": "XOF"})
    assert_rejected(response, "payin_currency_mismatch", "payin_currency")


def test_payout_currency_other_than_the_corridors_is_rejected(enabled_api):
    response = enabled_api.post("/quotes/transfer", {**TRANSFER, "payout_currency": "XAF"})
    assert_rejected(response, "payout_currency_mismatch", "payout_currency")


def test_transfer_without_any_amount_is_rejected(enabled_api):
    body = {k: v for k, v in TRANSFER.items() if k != "payin_amount"}
    assert_rejected(enabled_api.post("/quotes/transfer", body), "amount_required", "payin_amount")


def test_transfer_with_both_amounts_is_rejected(enabled_api):
    response = enabled_api.post("/quotes/transfer", {**TRANSFER, "payout_amount": "9800"})
    assert_rejected(response, "amount_ambiguous", "payout_amount")


def test_transfer_payin_amount_without_currency_is_rejected(enabled_api):
    body = {k: v for k, v in TRANSFER.items() if k != "payin_currency"}
    assert_rejected(
        enabled_api.post("/quotes/transfer", body), "payin_currency_required", "payin_currency"
    )


def test_transfer_send_amount_contradicting_payin_amount_is_rejected(enabled_api):
    response = enabled_api.post("/quotes/transfer", {**TRANSFER, "send_amount": "5000"})
    assert_rejected(response, "send_field_conflict", "send_amount")


def test_transfer_payin_amount_with_minor_unit_is_rejected(enabled_api):
    response = enabled_api.post("/quotes/transfer", {**TRANSFER, "payin_amount": "10000.5"})
    assert_rejected(response, "invalid_amount_precision", "payin_amount")


def test_transfer_fixed_payout_with_minor_unit_is_rejected(enabled_api):
    body = {k: v for k, v in TRANSFER.items() if k != "payin_amount"} | {"payout_amount": "9800.25"}
    assert_rejected(
        enabled_api.post("/quotes/transfer", body), "invalid_amount_precision", "payout_amount"
    )


def test_transfer_payin_above_the_payer_operator_maximum_is_rejected(enabled_api):
    response = enabled_api.post("/quotes/transfer", {**TRANSFER, "payin_amount": "1000001"})
    assert_rejected(response, "amount_above_maximum", "payin_amount")


def test_transfer_fixed_payout_needing_a_payin_above_the_maximum_is_rejected(enabled_api):
    body = {k: v for k, v in TRANSFER.items() if k != "payin_amount"} | {"payout_amount": "999999"}
    assert_rejected(
        enabled_api.post("/quotes/transfer", body), "amount_above_maximum", "payout_amount"
    )


def test_transfer_whose_fee_eats_the_payin_is_rejected(enabled_api):
    response = enabled_api.post("/quotes/transfer", {**TRANSFER, "payin_amount": "100"})
    assert_rejected(response, "amount_too_small_for_fees", "payin_amount")


def test_transfer_payout_below_the_recipient_minimum_is_rejected(enabled_api):
    response = enabled_api.post(
        "/quotes/transfer", {**TRANSFER, "payin_amount": "150"}
    )  # 150 - 100 = 50
    assert_rejected(response, "amount_below_minimum", "payin_amount")
    # the message names the amount that is short, not the 150 XAF sent
    assert response.json()["error"]["message"] == (
        "The payout of 50 XOF this payin_amount leaves is below SN_WAVE_MOMO's minimum of 100 XOF."
    )


def test_transfer_fixed_payout_needing_a_payin_above_the_maximum_names_that_payin(enabled_api):
    body = {k: v for k, v in TRANSFER.items() if k != "payin_amount"} | {"payout_amount": "999999"}
    response = enabled_api.post("/quotes/transfer", body)
    assert_rejected(response, "amount_above_maximum", "payout_amount")
    assert response.json()["error"]["message"] == (
        "The payin of 1019999 XAF this payout_amount needs is above CM_MTN_MOMO's maximum of "
        "1000000 XAF."
    )


def test_cross_border_transfer_without_fx_rate_is_rejected(enabled_api):
    FxRate.objects.all().delete()
    assert_rejected(enabled_api.post("/quotes/transfer", TRANSFER), "fx_rate_unavailable")


@pytest.mark.parametrize("amount", ["payin_amount", "payout_amount"])
def test_a_configured_fx_rate_that_rounds_to_zero_is_unavailable(enabled_api, amount):
    """A rate entered in the dashboard too small for the 10 places a quote locks (0.0000000001
    less a margin) is no rate: 400 fx_rate_unavailable, nothing quoted. With a fixed payout it
    was a division by zero, a 500."""
    FxRate.objects.create(
        merchant=enabled_api.merchant,
        source_currency="XAF",
        target_currency="XOF",
        rate=Decimal("0.0000000001"),
        margin_percent=Decimal("1"),
    )
    body = TRANSFER
    if amount == "payout_amount":
        body = {
            key: value
            for key, value in TRANSFER.items()
            if key not in ("payin_amount", "send_amount")
        } | {"payout_amount": "9800", "payout_currency": "XOF"}
    quotes_before = Quote.objects.count()

    response = enabled_api.post("/quotes/transfer", body)

    assert_rejected(response, "fx_rate_unavailable")
    assert "XAF->XOF" in response.json()["error"]["message"]
    assert Quote.objects.count() == quotes_before


@pytest.mark.parametrize(
    "field", ["corridor_code", "payer_operator_code", "recipient_operator_code", "payout_currency"]
)
def test_transfer_missing_required_field_is_rejected(enabled_api, field):
    body = {k: v for k, v in TRANSFER.items() if k != field}
    assert_rejected(enabled_api.post("/quotes/transfer", body), "invalid_request", field)
