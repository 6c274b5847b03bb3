"""The simulated KYC review through a real worker: docs/operations.md's KYC_REVIEW_DELAY_SECONDS."""

import pytest

from kyc.models import KycDocument, KycSubmission
from tests.kyc.test_kyc_fetch_and_review import document
from tests.worker import celery_worker, wait_until

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_the_review_comes_the_configured_delay_after_the_files_are_fetched(
    private_urls_allowed, file_server, customer, api, settings
):
    delay = 3
    env = {
        "KYC_REVIEW_DELAY_SECONDS": str(delay),
        "ALLOW_PRIVATE_NETWORK_URLS": "true",
        "MEDIA_ROOT": settings.MEDIA_ROOT,
    }
    with celery_worker(extra_env=env) as worker:
        response = api.post(
            f"/customers/{customer.id}/kyc",
            {"documents": [document(file_server.url("/id.png"))]},
            idempotency_key=None,
        )
        assert response.status_code == 201, response.content

        def reviewed() -> bool:
            assert worker.poll() is None, "the worker died"
            return api.get(f"/customers/{customer.id}/kyc").json()["kyc_status"] != "pending"

        assert wait_until(reviewed, timeout=90)

    assert api.get(f"/customers/{customer.id}/kyc").json()["kyc_status"] == "approved"
    fetched = KycDocument.objects.get(customer=customer).fetched_at
    submission = KycSubmission.objects.get(customer=customer)
    assert (submission.reviewed_at - fetched).total_seconds() >= delay
