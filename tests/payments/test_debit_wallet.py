"""debit_wallet: ops take money back out of a merchant wallet (the mirror of credit_wallet),
e.g. a payout we failed that the provider paid after all."""

import io
import uuid
from decimal import Decimal

import pytest
from django.core.management import CommandError, call_command
from django.db import transaction

from merchants.models import AuditLogEntry
from payments.ledger.checks import ledger_breaches
from payments.models import Journal, Payout, Wallet
from tests.locks import start, waiting_for_a_lock
from tests.payments.adjustments import (
    adjust,
    adjustment_state,
    balances,
    ledger_clean,
    payin_collected_after_we_failed_it,
    payout_paid_after_we_failed_it,
    reported_failed_after_it_completed,
)
from tests.payments.conftest import (
    SILENT_PHONE,
    create_customer,
    create_quote,
    fund,
    payout_body,
)
from tests.support import MerchantClient

pytestmark = pytest.mark.django_db


def _debit(merchant, amount: str, *args: str, currency: str = "XOF") -> dict:
    return adjust("debit_wallet", merchant, amount, *args, currency=currency)


def test_debit_wallet_posts_a_balanced_adjustment_out_of_the_wallet(enabled_api, enabled_merchant):
    fund(enabled_merchant, "5000")

    assert _debit(enabled_merchant, "1200") == {"currency": "XOF", "available": "3800"}

    assert balances(enabled_api) == {"currency": "XOF", "available": "3800", "reserved": "0"}
    journal = Journal.objects.filter(merchant=enabled_merchant).latest("created_at")
    assert (journal.kind, journal.memo) == ("adjustment", "provider statement 2024-05")
    assert sorted((line.account.code, line.amount) for line in journal.lines.all()) == [
        ("adjustments", Decimal("1200")),
        ("merchant_available", Decimal("-1200")),
    ]
    entry = AuditLogEntry.objects.get(merchant=enabled_merchant, detail__action="wallet_debited")
    assert (entry.actor, entry.actor_label, entry.action) == (None, "system", "wallet.adjusted")
    assert entry.detail == {
        "action": "wallet_debited",
        "currency": "XOF",
        "amount": "1200",
        "reason": "provider statement 2024-05",
        "journal_id": str(journal.id),
        "discrepancy_id": None,
        "settled": None,
    }
    ledger_clean()


def test_debit_wallet_may_empty_the_wallet_but_never_overdraw_it(enabled_api, enabled_merchant):
    fund(enabled_merchant, "100")
    before = adjustment_state(enabled_merchant)

    with pytest.raises(CommandError, match="available balance is too low"):
        _debit(enabled_merchant, "101")
    with pytest.raises(CommandError, match="available balance is too low"):
        _debit(enabled_merchant, "1", currency="XAF")  # no XAF wallet at all

    assert adjustment_state(enabled_merchant) == before
    assert balances(enabled_api, "XAF")["available"] == "0"
    assert _debit(enabled_merchant, "100") == {"currency": "XOF", "available": "0"}
    ledger_clean()


@pytest.mark.parametrize(
    ("amount", "message"),
    [
        ("-5", "is not an amount"),
        ("0", "must be a positive"),
        ("1.5", "XOF has no minor unit"),
        ("abc", "is not an amount"),
        ("", "must not be empty"),
    ],
)
def test_debit_wallet_refuses_bad_amounts(merchant, amount, message):
    fund(merchant, "100")
    before = adjustment_state(merchant)
    with pytest.raises(CommandError, match=message):
        _debit(merchant, amount)
    assert adjustment_state(merchant) == before


def test_debit_wallet_refuses_an_unknown_merchant_and_a_blank_reason(merchant):
    with pytest.raises(CommandError, match="No merchant"):
        call_command("debit_wallet", str(uuid.uuid4()), "XOF", "10", "--reason", "x")
    fund(merchant, "100")
    with pytest.raises(CommandError, match="reason is required"):
        call_command("debit_wallet", str(merchant.id), "XOF", "10", "--reason", "  ")
    assert Wallet.objects.get(merchant=merchant).available == Decimal("100")


@pytest.mark.parametrize("command", ["credit_wallet", "debit_wallet"])
def test_a_reason_longer_than_the_journal_keeps_is_refused_not_cut(merchant, command):
    """The journal's memo keeps 255 characters: a longer reason was cut there and in the audit
    log without a word."""
    fund(merchant, "100")
    before = adjustment_state(merchant)
    with pytest.raises(CommandError, match="at most 255 characters"):
        call_command(command, str(merchant.id), "XOF", "10", "--reason", "r" * 256)
    assert adjustment_state(merchant) == before
    call_command(command, str(merchant.id), "XOF", "10", "--reason", "r" * 255)
    assert Journal.objects.filter(merchant=merchant).latest("created_at").memo == "r" * 255


def test_a_debit_takes_back_a_payout_the_provider_paid_and_resolves_its_discrepancy(
    enabled_api, enabled_merchant, django_capture_on_commit_callbacks, settings
):
    discrepancy = payout_paid_after_we_failed_it(
        enabled_api, enabled_merchant, django_capture_on_commit_callbacks, settings
    )

    with pytest.raises(CommandError, match="more than the payout took from the wallet"):
        _debit(enabled_merchant, "10201", "--discrepancy", str(discrepancy.id))
    discrepancy.refresh_from_db()
    assert discrepancy.resolved_at is None

    body = _debit(enabled_merchant, "10200", "--discrepancy", str(discrepancy.id))

    assert body == {"currency": "XOF", "available": "9800"}
    assert balances(enabled_api) == {"currency": "XOF", "available": "9800", "reserved": "0"}
    discrepancy.refresh_from_db()
    journal = Journal.objects.filter(merchant=enabled_merchant, kind="adjustment").latest(
        "created_at"
    )
    assert (discrepancy.resolved_at, discrepancy.resolved_by) == (
        journal.created_at,
        "debit_wallet",
    )
    entry = AuditLogEntry.objects.get(merchant=enabled_merchant, detail__action="wallet_debited")
    assert entry.actor_label == "system"
    assert entry.target == str(discrepancy.resource_id)
    assert entry.detail["discrepancy_id"] == str(discrepancy.id)
    assert entry.detail["settled"] == f"payout {discrepancy.resource_id}"
    assert entry.detail["journal_id"] == str(journal.id)
    ledger_clean()

    before = adjustment_state(enabled_merchant)
    with pytest.raises(CommandError, match="already resolved by debit_wallet"):
        _debit(enabled_merchant, "1", "--discrepancy", str(discrepancy.id))
    assert adjustment_state(enabled_merchant) == before


def test_a_debit_for_less_than_the_payout_settles_it_too(
    enabled_api, enabled_merchant, django_capture_on_commit_callbacks, settings
):
    """The provider paid, but charged no fee on it, say: ops take back what it paid."""
    discrepancy = payout_paid_after_we_failed_it(
        enabled_api, enabled_merchant, django_capture_on_commit_callbacks, settings
    )
    assert _debit(enabled_merchant, "10000", "--discrepancy", str(discrepancy.id)) == {
        "currency": "XOF",
        "available": "10000",
    }
    discrepancy.refresh_from_db()
    assert discrepancy.resolved_at is not None


def test_a_debit_refuses_another_merchants_discrepancy_and_changes_nothing(
    enabled_api, enabled_merchant, other_merchant, django_capture_on_commit_callbacks, settings
):
    discrepancy = payout_paid_after_we_failed_it(
        enabled_api, enabled_merchant, django_capture_on_commit_callbacks, settings
    )
    fund(other_merchant, "20000")
    before = adjustment_state(other_merchant)

    with pytest.raises(CommandError, match="has no provider discrepancy"):
        _debit(other_merchant, "10200", "--discrepancy", str(discrepancy.id))
    with pytest.raises(CommandError, match="has no provider discrepancy"):
        _debit(other_merchant, "10200", "--discrepancy", str(uuid.uuid4()))
    with pytest.raises(CommandError, match="No provider discrepancy"):
        _debit(other_merchant, "10200", "--discrepancy", "not-an-id")

    assert adjustment_state(other_merchant) == before
    with pytest.raises(CommandError, match=r"payout was in XOF, not XAF"):
        _debit(enabled_merchant, "100", "--discrepancy", str(discrepancy.id), currency="XAF")
    discrepancy.refresh_from_db()
    assert discrepancy.resolved_at is None


def test_a_debit_refuses_a_discrepancy_about_a_payin(
    enabled_api, enabled_merchant, django_capture_on_commit_callbacks, settings
):
    discrepancy = payin_collected_after_we_failed_it(
        enabled_api, django_capture_on_commit_callbacks, settings
    )
    fund(enabled_merchant, "20000")
    before = adjustment_state(enabled_merchant)

    with pytest.raises(
        CommandError,
        match="about a payin, not a payout, a refund or a transfer disbursement: ops settle it "
        "with credit_wallet --discrepancy",
    ):
        _debit(enabled_merchant, "100", "--discrepancy", str(discrepancy.id))

    assert adjustment_state(enabled_merchant) == before


def test_a_debit_refuses_a_discrepancy_the_provider_did_not_complete(
    enabled_api, enabled_merchant, django_capture_on_commit_callbacks
):
    """A payout we completed that the provider later says failed: there is nothing to take
    back (if anything, ops owe the merchant)."""
    fund(enabled_merchant, "20000")
    discrepancy = reported_failed_after_it_completed(
        enabled_api, django_capture_on_commit_callbacks, "payout"
    )
    before = adjustment_state(enabled_merchant)

    with pytest.raises(CommandError, match='answered "failed", not "completed"'):
        _debit(enabled_merchant, "100", "--discrepancy", str(discrepancy.id))

    assert adjustment_state(enabled_merchant) == before


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("first", ["payout", "debit"])
def test_a_debit_racing_a_payout_for_the_last_funds_has_exactly_one_winner(enabled_merchant, first):
    """Both reach the wallet while it is locked (as by a posting in flight), in either order:
    the first through takes the funds, the second is checked against what it left."""
    api = MerchantClient(enabled_merchant)
    customer = create_customer(api)
    fund(enabled_merchant, "10200")  # one payout of 10000 + 200 fee, or one debit of 10200
    quote = create_quote(api, "payout")
    payouts: list = []
    debits: list = []

    def payout():
        response = api.post("/payouts", payout_body(quote, customer, SILENT_PHONE))
        return response.status_code, response.json()

    def debit():
        try:
            return _debit(enabled_merchant, "10200")
        except CommandError as exc:
            return str(exc)

    works = [(payout, payouts), (debit, debits)]
    if first == "debit":
        works.reverse()
    with transaction.atomic():
        Wallet.objects.select_for_update().get(merchant=enabled_merchant, currency="XOF")
        threads = []
        for count, (work, results) in enumerate(works, start=1):
            threads.append(start(work, results))
            waiting_for_a_lock(count)
    for thread in threads:
        thread.join(timeout=60)

    [(status, body)], [debited] = payouts, debits
    if first == "payout":
        assert status == 201, body
        assert "available balance is too low" in debited, debited
        assert balances(api) == {"currency": "XOF", "available": "0", "reserved": "10200"}
        assert Journal.objects.filter(kind="adjustment").count() == 1
    else:
        assert debited == {"currency": "XOF", "available": "0"}
        assert (status, body["error"]["reason"]) == (400, "insufficient_balance"), body
        assert balances(api) == {"currency": "XOF", "available": "0", "reserved": "0"}
        assert not Payout.objects.exists()
    assert ledger_breaches() == []
    ledger_clean()


def test_a_debit_with_a_reference_run_again_after_the_funds_went_is_already_applied(
    enabled_api, enabled_merchant
):
    """A refusal uses no reference; once applied, a run again is answered from the journal,
    not checked against a balance that has moved since."""
    fund(enabled_merchant, "1000")
    before = adjustment_state(enabled_merchant)
    with pytest.raises(CommandError, match="available balance is too low"):
        _debit(enabled_merchant, "1200", "--reference", "OPS-9")
    assert adjustment_state(enabled_merchant) == before

    fund(enabled_merchant, "1000")
    assert _debit(enabled_merchant, "1200", "--reference", "OPS-9") == {
        "currency": "XOF",
        "available": "800",
    }
    journal = Journal.objects.get(resource_id=uuid.uuid5(enabled_merchant.id, "OPS-9"))
    assert sorted((line.account.code, line.amount) for line in journal.lines.all()) == [
        ("adjustments", Decimal("1200")),
        ("merchant_available", Decimal("-1200")),
    ]
    entry = AuditLogEntry.objects.get(merchant=enabled_merchant, detail__action="wallet_debited")
    assert entry.detail["reference"] == "OPS-9"
    _debit(enabled_merchant, "800")  # the rest goes
    before = adjustment_state(enabled_merchant)

    out = io.StringIO()
    call_command(
        "debit_wallet",
        str(enabled_merchant.id),
        "XOF",
        "1200",
        "--reason",
        "provider statement 2024-05",
        "--reference",
        "OPS-9",
        stdout=out,
    )

    assert out.getvalue() == (
        "Already applied with reference OPS-9, nothing changed: debited 1200 XOF; "
        "available: 0 XOF\n"
    )
    assert adjustment_state(enabled_merchant) == before
    with pytest.raises(CommandError, match=r"by a debit of 1200 XOF at .* differs in its amount"):
        _debit(enabled_merchant, "1000", "--reference", "OPS-9")
    assert adjustment_state(enabled_merchant) == before
    ledger_clean()
