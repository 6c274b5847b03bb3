from payments.ledger.adjustments import Adjusted, wallet_debit
from payments.management.commands._adjustments import AdjustmentCommand


class Command(AdjustmentCommand):
    help = (
        "Debit a merchant wallet with a balanced ledger adjustment (e.g. to take back a payout "
        "the provider paid after we failed it)."
    )
    done = "Debited"
    discrepancy_help = (
        "the unresolved provider discrepancy (a failed payout, or a returned transfer's "
        "disbursement, the provider paid) this debit settles; it is resolved with it"
    )

    def adjust(self, **adjustment) -> Adjusted:
        return wallet_debit(**adjustment)
