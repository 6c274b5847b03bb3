import json
import uuid
from decimal import Decimal

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from merchants.models import AuditLogEntry
from payments.ledger.accounts import (
    ADJUSTMENTS,
    FEE_REVENUE,
    MERCHANT_AVAILABLE,
    MERCHANT_RESERVED,
    TRANSFER_SUSPENSE,
    provider_clearing,
)
from payments.ledger.adjustments import InvalidAdjustment, wallet_credit
from payments.ledger.checks import ledger_breaches, ledger_check
from payments.ledger.journals import (
    InsufficientBalance,
    UnbalancedJournal,
    account_balances,
    post_journal,
)
from payments.models import Journal, JournalLine, Wallet
from payments.services.sweeps import payments_fail_timed_out
from tests.transfers import conftest as transfer_helpers
from transfers.models import Transfer
from transfers.services.support import transfer_return_collected_funds

pytestmark = pytest.mark.django_db


def _post(merchant, lines, *, kind="test", resource_id=None, currency="XOF"):
    return post_journal(
        merchant_id=merchant.pk,
        currency=currency,
        kind=kind,
        resource_type="test",
        resource_id=resource_id or uuid.uuid4(),
        lines=lines,
        at=timezone.now(),
    )


def test_credit_wallet_posts_a_balanced_adjustment(merchant):
    wallet = wallet_credit(
        merchant=merchant,
        currency="XOF",
        amount=Decimal("5000"),
        reason="opening float",
        at=timezone.now(),
    ).wallet
    assert wallet.available == Decimal("5000")
    assert wallet.reserved == 0
    journal = Journal.objects.get(merchant=merchant)
    assert journal.kind == "adjustment"
    assert journal.memo == "opening float"
    assert sorted((line.account.code, line.amount) for line in journal.lines.all()) == [
        ("adjustments", Decimal("-5000")),
        ("merchant_available", Decimal("5000")),
    ]
    assert ledger_breaches() == []


def test_posting_the_same_resource_and_kind_twice_changes_nothing(merchant):
    resource_id = uuid.uuid4()
    lines = [(ADJUSTMENTS, Decimal("-10")), (MERCHANT_AVAILABLE, Decimal("10"))]
    first = _post(merchant, lines, resource_id=resource_id)
    second = _post(merchant, lines, resource_id=resource_id)
    assert first.pk == second.pk
    assert Journal.objects.count() == 1
    assert Wallet.objects.get(merchant=merchant).available == Decimal("10")


def test_an_unbalanced_journal_is_refused(merchant):
    with pytest.raises(UnbalancedJournal):
        _post(
            merchant,
            [(ADJUSTMENTS, Decimal("-10")), (MERCHANT_AVAILABLE, Decimal("9"))],
        )
    with pytest.raises(UnbalancedJournal):
        _post(merchant, [(ADJUSTMENTS, -10.0), (MERCHANT_AVAILABLE, 10.0)])
    assert Journal.objects.count() == 0
    assert JournalLine.objects.count() == 0


def test_a_journal_that_would_overdraw_the_wallet_is_refused_and_changes_nothing(merchant):
    wallet_credit(
        merchant=merchant, currency="XOF", amount=Decimal("100"), reason="x", at=timezone.now()
    )
    with pytest.raises(InsufficientBalance):
        _post(
            merchant,
            [
                (MERCHANT_AVAILABLE, Decimal("-101")),
                (MERCHANT_RESERVED, Decimal("101")),
            ],
        )
    wallet = Wallet.objects.get(merchant=merchant)
    assert (wallet.available, wallet.reserved) == (Decimal("100"), Decimal("0"))
    assert Journal.objects.count() == 1


def test_wallets_are_per_currency(merchant):
    wallet_credit(
        merchant=merchant, currency="XOF", amount=Decimal("100"), reason="x", at=timezone.now()
    )
    wallet_credit(
        merchant=merchant, currency="XAF", amount=Decimal("7"), reason="x", at=timezone.now()
    )
    balances = dict(Wallet.objects.filter(merchant=merchant).values_list("currency", "available"))
    assert balances == {"XOF": Decimal("100"), "XAF": Decimal("7")}


@pytest.mark.parametrize(
    ("currency", "amount", "reason"),
    [("EUR", "10", "x"), ("XOF", "0", "x"), ("XOF", "1.5", "x"), ("XOF", "10", "  ")],
)
def test_invalid_adjustments_are_refused(merchant, currency, amount, reason):
    with pytest.raises(InvalidAdjustment):
        wallet_credit(
            merchant=merchant,
            currency=currency,
            amount=Decimal(amount),
            reason=reason,
            at=timezone.now(),
        )
    assert Journal.objects.count() == 0


def test_credit_wallet_command_prints_the_new_balance_as_json(merchant, capsys):
    call_command("credit_wallet", str(merchant.id), "XAF", "2500", "--reason", "float", "--json")
    call_command("credit_wallet", str(merchant.id), "XAF", "500.00", "--reason", "float", "--json")
    lines = capsys.readouterr().out.strip().splitlines()
    assert json.loads(lines[-1]) == {"currency": "XAF", "available": "3000"}


def test_credit_wallet_is_in_the_merchants_audit_log_as_system(merchant):
    call_command("credit_wallet", str(merchant.id), "XAF", "2500", "--reason", "statement fix")

    journal = Journal.objects.get(merchant=merchant)
    entry = AuditLogEntry.objects.get(merchant=merchant)
    assert (entry.actor, entry.actor_label, entry.action) == (None, "system", "wallet.adjusted")
    assert entry.detail == {
        "action": "wallet_credited",
        "currency": "XAF",
        "amount": "2500",
        "reason": "statement fix",
        "journal_id": str(journal.id),
        "discrepancy_id": None,
        "settled": None,
    }


@pytest.mark.parametrize("amount", ["-5", "1.5", "abc"])
def test_credit_wallet_command_refuses_bad_amounts(merchant, amount):
    with pytest.raises(CommandError):
        call_command("credit_wallet", str(merchant.id), "XAF", amount, "--reason", "float")
    assert Journal.objects.count() == 0


def test_credit_wallet_past_what_the_ledger_holds_is_refused_and_changes_nothing(merchant):
    largest = "9" * 18  # the largest amount a command accepts
    call_command("credit_wallet", str(merchant.id), "XAF", largest, "--reason", "float")
    with pytest.raises(CommandError, match="largest amount the ledger can hold"):
        call_command("credit_wallet", str(merchant.id), "XAF", largest, "--reason", "float")
    assert Wallet.objects.get(merchant=merchant, currency="XAF").available == Decimal(largest)
    assert Journal.objects.count() == 1
    assert ledger_check()["ok"]


def test_credit_wallet_command_refuses_an_unknown_merchant():
    with pytest.raises(CommandError):
        call_command("credit_wallet", str(uuid.uuid4()), "XAF", "10", "--reason", "float")


def test_check_ledger_is_clean_on_a_sound_ledger(merchant, capsys):
    wallet_credit(
        merchant=merchant, currency="XOF", amount=Decimal("100"), reason="x", at=timezone.now()
    )
    call_command("check_ledger", "--json")
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is True
    assert report["breaches"] == []


def test_check_ledger_exits_non_zero_when_a_wallet_disagrees_with_its_lines(merchant, capsys):
    wallet_credit(
        merchant=merchant, currency="XOF", amount=Decimal("100"), reason="x", at=timezone.now()
    )
    Wallet.objects.filter(merchant=merchant).update(available=Decimal("150"))
    with pytest.raises(CommandError):
        call_command("check_ledger", "--json")
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is False
    assert "available is 150" in report["breaches"][0]


def test_check_ledger_reports_an_unbalanced_journal(merchant):
    wallet_credit(
        merchant=merchant, currency="XOF", amount=Decimal("100"), reason="x", at=timezone.now()
    )
    line = JournalLine.objects.get(account__code=ADJUSTMENTS)
    JournalLine.objects.filter(pk=line.pk).update(amount=Decimal("-99"))
    breaches = ledger_breaches()
    assert any("summing to 1" in breach for breach in breaches)


def test_check_ledger_task_returns_the_report(merchant):
    from payments import tasks

    wallet_credit(
        merchant=merchant, currency="XOF", amount=Decimal("100"), reason="x", at=timezone.now()
    )
    report = tasks.check_ledger.delay().get()
    assert report["ok"] is True


def test_check_ledger_is_clean_after_every_kind_of_payment_and_flags_a_missing_journal(
    enabled_api, enabled_merchant, django_capture_on_commit_callbacks, capsys
):
    from payments.models import Payout
    from tests.payments.conftest import (
        DECLINED_PHONE,
        SILENT_PHONE,
        create_customer,
        create_quote,
        fund,
        payin_body,
        payout_body,
    )

    customer = create_customer(enabled_api)
    fund(enabled_merchant, "100000")
    with django_capture_on_commit_callbacks(execute=True):
        for phone in ("+221770001234", DECLINED_PHONE, SILENT_PHONE):
            quote = create_quote(enabled_api, "payin")
            assert (
                enabled_api.post("/payins", payin_body(quote, customer, phone)).status_code == 201
            )
            quote = create_quote(enabled_api, "payout")
            response = enabled_api.post("/payouts", payout_body(quote, customer, phone))
            assert response.status_code == 201
    payments_fail_timed_out(now=timezone.now() + timezone.timedelta(days=1))
    call_command("check_ledger", "--json")
    report = json.loads(capsys.readouterr().out)
    assert report == {"ok": True, "breaches": [], "journals": report["journals"], "wallets": 1}

    completed = Payout.objects.get(status="completed")
    journal = Journal.objects.get(resource_id=completed.id, kind="payout_completed")
    journal.lines.all().delete()
    journal.delete()
    with pytest.raises(CommandError):
        call_command("check_ledger")
    assert f"payout {completed.id} (completed) has no payout_completed journal" in (
        capsys.readouterr().out
    )


@pytest.mark.django_db(transaction=True)
def test_accounts_created_by_a_posting_that_rolled_back_are_not_reused(merchant):
    """Account ids are remembered per process, but only once their transaction committed."""
    from django.db import transaction

    lines = [(ADJUSTMENTS, Decimal("-10")), (MERCHANT_AVAILABLE, Decimal("10"))]
    with pytest.raises(RuntimeError), transaction.atomic():
        _post(merchant, lines)  # creates the merchant's XOF accounts, then rolls back
        raise RuntimeError("the caller's transaction fails after the posting")

    journal = _post(merchant, lines)  # must create them again, not post to the lost ids
    again = _post(merchant, lines)  # and now, from the remembered ids, the same accounts

    assert Wallet.objects.get(merchant=merchant, currency="XOF").available == Decimal("20")
    first_accounts = {line.account_id for line in journal.lines.all()}
    assert first_accounts == {line.account_id for line in again.lines.all()}
    assert ledger_breaches(merchant_ids=[merchant.pk]) == []


@pytest.mark.django_db(transaction=True)
def test_check_ledger_reads_one_snapshot_while_a_posting_commits(merchant):
    """A credit commits after the check summed the wallets' lines and before it read the
    wallets (it waits on the wallet table, which the crediting transaction holds): the check
    must see the credit whole or not at all, not report the wallet as out of line with its
    ledger."""
    import threading

    from django.db import connection, transaction

    from tests.locks import waiting_for_a_lock

    wallet_credit(
        merchant=merchant,
        currency="XOF",
        amount=Decimal("100"),
        reason="opening",
        at=timezone.now(),
    )
    locked, check_waits = threading.Event(), threading.Event()
    reports: list[dict] = []

    def credit_while_the_check_waits() -> None:
        try:
            with transaction.atomic():
                with connection.cursor() as cursor:
                    cursor.execute("LOCK TABLE payments_wallet IN ACCESS EXCLUSIVE MODE")
                locked.set()
                assert check_waits.wait(20)
                wallet_credit(
                    merchant=merchant,
                    currency="XOF",
                    amount=Decimal("5"),
                    reason="during the check",
                    at=timezone.now(),
                )
        finally:
            connection.close()

    def check() -> None:
        try:
            reports.append(ledger_check())
        finally:
            connection.close()

    crediting = threading.Thread(target=credit_while_the_check_waits)
    crediting.start()
    assert locked.wait(20)
    checking = threading.Thread(target=check)
    checking.start()
    waiting_for_a_lock(1)  # the check has run its first statements and waits for the wallets
    check_waits.set()
    crediting.join(30)
    checking.join(30)

    assert [report["breaches"] for report in reports] == [[]]
    assert Wallet.objects.get(merchant=merchant, currency="XOF").available == Decimal("105")
    assert ledger_check()["ok"]


def test_reposting_a_movement_returns_the_first_even_when_the_balance_no_longer_allows_it(
    merchant,
):
    _post(merchant, [(ADJUSTMENTS, Decimal("-10")), (MERCHANT_AVAILABLE, Decimal("10"))])
    spend = [(MERCHANT_AVAILABLE, Decimal("-10")), (ADJUSTMENTS, Decimal("10"))]
    resource_id = uuid.uuid4()
    first = _post(merchant, spend, kind="spend", resource_id=resource_id)  # available 10 -> 0

    again = _post(merchant, spend, kind="spend", resource_id=resource_id)  # would go to -10

    assert again.pk == first.pk
    assert Wallet.objects.get(merchant=merchant, currency="XOF").available == 0
    assert Journal.objects.filter(resource_id=resource_id).count() == 1
    with pytest.raises(InsufficientBalance):  # a new movement is still refused
        _post(merchant, spend, kind="spend", resource_id=uuid.uuid4())


# --- transfer_suspense: what each transfer holds there ------------------------------------

CM_SILENT = "+237670001999"


def _transfer(api, capture, *, domestic: bool = False, **phones) -> Transfer:
    """A 10000 transfer through the API, every leg the simulator answers at once applied."""
    customer = transfer_helpers.create_customer(api, **transfer_helpers.SENDER_DETAILS)
    corridor = (
        {
            "corridor": "SN-SN-XOF-XOF",
            "payer_operator": "SN_ORANGE_MOMO",
            "recipient_operator": "SN_WAVE_MOMO",
        }
        if domestic
        else {}
    )
    quote = transfer_helpers.create_quote(api, customer_id=customer["id"], **corridor)
    if domestic:
        phones.setdefault("payer_phone", "+221770002222")
    with capture(execute=True):
        created = api.post("/transfers", transfer_helpers.transfer_body(quote, customer, **phones))
    assert created.status_code == 201, created.json()
    return Transfer.objects.get(pk=created.json()["id"])


def _states(*transfers: Transfer) -> list[tuple[str, str, str]]:
    return [
        tuple(
            Transfer.objects.filter(pk=t.pk).values_list("status", "payin_status", "payout_status")[
                0
            ]
        )
        for t in transfers
    ]


@pytest.fixture
def transfers_in_every_state(enabled_api, django_capture_on_commit_callbacks) -> dict:
    capture = django_capture_on_commit_callbacks
    made = {
        "completed": _transfer(enabled_api, capture),
        "completed_domestic": _transfer(enabled_api, capture, domestic=True),
        "collecting": _transfer(enabled_api, capture, payer_phone=CM_SILENT),
        "failed_at_collection": _transfer(
            enabled_api, capture, payer_phone=transfer_helpers.CM_DECLINED
        ),
        "disbursing": _transfer(enabled_api, capture, recipient_phone=transfer_helpers.SN_SILENT),
        "payout_failed": _transfer(
            enabled_api, capture, recipient_phone=transfer_helpers.SN_DECLINED
        ),
        "returned": _transfer(enabled_api, capture, recipient_phone=transfer_helpers.SN_DECLINED),
    }
    transfer_return_collected_funds(transfer_id=made["returned"].id, actor=None, now=timezone.now())
    assert _states(*made.values()) == [
        ("completed", "completed", "completed"),
        ("completed", "completed", "completed"),
        ("collecting", "pending", "not_started"),
        ("failed", "failed", "cancelled"),
        ("disbursing", "completed", "pending"),
        ("failed", "completed", "failed"),
        ("failed", "completed", "cancelled"),
    ]
    return made


def test_check_ledger_passes_every_transfer_holding_what_its_state_implies_in_suspense(
    enabled_merchant, transfers_in_every_state, capsys
):
    """Completed, returned, failed at collection or not collected yet: nothing. Disbursing,
    or a failed disbursement waiting for a relaunch or a return: its payin amount."""
    call_command("check_ledger", "--json")

    report = json.loads(capsys.readouterr().out)
    assert (report["ok"], report["breaches"]) == (True, [])
    balances = account_balances(merchant=enabled_merchant, currency="XAF")
    assert balances[TRANSFER_SUSPENSE] == Decimal("20000")


def _post_about(
    transfer: Transfer, kind: str, lines, *, currency: str = "XAF", resource="transfer"
):
    return post_journal(
        merchant_id=transfer.merchant_id,
        currency=currency,
        kind=kind,
        resource_type=resource,
        resource_id=transfer.id if resource == "transfer" else uuid.uuid4(),
        lines=lines,
        at=timezone.now(),
    )


def test_check_ledger_flags_a_transfer_whose_suspense_disagrees_with_its_state(
    transfers_in_every_state, capsys
):
    """Balanced journals, wallets that agree with their lines, every journal a status implies:
    only the suspense shows that money went where the transfer's state says it did not."""
    completed = transfers_in_every_state["completed"]
    payout_failed = transfers_in_every_state["payout_failed"]
    returned = transfers_in_every_state["returned"]
    # a failed disbursement's money credited to the wallet without the return
    _post_about(
        payout_failed,
        "transfer_refund",
        [
            (TRANSFER_SUSPENSE, Decimal("-10000")),
            (MERCHANT_AVAILABLE, Decimal("10000")),
        ],
    )
    # a completed transfer collected a second time into its suspense
    _post_about(
        completed,
        "transfer_recollected",
        [
            (provider_clearing("CM_MTN_MOMO"), Decimal("-10000")),
            (TRANSFER_SUSPENSE, Decimal("10000")),
        ],
    )
    # money put in suspense by a journal that is no transfer's, and by a returned transfer's
    # journal in the payout currency
    stray = _post_about(
        completed,
        "adjustment",
        [(ADJUSTMENTS, Decimal("-5")), (TRANSFER_SUSPENSE, Decimal("5"))],
        resource="adjustment",
    )
    wrong_currency = _post_about(
        returned,
        "transfer_parked",
        [(FEE_REVENUE, Decimal("-7")), (TRANSFER_SUSPENSE, Decimal("7"))],
        currency="XOF",
    )
    assert ledger_breaches() == []

    with pytest.raises(CommandError, match="4 ledger breaches"):
        call_command("check_ledger")

    assert sorted(capsys.readouterr().out.splitlines()[1:]) == sorted(
        [
            f"transfer {payout_failed.id} (failed, payin completed, payout failed) holds 0 XAF "
            "in transfer_suspense, not 10000",
            f"transfer {completed.id} (completed, payin completed, payout completed) holds "
            "10000 XAF in transfer_suspense, not 0",
            f"journal {stray.id} (adjustment, adjustment, XAF) posts to transfer_suspense for no "
            "transfer in that currency",
            f"journal {wrong_currency.id} (transfer_parked, transfer, XOF) posts to "
            "transfer_suspense for no transfer in that currency",
        ]
    )
