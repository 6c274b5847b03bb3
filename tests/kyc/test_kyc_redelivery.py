"""KYC tasks delivered twice at once (acks_late redelivery of a worker that died, two beats'
stalled-KYC sweeps): the document is fetched once, the submission reviewed once, and the
customer's kyc_status moves once.

Real threads on their own connections run the task bodies at the same moment (a barrier);
the files come from a real local HTTP server."""

from datetime import timedelta

import pytest
from django.core.files.storage import default_storage
from django.utils import timezone

from kyc import services, tasks
from kyc import status as kyc_status
from kyc.models import KycDocument, KycStatusChange, KycSubmission
from tests.factories import CustomerFactory
from tests.locks import at_once

pytestmark = pytest.mark.django_db(transaction=True)

RUNS = 3


def _submission(customer, url: str, *, at, status: str = "uploaded") -> KycSubmission:
    """A submission as kyc_submit leaves it (customer pending), whose fetch and review
    messages have not run yet: the test delivers them."""
    submission = KycSubmission.objects.create(customer=customer, number=1, created_at=at)
    KycDocument.objects.create(
        submission=submission,
        customer=customer,
        document_type="passport",
        front_file_url=url,
        status=status,
        created_at=at,
    )
    kyc_status.customer_kyc_transition(
        customer_id=customer.id,
        to="pending",
        reason="submission #1",
        at=at,
        submission_id=submission.id,
    )
    return submission


def _outcome(customer) -> tuple[str, list[tuple[str, str]]]:
    customer.refresh_from_db()
    moves = KycStatusChange.objects.filter(customer=customer).order_by("id")
    return customer.kyc_status, list(moves.values_list("from_status", "to_status"))


def test_a_fetch_delivered_three_times_at_once_stores_one_file_and_approves_once(
    file_server, private_urls_allowed
):
    customer = CustomerFactory()
    submission = _submission(customer, file_server.url("/id.png"), at=timezone.now())
    document = submission.documents.get()

    at_once(lambda: tasks.fetch_kyc_document(document_id=str(document.id)), RUNS)

    document.refresh_from_db()
    assert document.status == "fetched"
    directory = f"kyc/{customer.id}/{document.id}"
    assert default_storage.listdir(directory)[1] == [document.front_file.name.split("/")[-1]]
    submission.refresh_from_db()
    assert submission.outcome == "approved"
    assert _outcome(customer) == (
        "approved",
        [("not_started", "pending"), ("pending", "approved")],
    )


def test_a_review_delivered_three_times_at_once_decides_once():
    customer = CustomerFactory()
    submission = _submission(
        customer, "https://files.example/id.png", at=timezone.now(), status="fetched"
    )

    at_once(lambda: tasks.review_kyc_submission(submission_id=str(submission.id)), RUNS)

    submission.refresh_from_db()
    assert submission.outcome == "approved"
    assert _outcome(customer) == (
        "approved",
        [("not_started", "pending"), ("pending", "approved")],
    )


def test_a_review_after_a_decision_by_hand_leaves_the_status_support_set(django_user_model):
    customer = CustomerFactory()
    submission = _submission(
        customer, "https://files.example/id.png", at=timezone.now(), status="fetched"
    )
    support = django_user_model.objects.create_user("support", is_staff=True)
    services.kyc_decide_by_hand(
        customer_id=customer.id, approve=False, user=support, at=timezone.now()
    )

    at_once(lambda: tasks.review_kyc_submission(submission_id=str(submission.id)), RUNS)

    submission.refresh_from_db()
    assert submission.outcome == "approved"  # the documents get their review
    assert _outcome(customer) == (
        "rejected",
        [("not_started", "pending"), ("pending", "rejected")],
    )


def test_stalled_sweeps_of_two_beats_at_once_finish_the_submission_once(
    file_server, private_urls_allowed
):
    customer = CustomerFactory()
    submission = _submission(
        customer, file_server.url("/id.png"), at=timezone.now() - timedelta(minutes=3)
    )

    at_once(lambda: services.kyc_resume_stalled(now=timezone.now()), RUNS)

    submission.refresh_from_db()
    assert submission.outcome == "approved"
    assert _outcome(customer) == (
        "approved",
        [("not_started", "pending"), ("pending", "approved")],
    )
    assert services.kyc_resume_stalled(now=timezone.now()) == 0
