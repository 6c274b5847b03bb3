"""Provider discrepancies: answers that contradict a final state, kept for support."""

import logging
from datetime import datetime
from typing import Any
from uuid import UUID

from django.db import transaction
from django.db.models import Exists, OuterRef, Q

from merchants import services as merchant_services
from merchants.models import Merchant
from payments import provider
from payments.ledger.adjustments import DEBIT_COMMAND
from payments.models import ProviderDiscrepancy, RefundStatus

logger = logging.getLogger("cowry.payments")


def refund_holds_its_payin() -> Q:
    """The refunds that hold part of their payin's amount: every one not failed, and one we
    failed that the provider paid after all (a "completed" discrepancy, open or settled by a
    debit): its payer has that money, and refunding it again would pay them twice."""
    paid_after_all = ProviderDiscrepancy.objects.filter(
        Q(resolved_at__isnull=True) | Q(resolved_by=DEBIT_COMMAND),
        resource_type="refund",
        resource_id=OuterRef("pk"),
        provider_outcome=provider.COMPLETED,
    )
    return ~Q(status=RefundStatus.FAILED) | Exists(paid_after_all)


def provider_discrepancy_resolve(*, discrepancy_id: UUID, actor: Any, now: datetime) -> bool:
    """Support marks a discrepancy reconciled, recorded with who did it, once: of two racing
    clicks, the second waits for the row lock and finds it resolved. False when it was."""
    with transaction.atomic():
        discrepancy = (
            ProviderDiscrepancy.objects.select_for_update(of=("self",))
            .select_related("merchant")
            .filter(pk=discrepancy_id, resolved_at__isnull=True)
            .first()
        )
        if discrepancy is None:
            return False
        discrepancy.mark_resolved(by=actor.get_username(), at=now)
        merchant_services.audit_record(
            merchant=discrepancy.merchant,
            actor=actor,
            action="support.action",
            target=str(discrepancy.resource_id),
            detail={"action": "provider_discrepancy_resolved", "id": str(discrepancy.id)},
        )
    return True


def provider_discrepancy_lock(*, discrepancy_id: UUID) -> ProviderDiscrepancy:
    """The discrepancy, its row locked until the caller's transaction ends."""
    return ProviderDiscrepancy.objects.select_for_update().get(pk=discrepancy_id)


def provider_discrepancy_mark_resolved(
    *, discrepancy: ProviderDiscrepancy, by: str, at: datetime
) -> None:
    """Record who reconciled a discrepancy and when; the caller holds its row lock."""
    discrepancy.mark_resolved(by=by, at=at)


def provider_discrepancy_record(
    *,
    merchant: Merchant,
    resource_type: str,
    resource_id: UUID,
    reference: str,
    provider_reference: str,
    outcome: str,
    reason: str,
    our_status: str,
    at: datetime,
) -> ProviderDiscrepancy:
    """Keep, once per answer, a provider answer that contradicts our final state, for support
    to reconcile. Money may have moved without a journal: this is logged as an error."""
    discrepancy, created = ProviderDiscrepancy.objects.get_or_create(
        resource_type=resource_type,
        reference=reference,
        provider_outcome=outcome,
        defaults={
            "merchant": merchant,
            "resource_id": resource_id,
            "provider_reference": provider_reference,
            "provider_reason": reason,
            "our_status": our_status,
            "received_at": at,
        },
    )
    if created:
        logger.error(
            "Provider discrepancy on %s %s: provider says %s, our status is %s",
            resource_type,
            resource_id,
            outcome,
            our_status,
        )
    return discrepancy
