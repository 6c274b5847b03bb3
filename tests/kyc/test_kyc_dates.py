"""A document's dates are days where it was issued (found in the time audit: "today" was
UTC's date, an hour behind Douala and Cotonou)."""

from datetime import UTC, date, datetime

import pytest

from customers.models import Customer
from kyc import services
from kyc.models import DocumentStatus, KycDocument
from kyc.serializers import KycSubmitInput
from tests.factories import CustomerFactory

pytestmark = pytest.mark.django_db

# 23:30 UTC on the 26th: 00:30 on the 27th in Douala and Cotonou, still the 26th in Dakar,
# Abidjan and Lomé
LATE = datetime(2026, 3, 26, 23, 30, tzinfo=UTC)


def review(customer: Customer, document: dict) -> KycDocument:
    services.kyc_submit(
        merchant=customer.merchant,
        customer_id=customer.id,
        documents=[
            {"document_type": "national_id", "front_file_url": "https://f.test/id.png", **document}
        ],
        at=LATE,
    )
    KycDocument.objects.filter(customer=customer).update(status=DocumentStatus.FETCHED)
    submission = customer.kyc_submissions.get()
    services.kyc_submission_review(submission_id=submission.id, at=LATE)
    return KycDocument.objects.get(customer=customer)


@pytest.mark.parametrize(
    ("country", "expiry", "outcome"),
    [
        ("CM", date(2026, 3, 26), "rejected"),  # yesterday in Douala
        ("BJ", date(2026, 3, 26), "rejected"),
        ("CM", date(2026, 3, 27), "approved"),  # today in Douala: still valid
        ("SN", date(2026, 3, 26), "approved"),  # today in Dakar
        ("CI", date(2026, 3, 25), "rejected"),
    ],
)
def test_a_document_expires_on_the_date_where_it_was_issued(country, expiry, outcome):
    customer = CustomerFactory(country_code="SN")
    document = review(customer, {"issue_country_code": country, "expiry_date": expiry})
    assert document.review_status == outcome, document.rejection_reason


def test_without_an_issue_country_the_customers_country_decides():
    assert (
        review(CustomerFactory(country_code="CM"), {"expiry_date": date(2026, 3, 26)}).review_status
        == "rejected"
    )
    assert (
        review(CustomerFactory(country_code="TG"), {"expiry_date": date(2026, 3, 26)}).review_status
        == "approved"
    )


def issue_date_errors(issued: str, country: str | None) -> dict:
    document = {
        "document_type": "national_id",
        "front_file_url": "https://f.test/id.png",
        "issue_date": issued,
    }
    if country:
        document["issue_country_code"] = country
    serializer = KycSubmitInput(data={"documents": [document]}, context={"at": LATE})
    serializer.is_valid()
    return serializer.errors


def test_a_document_issued_today_in_douala_is_not_in_the_future():
    assert issue_date_errors("2026-03-27", "CM") == {}
    assert issue_date_errors("2026-03-27", None) == {}  # today in one of the countries
    assert issue_date_errors("2026-03-27", "SN")["documents"][0]["issue_date"]
    assert issue_date_errors("2026-03-28", "CM")["documents"][0]["issue_date"]
    assert issue_date_errors("2026-03-28", None)["documents"][0]["issue_date"]
