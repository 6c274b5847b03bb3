import threading
from datetime import timedelta
from decimal import Decimal

import pytest
from django.core.management import call_command
from django.db import connection, transaction
from django.utils import timezone

from core.exceptions import DomainError
from quotes import services, tasks
from quotes.models import Quote
from tests.catalog import enable_everything
from tests.factories import CustomerFactory, MerchantFactory


def make_quote(merchant, *, flow_type="payin", customer=None, now=None) -> Quote:
    return services.quote_create_collection(
        merchant=merchant,
        flow_type=flow_type,
        customer_id=customer.id if customer else None,
        country_code="CI",
        operator_code="CI_ORANGE_MOMO",
        rail_type="mobile_money",
        send_amount=Decimal("5000"),
        send_currency="XOF",
        now=now or timezone.now(),
    )


def consume(merchant, quote, *, flow_type="payin", customer_id=None, now=None) -> Quote:
    with transaction.atomic():
        return services.quote_consume(
            merchant=merchant,
            quote_id=quote.id,
            flow_type=flow_type,
            customer_id=customer_id,
            now=now or timezone.now(),
        )


def reason_of(call) -> str:
    with pytest.raises(DomainError) as caught:
        call()
    assert caught.value.status == 400
    return caught.value.reason


@pytest.fixture
def quote(enabled_merchant):
    return make_quote(enabled_merchant)


@pytest.mark.django_db
def test_consume_marks_the_quote_consumed(enabled_merchant, quote):
    now = timezone.now()
    consumed = consume(enabled_merchant, quote, now=now)
    quote.refresh_from_db()
    assert consumed.status == quote.status == "consumed"
    assert quote.consumed_at == now


@pytest.mark.django_db
def test_consume_twice_is_quote_consumed(enabled_merchant, quote):
    consume(enabled_merchant, quote)
    assert reason_of(lambda: consume(enabled_merchant, quote)) == "quote_consumed"


@pytest.mark.django_db
def test_consume_after_expiry_is_quote_expired_even_before_the_sweep(enabled_merchant, quote):
    later = quote.expires_at + timedelta(seconds=1)
    assert reason_of(lambda: consume(enabled_merchant, quote, now=later)) == "quote_expired"
    quote.refresh_from_db()
    assert quote.status == "active" and quote.consumed_at is None


@pytest.mark.django_db
def test_consume_after_the_sweep_is_quote_expired(enabled_merchant, quote):
    services.quotes_expire(now=quote.expires_at + timedelta(microseconds=1))
    assert reason_of(lambda: consume(enabled_merchant, quote)) == "quote_expired"


@pytest.mark.django_db
def test_consume_for_another_flow_is_a_flow_mismatch(enabled_merchant, quote):
    assert (
        reason_of(lambda: consume(enabled_merchant, quote, flow_type="payout"))
        == "quote_flow_mismatch"
    )
    quote.refresh_from_db()
    assert quote.status == "active"


@pytest.mark.django_db
def test_another_merchants_quote_is_quote_not_found_400(enabled_merchant, quote):
    other = MerchantFactory()
    assert reason_of(lambda: consume(other, quote)) == "quote_not_found"


@pytest.mark.django_db
def test_consume_with_another_customer_is_a_customer_mismatch(enabled_merchant):
    customer = CustomerFactory(merchant=enabled_merchant)
    other_customer = CustomerFactory(merchant=enabled_merchant)
    quote = make_quote(enabled_merchant, customer=customer)
    assert (
        reason_of(lambda: consume(enabled_merchant, quote, customer_id=other_customer.id))
        == "quote_customer_mismatch"
    )
    assert (
        reason_of(lambda: consume(enabled_merchant, quote, customer_id=None))
        == "quote_customer_mismatch"
    )
    assert consume(enabled_merchant, quote, customer_id=str(customer.id)).status == "consumed"


@pytest.mark.django_db
def test_quote_without_customer_can_be_used_for_any_customer(enabled_merchant, quote):
    customer = CustomerFactory(merchant=enabled_merchant)
    assert consume(enabled_merchant, quote, customer_id=customer.id).status == "consumed"


@pytest.mark.django_db(transaction=True)
def test_consume_outside_a_transaction_is_a_programming_error(enabled_merchant, quote):
    with pytest.raises(RuntimeError):
        services.quote_consume(
            merchant=enabled_merchant,
            quote_id=quote.id,
            flow_type="payin",
            customer_id=None,
            now=timezone.now(),
        )


@pytest.mark.django_db
def test_a_rolled_back_payment_leaves_the_quote_active(enabled_merchant, quote):
    class PaymentFailed(Exception):
        pass

    with pytest.raises(PaymentFailed), transaction.atomic():
        services.quote_consume(
            merchant=enabled_merchant,
            quote_id=quote.id,
            flow_type="payin",
            customer_id=None,
            now=timezone.now(),
        )
        raise PaymentFailed
    quote.refresh_from_db()
    assert quote.status == "active" and quote.consumed_at is None


@pytest.mark.django_db(transaction=True)
def test_two_payments_racing_for_one_quote_have_exactly_one_winner():
    merchant = MerchantFactory()
    enable_everything(merchant)
    quote = make_quote(merchant)
    contenders = 2
    barrier = threading.Barrier(contenders, timeout=60)
    outcomes: list[str] = []
    lock = threading.Lock()

    def pay() -> None:
        try:
            barrier.wait()
            try:
                consume(merchant, quote)
                result = "won"
            except DomainError as exc:
                result = exc.reason
            with lock:
                outcomes.append(result)
        finally:
            connection.close()

    threads = [threading.Thread(target=pay) for _ in range(contenders)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(outcomes) == ["quote_consumed", "won"]
    quote.refresh_from_db()
    assert quote.status == "consumed"


# --- expiry ---------------------------------------------------------------------------------


@pytest.mark.django_db
def test_sweep_expires_only_active_quotes_past_their_expiry(enabled_merchant):
    now = timezone.now()
    stale = make_quote(enabled_merchant, now=now - timedelta(minutes=20))
    fresh = make_quote(enabled_merchant, now=now)
    used = make_quote(enabled_merchant, now=now - timedelta(minutes=20))
    Quote.objects.filter(pk=used.pk).update(
        status="consumed", consumed_at=now - timedelta(minutes=19)
    )

    assert services.quotes_expire(now=now) == 1

    statuses = dict(Quote.objects.values_list("pk", "status"))
    assert statuses == {stale.pk: "expired", fresh.pk: "active", used.pk: "consumed"}
    assert services.quotes_expire(now=now) == 0


@pytest.mark.django_db
def test_sweep_is_one_update_statement(enabled_merchant, django_assert_num_queries):
    now = timezone.now()
    for _ in range(3):
        make_quote(enabled_merchant, now=now - timedelta(minutes=20))
    with django_assert_num_queries(1):
        assert services.quotes_expire(now=now) == 3


@pytest.mark.django_db
def test_expired_quote_reads_expired_after_the_sweep(enabled_merchant, enabled_api):
    quote = make_quote(enabled_merchant, now=timezone.now() - timedelta(minutes=20))
    services.quotes_expire(now=timezone.now())
    assert enabled_api.get(f"/quotes/{quote.id}").json()["status"] == "expired"


@pytest.mark.django_db
def test_expire_quotes_task_runs_the_sweep(enabled_merchant):
    quote = make_quote(enabled_merchant, now=timezone.now() - timedelta(minutes=20))
    assert tasks.expire_quotes.delay().get() == 1
    quote.refresh_from_db()
    assert quote.status == "expired"


@pytest.mark.django_db
def test_expire_quotes_command_prints_the_count(enabled_merchant, capsys):
    make_quote(enabled_merchant, now=timezone.now() - timedelta(minutes=20))
    call_command("expire_quotes", "--json")
    assert capsys.readouterr().out.strip() == '{"expired": 1}'
    call_command("expire_quotes")
    assert "Expired 0 quote(s)." in capsys.readouterr().out
