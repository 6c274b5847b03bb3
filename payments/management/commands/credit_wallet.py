from django.utils import timezone

from payments.ledger.adjustments import Adjusted, wallet_credit
from payments.management.commands._adjustments import AdjustmentCommand


class Command(AdjustmentCommand):
    help = (
        "Credit a merchant wallet with a balanced ledger adjustment (e.g. for a payin the "
        "provider collected after we failed it)."
    )
    done = "Credited"
    discrepancy_help = (
        "the unresolved provider discrepancy (a failed payin, or a transfer's failed "
        "collection, the provider collected) this credit settles; it is resolved with it"
    )

    def adjust(self, **adjustment) -> Adjusted:
        return wallet_credit(**adjustment, at=timezone.now())
