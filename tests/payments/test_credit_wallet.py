"""credit_wallet --discrepancy: ops credit a merchant for a payin we failed that the provider
collected after all, and resolve its discrepancy with the credit (the mirror of debit_wallet
--discrepancy). The plain credit_wallet tests are in test_ledger.py."""

import uuid
from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError
from django.db import transaction
from django.utils import timezone

from merchants.models import AuditLogEntry
from payments import ledger, services
from payments.models import Journal, ProviderDiscrepancy
from tests.payments.adjustments import (
    adjust,
    adjustment_state,
    balances,
    ledger_clean,
    payin_collected_after_we_failed_it,
    payout_paid_after_we_failed_it,
    reported_failed_after_it_completed,
    start,
    waiting_for_a_lock,
)
from tests.support import MerchantClient
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
    assert services.provider_discrepancy_resolve(
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
        match="about a payout, not a payin: ops settle it with debit_wallet --discrepancy",
    ):
        _credit(enabled_merchant, "100", "--discrepancy", str(discrepancy.id))

    assert adjustment_state(enabled_merchant) == before
    with pytest.raises(services.DiscrepancyNotCreditable) as refused:
        services.wallet_credit(
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
    assert ledger.ledger_breaches() == []
    ledger_clean()
