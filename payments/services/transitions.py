"""What the payin, payout and refund state machines share: their refusal, the reasons they record,
the provider's callbacks, and what a late answer leaves behind."""

import logging
from datetime import datetime

from config.exceptions import DomainError
from payments import provider
from payments.ledger import provider_discrepancy_record
from payments.models import Payin, Payout, Refund

logger = logging.getLogger("cowry.payments")

PAYIN_CALLBACK = "payments.services.payin_apply_provider_result"
PAYOUT_CALLBACK = "payments.services.payout_apply_provider_result"
REFUND_CALLBACK = "payments.services.refund_apply_provider_result"

REASON_PROVIDER_TIMEOUT = "provider_timeout"
REASON_SUBMITTED = "submitted_to_provider"
REASON_MARKED_FAILED = "marked_failed_by_support"

TERMINAL = {"completed", "failed"}


class InvalidTransition(DomainError):
    status = 409
    reason = "invalid_transition"
    message = "The resource cannot move to that status."


def late_answer_ignored(
    *,
    payment: Payin | Payout | Refund,
    resource_type: str,
    provider_reference: str,
    outcome: str,
    reason: str,
    at: datetime,
) -> None:
    """An answer for a payment already final: kept for reconciliation when it contradicts."""
    final = payment.status in (provider.COMPLETED, provider.FAILED)
    if final and outcome != payment.status:
        provider_discrepancy_record(
            merchant=payment.merchant,
            resource_type=resource_type,
            resource_id=payment.id,
            reference=str(payment.id),
            provider_reference=provider_reference,
            outcome=outcome,
            reason=reason,
            our_status=payment.status,
            at=at,
        )
    logger.warning(
        "Late provider answer %s for %s %s ignored (%s)", outcome, resource_type, payment.id, reason
    )
