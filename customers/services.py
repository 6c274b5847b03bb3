from typing import Any

from django.db import IntegrityError, transaction

from config.exceptions import DomainError
from customers.models import Customer
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
