"""What credit_wallet and debit_wallet share: their arguments, how they read them, their output."""

from decimal import Decimal
from uuid import UUID

from django.core.management.base import CommandError

from core import money
from core.ops import OpsCommand
from merchants import services as merchant_services
from merchants.models import Merchant
from payments.ledger.adjustments import ADJUSTMENT_REFERENCE_MAX, Adjusted


def merchant_and_amount(
    *, merchant_id: str, currency: str, amount: str
) -> tuple[Merchant, Decimal]:
    """The merchant and the parsed amount; CommandError (one line, exit 1) when either is bad."""
    try:
        merchant = merchant_services.merchant_get(merchant_id=merchant_id)
    except (ValueError, merchant_services.NotFound) as exc:
        raise CommandError(f"No merchant {merchant_id}.") from exc
    try:
        return merchant, money.parse_amount(amount, currency)
    except ValueError as exc:
        raise CommandError(str(exc)) from exc


class AdjustmentCommand(OpsCommand):
    """MERCHANT_ID CURRENCY AMOUNT --reason TEXT [--discrepancy ID] [--reference REF]: one
    wallet adjustment, printed as the wallet's new available balance. With a reference, a run
    again that asks the same adjustment changes nothing and prints the same (saying, in text or
    on stderr with --json, that it was already applied); one asking another is refused."""

    done = ""  # "Credited" / "Debited"
    discrepancy_help = ""

    def add_command_arguments(self, parser) -> None:
        parser.add_argument("merchant_id")
        parser.add_argument("currency", choices=money.CURRENCIES)
        parser.add_argument("amount", help='a positive amount, e.g. "50000"')
        parser.add_argument("--reason", required=True, help="why (kept on the journal)")
        parser.add_argument("--discrepancy", help=self.discrepancy_help)
        parser.add_argument(
            "--reference",
            help=(
                f"an ops ticket or run id (1 to {ADJUSTMENT_REFERENCE_MAX} printable ASCII "
                "characters, no spaces): the merchant's adjustment with it is applied once, "
                "however often the command runs"
            ),
        )

    def run(
        self,
        *,
        merchant_id: str,
        currency: str,
        amount: str,
        reason: str,
        discrepancy: str | None,
        reference: str | None,
        **_,
    ) -> None:
        merchant, value = merchant_and_amount(
            merchant_id=merchant_id, currency=currency, amount=amount
        )
        try:
            discrepancy_id = UUID(discrepancy) if discrepancy is not None else None
        except ValueError as exc:
            raise CommandError(f"No provider discrepancy {discrepancy}.") from exc
        adjusted = self.adjust(
            merchant=merchant,
            currency=currency,
            amount=value,
            reason=reason,
            discrepancy_id=discrepancy_id,
            reference=reference,
        )
        available = money.format_amount(adjusted.wallet.available)
        done = f"{self.done} {money.format_amount(value)} {currency}"
        if adjusted.already_applied:
            done = (
                f"Already applied with reference {reference}, nothing changed: "
                f"{self.done.lower()} {money.format_amount(value)} {currency}"
            )
            if self.as_json:  # stdout keeps the contract's JSON object
                self.stderr.write(done)
        self.emit(
            {"currency": currency, "available": available},
            f"{done}; available: {available} {currency}",
        )

    def adjust(
        self,
        *,
        merchant: Merchant,
        currency: str,
        amount: Decimal,
        reason: str,
        discrepancy_id: UUID | None,
        reference: str | None,
    ) -> Adjusted:
        raise NotImplementedError
