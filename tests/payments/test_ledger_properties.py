"""Property test: whatever sequence of payins, payouts, provider answers, timeouts and
adjustments happens, the ledger stays balanced and the wallet matches a simple model of it."""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from payments.ledger.adjustments import wallet_credit
from payments.ledger.checks import ledger_breaches
from payments.ledger.journals import InsufficientBalance
from payments.services.payins import payin_create
from payments.services.payouts import payout_create
from payments.services.sweeps import payments_fail_timed_out
from quotes import services as quote_services
from tests.catalog import enable_everything
from tests.factories import CustomerFactory, MerchantFactory
from tests.support import wallet_balance

pytestmark = pytest.mark.django_db

PHONES = {"completes": "+221770001234", "declined": "+221770001000", "silent": "+221770001999"}

amounts = st.integers(min_value=100, max_value=60000)
outcomes = st.sampled_from(sorted(PHONES))
operations = st.lists(
    st.one_of(
        st.tuples(st.just("credit"), amounts, st.just("")),
        st.tuples(st.just("payin"), amounts, outcomes),
        st.tuples(st.just("payout"), amounts, outcomes),
        st.tuples(st.just("sweep"), st.just(0), st.just("")),
    ),
    min_size=1,
    max_size=12,
)


def _quote(merchant, customer, flow, amount):
    return quote_services.quote_create_collection(
        merchant=merchant,
        flow_type=flow,
        customer_id=customer.id,
        country_code="SN",
        operator_code="SN_ORANGE_MOMO",
        rail_type="mobile_money",
        send_amount=Decimal(amount),
        send_currency="XOF",
        now=timezone.now(),
    )


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(ops=operations)
def test_ledger_invariants_hold_after_every_step(ops, catalog, django_capture_on_commit_callbacks):
    merchant = MerchantFactory()
    enable_everything(merchant)
    customer = CustomerFactory(merchant=merchant)
    available, reserved = Decimal(0), Decimal(0)
    silent_payouts: list[Decimal] = []

    for kind, amount, outcome in ops:
        now = timezone.now()
        if kind == "credit":
            wallet_credit(
                merchant=merchant, currency="XOF", amount=Decimal(amount), reason="p", at=now
            )
            available += amount
        elif kind == "payin":
            quote = _quote(merchant, customer, "payin", amount)
            with django_capture_on_commit_callbacks(execute=True):
                payin_create(
                    merchant=merchant,
                    quote_id=quote.id,
                    customer_id=customer.id,
                    source={"phone": PHONES[outcome]},
                    now=now,
                )
            if outcome == "completes":
                available += quote.receive_amount
        elif kind == "payout":
            quote = _quote(merchant, customer, "payout", amount)
            debit = quote.send_amount + quote.total_fee
            try:
                with django_capture_on_commit_callbacks(execute=True):
                    payout_create(
                        merchant=merchant,
                        quote_id=quote.id,
                        customer_id=customer.id,
                        recipient={
                            "first_name": "A",
                            "last_name": "B",
                            "phone": PHONES[outcome],
                        },
                        now=now,
                    )
            except InsufficientBalance:
                assert debit > available
            else:
                assert debit <= available
                available -= debit
                if outcome == "declined":
                    available += debit
                elif outcome == "silent":
                    reserved += debit
                    silent_payouts.append(debit)
        else:
            later = now + timedelta(days=2)
            payments_fail_timed_out(now=later)
            available += sum(silent_payouts, Decimal(0))
            reserved = Decimal(0)
            silent_payouts.clear()

        assert wallet_balance(merchant=merchant, currency="XOF") == (
            available,
            reserved,
        )
        assert available >= 0
        assert reserved >= 0
        assert ledger_breaches(merchant_ids=[merchant.id]) == []
