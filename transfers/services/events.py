"""The data.object of each transfer webhook event: a leg's snapshot or the aggregate one."""

from datetime import datetime, timedelta
from typing import Any

from core import money
from transfers.models import Transfer, TransferStatus
from webhooks.services.events import event_record


def _leg_snapshot(transfer: Transfer) -> dict[str, Any]:
    return {
        "id": transfer.id,
        "status": transfer.status,
        "payin_status": transfer.payin_status,
        "payout_status": transfer.payout_status,
        "payin_amount": money.format_amount(transfer.payin_amount),
        "payin_currency": transfer.payin_currency,
        "payout_amount": money.format_amount(transfer.payout_amount),
        "payout_currency": transfer.payout_currency,
        "payer_operator_code": transfer.payer_operator_code,
        "recipient_operator_code": transfer.recipient_operator_code,
    }


def payin_leg_snapshot(transfer: Transfer) -> dict[str, Any]:
    """data.object of transfer.payin.*."""
    return {
        **_leg_snapshot(transfer),
        "collection_reference": transfer.collection_reference or None,
        "collection_submitted_at": transfer.collection_submitted_at,
        "collection_completed_at": transfer.collection_completed_at,
        "collection_failed_at": transfer.collection_failed_at,
        "collection_failure_reason": transfer.collection_failure_reason or None,
    }


def payout_leg_snapshot(transfer: Transfer) -> dict[str, Any]:
    """data.object of transfer.payout.*."""
    return {
        **_leg_snapshot(transfer),
        "disbursement_attempt": transfer.disbursement_attempt,
        "disbursement_reference": transfer.disbursement_reference or None,
        "disbursement_submitted_at": transfer.disbursement_submitted_at,
        "disbursement_completed_at": transfer.disbursement_completed_at,
        "disbursement_failed_at": transfer.disbursement_failed_at,
        "disbursement_failure_reason": transfer.disbursement_failure_reason or None,
    }


def aggregate_snapshot(transfer: Transfer, *, reason: str = "") -> dict[str, Any]:
    """data.object of transfer.completed / transfer.failed; `reason` is the final move's, which
    a failed transfer carries as its `failure_reason`."""
    failed = transfer.status == TransferStatus.FAILED
    return {
        "id": transfer.id,
        "status": transfer.status,
        "payin_status": transfer.payin_status,
        "payout_status": transfer.payout_status,
        "send_amount": money.format_amount(transfer.send_amount),
        "send_currency": transfer.send_currency,
        "receive_amount": money.format_amount(transfer.receive_amount),
        "receive_currency": transfer.receive_currency,
        "corridor_code": transfer.corridor_code,
        "payer_operator_code": transfer.payer_operator_code,
        "recipient_operator_code": transfer.recipient_operator_code,
        "collection_completed_at": transfer.collection_completed_at,
        "collection_failed_at": transfer.collection_failed_at,
        "disbursement_completed_at": transfer.disbursement_completed_at,
        "disbursement_failed_at": transfer.disbursement_failed_at,
        "failure_reason": (reason or None) if failed else None,
    }


def _snapshot_for(event_type: str, transfer: Transfer, *, reason: str) -> dict[str, Any]:
    if event_type.startswith("transfer.payin."):
        return payin_leg_snapshot(transfer)
    if event_type.startswith("transfer.payout."):
        return payout_leg_snapshot(transfer)
    return aggregate_snapshot(transfer, reason=reason)


def events_record(
    transfer: Transfer, event_types: tuple[str, ...], *, at: datetime, reason: str = ""
) -> None:
    """Record a move's events (`reason`: the move's): a leg event, then the aggregate one, 1 µs
    apart so created_at orders them."""
    for offset, event_type in enumerate(event_types):
        event_record(
            merchant_id=transfer.merchant_id,
            event_type=event_type,
            data_type="transfer",
            data_id=transfer.id,
            data_object=_snapshot_for(event_type, transfer, reason=reason),
            at=at + timedelta(microseconds=offset),
        )
