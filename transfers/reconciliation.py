"""What the transfers app adds to the payments app's reconciliation: the discrepancies of a
transfer that ops settle with credit_wallet / debit_wallet, the journals and transfer_suspense
balances check_ledger verifies, and the provider references of a transfer's statement lines.
Registered from TransfersConfig.ready(): payments never imports transfers."""

from decimal import Decimal
from uuid import UUID

from django.db import models
from django.db.models import Case, F, OuterRef, Q, Subquery, Sum, Value, When
from django.db.models.functions import Coalesce

from core import money
from payments import selectors as payment_selectors
from payments import statements
from payments.ledger.accounts import TRANSFER_SUSPENSE
from payments.ledger.adjustments import Settles, settlement_register
from payments.ledger.checks import breaches_register
from payments.models import Journal
from transfers.models import LegStatus, Transfer, TransferStatus

# The transfer failed at its collection and is final; the payer's money reached the provider.
# The merchant gets what the payer paid, as when support returns the collected funds of a
# failed disbursement: the whole payin amount, no fee.
COLLECTION_SETTLES = Settles(
    resource_type="transfer_collection",
    model=Transfer,
    state={"payin_status": LegStatus.FAILED},
    only="a transfer whose collection we failed",
    what="transfer's collection",
    currency_field="payin_currency",
    amount_field="payin_amount",
    at_most="the transfer's payer paid (its payin amount)",
)
# Support returned the collected funds of the failed disbursement to the wallet, then the
# provider said it paid the recipient: the merchant holds that money twice.
DISBURSEMENT_SETTLES = Settles(
    resource_type="transfer_disbursement",
    model=Transfer,
    state={"payin_status": LegStatus.COMPLETED, "payout_status": LegStatus.CANCELLED},
    only="a transfer whose collected funds were returned to the merchant's wallet",
    what="transfer's return",
    currency_field="payin_currency",
    amount_field="payin_amount",
    at_most="the return of the transfer's collected funds credited the wallet",
    also=(
        " once the transfer's collected funds were returned to the merchant's wallet "
        "(while its disbursement is failed, support applies the provider's completion)"
    ),
    otherwise=(
        " While its disbursement is failed, support applies the provider's completion "
        "instead (or marks it resolved if the provider did not pay)."
    ),
    # Two attempts that both paid after the return are two discrepancies, but the return
    # credited the merchant once.
    once=(
        "The collected funds returned for this transfer were already taken back by "
        "{command} for discrepancy {id} (attempt {reference}): this one's payout is "
        "beyond what the return credited the merchant. Reconcile it by hand, then mark "
        "it resolved."
    ),
)

_DONE = Q(status=TransferStatus.COMPLETED)
EXPECTED_JOURNALS = [
    (Transfer, "transfer", "transfer_collected", Q(payin_status=LegStatus.COMPLETED)),
    (Transfer, "transfer", "transfer_disbursed", _DONE),
    # across two currencies the suspense is emptied in the payin currency by its own journal
    (Transfer, "transfer", "transfer_settled", _DONE & ~Q(payin_currency=F("payout_currency"))),
    # support gave the disbursement up: the collected money went back to the wallet
    (
        Transfer,
        "transfer",
        "transfer_returned",
        Q(payin_status=LegStatus.COMPLETED, payout_status=LegStatus.CANCELLED),
    ),
]


def _transfer_suspense_breaches() -> list[str]:
    """Every transfer holds in transfer_suspense, in its payin currency, what its state implies:
    its payin_amount from its collection's completion until its disbursement completes or
    support returns the funds (disbursing, or a failed disbursement waiting for a relaunch or a
    return), nothing otherwise (not collected yet, failed at collection, completed, returned).
    And every transfer_suspense line is in a journal of a transfer, in that transfer's payin
    currency: one elsewhere would be money in suspense that no transfer accounts for."""
    suspense = payment_selectors.journal_lines_on(account_code=TRANSFER_SUSPENSE)
    return _suspense_held_wrongly(suspense) + _suspense_lines_of_no_transfer(suspense)


def _suspense_held_wrongly(suspense) -> list[str]:
    held = (
        suspense.filter(
            journal__resource_type="transfer",
            journal__resource_id=OuterRef("pk"),
            journal__currency=OuterRef("payin_currency"),
        )
        .order_by()
        .values("journal__resource_id")
        .annotate(total=Sum("amount"))
        .values("total")
    )
    amount = models.DecimalField(max_digits=20, decimal_places=2)  # as JournalLine.amount
    holding = Q(payin_status=LegStatus.COMPLETED) & ~Q(
        payout_status__in=[LegStatus.COMPLETED, LegStatus.CANCELLED]
    )
    wrong = (
        Transfer.objects.annotate(
            held=Coalesce(
                Subquery(held, output_field=amount), Value(Decimal(0)), output_field=amount
            ),
            expected=Case(
                When(holding, then=F("payin_amount")),
                default=Value(Decimal(0)),
                output_field=amount,
            ),
        )
        .exclude(held=F("expected"))
        .values_list(
            "id", "status", "payin_status", "payout_status", "payin_currency", "held", "expected"
        )
    )
    return [
        f"transfer {transfer_id} ({status}, payin {payin_status}, payout {payout_status}) "
        f"holds {money.format_amount(held_now)} {currency} in transfer_suspense, not "
        f"{money.format_amount(expected)}"
        for transfer_id, status, payin_status, payout_status, currency, held_now, expected in wrong
    ]


def _suspense_lines_of_no_transfer(suspense) -> list[str]:
    transfer_currency = Transfer.objects.filter(pk=OuterRef("journal__resource_id")).values(
        "payin_currency"
    )
    stray = (
        suspense.annotate(transfer_currency=Subquery(transfer_currency))
        .filter(
            ~Q(journal__resource_type="transfer")
            | Q(transfer_currency__isnull=True)
            | ~Q(journal__currency=F("transfer_currency"))
        )
        .values_list("journal_id", "journal__kind", "journal__resource_type", "journal__currency")
        .order_by("journal_id")
        .distinct()
    )
    return [
        f"journal {journal_id} ({kind}, {resource_type}, {currency}) posts to "
        "transfer_suspense for no transfer in that currency"
        for journal_id, kind, resource_type, currency in stray
    ]


def transfer_statement_references(journals: list[Journal]) -> dict[tuple[str, UUID, str], str]:
    """A transfer journal's provider reference: its collection's for the collected money
    (collected, or returned to the wallet), its disbursement's otherwise."""
    transfers = {
        row[0]: row[1:]
        for row in Transfer.objects.filter(
            pk__in={journal.resource_id for journal in journals}
        ).values_list("id", "collection_reference", "disbursement_reference")
    }
    found = {}
    for journal in journals:
        if journal.resource_id in transfers:
            collection, disbursement = transfers[journal.resource_id]
            from_collection = journal.kind in ("transfer_collected", "transfer_returned")
            key = (journal.resource_type, journal.resource_id, journal.kind)
            found[key] = collection if from_collection else disbursement
    return found


def register() -> None:
    """Called once from TransfersConfig.ready()."""
    settlement_register(direction="credit", settles=COLLECTION_SETTLES)
    settlement_register(direction="debit", settles=DISBURSEMENT_SETTLES)
    breaches_register(expected=EXPECTED_JOURNALS, check=_transfer_suspense_breaches)
    statements.references_register("transfer", transfer_statement_references)
