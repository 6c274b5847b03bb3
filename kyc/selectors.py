from dataclasses import dataclass
from uuid import UUID

from customers import selectors as customer_selectors
from customers.models import Customer
from kyc.models import KycDocument, KycSubmission
from merchants.models import Merchant


@dataclass(frozen=True)
class KycState:
    """What the KycStatus response shows: the customer's kyc_status and the documents of its
    latest submission."""

    customer_id: UUID
    kyc_status: str
    documents: list[KycDocument]


def kyc_latest_submission(*, customer: Customer) -> KycSubmission | None:
    return KycSubmission.objects.filter(customer=customer).order_by("-number").first()


def kyc_state_for(*, customer: Customer) -> KycState:
    submission = kyc_latest_submission(customer=customer)
    documents = list(submission.documents.order_by("position")) if submission else []
    return KycState(customer_id=customer.id, kyc_status=customer.kyc_status, documents=documents)


def kyc_state_get(*, merchant: Merchant, customer_id: UUID) -> KycState:
    """The merchant's customer's KYC; another merchant's customer is a 404."""
    customer = customer_selectors.customer_get(merchant=merchant, customer_id=customer_id)
    return kyc_state_for(customer=customer)
