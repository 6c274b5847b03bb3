import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from kyc.models import KycDocument, KycStatusChange
from tests.kyc.conftest import PNG

pytestmark = pytest.mark.django_db


@pytest.fixture
def support_client(client):
    user = get_user_model().objects.create_superuser("support", password="pw")
    client.force_login(user)
    client.user = user
    return client


@pytest.fixture
def reviewed_customer(
    api, customer, file_server, private_urls_allowed, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        api.post(
            f"/customers/{customer.id}/kyc",
            {
                "documents": [
                    {
                        "document_type": "passport",
                        "front_file_url": file_server.url("/missing.png"),
                    },
                    {"document_type": "national_id", "front_file_url": file_server.url("/id.png")},
                ]
            },
            idempotency_key=None,
        )
    customer.refresh_from_db()
    assert customer.kyc_status == "rejected"
    return customer


def test_customer_page_shows_documents_history_and_file_links(support_client, reviewed_customer):
    page = support_client.get(
        reverse("admin:customers_customer_change", args=[reviewed_customer.pk])
    )

    assert page.status_code == 200
    html = page.content.decode()
    assert "fetch_failed" in html
    assert "front_file_url: http_status_404" in html
    stored = KycDocument.objects.get(customer=reviewed_customer, document_type="national_id")
    assert reverse("admin:kyc_kycdocument_file", args=[stored.pk, "front"]) in html


def test_stored_file_is_served_to_staff_only(client, support_client, reviewed_customer):
    stored = KycDocument.objects.get(customer=reviewed_customer, document_type="national_id")
    url = reverse("admin:kyc_kycdocument_file", args=[stored.pk, "front"])

    response = support_client.get(url)

    assert response.status_code == 200
    assert b"".join(response.streaming_content) == PNG
    assert response["Content-Type"] == "image/png"
    support_client.logout()
    assert client.get(url).status_code == 302  # to the admin login


def test_support_approves_by_hand_and_it_is_recorded(support_client, reviewed_customer):
    response = support_client.post(
        reverse("admin:customers_customer_changelist"),
        {"action": "approve_kyc_by_hand", "_selected_action": [str(reviewed_customer.pk)]},
    )

    assert response.status_code == 302
    reviewed_customer.refresh_from_db()
    assert reviewed_customer.kyc_status == "approved"
    change = KycStatusChange.objects.filter(customer=reviewed_customer).latest("id")
    assert (change.from_status, change.to_status) == ("rejected", "approved")
    assert change.changed_by == support_client.user


def test_support_action_refusing_an_impossible_move_changes_nothing(support_client, customer):
    response = support_client.post(
        reverse("admin:customers_customer_changelist"),
        {"action": "reject_kyc_by_hand", "_selected_action": [str(customer.pk)]},
        follow=True,
    )

    assert response.status_code == 200
    assert "cannot move from not_started to rejected" in response.content.decode()
    customer.refresh_from_db()
    assert customer.kyc_status == "not_started"
    assert not KycStatusChange.objects.filter(customer=customer).exists()


def test_a_decision_by_hand_on_a_customer_already_there_is_refused_not_counted(
    support_client, reviewed_customer
):
    """It used to say "KYC rejected by hand for 1 customer(s)" with nothing recorded."""
    changes = KycStatusChange.objects.filter(customer=reviewed_customer).count()
    response = support_client.post(
        reverse("admin:customers_customer_changelist"),
        {"action": "reject_kyc_by_hand", "_selected_action": [str(reviewed_customer.pk)]},
        follow=True,
    )

    shown = [str(message) for message in response.context["messages"]]
    assert not any("by hand for" in message for message in shown), shown
    assert any("already rejected" in message for message in shown), shown
    assert KycStatusChange.objects.filter(customer=reviewed_customer).count() == changes


def test_a_decision_by_hand_is_in_the_merchants_audit_log_once(support_client, reviewed_customer):
    """Every other support action is in the merchant's audit log; a KYC decision by hand was
    only on the customer's status history."""
    from merchants.models import AuditLogEntry

    for _ in range(2):  # a second click finds the decision made: refused, not recorded
        support_client.post(
            reverse("admin:customers_customer_changelist"),
            {"action": "approve_kyc_by_hand", "_selected_action": [str(reviewed_customer.pk)]},
        )

    entries = AuditLogEntry.objects.filter(merchant=reviewed_customer.merchant)
    assert [(e.actor, e.action, e.target, e.detail) for e in entries] == [
        (
            support_client.user,
            "support.action",
            str(reviewed_customer.pk),
            {"action": "kyc.approved_by_hand", "from": "rejected"},
        )
    ]
