"""Support applies a provider's late "completed" to a failed transfer disbursement (the
provider paid the recipient after we had failed the attempt): the transfer completes as the
answer would have completed it, once, and a relaunch can no longer pay the recipient twice."""

import json
import threading
import uuid
from datetime import timedelta
from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

from merchants import services as merchant_services
from merchants.models import AuditLogEntry
from payments import provider
from payments.ledger.discrepancies import provider_discrepancy_resolve
from payments.ledger.journals import account_balances
from payments.models import Journal, ProviderDiscrepancy
from tests.dashboard.conftest import late_completion
from tests.transfers.conftest import (
    SENDER_DETAILS,
    SN_DECLINED,
    SN_SILENT,
    create_customer,
    create_quote,
    ledger_is_clean,
    transfer_body,
)
from transfers import selectors
from transfers.models import Transfer, TransferHistory
from transfers.services.submission import DISBURSEMENT_CALLBACK, disbursement_reference
from transfers.services.support import (
    ProviderCompletionNotApplicable,
    transfer_apply_provider_completion,
    transfer_mark_disbursement_failed,
)
from transfers.services.sweeps import transfers_fail_timed_out
from webhooks.models import Event
from webhooks.services.endpoints import endpoint_set
from webhooks.services.sweeps import deliveries_send_due

pytestmark = pytest.mark.django_db

CHANGELIST = "/admin/payments/providerdiscrepancy/"
APPLY = "apply_provider_completion"
APPLIED = "provider_completion_applied_by_support"


def _late_answer(transfer: Transfer, *, attempt: int, outcome: str = "completed") -> None:
    """The provider's answer for `attempt` of the transfer, arriving now."""
    provider.deliver_answer(
        callback=DISBURSEMENT_CALLBACK,
        reference=disbursement_reference(transfer.id, attempt),
        provider_reference=f"SIM-late-{attempt}",
        outcome=outcome,
    )


def _time_out(transfer_id, run=None) -> int:
    """The leg's timeout passes and the sweep runs now: how many legs it failed."""
    Transfer.objects.filter(pk=transfer_id).update(
        leg_timeout_at=timezone.now() - timedelta(seconds=1)
    )
    sweep = transfers_fail_timed_out
    return run(sweep, now=timezone.now()) if run else sweep(now=timezone.now())


def _timed_out_then_paid(api, customer, quote, run) -> tuple[Transfer, ProviderDiscrepancy]:
    """A transfer whose disbursement the provider received but did not answer in time: the
    sweep failed it (provider_timeout), then the provider said it paid after all."""
    created = run(api.post, "/transfers", transfer_body(quote, customer, recipient_phone=SN_SILENT))
    transfer = Transfer.objects.get(pk=created.json()["id"])
    assert transfer.status == "disbursing" and transfer.disbursement_reference
    assert _time_out(transfer.id, run) == 1
    _late_answer(transfer, attempt=1)
    discrepancy = ProviderDiscrepancy.objects.get(resource_id=transfer.id)
    assert (discrepancy.provider_outcome, discrepancy.our_status) == ("completed", "failed")
    return Transfer.objects.get(pk=transfer.id), discrepancy


@pytest.fixture
def support(staff_client):
    return staff_client(support=True, username="support-agent")


@pytest.fixture
def paid_after_all(enabled_api, customer, quote, run) -> tuple[Transfer, ProviderDiscrepancy]:
    return _timed_out_then_paid(enabled_api, customer, quote, run)


def _apply(support, discrepancy: ProviderDiscrepancy, run) -> str:
    """Support selects the discrepancy and runs the action; returns the page it lands on."""
    with run.capture(execute=True):
        page = support.post(
            CHANGELIST, {"action": APPLY, "_selected_action": [str(discrepancy.pk)]}, follow=True
        )
    assert page.status_code == 200
    return page.content.decode()


def _observed(transfer_id) -> dict:
    """What the merchant, the ledger and support see of a transfer (if there is one)."""
    return {
        "transfer": Transfer.objects.filter(pk=transfer_id)
        .values(
            "status",
            "payin_status",
            "payout_status",
            "disbursement_attempt",
            "disbursement_reference",
            "disbursement_completed_at",
            "disbursement_failed_at",
            "updated_at",
        )
        .first(),
        "history": TransferHistory.objects.filter(transfer_id=transfer_id).count(),
        "events": Event.objects.filter(data_id=transfer_id).count(),
        "journals": Journal.objects.filter(resource_id=transfer_id).count(),
        "audit": AuditLogEntry.objects.filter(target=str(transfer_id)).count(),
        "discrepancies": list(
            ProviderDiscrepancy.objects.filter(resource_id=transfer_id)
            .order_by("reference")
            .values_list("reference", "resolved_at", "resolved_by")
        ),
    }


def _assert_refused(support, discrepancy, run, why: str) -> None:
    before = _observed(discrepancy.resource_id)
    resolved = ProviderDiscrepancy.objects.get(pk=discrepancy.pk).resolved_at

    page = _apply(support, discrepancy, run)

    assert why in page, page
    assert "completed with the provider&#x27;s answer" not in page
    assert _observed(discrepancy.resource_id) == before
    assert ProviderDiscrepancy.objects.get(pk=discrepancy.pk).resolved_at == resolved
    assert ledger_is_clean()


def _sent(receiver_requests) -> list[tuple[str, dict]]:
    return [(r.headers["X-Cowry-Event"], json.loads(r.body)) for r in receiver_requests]


def _deliver_all() -> None:
    while deliveries_send_due(now=timezone.now()).attempted:
        pass


def test_support_applies_a_late_completion_and_the_merchant_sees_the_transfer_completed(
    support, enabled_api, enabled_merchant, customer, quote, run, receiver, webhook_settings
):
    endpoint_set(merchant=enabled_merchant, url=receiver.url, now=timezone.now())
    transfer, discrepancy = _timed_out_then_paid(enabled_api, customer, quote, run)
    _deliver_all()
    already_sent = len(receiver.requests)
    balances = enabled_api.get("/balances").json()
    assert selectors.transfer_suspense_held(transfer=transfer) == Decimal("10000")

    page = _apply(support, discrepancy, run)
    _deliver_all()

    assert f"Transfer {transfer.id} completed with the provider&#x27;s answer." in page
    body = enabled_api.get(f"/transfers/{transfer.id}").json()
    assert (body["status"], body["payin_status"], body["payout_status"]) == (
        "completed",
        "completed",
        "completed",
    )
    assert [(h["status"], h["reason"]) for h in body["history"]][-2:] == [
        ("failed", "provider_timeout"),
        ("completed", APPLIED),
    ]
    execution = body["execution"]
    assert execution["disbursement_completed_at"] is not None
    assert execution["disbursement_failed_at"] is None
    assert execution["disbursement_reference"] == transfer.disbursement_reference
    # Both events once, delivered over the socket, with the completed transfer.
    sent = _sent(receiver.requests[already_sent:])
    assert sorted(name for name, _ in sent) == ["transfer.completed", "transfer.payout.completed"]
    for _name, envelope in sent:
        assert envelope["data"]["id"] == str(transfer.id)
        assert envelope["data"]["object"]["status"] == "completed"
        assert envelope["data"]["object"]["payout_status"] == "completed"
        assert envelope["data"]["object"]["disbursement_failed_at"] is None
    assert [
        e["event"] for e in enabled_api.get("/events", data_id=str(transfer.id)).json()["data"]
    ][:2] == ["transfer.completed", "transfer.payout.completed"]
    # The journals of a completed disbursement, once; the suspense empty; the wallet untouched.
    assert selectors.transfer_suspense_held(transfer=transfer) == 0
    assert account_balances(merchant=enabled_merchant, currency="XAF") == {
        "provider_clearing:CM_MTN_MOMO": Decimal("-10000"),
        "transfer_suspense": Decimal("0"),
        "fee_revenue": Decimal("200"),
        "fx_conversion": Decimal("9800"),
    }
    assert account_balances(merchant=enabled_merchant, currency="XOF") == {
        "fx_conversion": Decimal("-9800"),
        "provider_clearing:SN_WAVE_MOMO": Decimal("9800"),
    }
    assert enabled_api.get("/balances").json() == balances
    assert ledger_is_clean()
    # The reconciliation queue and the audit log say who did it.
    discrepancy.refresh_from_db()
    assert discrepancy.resolved_at is not None
    assert discrepancy.resolved_by == "support-agent"
    entry = AuditLogEntry.objects.get(target=str(transfer.id))
    assert (entry.action, entry.actor.username) == ("support.action", "support-agent")
    assert entry.detail["action"] == "transfer.provider_completion_applied"
    assert entry.detail["discrepancy"] == str(discrepancy.id)


def test_a_relaunch_after_the_completion_was_applied_is_refused(
    support, enabled_api, paid_after_all, run
):
    transfer, discrepancy = paid_after_all
    _apply(support, discrepancy, run)

    response = enabled_api.post(f"/transfers/{transfer.id}/relaunch-payout")

    assert response.status_code == 409, response.json()
    assert response.json()["error"]["reason"] == "transfer_not_relaunchable"
    after = Transfer.objects.get(pk=transfer.id)
    assert (after.status, after.disbursement_attempt) == ("completed", 1)
    assert ledger_is_clean()


def test_a_lowered_relaunch_marked_failed_then_paid_credits_the_difference_to_the_wallet(
    support, enabled_api, enabled_merchant, customer, quote, run
):
    """Attempt 2 (lowered to 9000 of 9800) was stuck, marked failed by support, then the
    provider said it paid: the 800 not paid out goes to the merchant's wallet, as it would
    have at a normal completion."""
    created = run(
        enabled_api.post, "/transfers", transfer_body(quote, customer, recipient_phone=SN_DECLINED)
    )
    transfer_id = created.json()["id"]
    relaunched = run(
        enabled_api.post,
        f"/transfers/{transfer_id}/relaunch-payout",
        {
            "payout_amount": "9000",
            "recipient": {"first_name": "Moussa", "last_name": "Ndiaye", "phone": SN_SILENT},
        },
    )
    assert relaunched.status_code == 202, relaunched.json()
    transfer = Transfer.objects.get(pk=transfer_id)
    assert (transfer.status, transfer.disbursement_attempt) == ("disbursing", 2)
    Transfer.objects.filter(pk=transfer_id).update(
        leg_timeout_at=timezone.now() - timedelta(seconds=1)
    )  # stuck at the provider
    transfer_mark_disbursement_failed(
        transfer_id=transfer.id,
        actor=get_user_model().objects.get(username="support-agent"),
        now=timezone.now(),
    )
    _late_answer(transfer, attempt=2)
    discrepancy = ProviderDiscrepancy.objects.get(resource_id=transfer.id)

    _apply(support, discrepancy, run)

    body = enabled_api.get(f"/transfers/{transfer_id}").json()
    assert (body["status"], body["payout_amount"]) == ("completed", "9000")
    assert body["history"][-1]["reason"] == APPLIED
    xof = next(b for b in enabled_api.get("/balances").json()["data"] if b["currency"] == "XOF")
    assert xof["available"] == "800"
    assert account_balances(merchant=enabled_merchant, currency="XOF") == {
        "fx_conversion": Decimal("-9800"),
        "provider_clearing:SN_WAVE_MOMO": Decimal("9000"),
        "merchant_available": Decimal("800"),
    }
    assert selectors.transfer_suspense_held(transfer=transfer) == 0
    assert Event.objects.filter(data_id=transfer_id, event_type="transfer.completed").count() == 1
    assert ledger_is_clean()


# --- refusals: a clear message in the dashboard, nothing changed ---------------------------


def test_an_already_resolved_discrepancy_is_refused(support, paid_after_all, run):
    _transfer, discrepancy = paid_after_all
    provider_discrepancy_resolve(
        discrepancy_id=discrepancy.pk,
        actor=get_user_model().objects.get(username="support-agent"),
        now=timezone.now(),
    )

    _assert_refused(support, discrepancy, run, "already resolved by support-agent")


def test_a_discrepancy_that_is_not_a_completion_is_refused(
    support, enabled_api, customer, quote, run
):
    """The provider says "failed" for a disbursement we completed: nothing to apply."""
    created = run(enabled_api.post, "/transfers", transfer_body(quote, customer))
    transfer = Transfer.objects.get(pk=created.json()["id"])
    assert transfer.status == "completed"
    _late_answer(transfer, attempt=1, outcome="failed")
    discrepancy = ProviderDiscrepancy.objects.get(resource_id=transfer.id)

    _assert_refused(support, discrepancy, run, "not &quot;completed&quot;")


def test_a_discrepancy_about_another_resource_type_is_refused(support, enabled_merchant, run):
    discrepancy = late_completion(enabled_merchant, resource_type="payout")

    _assert_refused(
        support,
        discrepancy,
        run,
        "Only a transfer disbursement&#x27;s discrepancy can be applied; this one is about a "
        "payout: ops settle it with debit_wallet --discrepancy.",
    )


@pytest.fixture
def replaced_attempt_paid(
    enabled_api, customer, quote, run
) -> tuple[Transfer, ProviderDiscrepancy]:
    """Attempt 1 timed out and was relaunched; attempt 2 is with the provider (silent) when
    the provider says attempt 1 paid after all."""
    created = run(
        enabled_api.post, "/transfers", transfer_body(quote, customer, recipient_phone=SN_SILENT)
    )
    transfer = Transfer.objects.get(pk=created.json()["id"])
    assert _time_out(transfer.id, run) == 1
    assert run(enabled_api.post, f"/transfers/{transfer.id}/relaunch-payout").status_code == 202
    _late_answer(transfer, attempt=1)
    return Transfer.objects.get(pk=transfer.id), ProviderDiscrepancy.objects.get(
        resource_id=transfer.id
    )


def test_a_discrepancy_of_a_transfer_not_in_failed_payout_state_is_refused(
    support, replaced_attempt_paid, run
):
    transfer, discrepancy = replaced_attempt_paid
    assert (transfer.status, transfer.disbursement_attempt) == ("disbursing", 2)
    assert discrepancy.our_status == "superseded"

    _assert_refused(support, discrepancy, run, "this one is disbursing")


def test_an_answer_for_an_older_attempt_is_refused(support, replaced_attempt_paid, run):
    transfer, discrepancy = replaced_attempt_paid
    assert _time_out(transfer.id, run) == 1
    assert Transfer.objects.get(pk=transfer.id).status == "failed"  # attempt 2 timed out too

    _assert_refused(support, discrepancy, run, "not the current one")


def test_merchant_staff_cannot_apply_a_completion(staff_client, enabled_merchant, paid_after_all):
    transfer, discrepancy = paid_after_all
    owner = staff_client(merchant=enabled_merchant, role="owner")
    before = _observed(transfer.id)

    response = owner.post(CHANGELIST, {"action": APPLY, "_selected_action": [str(discrepancy.pk)]})

    assert response.status_code == 403
    assert _observed(transfer.id) == before


# --- races: real threads, each its own connection ------------------------------------------


def _setup_paid_after_all(api) -> tuple[Transfer, ProviderDiscrepancy]:
    customer = create_customer(api, **SENDER_DETAILS)
    quote = create_quote(api, customer_id=customer["id"])
    created = api.post("/transfers", transfer_body(quote, customer, recipient_phone=SN_SILENT))
    transfer = Transfer.objects.get(pk=created.json()["id"])
    assert transfer.status == "disbursing" and transfer.disbursement_reference
    assert _time_out(transfer.id) == 1
    _late_answer(transfer, attempt=1)
    return transfer, ProviderDiscrepancy.objects.get(resource_id=transfer.id)


def _agents(count: int) -> list:
    return [
        merchant_services.staff_user_create(
            username=f"agent-{i}", password="pw-123456-staff", support=True
        )
        for i in range(count)
    ]


def _in_threads(*work) -> None:
    barrier = threading.Barrier(len(work), timeout=60)

    def run(fn) -> None:
        try:
            barrier.wait()
            fn()
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(fn,)) for fn in work]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)


def _completed_once(transfer_id) -> None:
    transfer = Transfer.objects.get(pk=transfer_id)
    assert (transfer.status, transfer.payout_status, transfer.disbursement_attempt) == (
        "completed",
        "completed",
        1,
    )
    assert TransferHistory.objects.filter(transfer_id=transfer_id, reason=APPLIED).count() == 1
    for name in ("transfer.payout.completed", "transfer.completed"):
        assert Event.objects.filter(data_id=transfer_id, event_type=name).count() == 1, name
    assert sorted(
        Journal.objects.filter(resource_id=transfer_id).values_list("kind", flat=True)
    ) == ["transfer_collected", "transfer_disbursed", "transfer_settled"]
    assert selectors.transfer_suspense_held(transfer=transfer) == 0
    assert AuditLogEntry.objects.filter(target=str(transfer_id)).count() == 1
    assert ledger_is_clean()


@pytest.mark.django_db(transaction=True)
def test_racing_clicks_on_apply_complete_the_transfer_once(enabled_api):
    transfer, discrepancy = _setup_paid_after_all(enabled_api)
    agents = _agents(4)
    applied: list = []
    refused: list = []

    def click(agent):
        def apply() -> None:
            try:
                applied.append(
                    transfer_apply_provider_completion(
                        discrepancy_id=discrepancy.pk, actor=agent, now=timezone.now()
                    )
                )
            except ProviderCompletionNotApplicable as exc:
                refused.append(exc)

        return apply

    _in_threads(*(click(agent) for agent in agents))

    assert (len(applied), len(refused)) == (1, 3), refused
    _completed_once(transfer.id)
    assert ProviderDiscrepancy.objects.get(pk=discrepancy.pk).resolved_by == (
        AuditLogEntry.objects.get(target=str(transfer.id)).actor.username
    )


@pytest.mark.django_db(transaction=True)
def test_apply_racing_a_relaunch_and_the_provider_answering_again_has_one_winner(enabled_api):
    transfer, discrepancy = _setup_paid_after_all(enabled_api)
    [agent] = _agents(1)
    applied: list = []
    relaunched: list = []

    def apply() -> None:
        applied.append(
            transfer_apply_provider_completion(
                discrepancy_id=discrepancy.pk, actor=agent, now=timezone.now()
            )
        )

    def relaunch() -> None:
        client = APIClient()
        client.credentials(
            HTTP_X_API_KEY=enabled_api.api_key, HTTP_X_API_SECRET=enabled_api.api_secret
        )
        relaunched.append(
            client.post(
                f"/transfers/{transfer.id}/relaunch-payout",
                None,
                format="json",
                HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4()),
            )
        )

    def answer_again() -> None:
        _late_answer(transfer, attempt=1)

    _in_threads(apply, relaunch, relaunch, answer_again)

    assert len(applied) == 1
    assert [r.status_code for r in relaunched] == [409, 409], [r.json() for r in relaunched]
    for response in relaunched:
        assert response.json()["error"]["reason"] == "transfer_not_relaunchable"
    _completed_once(transfer.id)
    assert ProviderDiscrepancy.objects.filter(resource_id=transfer.id).count() == 1


@pytest.mark.django_db(transaction=True)
def test_apply_racing_mark_resolved_has_one_winner(enabled_api):
    """One agent applies the completion while another marks the discrepancy resolved (the
    provider did not pay after all): one of the two decisions is taken, never both."""
    transfer, discrepancy = _setup_paid_after_all(enabled_api)
    applier, resolver = _agents(2)
    outcomes: dict[str, object] = {}

    def apply() -> None:
        try:
            transfer_apply_provider_completion(
                discrepancy_id=discrepancy.pk, actor=applier, now=timezone.now()
            )
            outcomes["apply"] = True
        except ProviderCompletionNotApplicable:
            outcomes["apply"] = False

    def resolve() -> None:
        outcomes["resolve"] = provider_discrepancy_resolve(
            discrepancy_id=discrepancy.pk, actor=resolver, now=timezone.now()
        )

    _in_threads(apply, resolve)

    assert sorted(outcomes.values()) == [False, True], outcomes
    resolved_by = ProviderDiscrepancy.objects.get(pk=discrepancy.pk).resolved_by
    if outcomes["apply"]:
        assert resolved_by == applier.username
        _completed_once(transfer.id)
    else:
        assert resolved_by == resolver.username
        after = Transfer.objects.get(pk=transfer.id)
        assert (after.status, after.payout_status) == ("failed", "failed")
        assert selectors.transfer_suspense_held(transfer=after) == Decimal("10000")
        assert AuditLogEntry.objects.filter(target=str(transfer.id)).count() == 1
        assert ledger_is_clean()
