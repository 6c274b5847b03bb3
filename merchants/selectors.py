"""Reads of the merchants app for the apps above it."""

from typing import Any
from uuid import UUID

from django.db.models import Exists, Model, OuterRef

from merchants.models import (
    AuditAction,
    AuditLogEntry,
    Merchant,
    MerchantCorridor,
    MerchantOperator,
)


def wallet_adjustment_audit_detail(*, merchant: Merchant, journal_id: UUID) -> dict[str, Any]:
    """The detail of the merchant's wallet_adjusted audit entry of this journal ({} when none)."""
    return (
        AuditLogEntry.objects.filter(
            merchant=merchant,
            action=AuditAction.WALLET_ADJUSTED,
            detail__journal_id=str(journal_id),
        )
        .values_list("detail", flat=True)
        .first()
        or {}
    )


def merchant_has_operator(*, merchant: Merchant | OuterRef, operator: Model | OuterRef) -> Exists:
    """Whether the merchant has the operator enabled, as an expression for a query."""
    return Exists(MerchantOperator.objects.filter(merchant=merchant, operator=operator))


def merchant_has_operator_code(*, merchant: Merchant | OuterRef, operator_code: OuterRef) -> Exists:
    """Whether the merchant has the operator with this code enabled, as an expression."""
    return Exists(MerchantOperator.objects.filter(operator__code=operator_code, merchant=merchant))


def merchant_has_corridor(*, merchant: Merchant, corridor: Model) -> bool:
    """Whether the merchant has the corridor (a quotes.Corridor) enabled."""
    return MerchantCorridor.objects.filter(merchant=merchant, corridor=corridor).exists()
