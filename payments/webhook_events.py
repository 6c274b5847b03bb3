"""The payin.*, payout.* and refund.* webhooks in the OpenAPI document: `data.object` as
payin_snapshot, payout_snapshot and refund_snapshot build it (a test holds them equal)."""

from rest_framework import serializers

from core.money import AmountField, CurrencyField
from core.serializers import OutputSerializer
from payments.models import PayinStatus, PayoutStatus, RefundStatus
from payments.serializers import (
    PayinWalletImpactOutput,
    PayoutWalletImpactOutput,
    RefundWalletImpactOutput,
)
from quotes.models import RailType
from webhooks.schema import event_webhook


class _FinalPayment(OutputSerializer):
    id = serializers.UUIDField()
    send_amount = AmountField()
    send_currency = CurrencyField()
    receive_amount = AmountField()
    receive_currency = CurrencyField()
    operator_code = serializers.CharField()
    provider_reference = serializers.CharField(allow_null=True)
    completed_at = serializers.DateTimeField(allow_null=True)
    failed_at = serializers.DateTimeField(allow_null=True)
    failure_reason = serializers.CharField(
        allow_null=True, help_text="Why it failed (e.g. provider_declined); null if completed."
    )


class PayinEventObject(_FinalPayment):
    status = serializers.ChoiceField(choices=[PayinStatus.COMPLETED, PayinStatus.FAILED])
    country_code = serializers.CharField()
    rail_type = serializers.ChoiceField(choices=RailType.choices)
    wallet_impact = PayinWalletImpactOutput()


class PayoutEventObject(_FinalPayment):
    status = serializers.ChoiceField(choices=[PayoutStatus.COMPLETED, PayoutStatus.FAILED])
    wallet_impact = PayoutWalletImpactOutput()


class RefundEventObject(OutputSerializer):
    id = serializers.UUIDField()
    payin_id = serializers.UUIDField()
    status = serializers.ChoiceField(choices=[RefundStatus.COMPLETED, RefundStatus.FAILED])
    amount = AmountField()
    currency = CurrencyField()
    operator_code = serializers.CharField()
    provider_reference = serializers.CharField(allow_null=True)
    wallet_impact = RefundWalletImpactOutput()
    completed_at = serializers.DateTimeField(allow_null=True)
    failed_at = serializers.DateTimeField(allow_null=True)
    failure_reason = serializers.CharField(allow_null=True)


_AT = "2026-11-28T10:15:32.482913Z"
_FINAL = {"completed_at": _AT, "failed_at": None, "failure_reason": None}
_FAILED = {"completed_at": None, "failed_at": _AT, "failure_reason": "provider_declined"}
_PAYIN = {
    "id": "bb6e6362-15c1-498f-bbfa-377899cc658f",
    "send_amount": "10000",
    "send_currency": "XOF",
    "receive_amount": "9850",
    "receive_currency": "XOF",
    "country_code": "SN",
    "operator_code": "SN_ORANGE_MOMO",
    "rail_type": "mobile_money",
    "wallet_impact": {"credit_amount": "9850", "currency": "XOF"},
}
_PAYOUT = {
    "id": "6f1e0c55-2b7d-4f0a-9a43-1c8e5d7b2a90",
    "send_amount": "5000",
    "send_currency": "XOF",
    "receive_amount": "5000",
    "receive_currency": "XOF",
    "operator_code": "SN_ORANGE_MOMO",
    "wallet_impact": {"debit_amount": "5100", "currency": "XOF"},
}
_REFUND = {
    "id": "3c9a7e21-5d4b-4e8f-b1a2-9f0e6d5c4b3a",
    "payin_id": _PAYIN["id"],
    "amount": "10000",
    "currency": "XOF",
    "operator_code": "SN_ORANGE_MOMO",
    "wallet_impact": {"debit_amount": "10000", "currency": "XOF"},
}


def _completed(base: dict) -> dict:
    return {**base, "status": "completed", "provider_reference": "SIM-4F2A9C7B1E", **_FINAL}


def _failed(base: dict) -> dict:
    return {**base, "status": "failed", "provider_reference": "SIM-4F2A9C7B1E", **_FAILED}


PAYIN_COMPLETED = event_webhook(
    event="payin.completed",
    data_type="payin",
    data_object=PayinEventObject,
    example_object=_completed(_PAYIN),
    when="A payin completed: the payer paid, your wallet is credited `wallet_impact`.",
)
PAYIN_FAILED = event_webhook(
    event="payin.failed",
    data_type="payin",
    data_object=PayinEventObject,
    example_object=_failed(_PAYIN),
    when="A payin failed (`failure_reason`): nothing was collected.",
)
PAYOUT_COMPLETED = event_webhook(
    event="payout.completed",
    data_type="payout",
    data_object=PayoutEventObject,
    example_object=_completed(_PAYOUT),
    when="A payout completed: the recipient was paid, its reservation settled.",
)
PAYOUT_FAILED = event_webhook(
    event="payout.failed",
    data_type="payout",
    data_object=PayoutEventObject,
    example_object=_failed(_PAYOUT),
    when="A payout failed (`failure_reason`): its reservation is back in your available balance.",
)
REFUND_COMPLETED = event_webhook(
    event="refund.completed",
    data_type="refund",
    data_object=RefundEventObject,
    example_object=_completed(_REFUND),
    when="A refund completed: the payer got `amount` back.",
)
REFUND_FAILED = event_webhook(
    event="refund.failed",
    data_type="refund",
    data_object=RefundEventObject,
    example_object=_failed(_REFUND),
    when="A refund failed (`failure_reason`): its reservation is back in your available balance.",
)
