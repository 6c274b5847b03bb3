"""Reads of the merchants app for the apps above it."""

from typing import Any
from uuid import UUID

from merchants.models import AuditAction, AuditLogEntry, Merchant


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
