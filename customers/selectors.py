from datetime import datetime
from uuid import UUID

from config import pagination
from config.exceptions import DomainError, NotFound
from config.rawsql import RowReader
from customers.models import Customer, CustomerStatus
from merchants.models import Merchant


class CustomerNotFound(NotFound):
    reason = "customer_not_found"
    message = "The customer does not exist."


_CUSTOMER_BY_ID = RowReader(Customer, where=("id", "merchant"))  # on every quote and payment


class CustomerBlocked(DomainError):
    status = 400
    reason = "customer_blocked"
    message = "This customer is blocked: no new quote or payment can be made for them."


def customer_get(*, merchant: Merchant, customer_id: UUID) -> Customer:
    """The merchant's customer; another merchant's customer is indistinguishable from none."""
    customer = _CUSTOMER_BY_ID.first(customer_id, merchant.pk)
    if customer is None:
        raise CustomerNotFound()
    return customer


def customer_get_active(*, merchant: Merchant, customer_id: UUID) -> Customer:
    """customer_get(), for a new quote or payment: a blocked customer is a 400 naming
    customer_id (CustomerBlocked)."""
    customer = customer_get(merchant=merchant, customer_id=customer_id)
    if customer.status != CustomerStatus.ACTIVE:
        raise CustomerBlocked(fields={"customer_id": [CustomerBlocked.message]})
    return customer


def customer_list(
    *,
    merchant: Merchant,
    page: pagination.PageRequest,
    status: str | None = None,
    external_ref: str | None = None,
    created_gte: datetime | None = None,
    created_lt: datetime | None = None,
) -> pagination.Page:
    """The merchant's customers, newest first, one page (GET /customers)."""
    queryset = Customer.objects.filter(merchant=merchant)
    if status is not None:
        queryset = queryset.filter(status=status)
    if external_ref is not None:
        queryset = queryset.filter(external_ref=external_ref)
    queryset = pagination.created_filter(queryset, created_gte=created_gte, created_lt=created_lt)
    return pagination.paginate(queryset, page=page)
