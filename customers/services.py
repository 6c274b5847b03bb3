from typing import Any
from uuid import UUID

from django.db import IntegrityError, transaction

from core.exceptions import DomainError
from customers.models import Customer
from customers.selectors import CustomerNotFound
from merchants.models import Merchant


class DuplicateExternalRef(DomainError):
    status = 400  # 409 is kept for Idempotency-Key conflicts
    reason = "duplicate_external_ref"
    message = "A customer with this external_ref already exists."


def customer_create(*, merchant: Merchant, data: dict[str, Any]) -> Customer:
    """data is the validated CreateCustomerRequest."""
    external_ref = data.get("external_ref")
    if (
        external_ref
        and Customer.objects.filter(merchant=merchant, external_ref=external_ref).exists()
    ):
        raise DuplicateExternalRef(fields={"external_ref": [DuplicateExternalRef.message]})
    try:
        with transaction.atomic():
            return Customer.objects.create(merchant=merchant, **data)
    except IntegrityError as exc:
        if "customer_external_ref_unique_per_merchant" in str(exc):
            raise DuplicateExternalRef(
                fields={"external_ref": [DuplicateExternalRef.message]}
            ) from exc
        raise


def customer_lock_of_merchant(*, merchant: Merchant, customer_id: UUID) -> Customer:
    """The merchant's customer, its row locked FOR NO KEY UPDATE; CustomerNotFound otherwise."""
    customer = (
        Customer.objects.select_for_update(no_key=True)
        .filter(merchant=merchant, pk=customer_id)
        .first()
    )
    if customer is None:
        raise CustomerNotFound()
    return customer


def customer_lock(*, customer_id: UUID, with_merchant: bool = False) -> Customer:
    """The customer, its row (only) locked FOR NO KEY UPDATE, with its merchant if asked."""
    if with_merchant:
        return (
            Customer.objects.select_for_update(of=("self",), no_key=True)
            .select_related("merchant")
            .get(pk=customer_id)
        )
    return Customer.objects.select_for_update(no_key=True).get(pk=customer_id)
