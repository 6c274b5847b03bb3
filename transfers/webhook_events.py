"""The transfer.* webhooks in the OpenAPI document: `data.object` as transfers.services.events
builds it, a leg's snapshot or the aggregate one (a test holds them equal)."""

from rest_framework import serializers

from core.money import AmountField, CurrencyField
from core.serializers import OutputSerializer
from transfers.serializers import TransferLegStatusField, TransferStatusField
from webhooks.schema import event_webhook


class _TransferLeg(OutputSerializer):
    id = serializers.UUIDField()
    status = TransferStatusField()
    payin_status = TransferLegStatusField(help_text="Status of the collection leg.")
    payout_status = TransferLegStatusField(help_text="Status of the disbursement leg.")
    payin_amount = AmountField()
    payin_currency = CurrencyField()
    payout_amount = AmountField()
    payout_currency = CurrencyField()
    payer_operator_code = serializers.CharField()
    recipient_operator_code = serializers.CharField()


class TransferPayinLegEventObject(_TransferLeg):
    collection_reference = serializers.CharField(allow_null=True)
    collection_submitted_at = serializers.DateTimeField(allow_null=True)
    collection_completed_at = serializers.DateTimeField(allow_null=True)
    collection_failed_at = serializers.DateTimeField(allow_null=True)
    collection_failure_reason = serializers.CharField(allow_null=True)


class TransferPayoutLegEventObject(_TransferLeg):
    disbursement_attempt = serializers.IntegerField(help_text="1, then one more per relaunch.")
    disbursement_reference = serializers.CharField(allow_null=True)
    disbursement_submitted_at = serializers.DateTimeField(allow_null=True)
    disbursement_completed_at = serializers.DateTimeField(allow_null=True)
    disbursement_failed_at = serializers.DateTimeField(allow_null=True)
    disbursement_failure_reason = serializers.CharField(allow_null=True)


class TransferEventObject(OutputSerializer):
    id = serializers.UUIDField()
    status = TransferStatusField()
    payin_status = TransferLegStatusField(help_text="Status of the collection leg.")
    payout_status = TransferLegStatusField(help_text="Status of the disbursement leg.")
    send_amount = AmountField()
    send_currency = CurrencyField()
    receive_amount = AmountField()
    receive_currency = CurrencyField()
    corridor_code = serializers.CharField()
    payer_operator_code = serializers.CharField()
    recipient_operator_code = serializers.CharField()
    collection_completed_at = serializers.DateTimeField(allow_null=True)
    collection_failed_at = serializers.DateTimeField(allow_null=True)
    disbursement_completed_at = serializers.DateTimeField(allow_null=True)
    disbursement_failed_at = serializers.DateTimeField(allow_null=True)
    failure_reason = serializers.CharField(
        allow_null=True,
        help_text="On transfer.failed: the collection's reason (e.g. provider_declined) or "
        "collected_funds_returned_by_support; null otherwise.",
    )


_ID = "9a2c4e6f-8b1d-4f3a-a5c7-e9b0d2f4a6c8"
_SUBMITTED = "2026-11-28T10:15:30.118204Z"
_AT = "2026-11-28T10:15:32.482913Z"
_LEG = {
    "id": _ID,
    "payin_amount": "10000",
    "payin_currency": "XAF",
    "payout_amount": "9800",
    "payout_currency": "XOF",
    "payer_operator_code": "CM_MTN_MOMO",
    "recipient_operator_code": "SN_WAVE_MOMO",
}
_COLLECTED = {
    "collection_reference": "SIM-7C1D3E5F9A",
    "collection_submitted_at": _SUBMITTED,
}
_DISBURSED = {
    "disbursement_attempt": 1,
    "disbursement_reference": "SIM-2B4D6F8A0C",
    "disbursement_submitted_at": _SUBMITTED,
}
_AGGREGATE = {
    "id": _ID,
    "send_amount": "10000",
    "send_currency": "XAF",
    "receive_amount": "9800",
    "receive_currency": "XOF",
    "corridor_code": "CM-SN-XAF-XOF",
    "payer_operator_code": "CM_MTN_MOMO",
    "recipient_operator_code": "SN_WAVE_MOMO",
}

TRANSFER_PAYIN_COMPLETED = event_webhook(
    event="transfer.payin.completed",
    data_type="transfer",
    data_object=TransferPayinLegEventObject,
    example_object={
        **_LEG,
        "status": "disbursing",
        "payin_status": "completed",
        "payout_status": "pending",
        **_COLLECTED,
        "collection_completed_at": _AT,
        "collection_failed_at": None,
        "collection_failure_reason": None,
    },
    when="A transfer's collection leg completed: the payer paid; the disbursement follows.",
)
TRANSFER_PAYIN_FAILED = event_webhook(
    event="transfer.payin.failed",
    data_type="transfer",
    data_object=TransferPayinLegEventObject,
    example_object={
        **_LEG,
        "status": "failed",
        "payin_status": "failed",
        "payout_status": "cancelled",
        **_COLLECTED,
        "collection_completed_at": None,
        "collection_failed_at": _AT,
        "collection_failure_reason": "provider_declined",
    },
    when="A transfer's collection leg failed; `transfer.failed` follows.",
)
TRANSFER_PAYOUT_COMPLETED = event_webhook(
    event="transfer.payout.completed",
    data_type="transfer",
    data_object=TransferPayoutLegEventObject,
    example_object={
        **_LEG,
        "status": "completed",
        "payin_status": "completed",
        "payout_status": "completed",
        **_DISBURSED,
        "disbursement_completed_at": _AT,
        "disbursement_failed_at": None,
        "disbursement_failure_reason": None,
    },
    when="A transfer's disbursement attempt completed: the recipient was paid.",
)
TRANSFER_PAYOUT_FAILED = event_webhook(
    event="transfer.payout.failed",
    data_type="transfer",
    data_object=TransferPayoutLegEventObject,
    example_object={
        **_LEG,
        "status": "disbursing",
        "payin_status": "completed",
        "payout_status": "failed",
        **_DISBURSED,
        "disbursement_completed_at": None,
        "disbursement_failed_at": _AT,
        "disbursement_failure_reason": "provider_declined",
    },
    when="A transfer's disbursement attempt failed. The transfer can still be relaunched to "
    "another recipient; `transfer.failed` comes only when it becomes final.",
)
TRANSFER_COMPLETED = event_webhook(
    event="transfer.completed",
    data_type="transfer",
    data_object=TransferEventObject,
    example_object={
        **_AGGREGATE,
        "status": "completed",
        "payin_status": "completed",
        "payout_status": "completed",
        "collection_completed_at": _SUBMITTED,
        "collection_failed_at": None,
        "disbursement_completed_at": _AT,
        "disbursement_failed_at": None,
        "failure_reason": None,
    },
    when="A transfer is final and completed: collected from the payer, paid to the recipient.",
)
TRANSFER_FAILED = event_webhook(
    event="transfer.failed",
    data_type="transfer",
    data_object=TransferEventObject,
    example_object={
        **_AGGREGATE,
        "status": "failed",
        "payin_status": "failed",
        "payout_status": "cancelled",
        "collection_completed_at": None,
        "collection_failed_at": _AT,
        "disbursement_completed_at": None,
        "disbursement_failed_at": None,
        "failure_reason": "provider_declined",
    },
    when="A transfer is final and failed: its collection failed, or support returned the "
    "collected funds to your wallet.",
)
