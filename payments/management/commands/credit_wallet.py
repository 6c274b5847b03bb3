from django.utils import timezone

from config import money
from config.ops import OpsCommand
from payments import services
from payments.management.commands._adjustments import merchant_and_amount


class Command(OpsCommand):
    help = "Credit a merchant wallet with a balanced ledger adjustment."

    def add_command_arguments(self, parser) -> None:
        parser.add_argument("merchant_id")
        parser.add_argument("currency", choices=money.CURRENCIES)
        parser.add_argument("amount", help='a positive amount, e.g. "50000"')
        parser.add_argument("--reason", required=True, help="why (kept on the journal)")

    def run(self, *, merchant_id: str, currency: str, amount: str, reason: str, **_) -> None:
        merchant, value = merchant_and_amount(
            merchant_id=merchant_id, currency=currency, amount=amount
        )
        wallet = services.wallet_credit(
            merchant=merchant, currency=currency, amount=value, reason=reason, at=timezone.now()
        )
        available = money.format_amount(wallet.available)
        self.emit(
            {"currency": currency, "available": available},
            f"Credited {money.format_amount(value)} {currency}; available: {available} {currency}",
        )
