from uuid import UUID

from django.core.management.base import CommandError

from config import money
from config.ops import OpsCommand
from payments import services
from payments.management.commands._adjustments import merchant_and_amount


class Command(OpsCommand):
    help = (
        "Debit a merchant wallet with a balanced ledger adjustment (e.g. to take back a payout "
        "the provider paid after we failed it)."
    )

    def add_command_arguments(self, parser) -> None:
        parser.add_argument("merchant_id")
        parser.add_argument("currency", choices=money.CURRENCIES)
        parser.add_argument("amount", help='a positive amount, e.g. "50000"')
        parser.add_argument("--reason", required=True, help="why (kept on the journal)")
        parser.add_argument(
            "--discrepancy",
            help="the unresolved provider discrepancy (a failed payout the provider paid) this "
            "debit settles; it is resolved with it",
        )

    def run(
        self,
        *,
        merchant_id: str,
        currency: str,
        amount: str,
        reason: str,
        discrepancy: str | None,
        **_,
    ) -> None:
        merchant, value = merchant_and_amount(
            merchant_id=merchant_id, currency=currency, amount=amount
        )
        try:
            discrepancy_id = UUID(discrepancy) if discrepancy is not None else None
        except ValueError as exc:
            raise CommandError(f"No provider discrepancy {discrepancy}.") from exc
        wallet = services.wallet_debit(
            merchant=merchant,
            currency=currency,
            amount=value,
            reason=reason,
            discrepancy_id=discrepancy_id,
        )
        available = money.format_amount(wallet.available)
        self.emit(
            {"currency": currency, "available": available},
            f"Debited {money.format_amount(value)} {currency}; available: {available} {currency}",
        )
