"""Property tests, through the API and the provider simulator: whatever fee schedule and FX rate
apply, a quote's amounts follow docs/api.md computed independently (exact fractions), and the
ledger posts at completion exactly what the quote promised, every currency summing to zero."""

import math
from decimal import Decimal
from fractions import Fraction

import pytest
from django.db.models import Sum
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from payments.ledger.adjustments import wallet_credit
from payments.ledger.checks import ledger_check
from payments.models import Journal, JournalLine
from quotes.models import Corridor, FeeSchedule, FxRate, Operator
from tests.catalog import enable_everything
from tests.factories import MerchantFactory
from tests.support import MerchantClient

pytestmark = pytest.mark.django_db

D = Decimal
SN_PHONE = "+221770001234"
CM_PHONE = "+237670001234"
SENDER_DETAILS = {
    "address_line1": "12 rue Joss",
    "city": "Douala",
    "occupation": "trader",
    "source_of_funds": "salary",
}
TOO_SMALL = "amount_too_small_for_fees"
PROPERTY = settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

fee_terms = st.fixed_dictionaries(
    {
        "percentage": st.decimals(min_value=0, max_value=10, places=4),
        # with cents, as the dashboard takes them
        "fixed_amount": st.decimals(min_value=0, max_value=300, places=2),
        "minimum_fee": st.decimals(min_value=0, max_value=300, places=2),
        "maximum_fee": st.one_of(st.none(), st.decimals(min_value=300, max_value=30000, places=2)),
    }
)


def expected_fee(terms: dict, amount: Decimal) -> int:
    """docs/api.md with exact fractions: percentage + fixed, raised to the minimum, capped at the
    maximum, rounded up to the unit, never above the maximum."""
    raw = Fraction(amount) * Fraction(terms["percentage"]) / 100 + Fraction(terms["fixed_amount"])
    fee = max(raw, Fraction(terms["minimum_fee"]))
    if terms["maximum_fee"] is not None:
        fee = min(fee, Fraction(terms["maximum_fee"]))
    fee = math.ceil(fee)
    if terms["maximum_fee"] is not None:
        fee = min(fee, math.floor(terms["maximum_fee"]))
    return fee


def lines_of(resource_id, kind: str) -> dict[str, Decimal]:
    journal = Journal.objects.get(resource_id=resource_id, kind=kind)
    return {line.account.code: line.amount for line in journal.lines.select_related("account")}


def assert_every_currency_sums_to_zero(merchant) -> None:
    sums = (
        JournalLine.objects.filter(journal__merchant=merchant)
        .values("journal__currency")
        .annotate(total=Sum("amount"))
    )
    assert all(row["total"] == 0 for row in sums), list(sums)
    report = ledger_check()
    assert report["breaches"] == []


def _merchant() -> tuple:
    merchant = MerchantFactory()
    enable_everything(merchant)
    api = MerchantClient(merchant)
    customer = api.post("/customers", {"first_name": "A", "last_name": "B", **SENDER_DETAILS})
    assert customer.status_code == 201
    return merchant, api, customer.json()


@PROPERTY
@given(
    terms=fee_terms,
    amount=st.integers(100, 1_000_000),
    operator_specific=st.booleans(),
)
def test_payin_credits_exactly_what_the_quote_promised(
    terms, amount, operator_specific, catalog, django_capture_on_commit_callbacks
):
    merchant, api, customer = _merchant()
    operator = Operator.objects.get(code="SN_ORANGE_MOMO")
    FeeSchedule.objects.create(
        merchant=merchant,
        flow_type="payin",
        operator=operator if operator_specific else None,
        **terms,
    )
    response = api.post(
        "/quotes/payin",
        {
            "country_code": "SN",
            "operator_code": operator.code,
            "rail_type": "mobile_money",
            "send_amount": str(amount),
            "send_currency": "XOF",
        },
    )
    fee = expected_fee(terms, D(amount))
    if fee >= amount:
        assert response.status_code == 400
        assert response.json()["error"]["reason"] == "amount_too_small_for_fees"
        return
    quote = response.json()
    assert response.status_code == 201, quote
    assert (quote["total_fee"], quote["receive_amount"]) == (str(fee), str(amount - fee))
    assert quote["wallet_impact"] == {"credit_amount": str(amount - fee), "currency": "XOF"}

    with django_capture_on_commit_callbacks(execute=True):
        created = api.post(
            "/payins",
            {"quote_id": quote["id"], "customer_id": customer["id"], "source": {"phone": SN_PHONE}},
        )
    assert created.status_code == 201, created.json()
    payin = api.get(f"/payins/{created.json()['id']}").json()
    assert payin["status"] == "completed"
    assert (payin["send_amount"], payin["receive_amount"]) == (str(amount), str(amount - fee))
    assert lines_of(payin["id"], "payin_completed") == {
        "provider_clearing:SN_ORANGE_MOMO": -D(amount),
        "merchant_available": D(amount - fee),
        **({"fee_revenue": D(fee)} if fee else {}),
    }
    assert merchant.wallets.get(currency="XOF").available == amount - fee
    assert_every_currency_sums_to_zero(merchant)


@PROPERTY
@given(
    terms=fee_terms,
    amount=st.integers(100, 1_000_000),
    declined=st.booleans(),
)
def test_payout_debits_exactly_send_plus_fee(
    terms, amount, declined, catalog, django_capture_on_commit_callbacks
):
    merchant, api, customer = _merchant()
    FeeSchedule.objects.create(merchant=merchant, flow_type="payout", **terms)
    wallet_credit(
        merchant=merchant, currency="XAF", amount=D(2_000_000), reason="float", at=timezone.now()
    )
    response = api.post(
        "/quotes/payout",
        {
            "country_code": "CM",
            "operator_code": "CM_ORANGE_MOMO",
            "rail_type": "mobile_money",
            "send_amount": str(amount),
            "send_currency": "XAF",
        },
    )
    quote = response.json()
    assert response.status_code == 201, quote
    fee = expected_fee(terms, D(amount))
    assert (quote["total_fee"], quote["receive_amount"]) == (str(fee), str(amount))
    assert quote["wallet_impact"] == {"debit_amount": str(amount + fee), "currency": "XAF"}

    phone = "+237670001000" if declined else CM_PHONE
    with django_capture_on_commit_callbacks(execute=True):
        created = api.post(
            "/payouts",
            {
                "quote_id": quote["id"],
                "customer_id": customer["id"],
                "recipient": {"first_name": "M", "last_name": "N", "phone": phone},
            },
        )
    assert created.status_code == 201, created.json()
    payout_id = created.json()["id"]
    assert lines_of(payout_id, "payout_reserved") == {
        "merchant_available": -D(amount + fee),
        "merchant_reserved": D(amount + fee),
    }
    wallet = merchant.wallets.get(currency="XAF")
    assert wallet.reserved == 0
    if declined:
        assert lines_of(payout_id, "payout_released") == {
            "merchant_reserved": -D(amount + fee),
            "merchant_available": D(amount + fee),
        }
        assert wallet.available == 2_000_000
    else:
        assert lines_of(payout_id, "payout_completed") == {
            "merchant_reserved": -D(amount + fee),
            "provider_clearing:CM_ORANGE_MOMO": D(amount),
            **({"fee_revenue": D(fee)} if fee else {}),
        }
        assert wallet.available == 2_000_000 - amount - fee
    assert_every_currency_sums_to_zero(merchant)


def _transfer_quote(api, customer, *, payin_amount=None, payout_amount=None):
    body = {
        "customer_id": customer["id"],
        "corridor_code": "CM-SN-XAF-XOF",
        "payer_operator_code": "CM_MTN_MOMO",
        "recipient_operator_code": "SN_WAVE_MOMO",
        "payout_currency": "XOF",
    }
    if payin_amount is not None:
        body |= {"payin_amount": str(payin_amount), "payin_currency": "XAF"}
    else:
        body["payout_amount"] = str(payout_amount)
    return api.post("/quotes/transfer", body)


@PROPERTY
@given(
    terms=fee_terms,
    base_rate=st.decimals(min_value=D("0.5"), max_value=D("1"), places=10),
    margin=st.decimals(min_value=0, max_value=5, places=4),
    amount=st.integers(100, 1_000_000),
    fixed_payout=st.booleans(),
    lowered_by=st.one_of(st.none(), st.integers(0, 500)),
)
def test_transfer_posts_what_its_quote_locked_through_fx_and_a_lowered_relaunch(
    terms, base_rate, margin, amount, fixed_payout, lowered_by, catalog,
    django_capture_on_commit_callbacks,
):  # fmt: skip
    merchant, api, customer = _merchant()
    corridor = Corridor.objects.get(code="CM-SN-XAF-XOF")
    FeeSchedule.objects.create(merchant=merchant, flow_type="transfer", corridor=corridor, **terms)
    FxRate.objects.create(
        merchant=merchant,
        source_currency="XAF",
        target_currency="XOF",
        rate=base_rate,
        margin_percent=margin,
    )
    rate = Fraction(base_rate) * (100 - Fraction(margin)) / 100
    if fixed_payout:
        response = _transfer_quote(api, customer, payout_amount=amount)
    else:
        response = _transfer_quote(api, customer, payin_amount=amount)
    if response.status_code == 400:  # outside an operator's limits, or eaten by the fee
        reason = response.json()["error"]["reason"]
        assert reason in {
            "amount_above_maximum",
            "amount_below_minimum",
            "amount_too_small_for_fees",
        }
        return
    quote = response.json()
    assert response.status_code == 201, quote
    payin, payout, fee = (D(quote[k]) for k in ("send_amount", "receive_amount", "total_fee"))
    assert fee == expected_fee(terms, payin)
    # the locked rate never exceeds rate x (1 - margin), and the payout follows the locked rate
    locked = Fraction(D(quote["fx_rate"] if "fx_rate" in quote else _locked_rate(quote["id"])))
    assert locked <= rate
    assert payout == math.floor(Fraction(payin - fee) * locked)
    if fixed_payout:
        assert payout == amount
        assert math.floor(Fraction(payin - 1 - expected_fee(terms, payin - 1)) * locked) < amount
    else:
        assert payin == amount

    recipient_phone = "+221770001000" if lowered_by is not None else SN_PHONE
    with django_capture_on_commit_callbacks(execute=True):
        created = api.post(
            "/transfers",
            {
                "quote_id": quote["id"],
                "customer_id": customer["id"],
                "payer": {"phone": CM_PHONE},
                "recipient": {"first_name": "M", "last_name": "N", "phone": recipient_phone},
            },
        )
    assert created.status_code == 201, created.json()
    transfer_id = created.json()["id"]
    paid = payout
    if lowered_by is not None:
        assert api.get(f"/transfers/{transfer_id}").json()["status"] == "failed"
        assert_every_currency_sums_to_zero(merchant)
        paid = max(payout - lowered_by, D(100))
        with django_capture_on_commit_callbacks(execute=True):
            relaunched = api.post(
                f"/transfers/{transfer_id}/relaunch-payout",
                {
                    "payout_amount": str(paid),
                    "recipient": {"first_name": "M", "last_name": "N", "phone": SN_PHONE},
                },
            )
        assert relaunched.status_code == 202, relaunched.json()
    transfer = api.get(f"/transfers/{transfer_id}").json()
    assert transfer["status"] == "completed"
    assert (transfer["payin_amount"], transfer["payout_amount"]) == (str(payin), str(paid))
    assert lines_of(transfer_id, "transfer_collected") == {
        "provider_clearing:CM_MTN_MOMO": -payin,
        "transfer_suspense": payin,
    }
    assert lines_of(transfer_id, "transfer_settled") == {
        "transfer_suspense": -payin,
        "fx_conversion": payin - fee,
        **({"fee_revenue": fee} if fee else {}),
    }
    assert lines_of(transfer_id, "transfer_disbursed") == {
        "fx_conversion": -payout,
        "provider_clearing:SN_WAVE_MOMO": paid,
        **({"merchant_available": payout - paid} if payout != paid else {}),
    }
    assert merchant.wallets.get(currency="XOF").available == payout - paid
    assert_every_currency_sums_to_zero(merchant)


def _locked_rate(quote_id) -> Decimal:
    from quotes.models import Quote

    return Quote.objects.get(pk=quote_id).fx_rate
