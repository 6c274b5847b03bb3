"""The fee and FX arithmetic, without the database."""

from decimal import Decimal

from hypothesis import given
from hypothesis import strategies as st

from quotes.pricing import (
    FeeTerms,
    effective_rate,
    fee_for,
    transfer_for_payout,
    transfer_from_payin,
)

D = Decimal


def test_fee_is_percentage_plus_fixed_rounded_up():
    terms = FeeTerms(percentage=D("1.5"), fixed_amount=D("10"))
    assert fee_for(terms=terms, amount=D("1001"), currency="XAF") == D("26")  # 15.015 + 10


def test_fee_is_raised_to_the_minimum():
    terms = FeeTerms(percentage=D("1"), minimum_fee=D("100"))
    assert fee_for(terms=terms, amount=D("500"), currency="XAF") == D("100")


def test_fee_is_capped_at_the_maximum():
    terms = FeeTerms(percentage=D("2"), maximum_fee=D("20000"))
    assert fee_for(terms=terms, amount=D("1000000"), currency="XOF") == D("20000")


def test_a_maximum_with_digits_below_the_unit_is_never_passed_by_the_rounding_up():
    # the dashboard takes 2 decimals; XAF has none: 20000.50 caps the fee at 20000, not 20001
    terms = FeeTerms(percentage=D("2"), minimum_fee=D("100.25"), maximum_fee=D("20000.50"))
    assert fee_for(terms=terms, amount=D("1500000"), currency="XAF") == D("20000")
    assert fee_for(terms=terms, amount=D("1000"), currency="XAF") == D("101")  # 100.25 up


def test_margin_lowers_the_rate():
    assert effective_rate(base_rate=D("1"), margin_percent=D("1.5")) == D("0.985")


def test_transfer_from_payin_floors_the_payout():
    terms = FeeTerms(percentage=D("2"), minimum_fee=D("100"))
    amounts = transfer_from_payin(
        terms=terms,
        payin_amount=D("10001"),
        payin_currency="XAF",
        rate=D("0.985"),
        payout_currency="XOF",
    )
    # fee ceil(200.02) = 201; (10001 - 201) x 0.985 = 9653 exactly
    assert amounts.fee == D("201")
    assert amounts.payout_amount == D("9653")


def test_fixed_payout_solves_for_the_smallest_payin():
    terms = FeeTerms(percentage=D("2"), minimum_fee=D("100"), maximum_fee=D("20000"))
    amounts = transfer_for_payout(
        terms=terms,
        payout_amount=D("9800"),
        payin_currency="XAF",
        rate=D("1"),
        payout_currency="XOF",
    )
    assert amounts.payin_amount == D("10000")
    assert amounts.fee == D("200")
    assert amounts.payout_amount == D("9800")
    assert amounts.rounding_residual == D("0")


TERMS = st.builds(
    FeeTerms,
    percentage=st.decimals(min_value=0, max_value=10, places=2),
    fixed_amount=st.integers(0, 500).map(D),
    minimum_fee=st.integers(0, 500).map(D),
    maximum_fee=st.one_of(st.none(), st.integers(500, 50000).map(D)),
)
# What the dashboard accepts (numeric(20, 2)): fixed, minimum and maximum with cents.
CENTS_TERMS = st.builds(
    FeeTerms,
    percentage=st.decimals(min_value=0, max_value=10, places=4),
    fixed_amount=st.decimals(min_value=0, max_value=500, places=2),
    minimum_fee=st.decimals(min_value=0, max_value=500, places=2),
    maximum_fee=st.one_of(st.none(), st.decimals(min_value=501, max_value=50000, places=2)),
)
RATES = st.decimals(min_value=D("0.5"), max_value=D("2"), places=4)


@given(terms=st.one_of(TERMS, CENTS_TERMS), payout=st.integers(1, 2_000_000).map(D), rate=RATES)
def test_fixed_payout_is_reached_by_the_smallest_payin(terms, payout, rate):
    amounts = transfer_for_payout(
        terms=terms, payout_amount=payout, payin_currency="XAF", rate=rate, payout_currency="XOF"
    )
    assert amounts is not None
    reached = transfer_from_payin(
        terms=terms,
        payin_amount=amounts.payin_amount,
        payin_currency="XAF",
        rate=rate,
        payout_currency="XOF",
    ).payout_amount
    assert reached >= payout
    converted = (amounts.payin_amount - amounts.fee) * rate
    assert amounts.rounding_residual == converted - payout >= reached - payout
    one_less = transfer_from_payin(
        terms=terms,
        payin_amount=amounts.payin_amount - 1,
        payin_currency="XAF",
        rate=rate,
        payout_currency="XOF",
    ).payout_amount
    assert one_less < payout


@given(terms=TERMS, payin=st.integers(1, 2_000_000).map(D), rate=RATES)
def test_a_fixed_payin_records_the_fraction_the_rounding_keeps(terms, payin, rate):
    amounts = transfer_from_payin(
        terms=terms, payin_amount=payin, payin_currency="XAF", rate=rate, payout_currency="XOF"
    )
    assert amounts.payout_amount + amounts.rounding_residual == (payin - amounts.fee) * rate
    assert 0 <= amounts.rounding_residual < 1


@given(terms=st.one_of(TERMS, CENTS_TERMS), amount=st.integers(0, 10**12).map(D))
def test_fee_is_a_whole_amount_within_its_bounds(terms, amount):
    fee = fee_for(terms=terms, amount=amount, currency="XOF")
    assert fee == fee.to_integral_value()
    assert fee >= 0
    if terms.maximum_fee is not None:
        assert fee <= terms.maximum_fee
    else:
        assert fee >= terms.minimum_fee
