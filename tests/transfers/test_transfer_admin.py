from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from core.exceptions import DomainError
from merchants import services as merchant_services
from merchants.models import AuditLogEntry
from payments.ledger.discrepancies import provider_discrepancy_record
from payments.provider import sandbox_gateway
from payments.provider.simulator import SimulatorGateway
from tests.transfers.conftest import (
    SN_DECLINED,
    SN_SILENT,
    create_quote,
    ledger_is_clean,
    transfer_body,
)
from transfers.models import Transfer
from transfers.services.support import transfer_mark_disbursement_failed
from webhooks.models import Delivery, Event
from webhooks.services.endpoints import endpoint_add

pytestmark = pytest.mark.django_db

CHANGELIST = "admin:transfers_transfer_changelist"


def login(username: str, **assignment) -> Client:
    merchant_services.staff_user_create(username=username, password="pw-123456-staff", **assignment)
    client = Client()
    assert client.login(username=username, password="pw-123456-staff")
    return client


@pytest.fixture
def support():
    return login("support-agent", support=True)


def _past_leg_timeout(transfer: Transfer) -> None:
    due = timezone.now() - timedelta(seconds=1)
    Transfer.objects.filter(pk=transfer.pk).update(leg_timeout_at=due)


def make_transfer(api, customer, quote, run, **phones) -> Transfer:
    response = run(api.post, "/transfers", transfer_body(quote, customer, **phones))
    return Transfer.objects.get(pk=response.json()["id"])


def test_page_shows_legs_history_events_and_journals(support, enabled_api, customer, quote, run):
    transfer = make_transfer(enabled_api, customer, quote, run, recipient_phone=SN_DECLINED)

    page = support.get(reverse("admin:transfers_transfer_change", args=[transfer.pk]))

    assert page.status_code == 200
    html = page.content.decode()
    assert "transfer_collected" in html  # the journal
    assert "transfer_suspense" in html
    assert "10,000 XAF" in html  # held in suspense
    assert "transfer.payout.failed" in html  # the events
    assert "provider_declined" in html  # history / execution
    assert transfer.collection_reference in html
    assert transfer.disbursement_reference in html
    assert "+00:00" not in html  # legs, journals and events show times as ...T12:00:00Z


def test_support_relaunches_a_failed_payout_and_it_is_recorded(
    support, enabled_api, customer, quote, run
):
    transfer = make_transfer(enabled_api, customer, quote, run, recipient_phone=SN_DECLINED)

    with run.capture(execute=True):
        response = support.post(
            reverse(CHANGELIST),
            {"action": "relaunch_payout", "_selected_action": [str(transfer.pk)]},
        )

    assert response.status_code == 302
    transfer.refresh_from_db()
    assert transfer.disbursement_attempt == 2
    assert transfer.history.filter(reason="payout_relaunched").count() == 1
    entry = AuditLogEntry.objects.get(target=str(transfer.id))
    assert entry.action == "support.action"
    assert entry.actor.username == "support-agent"
    assert entry.detail["action"] == "transfer.relaunch_payout"
    assert entry.merchant_id == transfer.merchant_id
    assert ledger_is_clean()


def test_support_marks_a_stuck_disbursement_failed_and_it_is_recorded(
    support, enabled_api, customer, quote, run
):
    transfer = make_transfer(enabled_api, customer, quote, run, recipient_phone=SN_SILENT)
    assert transfer.status == "disbursing"
    mark_failed = {"action": "mark_disbursement_failed", "_selected_action": [str(transfer.pk)]}

    support.post(reverse(CHANGELIST), mark_failed)  # before its leg timeout: refused
    assert Transfer.objects.get(pk=transfer.pk).status == "disbursing"
    _past_leg_timeout(transfer)
    response = support.post(reverse(CHANGELIST), mark_failed)

    assert response.status_code == 302
    transfer.refresh_from_db()
    assert (transfer.status, transfer.payin_status, transfer.payout_status) == (
        "failed",
        "completed",
        "failed",
    )
    assert transfer.disbursement_failure_reason == "marked_failed_by_support"
    assert list(
        Event.objects.filter(data_id=transfer.id)
        .order_by("created_at")
        .values_list("event_type", flat=True)
    ) == ["transfer.payin.completed", "transfer.payout.failed"]
    entry = AuditLogEntry.objects.get(target=str(transfer.id))
    assert entry.actor.username == "support-agent"
    assert entry.detail["action"] == "transfer.mark_disbursement_failed"
    assert ledger_is_clean()


def test_support_action_refused_for_a_completed_transfer_changes_nothing(
    support, enabled_api, customer, quote, run
):
    transfer = make_transfer(enabled_api, customer, quote, run)
    assert transfer.status == "completed"

    for action in ("mark_disbursement_failed", "relaunch_payout"):
        response = support.post(
            reverse(CHANGELIST),
            {"action": action, "_selected_action": [str(transfer.pk)]},
            follow=True,
        )
        assert response.status_code == 200

    transfer.refresh_from_db()
    assert transfer.status == "completed"
    assert transfer.disbursement_attempt == 1
    assert not AuditLogEntry.objects.filter(target=str(transfer.id)).exists()
    assert ledger_is_clean()


def test_merchant_staff_see_only_their_transfers_and_cannot_run_support_actions(
    enabled_api, enabled_merchant, customer, quote, run
):
    transfer = make_transfer(enabled_api, customer, quote, run, recipient_phone=SN_DECLINED)
    owner = login("owner", merchant=enabled_merchant, role="owner")
    from tests.factories import MerchantFactory

    stranger = login("stranger", merchant=MerchantFactory(), role="owner")

    assert (
        owner.get(reverse("admin:transfers_transfer_change", args=[transfer.pk])).status_code == 200
    )
    assert (
        stranger.get(reverse("admin:transfers_transfer_change", args=[transfer.pk])).status_code
        == 404
    )
    owner.post(
        reverse(CHANGELIST), {"action": "relaunch_payout", "_selected_action": [str(transfer.pk)]}
    )
    transfer.refresh_from_db()
    assert transfer.disbursement_attempt == 1


@sandbox_gateway("transfers-support-clicks-during-the-call")
class SupportClicksDuringTheCallGateway(SimulatorGateway):
    """The simulator, slow to take a disbursement (past the leg timeout before it is taken),
    with support marking it failed meanwhile."""

    refusals: list[Exception] = []

    def submit_disbursement(self, **kwargs):
        transfer = Transfer.objects.get(pk=kwargs["reference"].split(":")[0])
        _past_leg_timeout(transfer)
        support = get_user_model().objects.get(username="support-agent")
        try:
            transfer_mark_disbursement_failed(
                transfer_id=transfer.pk, actor=support, now=timezone.now()
            )
        except DomainError as refused:
            self.refusals.append(refused)
        return super().submit_disbursement(**kwargs)


def test_a_disbursement_on_its_way_to_the_provider_cannot_be_marked_failed(
    support, enabled_api, customer, quote, run, settings
):
    settings.PAYMENTS_PROVIDER_GATEWAY = "transfers-support-clicks-during-the-call"
    SupportClicksDuringTheCallGateway.refusals.clear()

    transfer = make_transfer(enabled_api, customer, quote, run)

    assert len(SupportClicksDuringTheCallGateway.refusals) == 1
    assert (transfer.status, transfer.disbursement_attempt) == ("completed", 1)
    assert not AuditLogEntry.objects.filter(target=str(transfer.id)).exists()
    assert ledger_is_clean()


def test_the_transfer_page_links_each_event_to_its_deliveries_in_fixed_queries(
    support,
    enabled_api,
    enabled_merchant,
    customer,
    quote,
    run,
    receiver,
    webhook_settings,
    django_assert_max_num_queries,
):
    """Each event on the transfer's page links to its own page (every attempt, the answers,
    re-send) and shows each endpoint's delivery: the page listed the event's type and id only."""
    for n in range(2):
        endpoint_add(merchant=enabled_merchant, url=f"{receiver.url}?n={n}", now=timezone.now())
    transfer = make_transfer(enabled_api, customer, quote, run, recipient_phone=SN_DECLINED)
    events = list(Event.objects.filter(data_id=transfer.id))
    assert len(events) == 2  # transfer.payin.completed, transfer.payout.failed
    deliveries = list(Delivery.objects.filter(event__in=events))
    assert len(deliveries) == 4

    # its discrepancies (support), its attempts; the header's timeline reads the history, the
    # admin log and the second factor's check besides: fixed, whatever the events
    with django_assert_max_num_queries(23):
        page = support.get(reverse("admin:transfers_transfer_change", args=[transfer.pk]))

    html = page.content.decode()
    for event in events:
        assert reverse("admin:webhooks_event_change", args=[event.pk]) in html
    for delivery in deliveries:
        assert reverse("admin:webhooks_delivery_change", args=[delivery.pk]) in html
    assert html.count("succeeded, 1 attempt(s)") == 4


def test_the_transfer_page_shows_support_its_provider_discrepancies(
    support, enabled_api, enabled_merchant, customer, quote, run, staff_client
):
    """A superseded disbursement attempt that paid after all: support reaches the
    discrepancy from the transfer's page; merchant staff do not see the reconciliation queue."""
    transfer = make_transfer(enabled_api, customer, quote, run, recipient_phone=SN_DECLINED)
    discrepancy = provider_discrepancy_record(
        merchant=transfer.merchant,
        resource_type="transfer_disbursement",
        resource_id=transfer.id,
        reference=f"{transfer.id}:1",
        provider_reference="SIM-paid-after-all",
        outcome="completed",
        reason="",
        our_status="superseded",
        at=timezone.now(),
    )
    link = reverse("admin:payments_providerdiscrepancy_change", args=[discrepancy.pk])
    page = reverse("admin:transfers_transfer_change", args=[transfer.pk])

    html = support.get(page).content.decode()
    assert link in html
    assert "SIM-paid-after-all" in html and "superseded" in html

    owner = staff_client(merchant=enabled_merchant, role="owner").get(page)
    assert owner.status_code == 200
    assert link not in owner.content.decode()


def test_support_buttons_show_only_where_they_can_act(support, enabled_api, customer, run):
    def buttons(transfer: Transfer) -> set[str]:
        change = reverse("admin:transfers_transfer_change", args=[transfer.pk])
        html = support.get(change).content.decode()
        return {path for path in ("relaunch", "mark-failed", "return-funds") if f"/{path}/" in html}

    def transfer(**phones) -> Transfer:
        quote = create_quote(enabled_api, customer_id=customer["id"])
        return make_transfer(enabled_api, customer, quote, run, **phones)

    completed = transfer()
    assert completed.status == "completed"
    assert buttons(completed) == set()
    relaunch = reverse("admin:transfers_transfer_relaunch_payout_detail", args=[completed.pk])
    assert support.get(relaunch).status_code == 403  # no confirmation page claiming a payout

    failed = transfer(recipient_phone=SN_DECLINED)
    assert buttons(failed) == {"relaunch", "return-funds"}

    stuck = transfer(recipient_phone=SN_SILENT)
    assert buttons(stuck) == set()  # in flight, before its leg timeout
    _past_leg_timeout(stuck)
    assert buttons(stuck) == {"mark-failed"}
