"""A submission whose fetch message was lost (broker down, worker killed) is finished by the
beat sweep, not left pending forever."""

from datetime import timedelta

import pytest
from django.utils import timezone

from kyc import services
from tests.kyc.test_kyc_fetch_and_review import document

pytestmark = pytest.mark.django_db


def test_a_fetch_lost_to_a_stopped_broker_is_resumed_by_the_sweep(
    api,
    private_urls_allowed,
    file_server,
    customer,
    broker_down,
    django_capture_on_commit_callbacks,
    caplog,
):
    """The submission is committed before its fetch is enqueued: a broker that is down then is
    a warning, not a 500 for a submission that exists, and the sweep sends the fetch later."""
    with broker_down(), django_capture_on_commit_callbacks(execute=True) as sent:
        response = api.post(
            f"/customers/{customer.id}/kyc",
            {"documents": [document(file_server.url("/id.png"))]},
            idempotency_key=None,
        )
    assert response.status_code == 201
    assert sent, "the fetch was enqueued after commit, into the stopped broker"
    assert "kyc.tasks.fetch_kyc_document" in caplog.text and "left to its sweep" in caplog.text
    assert api.get(f"/customers/{customer.id}/kyc").json()["kyc_status"] == "pending"
    assert services.kyc_resume_stalled(now=timezone.now()) == 0  # too recent to call stalled

    with django_capture_on_commit_callbacks(execute=True):
        resumed = services.kyc_resume_stalled(now=timezone.now() + timedelta(minutes=3))

    assert resumed == 1
    state = api.get(f"/customers/{customer.id}/kyc").json()
    assert state["kyc_status"] == "approved"
    assert state["documents"][0]["status"] == "fetched"
    assert services.kyc_resume_stalled(now=timezone.now() + timedelta(minutes=3)) == 0
