"""What the dashboard refuses, and how: a message or a 403, never a 500, and never a write that
goes around a service."""

from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from kyc import status as kyc_status
from payments.ledger.adjustments import wallet_credit
from payments.models import Wallet
from tests.transfers.conftest import create_customer, create_quote, transfer_body
from transfers.models import Transfer
from webhooks.models import Delivery, Event, WebhookEndpoint
from webhooks.services.endpoints import endpoint_add, endpoint_set

pytestmark = pytest.mark.django_db


@pytest.fixture
def ops_client(db) -> Client:
    ops = get_user_model().objects.create_superuser("ops", "ops@example.com", "ops-password-long")
    client = Client()
    client.force_login(ops)
    return client


def test_a_sixth_webhook_endpoint_is_a_message_on_the_form_not_a_500(merchant, staff_client):
    for i in range(5):
        endpoint_add(merchant=merchant, url=f"https://h{i}.example.com/hook", now=timezone.now())
    owner = staff_client(merchant=merchant, role="owner")

    response = owner.post(
        "/admin/webhooks/webhookendpoint/add/",
        {"url": "https://h6.example.com/hook", "event_types": []},
        follow=True,
    )

    assert response.status_code == 200
    assert "at most 5 webhook endpoints" in response.content.decode()
    assert WebhookEndpoint.objects.filter(merchant=merchant).count() == 5


def test_the_statement_action_on_a_wallet_out_of_sight_is_a_message(
    merchant, other_merchant, staff_client
):
    wallet_credit(
        merchant=merchant, currency="XOF", amount=Decimal("1000"), reason="float", at=timezone.now()
    )
    wallet = Wallet.objects.get(merchant=merchant)
    intruder = staff_client(merchant=other_merchant, role="viewer")

    response = intruder.post(
        "/admin/payments/wallet/",
        {"action": "download_statement", "_selected_action": [str(wallet.pk)], "index": 0},
        follow=True,
    )

    assert response.status_code == 200
    assert "Select one of your wallets" in response.content.decode()


def test_transfers_events_and_deliveries_cannot_be_added_or_saved_even_by_ops(
    enabled_api, enabled_merchant, ops_client, django_capture_on_commit_callbacks
):
    """Saving such a page wrote back every column as read, over the state machine's moves."""
    customer = create_customer(
        enabled_api,
        address_line1="1 rue",
        city="Douala",
        occupation="trader",
        source_of_funds="salary",
    )
    quote = create_quote(enabled_api, customer_id=customer["id"])
    endpoint_set(merchant=enabled_merchant, url="https://93.184.216.34/hook", now=timezone.now())
    transfer_id = enabled_api.post("/transfers", transfer_body(quote, customer)).json()["id"]
    event = Event.objects.create(
        merchant=enabled_merchant,
        event_type="transfer.completed",
        data_type="transfer",
        data_id=transfer_id,
        payload={},
        created_at=timezone.now(),
    )
    delivery = Delivery.objects.create(
        event=event,
        endpoint=WebhookEndpoint.objects.get(merchant=enabled_merchant),
        status="succeeded",
        next_attempt_at=timezone.now(),
        delivered_at=timezone.now(),
        created_at=timezone.now(),
        updated_at=timezone.now(),
    )
    pages = [
        "/admin/transfers/transfer/add/",
        f"/admin/transfers/transfer/{transfer_id}/change/",
        f"/admin/webhooks/event/{event.pk}/change/",
        f"/admin/webhooks/delivery/{delivery.pk}/change/",
    ]
    assert ops_client.get(pages[0]).status_code == 403
    for page in pages[1:]:
        assert ops_client.get(page).status_code == 200  # still shown, read only
        assert ops_client.post(page, {}).status_code == 403
    assert Transfer.objects.get(pk=transfer_id).status == "pending"
    delivery.refresh_from_db()
    assert delivery.status == "succeeded"


def test_customers_are_not_added_in_the_dashboard(ops_client):
    assert ops_client.get("/admin/customers/customer/add/").status_code == 403


def test_saving_a_customer_in_the_dashboard_writes_only_what_the_form_changed(
    merchant, ops_client, monkeypatch
):
    """A whole-row save wrote back kyc_status as read: a review decided while the form was
    posted was undone, with no history row for that move."""
    from django.urls import reverse

    from customers.admin import CustomerAdmin
    from kyc.models import KycStatusChange
    from tests.factories import CustomerFactory

    customer = CustomerFactory(merchant=merchant)
    kyc_status.customer_kyc_transition(customer_id=customer.id, to="pending", at=timezone.now())
    url = reverse("admin:customers_customer_change", args=[customer.pk])
    form = ops_client.get(url).context["adminform"].form
    data = {key: ("" if value is None else value) for key, value in form.initial.items()}
    data["city"] = "Dakar"
    for prefix in ("kyc_documents", "kyc_status_changes"):
        data.update({f"{prefix}-TOTAL_FORMS": "0", f"{prefix}-INITIAL_FORMS": "0"})
    get_object = CustomerAdmin.get_object

    def review_decides_meanwhile(self, request, object_id, from_field=None):
        customer_read = get_object(self, request, object_id, from_field)
        if request.method == "POST":
            kyc_status.customer_kyc_transition(
                customer_id=customer.id, to="approved", at=timezone.now()
            )
        return customer_read

    monkeypatch.setattr(CustomerAdmin, "get_object", review_decides_meanwhile)
    assert ops_client.post(url, data).status_code == 302

    customer.refresh_from_db()
    assert customer.city == "Dakar"
    assert customer.kyc_status == "approved"
    assert KycStatusChange.objects.filter(customer=customer).latest("id").to_status == "approved"
