"""A submission whose fetch message was lost (broker down, worker killed) is finished by the
beat sweep, not left pending forever."""

from datetime import timedelta

import pytest
from django.utils import timezone

from kyc import services
from tests.kyc.test_kyc_fetch_and_review import document

pytestmark = pytest.mark.django_db


def test_lost_fetch_message_is_resumed_by_the_sweep(
    api, private_urls_allowed, file_server, customer, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False) as lost:
        response = api.post(
            f"/customers/{customer.id}/kyc",
            {"documents": [document(file_server.url("/id.png"))]},
            idempotency_key=None,
        )
    assert response.status_code == 201
    assert lost, "the fetch was to be enqueued after commit; here the message never left"
    assert services.kyc_resume_stalled(now=timezone.now()) == 0  # too recent to call stalled

    with django_capture_on_commit_callbacks(execute=True):
        resumed = services.kyc_resume_stalled(now=timezone.now() + timedelta(minutes=3))

    assert resumed == 1
    state = api.get(f"/customers/{customer.id}/kyc").json()
    assert state["kyc_status"] == "approved"
    assert state["documents"][0]["status"] == "fetched"
    assert services.kyc_resume_stalled(now=timezone.now() + timedelta(minutes=3)) == 0
