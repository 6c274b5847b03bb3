"""The transfer's ledger postings: collected into suspense, disbursed out of it (with the FX
position across two currencies), or returned to the merchant's wallet."""

from datetime import datetime

from payments.ledger.accounts import (
    FEE_REVENUE,
    MERCHANT_AVAILABLE,
    TRANSFER_SUSPENSE,
    provider_clearing,
)
from payments.ledger.journals import post_journal
from transfers.models import Transfer

# The FX position between the two currencies of a cross-currency transfer (docs/decisions.md).
FX_CONVERSION = "fx_conversion"
# The journal that returns a failed transfer's collected money to the merchant's wallet.
RETURNED_JOURNAL = "transfer_returned"


def post_collected(transfer: Transfer, at: datetime) -> None:
    """The collected money waits in transfer_suspense until the disbursement completes."""
    post_journal(
        merchant_id=transfer.merchant_id,
        currency=transfer.payin_currency,
        kind="transfer_collected",
        resource_type="transfer",
        resource_id=transfer.id,
        lines=[
            (provider_clearing(transfer.payer_operator_code), -transfer.payin_amount),
            (TRANSFER_SUSPENSE, transfer.payin_amount),
        ],
        at=at,
    )


def post_disbursed(transfer: Transfer, at: datetime) -> None:
    """Empty the suspense: the fee to fee_revenue, the payout to the recipient operator and,
    when a relaunch lowered the payout, the difference to the merchant's wallet. Across two
    currencies the net amount passes through fx_conversion so each journal balances in its
    own currency."""
    payin, fee = transfer.payin_amount, transfer.total_fee
    quoted, paid = transfer.quoted_payout_amount, transfer.payout_amount
    payout_lines = [
        (provider_clearing(transfer.recipient_operator_code), paid),
        (MERCHANT_AVAILABLE, quoted - paid),
    ]
    common = {"merchant_id": transfer.merchant_id, "resource_type": "transfer", "at": at}
    if transfer.payin_currency == transfer.payout_currency:
        post_journal(
            **common,
            currency=transfer.payin_currency,
            kind="transfer_disbursed",
            resource_id=transfer.id,
            lines=[
                (TRANSFER_SUSPENSE, -payin),
                (FEE_REVENUE, fee),
                *payout_lines,
            ],
        )
        return
    journals = {
        transfer.payin_currency: (
            "transfer_settled",
            [
                (TRANSFER_SUSPENSE, -payin),
                (FEE_REVENUE, fee),
                (FX_CONVERSION, payin - fee),
            ],
        ),
        transfer.payout_currency: ("transfer_disbursed", [(FX_CONVERSION, -quoted), *payout_lines]),
    }
    # Each posting locks the merchant's wallet in its currency until commit: posted in one
    # order of currencies, a XAF->XOF and a XOF->XAF transfer of one merchant completing at the
    # same moment cannot each hold the wallet the other waits for (a deadlock).
    for currency in sorted(journals):
        kind, lines = journals[currency]
        post_journal(**common, currency=currency, kind=kind, resource_id=transfer.id, lines=lines)


def post_returned(transfer: Transfer, at: datetime) -> None:
    """Empty the suspense into the merchant's available balance, in the payin currency: the
    whole collected amount, no fee (fees are earned at completion, and this transfer never
    completed). Unique per transfer, so it is posted once."""
    post_journal(
        merchant_id=transfer.merchant_id,
        currency=transfer.payin_currency,
        kind=RETURNED_JOURNAL,
        resource_type="transfer",
        resource_id=transfer.id,
        lines=[
            (TRANSFER_SUSPENSE, -transfer.payin_amount),
            (MERCHANT_AVAILABLE, transfer.payin_amount),
        ],
        at=at,
    )
