"""Support returns the money collected for a transfer whose disbursement failed (and that the
merchant will not relaunch) to the merchant's wallet: once, in full, in the payin currency, and
the transfer can then never be relaunched or returned again."""

import csv
import io
import threading
import uuid
from datetime import timedelta
from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError
from django.db import connection, transaction
from django.db.models import Sum
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from config import worklist
from merchants import services as merchant_services
from merchants.models import AuditLogEntry
from payments import provider
from payments.ledger.accounts import MERCHANT_AVAILABLE
from payments.ledger.adjustments import wallet_credit
from payments.ledger.checks import ledger_check
from payments.ledger.discrepancies import provider_discrepancy_resolve
from payments.ledger.journals import account_balances
from payments.models import Journal, JournalLine, ProviderDiscrepancy
from tests.locks import start, waiting_for_a_lock
from tests.payments.adjustments import adjust, adjustment_state, ledger_clean
from tests.transfers.conftest import (
    CM_DECLINED,
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
from transfers.services.submission import (
    COLLECTION_CALLBACK,
    DISBURSEMENT_CALLBACK,
    disbursement_reference,
)
from transfers.services.support import (
    CollectedFundsNotReturnable,
    ProviderCompletionNotApplicable,
    transfer_apply_provider_completion,
    transfer_return_collected_funds,
)
from transfers.services.sweeps import transfers_fail_timed_out
from webhooks.models import Event

pytestmark = pytest.mark.django_db

CHANGELIST = "admin:transfers_transfer_changelist"
ACTION = "return_collected_funds"
RETURNED = "collected_funds_returned_by_support"


@pytest.fixture
def support(staff_client):
    return staff_client(support=True, username="support-agent")


def _agent(username: str = "support-agent"):
    return get_user_model().objects.get(username=username)


def _make(api, customer, quote, run, **phones) -> Transfer:
    created = run(api.post, "/transfers", transfer_body(quote, customer, **phones))
    assert created.status_code == 201, created.json()
    return Transfer.objects.get(pk=created.json()["id"])


@pytest.fixture
def failed_payout(enabled_api, customer, quote, run) -> Transfer:
    """10000 XAF collected from the payer; the disbursement (9800 XOF) declined."""
    transfer = _make(enabled_api, customer, quote, run, recipient_phone=SN_DECLINED)
    assert (transfer.status, transfer.payin_status, transfer.payout_status) == (
        "failed",
        "completed",
        "failed",
    )
    assert selectors.transfer_suspense_held(transfer=transfer) == Decimal("10000")
    return transfer


def _click(support, transfer: Transfer, run) -> str:
    """Support selects the transfer and runs the action; returns the page it lands on."""
    with run.capture(execute=True):
        page = support.post(
            reverse(CHANGELIST),
            {"action": ACTION, "_selected_action": [str(transfer.pk)]},
            follow=True,
        )
    assert page.status_code == 200
    return page.content.decode()


def _available(api, currency: str) -> str:
    return next(b for b in api.get("/balances").json()["data"] if b["currency"] == currency)[
        "available"
    ]


def _statement(api, currency: str) -> list[dict]:
    today = timezone.now().date().isoformat()
    response = api.get("/statements", **{"from": today, "to": today, "currency": currency})
    assert response.status_code == 200, response.content
    return list(csv.DictReader(io.StringIO(response.content.decode())))


def _observed(transfer_id) -> dict:
    """What the merchant, the ledger and support see of a transfer."""
    return {
        "transfer": Transfer.objects.filter(pk=transfer_id)
        .values(
            "status",
            "payin_status",
            "payout_status",
            "payout_amount",
            "disbursement_attempt",
            "updated_at",
        )
        .first(),
        "history": TransferHistory.objects.filter(transfer_id=transfer_id).count(),
        "events": Event.objects.filter(data_id=transfer_id).count(),
        "journals": sorted(
            Journal.objects.filter(resource_id=transfer_id).values_list("kind", flat=True)
        ),
        "audit": AuditLogEntry.objects.filter(target=str(transfer_id)).count(),
        "suspense": selectors.transfer_suspense_held(transfer=Transfer(pk=transfer_id)),
        "wallets": sorted(
            account_balances(
                merchant=Transfer.objects.get(pk=transfer_id).merchant, currency=currency
            ).get(MERCHANT_AVAILABLE, Decimal(0))
            for currency in ("XAF", "XOF")
        ),
    }


def _assert_refused(support, transfer: Transfer, run, why: str) -> None:
    before = _observed(transfer.id)

    page = _click(support, transfer, run)

    assert why in page, page
    assert "Collected funds returned" not in page
    assert _observed(transfer.id) == before
    assert ledger_is_clean()


# --- the return ----------------------------------------------------------------------------


def test_support_returns_the_collected_funds_and_the_merchant_sees_them_on_its_wallet(
    support, enabled_api, enabled_merchant, failed_payout, run
):
    transfer = failed_payout
    assert _available(enabled_api, "XAF") == "0"

    page = _click(support, transfer, run)

    assert "Collected funds returned to the merchant&#x27;s wallet for 1 transfer(s)." in page
    # The merchant: the transfer is failed for good, the money is on its wallet and statement.
    body = enabled_api.get(f"/transfers/{transfer.id}").json()
    assert (body["status"], body["payin_status"], body["payout_status"]) == (
        "failed",
        "completed",
        "cancelled",
    )
    assert (body["history"][-1]["status"], body["history"][-1]["reason"]) == ("failed", RETURNED)
    assert _available(enabled_api, "XAF") == "10000"  # in full: no fee was earned
    assert _available(enabled_api, "XOF") == "0"
    [line] = _statement(enabled_api, "XAF")
    assert (line["kind"], line["resource_type"], line["resource_id"]) == (
        "transfer_returned",
        "transfer",
        str(transfer.id),
    )
    assert (line["account"], line["amount"], line["fee"], line["balance_after"]) == (
        "merchant_available",
        "10000",
        "0",
        "10000",
    )
    assert line["provider_reference"] == transfer.collection_reference
    # One event: the transfer is final now, so its aggregate transfer.failed, once.
    events = enabled_api.get("/events", data_id=str(transfer.id)).json()["data"]
    assert [e["event"] for e in events] == [
        "transfer.failed",
        "transfer.payout.failed",
        "transfer.payin.completed",
    ]
    snapshot = Event.objects.get(data_id=transfer.id, event_type="transfer.failed").payload["data"][
        "object"
    ]
    assert (snapshot["status"], snapshot["payin_status"], snapshot["payout_status"]) == (
        "failed",
        "completed",
        "cancelled",
    )
    assert snapshot["failure_reason"] == "collected_funds_returned_by_support"
    # The ledger: the suspense emptied into the wallet, no fee, nothing in the payout currency.
    assert selectors.transfer_suspense_held(transfer=transfer) == 0
    assert account_balances(merchant=enabled_merchant, currency="XAF") == {
        "provider_clearing:CM_MTN_MOMO": Decimal("-10000"),
        "transfer_suspense": Decimal("0"),
        "merchant_available": Decimal("10000"),
    }
    assert account_balances(merchant=enabled_merchant, currency="XOF") == {}
    returned = Journal.objects.get(resource_id=transfer.id, kind="transfer_returned")
    assert returned.currency == "XAF"
    assert sorted((line.account.code, line.amount) for line in returned.lines.all()) == [
        ("merchant_available", Decimal("10000")),
        ("transfer_suspense", Decimal("-10000")),
    ]
    assert ledger_is_clean()
    # The audit log says who did it.
    entry = AuditLogEntry.objects.get(target=str(transfer.id))
    assert (entry.action, entry.actor.username, entry.merchant_id) == (
        "support.action",
        "support-agent",
        enabled_merchant.pk,
    )
    assert entry.detail["action"] == "transfer.collected_funds_returned"
    assert (entry.detail["amount"], entry.detail["currency"]) == ("10000", "XAF")


def test_the_transfer_page_shows_nothing_held_in_suspense_after_the_return(
    support, failed_payout, run
):
    actions = support.get(reverse(CHANGELIST)).content.decode()
    assert f'value="{ACTION}"' in actions
    assert "Return collected funds to merchant wallet" in actions
    change = reverse("admin:transfers_transfer_change", args=[failed_payout.pk])
    held = '<span class="suspense-held"><span class="whitespace-nowrap">{} XAF</span></span>'
    assert held.format("10,000") in support.get(change).content.decode()

    _click(support, failed_payout, run)

    html = support.get(change).content.decode()
    assert held.format("0") in html
    assert "transfer_returned" in html
    assert RETURNED in html


def test_a_lowered_relaunch_that_failed_returns_the_whole_collected_amount(
    support, enabled_api, failed_payout, run
):
    """The payer paid 10000 XAF whatever the payout was lowered to: all of it goes back."""
    relaunched = run(
        enabled_api.post,
        f"/transfers/{failed_payout.id}/relaunch-payout",
        {"payout_amount": "9000"},
    )
    assert relaunched.status_code == 202, relaunched.json()
    transfer = Transfer.objects.get(pk=failed_payout.id)
    assert (transfer.status, transfer.payout_amount, transfer.disbursement_attempt) == (
        "failed",
        Decimal("9000"),
        2,
    )

    _click(support, transfer, run)

    assert _available(enabled_api, "XAF") == "10000"
    assert _available(enabled_api, "XOF") == "0"
    assert selectors.transfer_suspense_held(transfer=transfer) == 0
    assert ledger_is_clean()


def test_a_relaunch_after_the_return_is_refused_and_changes_nothing(
    support, enabled_api, failed_payout, run
):
    _click(support, failed_payout, run)
    before = _observed(failed_payout.id)

    response = run(enabled_api.post, f"/transfers/{failed_payout.id}/relaunch-payout")

    assert response.status_code == 409, response.json()
    error = response.json()["error"]
    assert error["reason"] == "transfer_not_relaunchable"
    assert "returned to the merchant's wallet" in error["message"]
    assert _observed(failed_payout.id) == before
    assert ledger_is_clean()


def test_a_late_provider_completion_after_the_return_is_kept_for_reconciliation(
    enabled_api, failed_payout, run
):
    """The provider says the failed attempt paid after all: nothing changes (the money is on
    the wallet now), and support sees a discrepancy that it cannot apply."""
    transfer_return_collected_funds(transfer_id=failed_payout.id, actor=None, now=timezone.now())
    before = _observed(failed_payout.id)

    provider.deliver_answer(
        callback=DISBURSEMENT_CALLBACK,
        reference=disbursement_reference(failed_payout.id, 1),
        provider_reference="SIM-late-1",
        outcome="completed",
    )

    assert _observed(failed_payout.id) == before
    discrepancy = ProviderDiscrepancy.objects.get(resource_id=failed_payout.id)
    assert (discrepancy.provider_outcome, discrepancy.our_status) == ("completed", "cancelled")
    with pytest.raises(ProviderCompletionNotApplicable) as refused:
        transfer_apply_provider_completion(
            discrepancy_id=discrepancy.pk,
            actor=merchant_services.staff_user_create(
                username="agent", password="pw-123456-staff", support=True
            ),
            now=timezone.now(),
        )
    # support is told why, and what the merchant now holds: not only the leg statuses
    assert refused.value.message == (
        "This transfer's collected funds were returned to the merchant's wallet: it can no "
        "longer complete. If the provider did pay the recipient, the merchant holds that money "
        "twice: ops take it back with debit_wallet --discrepancy, which resolves the "
        "discrepancy (mark it resolved if the provider did not pay)."
    )
    assert _observed(failed_payout.id) == before
    assert ledger_is_clean()


def test_check_ledger_flags_a_returned_transfer_without_its_journal(failed_payout):
    Transfer.objects.filter(pk=failed_payout.pk).update(payout_status="cancelled")

    report = ledger_check()

    assert report["breaches"] == [
        f"transfer {failed_payout.id} (failed) has no transfer_returned journal",
        f"transfer {failed_payout.id} (failed, payin completed, payout cancelled) holds 10000 "
        "XAF in transfer_suspense, not 0",
    ]


# --- the provider paid after the return: ops take the money back ----------------------------


def _paid_after_the_return(transfer: Transfer) -> ProviderDiscrepancy:
    """Support returned the collected funds (10000 XAF to the wallet), then the provider said
    the failed attempt paid the recipient after all: the merchant holds that money twice."""
    transfer_return_collected_funds(transfer_id=transfer.id, actor=None, now=timezone.now())
    provider.deliver_answer(
        callback=DISBURSEMENT_CALLBACK,
        reference=disbursement_reference(transfer.id, transfer.disbursement_attempt),
        provider_reference="SIM-late-1",
        outcome="completed",
    )
    discrepancy = ProviderDiscrepancy.objects.get(resource_id=transfer.id)
    assert (discrepancy.resource_type, discrepancy.our_status) == (
        "transfer_disbursement",
        "cancelled",
    )
    return discrepancy


def _debit(merchant, amount: str, discrepancy, currency: str = "XAF") -> dict:
    return adjust(
        "debit_wallet", merchant, amount, "--discrepancy", str(discrepancy.id), currency=currency
    )


def test_ops_take_back_a_returned_transfers_payout_the_provider_paid_with_debit_wallet(
    enabled_api, enabled_merchant, failed_payout
):
    """debit_wallet --discrepancy takes back what the return credited, in the payin currency,
    and resolves the discrepancy in the same transaction; the transfer stays as it was."""
    discrepancy = _paid_after_the_return(failed_payout)
    assert _available(enabled_api, "XAF") == "10000"
    before = adjustment_state(enabled_merchant)
    seen = _observed(failed_payout.id)

    with pytest.raises(
        CommandError,
        match=r"10001 XAF is more than the return of the transfer's collected funds credited "
        r"the wallet \(10000 XAF\)",
    ):
        _debit(enabled_merchant, "10001", discrepancy)
    with pytest.raises(CommandError, match="The transfer's return was in XAF, not XOF"):
        _debit(enabled_merchant, "9800", discrepancy, currency="XOF")
    assert adjustment_state(enabled_merchant) == before

    assert _debit(enabled_merchant, "10000", discrepancy) == {"currency": "XAF", "available": "0"}

    assert _available(enabled_api, "XAF") == "0"
    journal = Journal.objects.get(merchant=enabled_merchant, kind="adjustment")
    assert sorted((line.account.code, line.amount) for line in journal.lines.all()) == [
        ("adjustments", Decimal("10000")),
        ("merchant_available", Decimal("-10000")),
    ]
    discrepancy.refresh_from_db()
    assert (discrepancy.resolved_at, discrepancy.resolved_by) == (
        journal.created_at,
        "debit_wallet",
    )
    entry = AuditLogEntry.objects.get(detail__action="wallet_debited")
    assert (entry.actor_label, entry.merchant_id) == ("system", enabled_merchant.pk)
    assert entry.detail["settled"] == f"transfer_disbursement {failed_payout.id}"
    # the transfer, its journals and its events are as the return left them
    assert {
        k: v for k, v in _observed(failed_payout.id).items() if k not in ("audit", "wallets")
    } == {k: v for k, v in seen.items() if k not in ("audit", "wallets")}
    ledger_clean()

    before = adjustment_state(enabled_merchant)
    with pytest.raises(CommandError, match="already resolved by debit_wallet"):
        _debit(enabled_merchant, "1", discrepancy)
    assert adjustment_state(enabled_merchant) == before


def test_a_debit_for_a_paid_disbursement_not_returned_is_refused_and_names_the_apply_action(
    enabled_api, enabled_merchant, customer, quote, run
):
    """While the disbursement is failed (nothing returned), the provider's completion is
    applied by support: a debit would take money the merchant never got back."""
    transfer = _make(enabled_api, customer, quote, run, recipient_phone=SN_SILENT)
    Transfer.objects.filter(pk=transfer.pk).update(
        leg_timeout_at=timezone.now() - timedelta(seconds=1)
    )
    assert run(transfers_fail_timed_out, now=timezone.now()) == 1
    provider.deliver_answer(
        callback=DISBURSEMENT_CALLBACK,
        reference=disbursement_reference(transfer.id, 1),
        provider_reference="SIM-late-1",
        outcome="completed",
    )
    discrepancy = ProviderDiscrepancy.objects.get(resource_id=transfer.id)
    wallet_credit(
        merchant=enabled_merchant,
        currency="XAF",
        amount=Decimal("20000"),
        reason="float",
        at=timezone.now(),
    )
    before = adjustment_state(enabled_merchant)

    with pytest.raises(CommandError) as refused:
        _debit(enabled_merchant, "100", discrepancy)

    assert str(refused.value) == (
        "Only a transfer whose collected funds were returned to the merchant's wallet can be "
        "settled; this one is failed with payin_status completed and payout_status failed. "
        "While its disbursement is failed, support applies the provider's completion instead "
        "(or marks it resolved if the provider did not pay)."
    )
    assert adjustment_state(enabled_merchant) == before


@pytest.mark.django_db(transaction=True)
def test_two_debits_racing_for_one_returned_transfers_discrepancy_have_exactly_one_winner(
    enabled_api, enabled_merchant
):
    """Both reach the discrepancy while it is locked (as by a run in flight): the first
    through takes the money back and resolves it, the second finds it resolved."""
    transfer = _setup_failed_payout(enabled_api)
    discrepancy = _paid_after_the_return(transfer)
    results: list = []

    def debit():
        try:
            return _debit(enabled_merchant, "10000", discrepancy)
        except CommandError as exc:
            return str(exc)

    with transaction.atomic():
        ProviderDiscrepancy.objects.select_for_update().get(pk=discrepancy.id)
        threads = []
        for count in (1, 2):
            threads.append(start(debit, results))
            waiting_for_a_lock(count)
    for thread in threads:
        thread.join(timeout=60)

    winners = [result for result in results if isinstance(result, dict)]
    refusals = [result for result in results if isinstance(result, str)]
    assert winners == [{"currency": "XAF", "available": "0"}], results
    assert len(refusals) == 1 and "already resolved by debit_wallet" in refusals[0], results
    assert _available(enabled_api, "XAF") == "0"
    assert Journal.objects.filter(kind="adjustment").count() == 1
    assert AuditLogEntry.objects.filter(detail__action="wallet_debited").count() == 1
    assert ProviderDiscrepancy.objects.get(pk=discrepancy.id).resolved_by == "debit_wallet"
    ledger_clean()


def _both_attempts_paid_after_the_return(api, transfer: Transfer, run) -> tuple:
    """Attempt 1 declined, the relaunched attempt 2 declined too, support returned the 10000
    XAF, then the provider said both attempts paid: two discrepancies (attempt 1 superseded,
    attempt 2 cancelled) for one return. The merchant holds 20000 XAF more, so no debit is
    refused for the balance."""
    relaunched = run(api.post, f"/transfers/{transfer.id}/relaunch-payout", {})
    assert relaunched.status_code == 202, relaunched.json()
    transfer.refresh_from_db()
    assert (transfer.status, transfer.payout_status, transfer.disbursement_attempt) == (
        "failed",
        "failed",
        2,
    )
    transfer_return_collected_funds(transfer_id=transfer.id, actor=None, now=timezone.now())
    wallet_credit(
        merchant=transfer.merchant,
        currency="XAF",
        amount=Decimal("20000"),
        reason="float",
        at=timezone.now(),
    )
    for attempt in (1, 2):
        provider.deliver_answer(
            callback=DISBURSEMENT_CALLBACK,
            reference=disbursement_reference(transfer.id, attempt),
            provider_reference=f"SIM-late-{attempt}",
            outcome="completed",
        )
    older, current = (
        ProviderDiscrepancy.objects.get(reference=disbursement_reference(transfer.id, attempt))
        for attempt in (1, 2)
    )
    assert (older.our_status, current.our_status) == ("superseded", "cancelled")
    assert _available(api, "XAF") == "30000"
    return older, current


def test_a_returns_collected_funds_are_taken_back_once_when_two_attempts_paid(
    enabled_api, enabled_merchant, failed_payout, run
):
    """The return credited 10000 XAF once: debit_wallet --discrepancy takes that back for one
    of the two attempts that paid, and refuses the other, which would take 10000 more that the
    return never gave the merchant (the second payout is reconciled by hand)."""
    older, current = _both_attempts_paid_after_the_return(enabled_api, failed_payout, run)

    assert _debit(enabled_merchant, "10000", current) == {"currency": "XAF", "available": "20000"}
    ledger_clean()
    before = adjustment_state(enabled_merchant)

    with pytest.raises(CommandError) as refused:
        _debit(enabled_merchant, "10000", older)

    assert str(refused.value) == (
        "The collected funds returned for this transfer were already taken back by "
        f"debit_wallet for discrepancy {current.id} (attempt {current.reference}): this "
        "one's payout is beyond what the return credited the merchant. Reconcile it by hand, "
        "then mark it resolved."
    )
    assert adjustment_state(enabled_merchant) == before
    assert _available(enabled_api, "XAF") == "20000"
    older.refresh_from_db()
    assert older.resolved_at is None
    ledger_clean()


@pytest.mark.django_db(transaction=True)
def test_two_debits_racing_for_two_attempts_of_one_returned_transfer_take_it_back_once(
    enabled_api, enabled_merchant, django_capture_on_commit_callbacks
):
    """Each reaches its own discrepancy while it is locked (as by runs in flight): the first
    through takes the return back, the second is refused, not a second 10000 XAF."""
    transfer = _setup_failed_payout(enabled_api)

    def run(fn, *args, **kwargs):
        with django_capture_on_commit_callbacks(execute=True):
            return fn(*args, **kwargs)

    discrepancies = _both_attempts_paid_after_the_return(enabled_api, transfer, run)
    results: list = []

    def debit(discrepancy):
        try:
            return _debit(enabled_merchant, "10000", discrepancy)
        except CommandError as exc:
            return str(exc)

    with transaction.atomic():
        for discrepancy in sorted(discrepancies, key=lambda d: d.pk):
            ProviderDiscrepancy.objects.select_for_update().get(pk=discrepancy.pk)
        threads = []
        for count, discrepancy in enumerate(discrepancies, start=1):
            threads.append(start(lambda d=discrepancy: debit(d), results))
            waiting_for_a_lock(count)
    for thread in threads:
        thread.join(timeout=60)

    winners = [result for result in results if isinstance(result, dict)]
    refusals = [result for result in results if isinstance(result, str)]
    assert winners == [{"currency": "XAF", "available": "20000"}], results
    assert len(refusals) == 1 and "already taken back by debit_wallet" in refusals[0], results
    assert _available(enabled_api, "XAF") == "20000"
    assert AuditLogEntry.objects.filter(detail__action="wallet_debited").count() == 1
    assert sorted(
        ProviderDiscrepancy.objects.filter(resource_id=transfer.id).values_list(
            "resolved_by", flat=True
        )
    ) == ["", "debit_wallet"]
    ledger_clean()


# --- refusals: a clear message in the dashboard, the error shape, nothing changed -----------


def test_a_second_return_is_refused(support, failed_payout, run):
    _click(support, failed_payout, run)

    _assert_refused(support, failed_payout, run, "already returned to the merchant&#x27;s wallet")
    assert (
        Journal.objects.filter(resource_id=failed_payout.id, kind="transfer_returned").count() == 1
    )


def test_the_refusal_is_a_409_in_the_error_shape(failed_payout):
    transfer_return_collected_funds(transfer_id=failed_payout.id, actor=None, now=timezone.now())

    with pytest.raises(CollectedFundsNotReturnable) as refused:
        transfer_return_collected_funds(
            transfer_id=failed_payout.id, actor=None, now=timezone.now()
        )

    assert refused.value.status == 409
    assert refused.value.reason == "collected_funds_not_returnable"


def test_a_transfer_still_disbursing_is_refused(support, enabled_api, customer, quote, run):
    transfer = _make(enabled_api, customer, quote, run, recipient_phone=SN_SILENT)
    assert transfer.status == "disbursing"

    _assert_refused(support, transfer, run, "This one is disbursing")


def test_a_completed_transfer_is_refused(support, enabled_api, customer, quote, run):
    transfer = _make(enabled_api, customer, quote, run)
    assert transfer.status == "completed"

    _assert_refused(support, transfer, run, "This one is completed")


def test_a_transfer_whose_collection_failed_is_refused(support, enabled_api, customer, quote, run):
    """Nothing was collected: there is nothing to return."""
    transfer = _make(enabled_api, customer, quote, run, payer_phone=CM_DECLINED)
    assert (transfer.status, transfer.payin_status) == ("failed", "failed")

    _assert_refused(support, transfer, run, "payin_status failed")


def test_a_disbursement_the_provider_reported_paid_is_refused_until_reconciled(
    support, enabled_api, customer, quote, run
):
    """Timed out, then the provider said it paid: the recipient may have the money, so it is
    not returned until support has reconciled (here: the provider did not pay after all)."""
    transfer = _make(enabled_api, customer, quote, run, recipient_phone=SN_SILENT)
    Transfer.objects.filter(pk=transfer.pk).update(
        leg_timeout_at=timezone.now() - timedelta(seconds=1)
    )
    assert run(transfers_fail_timed_out, now=timezone.now()) == 1
    provider.deliver_answer(
        callback=DISBURSEMENT_CALLBACK,
        reference=disbursement_reference(transfer.id, 1),
        provider_reference="SIM-late-1",
        outcome="completed",
    )
    discrepancy = ProviderDiscrepancy.objects.get(resource_id=transfer.id)

    _assert_refused(support, transfer, run, "reported this transfer&#x27;s failed disbursement")

    provider_discrepancy_resolve(discrepancy_id=discrepancy.pk, actor=_agent(), now=timezone.now())
    page = _click(support, transfer, run)
    assert "Collected funds returned" in page
    assert Transfer.objects.get(pk=transfer.pk).payout_status == "cancelled"
    assert ledger_is_clean()


def test_a_collection_the_provider_reported_failed_is_refused_until_reconciled(
    support, failed_payout, run
):
    """After the collection completed the provider said it failed after all (a reversal): the
    money may never have been collected, so it is not credited to the wallet until support has
    reconciled (here: the provider did collect it)."""
    provider.deliver_answer(
        callback=COLLECTION_CALLBACK,
        reference=str(failed_payout.id),
        provider_reference="SIM-reversed",
        outcome="failed",
        reason="reversed",
    )
    discrepancy = ProviderDiscrepancy.objects.get(resource_id=failed_payout.id)
    assert (discrepancy.resource_type, discrepancy.provider_outcome) == (
        "transfer_collection",
        "failed",
    )

    _assert_refused(support, failed_payout, run, "reported this transfer&#x27;s collection")

    provider_discrepancy_resolve(discrepancy_id=discrepancy.pk, actor=_agent(), now=timezone.now())
    page = _click(support, failed_payout, run)
    assert "Collected funds returned" in page
    assert Transfer.objects.get(pk=failed_payout.pk).payout_status == "cancelled"
    assert ledger_is_clean()


def test_merchant_staff_cannot_return_funds(staff_client, enabled_merchant, failed_payout):
    """The action is not offered to them, and posting it anyway does nothing."""
    owner = staff_client(merchant=enabled_merchant, role="owner")
    before = _observed(failed_payout.id)
    assert f'value="{ACTION}"' not in owner.get(reverse(CHANGELIST)).content.decode()

    owner.post(reverse(CHANGELIST), {"action": ACTION, "_selected_action": [str(failed_payout.pk)]})

    assert _observed(failed_payout.id) == before


# --- races: real threads, each its own connection ------------------------------------------


def _setup_failed_payout(api) -> Transfer:
    customer = create_customer(api, **SENDER_DETAILS)
    quote = create_quote(api, customer_id=customer["id"])
    created = api.post("/transfers", transfer_body(quote, customer, recipient_phone=SN_DECLINED))
    transfer = Transfer.objects.get(pk=created.json()["id"])
    assert (transfer.status, transfer.payin_status, transfer.payout_status) == (
        "failed",
        "completed",
        "failed",
    )
    return transfer


def _agents(count: int) -> list:
    return [
        merchant_services.staff_user_create(
            username=f"agent-{i}", password="pw-123456-staff", support=True
        )
        for i in range(count)
    ]


def _in_threads(*work) -> None:
    barrier = threading.Barrier(len(work), timeout=60)
    errors: list[BaseException] = []

    def run(fn) -> None:
        try:
            barrier.wait()
            fn()
        except BaseException as exc:  # reported by the test, not lost in the thread
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(fn,)) for fn in work]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []


def _return_by(agent, transfer_id, returned: list, refused: list):
    def work() -> None:
        try:
            returned.append(
                transfer_return_collected_funds(
                    transfer_id=transfer_id, actor=agent, now=timezone.now()
                )
            )
        except CollectedFundsNotReturnable as exc:
            refused.append(exc)

    return work


def _journal_sums(transfer_id) -> dict[str, Decimal]:
    """Per account code, what the transfer's journals moved."""
    rows = (
        JournalLine.objects.filter(journal__resource_id=transfer_id)
        .values("account__code")
        .annotate(total=Sum("amount"))
    )
    return {row["account__code"]: row["total"] for row in rows}


def _returned_once(transfer_id) -> None:
    transfer = Transfer.objects.get(pk=transfer_id)
    assert (transfer.status, transfer.payin_status, transfer.payout_status) == (
        "failed",
        "completed",
        "cancelled",
    )
    assert transfer.disbursement_attempt == 1
    assert TransferHistory.objects.filter(transfer_id=transfer_id, reason=RETURNED).count() == 1
    assert Event.objects.filter(data_id=transfer_id, event_type="transfer.failed").count() == 1
    assert sorted(
        Journal.objects.filter(resource_id=transfer_id).values_list("kind", flat=True)
    ) == ["transfer_collected", "transfer_returned"]
    assert _journal_sums(transfer_id) == {
        "provider_clearing:CM_MTN_MOMO": Decimal("-10000"),
        "transfer_suspense": Decimal("0"),
        "merchant_available": Decimal("10000"),
    }
    assert AuditLogEntry.objects.filter(target=str(transfer_id)).count() == 1
    assert ledger_is_clean()


@pytest.mark.django_db(transaction=True)
def test_racing_returns_credit_the_wallet_once(enabled_api, enabled_merchant):
    transfer = _setup_failed_payout(enabled_api)
    returned: list = []
    refused: list = []

    _in_threads(*(_return_by(agent, transfer.id, returned, refused) for agent in _agents(4)))

    assert (len(returned), len(refused)) == (1, 3), refused
    for exc in refused:
        assert "already returned" in exc.message
    _returned_once(transfer.id)
    assert _available(enabled_api, "XAF") == "10000"


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("first", ["return", "relaunch"])
def test_a_return_racing_a_relaunch_has_exactly_one_winner(enabled_api, first):
    """Both reach the transfer while its row is locked (as by an action in flight), in either
    order; the first through wins, the second sees what it did and is refused. The relaunch
    goes to a recipient the provider is still working on when the race ends."""
    transfer = _setup_failed_payout(enabled_api)
    [agent] = _agents(1)
    returned: list = []
    refused: list = []
    relaunched: list = []

    def relaunch() -> None:
        client = APIClient()
        client.credentials(
            HTTP_X_API_KEY=enabled_api.api_key, HTTP_X_API_SECRET=enabled_api.api_secret
        )
        relaunched.append(
            client.post(
                f"/transfers/{transfer.id}/relaunch-payout",
                {"recipient": {"first_name": "Moussa", "last_name": "Ndiaye", "phone": SN_SILENT}},
                format="json",
                HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4()),
            )
        )

    works = [_return_by(agent, transfer.id, returned, refused), relaunch]
    if first == "relaunch":
        works.reverse()
    with transaction.atomic():
        Transfer.objects.select_for_update().get(pk=transfer.id)
        threads = []
        for count, work in enumerate(works, start=1):
            threads.append(start(work, []))
            waiting_for_a_lock(count)
    for thread in threads:
        thread.join(timeout=60)

    [response] = relaunched
    if first == "return":
        assert (len(returned), refused) == (1, [])
        assert response.status_code == 409, response.json()
        assert response.json()["error"]["reason"] == "transfer_not_relaunchable"
        _returned_once(transfer.id)
        assert _available(enabled_api, "XAF") == "10000"
    else:
        assert response.status_code == 202, response.json()
        [refusal] = refused
        assert (returned, refusal.status) == ([], 409)
        assert "This one is disbursing" in refusal.message
        after = Transfer.objects.get(pk=transfer.id)
        assert (after.status, after.payout_status, after.disbursement_attempt) == (
            "disbursing",
            "pending",
            2,
        )
        assert selectors.transfer_suspense_held(transfer=after) == Decimal("10000")
        assert _journal_sums(transfer.id) == {
            "provider_clearing:CM_MTN_MOMO": Decimal("-10000"),
            "transfer_suspense": Decimal("10000"),
        }
        assert not Journal.objects.filter(resource_id=transfer.id, kind="transfer_returned")
        assert not AuditLogEntry.objects.filter(target=str(transfer.id)).exists()
        assert _available(enabled_api, "XAF") == "0"
        assert ledger_is_clean()


def test_a_transfer_whose_funds_were_returned_leaves_supports_worklist(failed_payout):
    def holding() -> int:
        items = worklist.support_worklist(now=timezone.now())
        return next(i for i in items if i.label == "Failed transfers holding collected funds")

    assert holding().count == 1
    transfer_return_collected_funds(transfer_id=failed_payout.id, actor=None, now=timezone.now())
    assert holding().count == 0
