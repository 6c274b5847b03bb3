"""A disbursement's money (a payout's, a refund's): reserved when it is created, then paid to
the operator's clearing (with Cowry's fee) or released to the available balance. Journal
kinds `<resource_type>_reserved`, `_completed` and `_released`."""

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from uuid import UUID

from payments.ledger.accounts import (
    FEE_REVENUE,
    MERCHANT_AVAILABLE,
    MERCHANT_RESERVED,
    provider_clearing,
)
from payments.ledger.journals import post_journal


@dataclass(frozen=True)
class Reservation:
    merchant_id: UUID
    currency: str
    resource_type: str
    resource_id: UUID
    amount: Decimal  # what leaves the merchant's wallet, fee included


def reservation_hold(reservation: Reservation) -> None:
    """The amount moves from the available to the reserved balance (InsufficientBalance when
    it is short), stamped when the wallet is locked: after any credit this debit relies on."""
    amount = reservation.amount
    _post(reservation, "reserved", [(MERCHANT_AVAILABLE, -amount), (MERCHANT_RESERVED, amount)])


def reservation_pay(
    reservation: Reservation,
    *,
    operator_code: str,
    paid: Decimal,
    fee: Decimal = Decimal(0),
    at: datetime,
) -> None:
    """The reservation pays the operator's clearing `paid` and Cowry `fee`."""
    lines = [
        (MERCHANT_RESERVED, -reservation.amount),
        (provider_clearing(operator_code), paid),
        (FEE_REVENUE, fee),  # a zero line is not written
    ]
    _post(reservation, "completed", lines, at=at)


def reservation_release(reservation: Reservation, *, at: datetime) -> None:
    """The reservation goes back to the available balance."""
    amount = reservation.amount
    lines = [(MERCHANT_RESERVED, -amount), (MERCHANT_AVAILABLE, amount)]
    _post(reservation, "released", lines, at=at)


def _post(reservation: Reservation, kind: str, lines: list, *, at: datetime | None = None) -> None:
    post_journal(
        merchant_id=reservation.merchant_id,
        currency=reservation.currency,
        kind=f"{reservation.resource_type}_{kind}",
        resource_type=reservation.resource_type,
        resource_id=reservation.resource_id,
        lines=lines,
        at=at,
    )
