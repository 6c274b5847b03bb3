"""quotes.services.quote_locked() (QUOTE_LOCKED_READ): what the locked read of a quote tells
quote_operator_check_enabled() about its operator and customer, with no read of its own."""

import pytest
from django.db import transaction

from core.exceptions import DomainError
from customers.models import CustomerStatus
from quotes import selectors, services
from quotes.models import MerchantOperator, Operator, Quote
from tests.catalog import enable_everything
from tests.factories import CustomerFactory, MerchantFactory
from tests.quotes.test_consume_and_expiry import make_quote

pytestmark = pytest.mark.django_db


def _read(quote: Quote) -> Quote:
    with transaction.atomic():
        return services.quote_locked(merchant=quote.merchant, quote_id=quote.pk)


@pytest.fixture
def merchant():
    merchant = MerchantFactory()
    enable_everything(merchant)
    return merchant


def test_an_enabled_operator_and_an_active_customer_pass(merchant, django_assert_num_queries):
    customer = CustomerFactory(merchant=merchant)
    quote = _read(make_quote(merchant, customer=customer))

    with django_assert_num_queries(0):
        selectors.quote_operator_check_enabled(quote)
    assert (quote.operator_active, quote.operator_enabled_for_merchant) == (True, True)
    assert quote.customer_active is True


def test_a_blocked_customer_reads_as_not_active(merchant):
    customer = CustomerFactory(merchant=merchant)
    quote = make_quote(merchant, customer=customer)
    customer.status = CustomerStatus.BLOCKED
    customer.save(update_fields=["status"])

    assert _read(quote).customer_active is False


def test_an_operator_disabled_for_the_merchant_is_refused(merchant):
    quote = make_quote(merchant)
    MerchantOperator.objects.filter(merchant=merchant, operator__code=quote.operator_code).delete()

    with pytest.raises(DomainError) as refused:
        selectors.quote_operator_check_enabled(_read(quote))
    assert refused.value.reason == "operator_not_enabled"


def test_an_operator_gone_from_the_catalog_is_unknown(merchant):
    quote = make_quote(merchant)
    Operator.objects.filter(code=quote.operator_code).delete()

    read = _read(quote)
    assert read.operator_active is None
    with pytest.raises(DomainError) as refused:
        selectors.quote_operator_check_enabled(read)
    assert refused.value.reason == "unknown_operator"


def test_another_merchants_quote_is_not_read(merchant):
    quote = make_quote(merchant)
    with transaction.atomic():
        assert services.quote_locked(merchant=MerchantFactory(), quote_id=quote.pk) is None
