from datetime import timedelta
from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from merchants import services as merchant_services
from merchants.models import AuditLogEntry
from payments.ledger.checks import ledger_breaches
from payments.models import Payout, ProviderDiscrepancy
from payments.provider import sandbox_gateway
from payments.provider.simulator import SimulatorGateway
from payments.services.payouts import (
    PayoutNotStuck,
    payout_apply_provider_result,
    payout_mark_failed,
)
from tests.payments.conftest import (
    DECLINED_PHONE,
    SILENT_PHONE,
    create_quote,
    fund,
    payin_body,
    payout_body,
)
from tests.support import wallet_balance
from webhooks.models import Delivery, Event
from webhooks.services.endpoints import endpoint_add

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client):
    user = get_user_model().objects.create_superuser("root", "root@example.com", "pw")
    client.force_login(user)
    return client


def test_payment_and_ledger_admin_pages_render_read_only(
    admin_client, enabled_api, enabled_merchant, customer, django_capture_on_commit_callbacks
):
    fund(enabled_merchant, "50000")
    with django_capture_on_commit_callbacks(execute=True):
        payin = enabled_api.post(
            "/payins", payin_body(create_quote(enabled_api, "payin"), customer)
        ).json()
        payout = enabled_api.post(
            "/payouts", payout_body(create_quote(enabled_api, "payout"), customer)
        ).json()
    pages = [
        "/admin/payments/payin/",
        f"/admin/payments/payin/{payin['id']}/change/",
        "/admin/payments/payout/",
        f"/admin/payments/payout/{payout['id']}/change/",
        "/admin/payments/wallet/",
        "/admin/payments/journal/",
        "/admin/payments/journalline/",
        "/admin/payments/ledgeraccount/",
    ]
    for page in pages:
        response = admin_client.get(page)
        assert response.status_code == 200, page
    assert admin_client.get("/admin/payments/payin/add/").status_code == 403
    detail = admin_client.get(f"/admin/payments/payin/{payin['id']}/change/").content.decode()
    assert "provider_declined" not in detail
    assert "completed" in detail


def _support_client():
    merchant_services.staff_user_create(
        username="support-agent", password="pw-123456-staff", support=True
    )
    client = Client()
    assert client.login(username="support-agent", password="pw-123456-staff")
    return client


def _pending_payout(api, customer, capture, *, past_timeout: bool = True) -> dict:
    """A payout the provider received and never answers (the sandbox's silent recipient),
    past its provider timeout unless told otherwise."""
    with capture(execute=True):
        payout = api.post(
            "/payouts", payout_body(create_quote(api, "payout"), customer, SILENT_PHONE)
        ).json()
    assert api.get(f"/payouts/{payout['id']}").json()["status"] == "pending"
    if past_timeout:
        due = timezone.now() - timedelta(seconds=1)
        Payout.objects.filter(pk=payout["id"]).update(provider_timeout_at=due)
    return payout


def _mark_failed(client, payout_id: str):
    return client.post(
        "/admin/payments/payout/", {"action": "mark_failed", "_selected_action": [payout_id]}
    )


def test_support_marks_a_stuck_payout_failed_its_reserve_released_and_recorded(
    enabled_api, enabled_merchant, customer, django_capture_on_commit_callbacks
):
    fund(enabled_merchant, "50000")
    payout = _pending_payout(enabled_api, customer, django_capture_on_commit_callbacks)
    assert wallet_balance(merchant=enabled_merchant, currency="XOF")[1] > 0

    with django_capture_on_commit_callbacks(execute=True):
        assert _mark_failed(_support_client(), payout["id"]).status_code == 302

    body = enabled_api.get(f"/payouts/{payout['id']}").json()
    assert (body["status"], body["history"][-1]["reason"]) == ("failed", "marked_failed_by_support")
    assert wallet_balance(merchant=enabled_merchant, currency="XOF") == (
        Decimal("50000"),
        Decimal("0"),
    )
    events = Event.objects.filter(data_id=payout["id"]).values_list("event_type", flat=True)
    assert list(events) == ["payout.failed"]
    entry = AuditLogEntry.objects.get(target=payout["id"])
    assert (entry.action, entry.actor.username) == ("support.action", "support-agent")
    assert entry.detail == {"action": "payout.mark_failed"}
    assert ledger_breaches() == []

    # the provider pays after all: nothing moves, support sees it to reconcile
    payout_apply_provider_result(
        reference=payout["id"],
        provider_reference="SIM-late",
        outcome="completed",
        reason="",
        at=timezone.now(),
    )
    assert enabled_api.get(f"/payouts/{payout['id']}").json()["status"] == "failed"
    assert ProviderDiscrepancy.objects.filter(resource_id=payout["id"]).count() == 1
    assert ledger_breaches() == []


def test_marking_failed_is_refused_for_a_final_payout_and_for_merchant_staff(
    enabled_api, enabled_merchant, customer, django_capture_on_commit_callbacks
):
    fund(enabled_merchant, "50000")
    with django_capture_on_commit_callbacks(execute=True):
        completed = enabled_api.post(
            "/payouts", payout_body(create_quote(enabled_api, "payout"), customer)
        ).json()
    pending = _pending_payout(enabled_api, customer, django_capture_on_commit_callbacks)
    balance = wallet_balance(merchant=enabled_merchant, currency="XOF")

    support = _support_client()
    refused = support.post(
        "/admin/payments/payout/",
        {"action": "mark_failed", "_selected_action": [completed["id"]]},
        follow=True,
    )
    assert "Only a payout stuck at the provider" in refused.content.decode()
    merchant_services.staff_user_create(
        username="owner", password="pw-123456-staff", merchant=enabled_merchant, role="owner"
    )
    owner = Client()
    assert owner.login(username="owner", password="pw-123456-staff")
    _mark_failed(owner, pending["id"])

    statuses = [
        enabled_api.get(f"/payouts/{p['id']}").json()["status"] for p in (completed, pending)
    ]
    assert statuses == ["completed", "pending"]
    assert wallet_balance(merchant=enabled_merchant, currency="XOF") == balance
    assert not AuditLogEntry.objects.filter(action="support.action").exists()


def test_marking_failed_is_refused_before_the_timeout_and_while_the_provider_is_being_called(
    enabled_api, enabled_merchant, customer, django_capture_on_commit_callbacks, settings
):
    fund(enabled_merchant, "50000")
    support = _support_client()
    recent = _pending_payout(
        enabled_api, customer, django_capture_on_commit_callbacks, past_timeout=False
    )
    _mark_failed(support, recent["id"])
    assert enabled_api.get(f"/payouts/{recent['id']}").json()["status"] == "pending"

    # a click while the submitter is calling the provider (no reference stored yet): releasing
    # the reserve then would let the provider pay an unfunded payout
    settings.PAYMENTS_PROVIDER_GATEWAY = "support-clicks-during-the-call"
    SupportClicksDuringTheCallGateway.refusals.clear()
    with django_capture_on_commit_callbacks(execute=True):
        in_flight = enabled_api.post(
            "/payouts", payout_body(create_quote(enabled_api, "payout"), customer)
        ).json()
    assert [type(error) for error in SupportClicksDuringTheCallGateway.refusals] == [PayoutNotStuck]
    assert enabled_api.get(f"/payouts/{in_flight['id']}").json()["status"] == "completed"
    assert not AuditLogEntry.objects.filter(action="support.action").exists()
    assert not ProviderDiscrepancy.objects.exists()
    assert ledger_breaches() == []


@sandbox_gateway("support-clicks-during-the-call")
class SupportClicksDuringTheCallGateway(SimulatorGateway):
    """The simulator, slow to take a payout (past its timeout before it is taken), with
    support marking it failed meanwhile."""

    refusals: list[Exception] = []

    def submit_disbursement(self, **kwargs):
        slow = timezone.now() - timedelta(seconds=1)
        Payout.objects.filter(pk=kwargs["reference"]).update(provider_timeout_at=slow)
        support = get_user_model().objects.get(username="support-agent")
        try:
            payout_mark_failed(payout_id=kwargs["reference"], actor=support, now=timezone.now())
        except PayoutNotStuck as refused:
            self.refusals.append(refused)
        return super().submit_disbursement(**kwargs)


def test_support_sees_a_payments_history_and_its_events_with_every_delivery(
    enabled_api,
    enabled_merchant,
    customer,
    receiver,
    webhook_settings,
    django_capture_on_commit_callbacks,
    django_assert_max_num_queries,
):
    """ "Did you send us payout.failed?": the payout's page lists its events, each linked to its
    page (every attempt, the answers, re-send), with each endpoint's delivery, in a fixed
    number of queries whatever the number of endpoints."""
    for n in range(3):
        endpoint_add(merchant=enabled_merchant, url=f"{receiver.url}?n={n}", now=timezone.now())
    fund(enabled_merchant, "50000")
    with django_capture_on_commit_callbacks(execute=True):
        payout = enabled_api.post(
            "/payouts", payout_body(create_quote(enabled_api, "payout"), customer, DECLINED_PHONE)
        ).json()
    event = Event.objects.get(data_id=payout["id"])
    deliveries = list(Delivery.objects.filter(event=event))
    assert len(deliveries) == 3
    support = _support_client()
    # the second factor's check and the page's action buttons' permission are two of them;
    # the header's timeline reads the history and the admin log besides
    with django_assert_max_num_queries(18):
        page = support.get(f"/admin/payments/payout/{payout['id']}/change/")

    assert page.status_code == 200
    html = page.content.decode()
    assert "provider_declined" in html  # the history, shown to support
    assert reverse("admin:webhooks_event_change", args=[event.pk]) in html
    for delivery in deliveries:
        assert reverse("admin:webhooks_delivery_change", args=[delivery.pk]) in html
    assert html.count("succeeded, 1 attempt(s)") == 3


def test_a_payouts_page_shows_support_its_provider_discrepancy_and_merchant_staff_nothing(
    enabled_api, enabled_merchant, customer, django_capture_on_commit_callbacks
):
    """A payout failed by support that the provider paid after all: its page links support to
    the discrepancy to reconcile; merchant staff do not see the reconciliation queue."""
    fund(enabled_merchant, "50000")
    payout = _pending_payout(enabled_api, customer, django_capture_on_commit_callbacks)
    support = _support_client()
    with django_capture_on_commit_callbacks(execute=True):
        _mark_failed(support, payout["id"])
    payout_apply_provider_result(
        reference=payout["id"],
        provider_reference="SIM-late",
        outcome="completed",
        reason="",
        at=timezone.now(),
    )
    discrepancy = ProviderDiscrepancy.objects.get(resource_id=payout["id"])
    link = reverse("admin:payments_providerdiscrepancy_change", args=[discrepancy.pk])
    page = f"/admin/payments/payout/{payout['id']}/change/"

    html = support.get(page).content.decode()
    assert link in html
    assert "SIM-late" in html and "open" in html

    merchant_services.staff_user_create(
        username="owner", password="pw-123456-staff", merchant=enabled_merchant, role="owner"
    )
    owner = Client()
    assert owner.login(username="owner", password="pw-123456-staff")
    shown = owner.get(page)
    assert shown.status_code == 200
    assert link not in shown.content.decode()
    assert "Provider discrepancies" not in shown.content.decode()


def test_the_mark_failed_button_shows_only_on_a_stuck_payout(
    enabled_api, enabled_merchant, customer, django_capture_on_commit_callbacks
):
    fund(enabled_merchant, "50000")
    support = _support_client()
    recent = _pending_payout(
        enabled_api, customer, django_capture_on_commit_callbacks, past_timeout=False
    )
    stuck = _pending_payout(enabled_api, customer, django_capture_on_commit_callbacks)

    def page(payout: dict) -> str:
        return support.get(f"/admin/payments/payout/{payout['id']}/change/").content.decode()

    assert "/mark-failed/" not in page(recent)
    assert support.get(f"/admin/payments/payout/{recent['id']}/mark-failed/").status_code == 403
    assert "/mark-failed/" in page(stuck)
