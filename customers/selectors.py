from datetime import datetime
from uuid import UUID

from django.db.models import QuerySet

from core import pagination
from core.exceptions import DomainError, NotFound
from customers.models import Customer, CustomerStatus
from merchants.models import Merchant


class CustomerNotFound(NotFound):
    reason = "customer_not_found"
    message = "The customer does not exist."


class CustomerNotFoundForPayment(DomainError):
    """The customer_id in a new quote or payment's body names no customer of the merchant: a
    400 naming the field (the request is wrong), where a path id is a 404 (CustomerNotFound)."""

    status = 400
    reason = CustomerNotFound.reason
    message = CustomerNotFound.message

    def __init__(self) -> None:
        super().__init__(fields={"customer_id": [self.message]})


class CustomerBlocked(DomainError):
    status = 400
    reason = "customer_blocked"
    message = "This customer is blocked: no new quote or payment can be made for them."


def customers_active() -> QuerySet[Customer]:
    """The customers not blocked, of every merchant: narrow it to one."""
    return Customer.objects.filter(status=CustomerStatus.ACTIVE)


def customer_get(*, merchant: Merchant, customer_id: UUID) -> Customer:
    """The merchant's customer; another merchant's customer is indistinguishable from none."""
    customer = Customer.objects.filter(pk=customer_id, merchant=merchant).first()
    if customer is None:
        raise CustomerNotFound()
    return customer


def customer_get_for_payment(*, merchant: Merchant, customer_id: UUID) -> Customer:
    """The customer named by a new quote or payment's customer_id: unknown or blocked is a
    400 naming customer_id (CustomerNotFoundForPayment, CustomerBlocked)."""
    customer = Customer.objects.filter(pk=customer_id, merchant=merchant).first()
    if customer is None:
        raise CustomerNotFoundForPayment()
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
    queryset = pagination.filtered(
        Customer.objects.filter(merchant=merchant),
        status=status,
        external_ref=external_ref,
        created_gte=created_gte,
        created_lt=created_lt,
    )
    return pagination.paginate(queryset, page=page)
