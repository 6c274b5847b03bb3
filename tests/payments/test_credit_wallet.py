"""credit_wallet --discrepancy: ops credit a merchant for a payin we failed that the provider
collected after all, and resolve its discrepancy with the credit (the mirror of debit_wallet
--discrepancy). The plain credit_wallet tests are in test_ledger.py."""

import io
import uuid
from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.db import transaction
from django.utils import timezone

from merchants.models import AuditLogEntry
from payments.ledger.adjustments import DiscrepancyNotCreditable, wallet_credit
from payments.ledger.checks import ledger_breaches
from payments.ledger.discrepancies import provider_discrepancy_resolve
from payments.models import Journal, ProviderDiscrepancy, Wallet
from tests.locks import start, waiting_for_a_lock
from tests.payments.adjustments import (
    adjust,
    adjust_and_stderr,
    adjustment_state,
    balances,
    late_answer,
    ledger_clean,
    payin_collected_after_we_failed_it,
    payout_paid_after_we_failed_it,
    reported_failed_after_it_completed,
    transfer_collected_after_we_failed_it,
)
from tests.payments.conftest import fund
from tests.support import MerchantClient
from tests.transfers import conftest as transfer_helpers
from transfers.models import Transfer, TransferHistory
from transfers.services.submission import COLLECTION_CALLBACK
from transfers.services.support import (
    ProviderCompletionNotApplicable,
    transfer_apply_provider_completion,
)
from webhooks.models import Event

pytestmark = pytest.mark.django_db


def _credit(merchant, amount: str, *args: str, currency: str = "XOF") -> dict:
    return adjust("credit_wallet", merchant, amount, *args, currency=currency)


@pytest.fixture
def collected(enabled_api, django_capture_on_commit_callbacks, settings) -> ProviderDiscrepancy:
    """A 10000 XOF payin (9850 net of its fee) we failed that the provider then collected."""
    return payin_collected_after_we_failed_it(
        enabled_api, django_capture_on_commit_callbacks, settings
    )


def test_a_credit_pays_the_merchant_a_payin_the_provider_collected_and_resolves_its_discrepancy(
    enabled_api, enabled_merchant, collected
):
    events = list(Event.objects.values_list("event_type", flat=True))

    body = _credit(enabled_merchant, "9850", "--discrepancy", str(collected.id))

    assert body == {"currency": "XOF", "available": "9850"}
    assert balances(enabled_api) == {"currency": "XOF", "available": "9850", "reserved": "0"}
    journal = Journal.objects.get(merchant=enabled_merchant, kind="adjustment")
    assert journal.memo == "provider statement 2024-05"
    assert sorted((line.account.code, line.amount) for line in journal.lines.all()) == [
        ("adjustments", Decimal("-9850")),
        ("merchant_available", Decimal("9850")),
    ]
    collected.refresh_from_db()
    assert (collected.resolved_at, collected.resolved_by) == (journal.created_at, "credit_wallet")
    entry = AuditLogEntry.objects.get(merchant=enabled_merchant, detail__action="wallet_credited")
    assert (entry.actor, entry.actor_label, entry.action) == (None, "system", "wallet.adjusted")
    assert entry.target == str(collected.resource_id)
    assert entry.detail == {
        "action": "wallet_credited",
        "currency": "XOF",
        "amount": "9850",
        "reason": "provider statement 2024-05",
        "journal_id": str(journal.id),
        "discrepancy_id": str(collected.id),
        "settled": f"payin {collected.resource_id}",
    }
    # the merchant was told the payin failed: it stays failed, with no new event
    assert enabled_api.get(f"/payins/{collected.resource_id}").json()["status"] == "failed"
    assert list(Event.objects.values_list("event_type", flat=True)) == events
    ledger_clean()

    before = adjustment_state(enabled_merchant)
    with pytest.raises(CommandError, match="already resolved by credit_wallet"):
        _credit(enabled_merchant, "9850", "--discrepancy", str(collected.id))
    assert adjustment_state(enabled_merchant) == before


def test_a_credit_above_what_the_payin_would_have_credited_is_refused_and_changes_nothing(
    enabled_merchant, collected
):
    before = adjustment_state(enabled_merchant)

    with pytest.raises(
        CommandError,
        match=r"9851 XOF is more than the payin would have credited the wallet, net of its fee "
        r"\(9850 XOF\)",
    ):
        _credit(enabled_merchant, "9851", "--discrepancy", str(collected.id))
    with pytest.raises(CommandError, match="more than the payin would have credited"):
        _credit(enabled_merchant, "10000", "--discrepancy", str(collected.id))  # fee included

    assert adjustment_state(enabled_merchant) == before
    assert _credit(enabled_merchant, "9000", "--discrepancy", str(collected.id)) == {
        "currency": "XOF",
        "available": "9000",
    }  # less (the provider kept a fee of its own, say) settles it too
    collected.refresh_from_db()
    assert collected.resolved_by == "credit_wallet"


def test_a_credit_in_another_currency_than_the_payins_is_refused(enabled_merchant, collected):
    before = adjustment_state(enabled_merchant)

    with pytest.raises(CommandError, match="The payin was in XOF, not XAF"):
        _credit(enabled_merchant, "9850", "--discrepancy", str(collected.id), currency="XAF")

    assert adjustment_state(enabled_merchant) == before


def test_a_credit_refuses_another_merchants_discrepancy_and_changes_nothing(
    enabled_merchant, other_merchant, collected
):
    before = adjustment_state(other_merchant)

    with pytest.raises(CommandError, match="has no provider discrepancy"):
        _credit(other_merchant, "9850", "--discrepancy", str(collected.id))
    with pytest.raises(CommandError, match="has no provider discrepancy"):
        _credit(other_merchant, "9850", "--discrepancy", str(uuid.uuid4()))
    with pytest.raises(CommandError, match="No provider discrepancy"):
        _credit(other_merchant, "9850", "--discrepancy", "not-an-id")

    assert adjustment_state(other_merchant) == before
    assert not Journal.objects.filter(kind="adjustment").exists()


def test_a_credit_refuses_a_discrepancy_support_already_marked_resolved(
    enabled_merchant, collected
):
    """Ops credited it by hand and support clicked "Mark resolved": crediting it again with
    --discrepancy would pay the merchant twice."""
    agent = get_user_model().objects.create_user(username="agent-ama", password="x" * 16)
    assert provider_discrepancy_resolve(
        discrepancy_id=collected.id, actor=agent, now=timezone.now()
    )
    before = adjustment_state(enabled_merchant)

    with pytest.raises(CommandError, match="already resolved by agent-ama"):
        _credit(enabled_merchant, "9850", "--discrepancy", str(collected.id))

    assert adjustment_state(enabled_merchant) == before


def test_a_credit_refuses_a_discrepancy_about_a_payout_and_says_what_settles_it(
    enabled_api, enabled_merchant, django_capture_on_commit_callbacks, settings
):
    discrepancy = payout_paid_after_we_failed_it(
        enabled_api, enabled_merchant, django_capture_on_commit_callbacks, settings
    )
    before = adjustment_state(enabled_merchant)

    with pytest.raises(
        CommandError,
        match="about a payout, not a payin or a transfer collection: ops settle it with "
        "debit_wallet --discrepancy",
    ):
        _credit(enabled_merchant, "100", "--discrepancy", str(discrepancy.id))

    assert adjustment_state(enabled_merchant) == before
    with pytest.raises(DiscrepancyNotCreditable) as refused:
        wallet_credit(
            merchant=enabled_merchant,
            currency="XOF",
            amount=Decimal("100"),
            reason="x",
            at=timezone.now(),
            discrepancy_id=discrepancy.id,
        )
    assert (refused.value.status, refused.value.reason) == (409, "discrepancy_not_creditable")


def test_a_credit_refuses_a_discrepancy_the_provider_did_not_complete(
    enabled_api, enabled_merchant, django_capture_on_commit_callbacks
):
    """A payin we completed that the provider later says failed: the merchant was already
    credited, there is nothing more to credit."""
    discrepancy = reported_failed_after_it_completed(
        enabled_api, django_capture_on_commit_callbacks, "payin"
    )
    before = adjustment_state(enabled_merchant)

    with pytest.raises(CommandError, match='answered "failed", not "completed": it collected'):
        _credit(enabled_merchant, "100", "--discrepancy", str(discrepancy.id))

    assert adjustment_state(enabled_merchant) == before


@pytest.mark.django_db(transaction=True)
def test_two_credits_racing_for_one_discrepancy_have_exactly_one_winner(
    enabled_merchant, django_capture_on_commit_callbacks, settings
):
    """Both reach the discrepancy while it is locked (as by a click in flight): the first
    through credits and resolves it, the second finds it resolved and credits nothing."""
    api = MerchantClient(enabled_merchant)
    discrepancy = payin_collected_after_we_failed_it(
        api, django_capture_on_commit_callbacks, settings
    )
    results: list = []

    def credit():
        try:
            return _credit(enabled_merchant, "9850", "--discrepancy", str(discrepancy.id))
        except CommandError as exc:
            return str(exc)

    with transaction.atomic():
        ProviderDiscrepancy.objects.select_for_update().get(pk=discrepancy.id)
        threads = []
        for count in (1, 2):
            threads.append(start(credit, results))
            waiting_for_a_lock(count)
    for thread in threads:
        thread.join(timeout=60)

    winners = [result for result in results if isinstance(result, dict)]
    refusals = [result for result in results if isinstance(result, str)]
    assert winners == [{"currency": "XOF", "available": "9850"}], results
    assert len(refusals) == 1 and "already resolved by credit_wallet" in refusals[0], results
    assert balances(api) == {"currency": "XOF", "available": "9850", "reserved": "0"}
    assert Journal.objects.filter(kind="adjustment").count() == 1
    assert AuditLogEntry.objects.filter(detail__action="wallet_credited").count() == 1
    assert ProviderDiscrepancy.objects.get(pk=discrepancy.id).resolved_by == "credit_wallet"
    assert ledger_breaches() == []
    ledger_clean()


# --- a transfer whose collection we failed, that the provider collected ---------------------


def _transfer_seen(transfer_id) -> tuple:
    """What the merchant sees of the transfer itself: the credit must leave it as it was."""
    return (
        Transfer.objects.filter(pk=transfer_id)
        .values_list("status", "payin_status", "payout_status", "updated_at")
        .get(),
        TransferHistory.objects.filter(transfer_id=transfer_id).count(),
        list(Event.objects.filter(data_id=transfer_id).values_list("event_type", flat=True)),
        sorted(Journal.objects.filter(resource_id=transfer_id).values_list("kind", flat=True)),
    )


@pytest.fixture
def transfer_collected(enabled_api, django_capture_on_commit_callbacks) -> ProviderDiscrepancy:
    """A 10000 XAF transfer whose collection we failed (timeout) and the provider collected."""
    return transfer_collected_after_we_failed_it(enabled_api, django_capture_on_commit_callbacks)


def test_a_credit_pays_the_merchant_a_transfer_collection_the_provider_collected_after_we_failed_it(
    enabled_api, enabled_merchant, transfer_collected
):
    """The transfer is final (transfer.failed was sent) and the payer's money reached the
    provider: the merchant gets the whole payin amount, no fee, in the payin currency, as a
    return of collected funds would give it, and the discrepancy is resolved with it."""
    discrepancy = transfer_collected
    transfer_id = discrepancy.resource_id
    assert (discrepancy.resource_type, discrepancy.our_status) == ("transfer_collection", "failed")
    seen = _transfer_seen(transfer_id)

    body = _credit(enabled_merchant, "10000", "--discrepancy", str(discrepancy.id), currency="XAF")

    assert body == {"currency": "XAF", "available": "10000"}
    assert balances(enabled_api, "XAF") == {
        "currency": "XAF",
        "available": "10000",
        "reserved": "0",
    }
    journal = Journal.objects.get(merchant=enabled_merchant, kind="adjustment")
    assert sorted((line.account.code, line.amount) for line in journal.lines.all()) == [
        ("adjustments", Decimal("-10000")),
        ("merchant_available", Decimal("10000")),
    ]
    discrepancy.refresh_from_db()
    assert (discrepancy.resolved_at, discrepancy.resolved_by) == (
        journal.created_at,
        "credit_wallet",
    )
    entry = AuditLogEntry.objects.get(merchant=enabled_merchant, detail__action="wallet_credited")
    assert entry.target == str(transfer_id)
    assert entry.detail["discrepancy_id"] == str(discrepancy.id)
    assert entry.detail["settled"] == f"transfer_collection {transfer_id}"
    # the transfer stays failed, with no new event, journal or history row
    assert _transfer_seen(transfer_id) == seen
    ledger_clean()

    before = adjustment_state(enabled_merchant)
    with pytest.raises(CommandError, match="already resolved by credit_wallet"):
        _credit(enabled_merchant, "10000", "--discrepancy", str(discrepancy.id), currency="XAF")
    assert adjustment_state(enabled_merchant) == before


def test_a_transfer_collection_credit_is_at_most_the_payin_amount_in_the_payin_currency(
    enabled_merchant, transfer_collected
):
    before = adjustment_state(enabled_merchant)

    with pytest.raises(
        CommandError,
        match=r"10001 XAF is more than the transfer's payer paid \(its payin amount\) "
        r"\(10000 XAF\)",
    ):
        _credit(
            enabled_merchant, "10001", "--discrepancy", str(transfer_collected.id), currency="XAF"
        )
    with pytest.raises(CommandError, match="The transfer's collection was in XAF, not XOF"):
        _credit(enabled_merchant, "9800", "--discrepancy", str(transfer_collected.id))

    assert adjustment_state(enabled_merchant) == before
    transfer_collected.refresh_from_db()
    assert transfer_collected.resolved_at is None


def test_a_transfer_collection_the_provider_reversed_is_not_credited(
    enabled_api, enabled_merchant, django_capture_on_commit_callbacks
):
    """The collection completed and the provider then said it failed: the merchant holds
    nothing it was not owed from this answer; a credit would pay it money no one collected."""
    customer = transfer_helpers.create_customer(enabled_api, **transfer_helpers.SENDER_DETAILS)
    quote = transfer_helpers.create_quote(enabled_api, customer_id=customer["id"])
    with django_capture_on_commit_callbacks(execute=True):
        created = enabled_api.post("/transfers", transfer_helpers.transfer_body(quote, customer))
    transfer_id = created.json()["id"]
    assert Transfer.objects.get(pk=transfer_id).status == "completed"
    late_answer(COLLECTION_CALLBACK, transfer_id, "failed")
    discrepancy = ProviderDiscrepancy.objects.get(resource_id=transfer_id)
    before = adjustment_state(enabled_merchant)

    with pytest.raises(CommandError, match='answered "failed", not "completed": it collected'):
        _credit(enabled_merchant, "100", "--discrepancy", str(discrepancy.id), currency="XAF")

    assert adjustment_state(enabled_merchant) == before


def test_a_transfer_collections_discrepancy_names_credit_wallet_where_it_is_refused(
    enabled_merchant, transfer_collected
):
    """debit_wallet and "Apply the provider's completion" point at the command that settles it."""
    fund(enabled_merchant, "20000", currency="XAF")
    before = adjustment_state(enabled_merchant)

    with pytest.raises(
        CommandError,
        match="about a transfer collection, not a payout, a refund or a transfer disbursement: "
        "ops settle it with credit_wallet --discrepancy",
    ):
        adjust(
            "debit_wallet",
            enabled_merchant,
            "100",
            "--discrepancy",
            str(transfer_collected.id),
            currency="XAF",
        )
    with pytest.raises(ProviderCompletionNotApplicable) as refused:
        transfer_apply_provider_completion(
            discrepancy_id=transfer_collected.id,
            actor=get_user_model().objects.create_user(username="agent-ama", password="x" * 16),
            now=timezone.now(),
        )
    assert refused.value.message == (
        "Only a transfer disbursement's discrepancy can be applied; this one is about a "
        "transfer collection: ops settle it with credit_wallet --discrepancy."
    )

    assert adjustment_state(enabled_merchant) == before


@pytest.mark.django_db(transaction=True)
def test_two_credits_racing_for_one_transfer_collection_have_exactly_one_winner(
    enabled_merchant, django_capture_on_commit_callbacks
):
    api = MerchantClient(enabled_merchant)
    discrepancy = transfer_collected_after_we_failed_it(api, django_capture_on_commit_callbacks)
    results: list = []

    def credit():
        try:
            return _credit(
                enabled_merchant, "10000", "--discrepancy", str(discrepancy.id), currency="XAF"
            )
        except CommandError as exc:
            return str(exc)

    with transaction.atomic():
        ProviderDiscrepancy.objects.select_for_update().get(pk=discrepancy.id)
        threads = []
        for count in (1, 2):
            threads.append(start(credit, results))
            waiting_for_a_lock(count)
    for thread in threads:
        thread.join(timeout=60)

    winners = [result for result in results if isinstance(result, dict)]
    refusals = [result for result in results if isinstance(result, str)]
    assert winners == [{"currency": "XAF", "available": "10000"}], results
    assert len(refusals) == 1 and "already resolved by credit_wallet" in refusals[0], results
    assert balances(api, "XAF") == {"currency": "XAF", "available": "10000", "reserved": "0"}
    assert Journal.objects.filter(kind="adjustment").count() == 1
    assert AuditLogEntry.objects.filter(detail__action="wallet_credited").count() == 1
    ledger_clean()


# --- --reference: an adjustment applied once per merchant and reference ---------------------


_run = adjust_and_stderr


def test_a_credit_with_a_reference_is_applied_once_however_often_it_runs(
    enabled_api, enabled_merchant, other_merchant
):
    body, said = _run("credit_wallet", enabled_merchant, "5000", "--reference", "OPS-1234")

    assert (body, said) == ({"currency": "XOF", "available": "5000"}, "")
    journal = Journal.objects.get(merchant=enabled_merchant, kind="adjustment")
    assert journal.resource_id == uuid.uuid5(enabled_merchant.id, "OPS-1234")
    entry = AuditLogEntry.objects.get(merchant=enabled_merchant, detail__action="wallet_credited")
    assert entry.target == str(journal.resource_id)
    assert entry.detail == {
        "action": "wallet_credited",
        "currency": "XOF",
        "amount": "5000",
        "reason": "provider statement 2024-05",
        "journal_id": str(journal.id),
        "discrepancy_id": None,
        "settled": None,
        "reference": "OPS-1234",
    }
    before = adjustment_state(enabled_merchant)

    # the session dropped, or the script timed out: it runs again, as it was
    body, said = _run("credit_wallet", enabled_merchant, "5000", "--reference", "OPS-1234")

    assert body == {"currency": "XOF", "available": "5000"}  # the same keys, the balance now
    assert "Already applied with reference OPS-1234, nothing changed" in said
    out = io.StringIO()
    call_command(
        "credit_wallet",
        str(enabled_merchant.id),
        "XOF",
        "5000",
        "--reason",
        "provider statement 2024-05",
        "--reference",
        "OPS-1234",
        stdout=out,
    )
    assert out.getvalue() == (
        "Already applied with reference OPS-1234, nothing changed: credited 5000 XOF; "
        "available: 5000 XOF\n"
    )
    assert adjustment_state(enabled_merchant) == before
    assert balances(enabled_api) == {"currency": "XOF", "available": "5000", "reserved": "0"}
    ledger_clean()

    # the reference is the merchant's: another merchant's adjustment may use it; and without
    # a reference, each run is an adjustment of its own, as before
    assert (
        _run("credit_wallet", other_merchant, "700", "--reference", "OPS-1234")[0]["available"]
        == "700"
    )
    _credit(enabled_merchant, "5000")
    assert _credit(enabled_merchant, "5000") == {"currency": "XOF", "available": "15000"}
    assert Journal.objects.filter(kind="adjustment").count() == 4
    ledger_clean()


@pytest.mark.parametrize(
    "command,amount,currency,reason,differs",
    [
        ("credit_wallet", "5001", "XOF", "provider statement 2024-05", "amount"),
        ("credit_wallet", "5000", "XAF", "provider statement 2024-05", "currency"),
        ("credit_wallet", "5000", "XOF", "another reason", "reason"),
        ("debit_wallet", "5000", "XOF", "provider statement 2024-05", "direction"),
        ("debit_wallet", "100", "XAF", "another reason", "direction, currency, amount, reason"),
    ],
)
def test_a_run_with_a_used_reference_asking_another_adjustment_is_refused(
    enabled_merchant, command, amount, currency, reason, differs
):
    fund(enabled_merchant, "20000", currency="XAF")
    _run("credit_wallet", enabled_merchant, "5000", "--reference", "OPS-1234")
    before = adjustment_state(enabled_merchant)

    with pytest.raises(CommandError) as refused:
        call_command(
            command,
            str(enabled_merchant.id),
            currency,
            amount,
            "--reason",
            reason,
            "--reference",
            "OPS-1234",
            "--json",
            stdout=io.StringIO(),
        )

    assert str(refused.value) == (
        "Reference OPS-1234 was already used for this merchant, by a credit of 5000 XOF at "
        f"{Journal.objects.get(currency='XOF').created_at.isoformat(timespec='seconds')}; "
        f"this run differs in its {differs}: nothing changed."
    )
    assert adjustment_state(enabled_merchant) == before


@pytest.mark.parametrize("command", ["credit_wallet", "debit_wallet"])
@pytest.mark.parametrize(
    "reference", ["", " ", "OPS 1234", " OPS-1234", "OPS-1234\n", "OPS-é", "x" * 65]
)
def test_a_bad_reference_is_refused_and_changes_nothing(enabled_merchant, command, reference):
    fund(enabled_merchant, "10000")
    before = adjustment_state(enabled_merchant)

    with pytest.raises(
        CommandError, match="A reference is 1 to 64 printable ASCII characters without spaces"
    ):
        adjust(command, enabled_merchant, "100", "--reference", reference)

    assert adjustment_state(enabled_merchant) == before
    assert adjust(command, enabled_merchant, "100", "--reference", "x" * 64)["available"] in {
        "10100",
        "9900",
    }


def test_a_credit_settling_a_discrepancy_with_a_reference_says_already_applied_when_run_again(
    enabled_api, enabled_merchant, collected, django_capture_on_commit_callbacks, settings
):
    another = payin_collected_after_we_failed_it(
        enabled_api, django_capture_on_commit_callbacks, settings
    )
    body, _ = _run(
        "credit_wallet",
        enabled_merchant,
        "9850",
        "--discrepancy",
        str(collected.id),
        "--reference",
        "OPS-77",
    )
    assert body == {"currency": "XOF", "available": "9850"}
    collected.refresh_from_db()
    assert collected.resolved_by == "credit_wallet"
    entry = AuditLogEntry.objects.get(merchant=enabled_merchant, detail__action="wallet_credited")
    assert (entry.detail["discrepancy_id"], entry.detail["reference"]) == (
        str(collected.id),
        "OPS-77",
    )
    before = adjustment_state(enabled_merchant)

    body, said = _run(
        "credit_wallet",
        enabled_merchant,
        "9850",
        "--discrepancy",
        str(collected.id),
        "--reference",
        "OPS-77",
    )

    assert body == {"currency": "XOF", "available": "9850"}
    assert "Already applied with reference OPS-77" in said
    assert adjustment_state(enabled_merchant) == before
    # the same reference without the discrepancy, or with another, is another adjustment
    for args in ([], ["--discrepancy", str(another.id)]):
        with pytest.raises(CommandError, match="this run differs in its discrepancy: nothing"):
            _run("credit_wallet", enabled_merchant, "9850", *args, "--reference", "OPS-77")
    assert adjustment_state(enabled_merchant) == before
    another.refresh_from_db()
    assert another.resolved_at is None
    ledger_clean()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("second", ["same", "XAF", "debit"])
def test_two_runs_racing_with_one_reference_apply_it_once(enabled_merchant, second):
    """Both start while the wallet is locked (as by a posting in flight): the first through
    credits; the second, the same run again, finds it applied, and asking another adjustment
    with the reference (in another currency, or a debit of what the credit brings) is
    refused."""
    fund(enabled_merchant, "5000", currency="XAF")
    fund(enabled_merchant, "1000")
    results: list = []

    def credit():
        return _run("credit_wallet", enabled_merchant, "5000", "--reference", "RUN-42")

    def again():
        try:
            if second == "same":
                return credit()
            command = "debit_wallet" if second == "debit" else "credit_wallet"
            currency = "XAF" if second == "XAF" else "XOF"
            return _run(
                command, enabled_merchant, "5000", "--reference", "RUN-42", currency=currency
            )
        except CommandError as exc:
            return str(exc)

    with transaction.atomic():
        Wallet.objects.select_for_update().get(merchant=enabled_merchant, currency="XOF")
        threads = []
        for count, work in enumerate((credit, again), start=1):
            threads.append(start(work, results))
            waiting_for_a_lock(count)
    for thread in threads:
        thread.join(timeout=60)

    first, then = results
    assert first == ({"currency": "XOF", "available": "6000"}, ""), results
    if second == "same":
        assert then[0] == {"currency": "XOF", "available": "6000"}, results
        assert "Already applied with reference RUN-42" in then[1], results
    else:
        assert "Reference RUN-42 was already used for this merchant" in then, results
    assert (
        Journal.objects.filter(
            resource_type="adjustment", resource_id=uuid.uuid5(enabled_merchant.id, "RUN-42")
        ).count()
        == 1
    )
    assert AuditLogEntry.objects.filter(detail__reference="RUN-42").count() == 1
    assert list(
        Wallet.objects.filter(merchant=enabled_merchant)
        .order_by("currency")
        .values_list("currency", "available")
    ) == [("XAF", Decimal("5000")), ("XOF", Decimal("6000"))]
    assert ledger_breaches() == []
    ledger_clean()
