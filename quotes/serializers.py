from rest_framework import serializers

from core import money, pagination
from core.fields import CountryCodeField, StrictCharField, StrictUUIDField
from core.money import AmountField, CurrencyField
from core.serializers import (
    IdempotencyMetaSerializer,
    InputSerializer,
    NullForBlank,
    OutputSerializer,
)
from quotes.models import CorridorType, FlowType, OperatorStatus, QuoteStatus, RailType


class QuoteCollectionInput(InputSerializer):
    """POST /quotes/payin and POST /quotes/payout (same shape)."""

    customer_id = StrictUUIDField(required=False)
    country_code = CountryCodeField()
    operator_code = StrictCharField(max_length=64)
    rail_type = serializers.ChoiceField(choices=RailType.choices)
    send_amount = AmountField()
    send_currency = CurrencyField()


class QuoteTransferInput(InputSerializer):
    """POST /quotes/transfer. payin_amount + payin_currency, or a fixed payout_amount."""

    customer_id = StrictUUIDField(required=False)
    corridor_code = StrictCharField(max_length=32)
    payer_operator_code = StrictCharField(max_length=64)
    recipient_operator_code = StrictCharField(max_length=64)
    payout_currency = CurrencyField()
    payin_amount = AmountField(required=False)
    payin_currency = CurrencyField(required=False)
    payout_amount = AmountField(required=False, help_text="Optional fixed payout amount.")
    send_amount = AmountField(required=False, help_text="Synonym of payin_amount.")
    send_currency = CurrencyField(required=False, help_text="Synonym of payin_currency.")


class QuoteOutput(NullForBlank, OutputSerializer):
    id = serializers.UUIDField()
    customer_id = serializers.UUIDField(allow_null=True)
    flow_type = serializers.ChoiceField(choices=FlowType.choices)
    status = serializers.ChoiceField(choices=QuoteStatus.choices, source="current_status")
    expires_at = serializers.DateTimeField()
    send_amount = AmountField()
    send_currency = CurrencyField()
    receive_amount = AmountField()
    receive_currency = CurrencyField()
    country_code = serializers.CharField(allow_null=True)
    operator_code = serializers.CharField(allow_null=True)
    rail_type = serializers.ChoiceField(choices=RailType.choices, allow_null=True)
    corridor_code = serializers.CharField(allow_null=True)
    corridor_type = serializers.ChoiceField(choices=CorridorType.choices, allow_null=True)
    payer_operator_code = serializers.CharField(allow_null=True)
    recipient_operator_code = serializers.CharField(allow_null=True)
    total_fee = AmountField()
    wallet_impact = serializers.DictField()
    created_at = serializers.DateTimeField()
    # Present on POST answers only (added by @idempotent); not required in the schema.
    _meta = IdempotencyMetaSerializer(required=False, source="idempotency_meta")


class QuoteListQuery(pagination.ListQueryInput):
    status = serializers.ChoiceField(choices=QuoteStatus.choices, required=False)
    flow_type = serializers.ChoiceField(choices=FlowType.choices, required=False)
    customer_id = serializers.UUIDField(required=False)


QuotePageOutput = pagination.page_serializer("QuotePageOutput", QuoteOutput)


class FeeSummaryOutput(serializers.Serializer):
    """The fee schedule that applies: percentage% x amount + fixed, clamped to [min, max]
    (max null: no cap), rounded up to the currency unit."""

    percentage = serializers.SerializerMethodField()
    fixed = AmountField(source="fixed_amount")
    min = AmountField(source="minimum_fee")
    max = AmountField(source="maximum_fee", allow_null=True)

    def get_percentage(self, schedule) -> str:
        return money.format_amount(schedule.percentage.normalize())


class OperatorFeesOutput(serializers.Serializer):
    payin = FeeSummaryOutput(allow_null=True)
    payout = FeeSummaryOutput(allow_null=True)


class OperatorItemOutput(serializers.Serializer):
    code = serializers.CharField(source="operator.code")
    country_code = serializers.CharField(source="operator.country_code")
    currency = CurrencyField(source="operator.currency")
    rail_type = serializers.ChoiceField(choices=RailType.choices, source="operator.rail_type")
    name = serializers.CharField(source="operator.name")
    min_amount = AmountField(source="operator.min_amount")
    max_amount = AmountField(source="operator.max_amount")
    status = serializers.ChoiceField(choices=OperatorStatus.choices, source="operator.status")
    fees = OperatorFeesOutput()


class OperatorListOutput(serializers.Serializer):
    data = OperatorItemOutput(many=True)


class CorridorItemOutput(serializers.Serializer):
    code = serializers.CharField(source="corridor.code")
    payer_country = serializers.CharField(source="corridor.payer_country")
    recipient_country = serializers.CharField(source="corridor.recipient_country")
    payer_currency = CurrencyField(source="corridor.payer_currency")
    recipient_currency = CurrencyField(source="corridor.recipient_currency")
    corridor_type = serializers.ChoiceField(
        choices=CorridorType.choices, source="corridor.corridor_type"
    )
    requires_sender_details = serializers.BooleanField(source="corridor.requires_sender_details")
    requires_kyc = serializers.BooleanField(source="corridor.requires_kyc")
    fees = FeeSummaryOutput(allow_null=True)


class CorridorListOutput(serializers.Serializer):
    data = CorridorItemOutput(many=True)


class OperatorPredictInput(InputSerializer):
    """POST /operators/predict."""

    phone = StrictCharField(
        allow_blank=True,  # refused as phone_invalid, as any other text that is not a number
        help_text=(
            "The number in international form: one +, the country code and the number; spaces,"
            " dots, hyphens and parentheses allowed, no extension (E.164 recommended)."
        ),
    )


class OperatorPredictionOutput(OutputSerializer):
    """The catalog operator of a phone number's network, and the wallets usable beside it."""

    phone = serializers.CharField(help_text="The number in E.164 form.")
    country_code = serializers.CharField()
    operator_code = serializers.CharField(
        source="operator.code", help_text="The catalog operator of the number's network."
    )
    rail_type = serializers.ChoiceField(choices=RailType.choices, source="operator.rail_type")
    operator_status = serializers.ChoiceField(
        choices=OperatorStatus.choices,
        source="operator.status",
        help_text="The operator's status, as GET /operators gives it.",
    )
    enabled = serializers.BooleanField(
        help_text="Whether this merchant may use the operator (GET /operators lists it)."
    )
    also_usable = serializers.ListField(
        child=serializers.CharField(),
        help_text=(
            "The country's wallets that work with any network's number (e.g. SN_WAVE_MOMO), "
            "usable for this number too; possibly empty."
        ),
    )
