from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from drf_spectacular.plumbing import ResolvedComponent
from rest_framework import serializers

from core import pagination
from core.fields import (
    AccountIdentifierField,
    CountryCodeField,
    EmailAddressField,
    PhoneField,
    PricingField,
    StrictUUIDField,
    TextLineField,
)
from core.money import AmountField, CurrencyField
from core.serializers import IdempotencyMetaSerializer, NullForBlank, RejectUnknownFields
from quotes.models import CorridorType, RailType
from transfers.models import LegStatus, TransferStatus

RECIPIENT_TYPES = [("individual", "individual"), ("business", "business")]


class TransferStatusField(serializers.ChoiceField):
    def __init__(self, **kwargs) -> None:
        super().__init__(choices=TransferStatus.choices, **kwargs)


class TransferLegStatusField(serializers.ChoiceField):
    def __init__(self, **kwargs) -> None:
        super().__init__(choices=LegStatus.choices, **kwargs)


class _NamedEnumSchema(OpenApiSerializerFieldExtension):
    """One named component per choice set, so the schema has no colliding `status` enums."""

    component_name = ""
    values: list[str] = []

    def map_serializer_field(self, auto_schema, direction):
        component = ResolvedComponent(
            name=self.component_name,
            type=ResolvedComponent.SCHEMA,
            object=self.component_name,
            schema={"type": "string", "enum": list(self.values)},
        )
        auto_schema.registry.register_on_missing(component)
        return component.ref


class TransferStatusFieldSchema(_NamedEnumSchema):
    target_class = TransferStatusField
    component_name = "TransferStatus"
    values = TransferStatus.values


class TransferLegStatusFieldSchema(_NamedEnumSchema):
    target_class = TransferLegStatusField
    component_name = "TransferLegStatus"
    values = LegStatus.values


class TransferPayerInput(RejectUnknownFields):
    """RailParty. country_code, rail_type and operator_code may be omitted (they come from the
    quote) and must match the quote when sent. phone for mobile_money; bank_name, bank_code,
    account_name, account_number for bank_transfer (the other rail's fields are refused)."""

    country_code = CountryCodeField(required=False)
    rail_type = serializers.ChoiceField(choices=RailType.choices, required=False)
    operator_code = TextLineField(required=False, max_length=64)
    phone = PhoneField(required=False)
    bank_name = TextLineField(required=False, max_length=100)
    bank_code = AccountIdentifierField(required=False, max_length=32)
    account_name = TextLineField(required=False, max_length=100)
    account_number = AccountIdentifierField(required=False, max_length=64)


class TransferRecipientInput(TransferPayerInput):
    """The recipient party: the RailParty fields plus who is paid. individual: first_name and
    last_name; business: business_name. On relaunch-payout, operator_code may name another
    enabled operator of the same country and rail."""

    recipient_type = serializers.ChoiceField(
        choices=RECIPIENT_TYPES, required=False, default="individual"
    )
    first_name = TextLineField(required=False, max_length=100)
    last_name = TextLineField(required=False, max_length=100)
    business_name = TextLineField(required=False, max_length=200)
    email = EmailAddressField(required=False, max_length=254)
    recipient_nationality_code = CountryCodeField(required=False)
    address_line1 = TextLineField(required=False, max_length=255)
    city = TextLineField(required=False, max_length=100)


class TransferCreateInput(RejectUnknownFields):
    quote_id = StrictUUIDField()
    customer_id = StrictUUIDField()
    payment_reason_code = TextLineField(required=False, max_length=64)
    sender_source_of_funds = TextLineField(required=False, max_length=100)
    sender_occupation = TextLineField(required=False, max_length=100)
    payer = TransferPayerInput()
    recipient = TransferRecipientInput()


class TransferRelaunchPayoutInput(RejectUnknownFields):
    """Both optional; no body retries with the transfer's recipient and payout amount."""

    payout_amount = AmountField(
        required=False, help_text="Not above the transfer's original payout amount."
    )
    recipient = TransferRecipientInput(
        required=False, help_text="Replaces the recipient: same country and rail as the corridor."
    )


class _TransferPartyOutput(serializers.Serializer):
    side = ""

    def to_representation(self, instance):
        party = getattr(instance, self.side) or {}
        data = {name: party.get(name) for name in self.fields}
        data.update(
            country_code=getattr(instance, f"{self.side}_country_code"),
            rail_type=getattr(instance, f"{self.side}_rail_type"),
            operator_code=getattr(instance, f"{self.side}_operator_code"),
        )
        return data


class TransferPayerOutput(_TransferPartyOutput):
    side = "payer"

    country_code = serializers.CharField()
    rail_type = serializers.ChoiceField(choices=RailType.choices)
    operator_code = serializers.CharField()
    phone = serializers.CharField(allow_null=True)
    bank_name = serializers.CharField(allow_null=True)
    bank_code = serializers.CharField(allow_null=True)
    account_name = serializers.CharField(allow_null=True)
    account_number = serializers.CharField(allow_null=True)


class TransferRecipientOutput(TransferPayerOutput):
    side = "recipient"

    recipient_type = serializers.ChoiceField(choices=RECIPIENT_TYPES)
    first_name = serializers.CharField(allow_null=True)
    last_name = serializers.CharField(allow_null=True)
    business_name = serializers.CharField(allow_null=True)
    email = serializers.EmailField(allow_null=True)
    recipient_nationality_code = serializers.CharField(allow_null=True)
    address_line1 = serializers.CharField(allow_null=True)
    city = serializers.CharField(allow_null=True)


class TransferExecutionOutput(NullForBlank, serializers.Serializer):
    """The two legs at the provider: references (the provider's) and timestamps. A relaunch
    starts a new disbursement attempt and resets the disbursement fields."""

    collection_reference = serializers.CharField(allow_null=True)
    collection_submitted_at = serializers.DateTimeField(allow_null=True)
    collection_completed_at = serializers.DateTimeField(allow_null=True)
    collection_failed_at = serializers.DateTimeField(allow_null=True)
    collection_failure_reason = serializers.CharField(allow_null=True)
    disbursement_attempt = serializers.IntegerField()
    disbursement_reference = serializers.CharField(allow_null=True)
    disbursement_submitted_at = serializers.DateTimeField(allow_null=True)
    disbursement_completed_at = serializers.DateTimeField(allow_null=True)
    disbursement_failed_at = serializers.DateTimeField(allow_null=True)
    disbursement_failure_reason = serializers.CharField(allow_null=True)


class TransferHistoryItemOutput(NullForBlank, serializers.Serializer):
    null_for_blank = ("reason",)

    status = TransferStatusField()
    reason = serializers.CharField(allow_null=True)
    created_at = serializers.DateTimeField()


class TransferOutput(NullForBlank, serializers.Serializer):
    null_for_blank = ("payment_reason_code", "sender_source_of_funds", "sender_occupation")

    id = serializers.UUIDField()
    merchant_id = serializers.UUIDField()
    customer_id = serializers.UUIDField()
    quote_id = serializers.UUIDField()
    status = TransferStatusField()
    payin_status = TransferLegStatusField(help_text="Status of the collection leg.")
    payout_status = TransferLegStatusField(help_text="Status of the disbursement leg.")
    send_amount = AmountField()
    send_currency = CurrencyField()
    receive_amount = AmountField()
    receive_currency = CurrencyField()
    payin_amount = AmountField()
    payin_currency = CurrencyField()
    payout_amount = AmountField()
    payout_currency = CurrencyField()
    total_fee = AmountField(help_text="In payin_currency.")
    corridor_code = serializers.CharField()
    corridor_type = serializers.ChoiceField(choices=CorridorType.choices)
    payer_operator_code = serializers.CharField()
    recipient_operator_code = serializers.CharField()
    payment_reason_code = serializers.CharField(allow_null=True)
    sender_source_of_funds = serializers.CharField(allow_null=True)
    sender_occupation = serializers.CharField(allow_null=True)
    execution = TransferExecutionOutput(source="*")
    pricing = PricingField()
    payer = TransferPayerOutput(source="*")
    recipient = TransferRecipientOutput(source="*")
    history = TransferHistoryItemOutput(many=True, source="history.all")
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    _meta = IdempotencyMetaSerializer(read_only=True, required=False, source="idempotency_meta")


class TransferListQuery(pagination.ListQueryInput):
    status = serializers.ChoiceField(choices=TransferStatus.choices, required=False)
    customer_id = serializers.UUIDField(required=False)


TransferPageOutput = pagination.page_serializer("TransferPageOutput", TransferOutput)
