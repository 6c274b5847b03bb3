from rest_framework import serializers

from core import pagination
from core.fields import (
    AccountIdentifierField,
    CountryCodeField,
    EmailAddressField,
    FullDateField,
    PhoneField,
    PricingField,
    StrictUUIDField,
    TextLineField,
)
from core.money import AmountField, CurrencyField
from core.serializers import (
    IdempotencyMetaSerializer,
    InputSerializer,
    NullForBlank,
    OutputSerializer,
)
from payments.models import PayinStatus, PayoutStatus, RefundStatus
from quotes.models import RailType

RECIPIENT_TYPES = [("individual", "individual"), ("business", "business")]


class _RoutingInput(InputSerializer):
    """Routing comes from the quote; a party that states it must state the quote's (docs/api.md:
    quote and payment requests use matching country, rail and operator values)."""

    country_code = CountryCodeField(required=False)
    rail_type = serializers.ChoiceField(choices=RailType.choices, required=False)
    operator_code = TextLineField(required=False, max_length=64)


class PayinSourceInput(_RoutingInput):
    """phone for mobile_money quotes; bank_name, bank_code, account_name, account_number for
    bank_transfer quotes. The other rail's fields are refused; routing comes from the quote."""

    phone = PhoneField(required=False)
    bank_name = TextLineField(required=False, max_length=100)
    bank_code = AccountIdentifierField(required=False, max_length=32)
    account_name = TextLineField(required=False, max_length=100)
    account_number = AccountIdentifierField(required=False, max_length=64)


class PayinCreateInput(InputSerializer):
    quote_id = StrictUUIDField()
    customer_id = StrictUUIDField()
    source = PayinSourceInput()


class PayoutRecipientInput(_RoutingInput):
    """individual: first_name and last_name; business: business_name. phone for mobile_money
    quotes, bank fields for bank_transfer quotes (the other rail's fields are refused)."""

    recipient_type = serializers.ChoiceField(
        choices=RECIPIENT_TYPES, required=False, default="individual"
    )
    first_name = TextLineField(required=False, max_length=100)
    last_name = TextLineField(required=False, max_length=100)
    business_name = TextLineField(required=False, max_length=200)
    phone = PhoneField(required=False)
    bank_name = TextLineField(required=False, max_length=100)
    bank_code = AccountIdentifierField(required=False, max_length=32)
    account_name = TextLineField(required=False, max_length=100)
    account_number = AccountIdentifierField(required=False, max_length=64)
    email = EmailAddressField(required=False, max_length=254)
    recipient_nationality_code = CountryCodeField(required=False)


class PayoutCreateInput(InputSerializer):
    quote_id = StrictUUIDField()
    customer_id = StrictUUIDField()
    payment_reason_code = TextLineField(required=False, max_length=64)
    payment_reason_text = TextLineField(required=False, max_length=255)
    recipient = PayoutRecipientInput()


class _PartyOutput(OutputSerializer):
    """A party stored as JSON on the payment, plus the quote's routing."""

    party_attribute = ""

    def to_representation(self, instance):
        party = getattr(instance, self.party_attribute) or {}
        data = {
            name: party.get(name)
            for name in self.fields
            if name not in ("country_code", "rail_type", "operator_code")
        }
        data.update(
            country_code=instance.country_code,
            rail_type=instance.rail_type,
            operator_code=instance.operator_code,
        )
        return data


class PayinSourceOutput(_PartyOutput):
    party_attribute = "source"

    phone = serializers.CharField(allow_null=True)
    bank_name = serializers.CharField(allow_null=True)
    bank_code = serializers.CharField(allow_null=True)
    account_name = serializers.CharField(allow_null=True)
    account_number = serializers.CharField(allow_null=True)
    country_code = serializers.CharField()
    rail_type = serializers.ChoiceField(choices=RailType.choices)
    operator_code = serializers.CharField()


class PayoutRecipientOutput(_PartyOutput):
    party_attribute = "recipient"

    recipient_type = serializers.ChoiceField(choices=RECIPIENT_TYPES)
    first_name = serializers.CharField(allow_null=True)
    last_name = serializers.CharField(allow_null=True)
    business_name = serializers.CharField(allow_null=True)
    phone = serializers.CharField(allow_null=True)
    bank_name = serializers.CharField(allow_null=True)
    bank_code = serializers.CharField(allow_null=True)
    account_name = serializers.CharField(allow_null=True)
    account_number = serializers.CharField(allow_null=True)
    email = serializers.EmailField(allow_null=True)
    recipient_nationality_code = serializers.CharField(allow_null=True)
    country_code = serializers.CharField()
    rail_type = serializers.ChoiceField(choices=RailType.choices)
    operator_code = serializers.CharField()


class PayinHistoryItemOutput(NullForBlank, OutputSerializer):
    null_for_blank = ("reason",)

    status = serializers.CharField(
        help_text="The status entered: created, pending, completed, failed."
    )
    reason = serializers.CharField(allow_null=True)
    created_at = serializers.DateTimeField()


class PayoutHistoryItemOutput(PayinHistoryItemOutput):
    status = serializers.CharField(help_text="The status entered: pending, completed, failed.")


class PayinWalletImpactOutput(OutputSerializer):
    credit_amount = AmountField()
    currency = CurrencyField()


class PayoutWalletImpactOutput(OutputSerializer):
    debit_amount = AmountField()
    currency = CurrencyField()


class _PaymentOutput(NullForBlank, OutputSerializer):
    null_for_blank = ("provider_reference",)

    id = serializers.UUIDField()
    merchant_id = serializers.UUIDField()
    customer_id = serializers.UUIDField()
    quote_id = serializers.UUIDField()
    send_amount = AmountField()
    send_currency = CurrencyField()
    receive_amount = AmountField()
    receive_currency = CurrencyField()
    country_code = serializers.CharField()
    rail_type = serializers.ChoiceField(choices=RailType.choices)
    operator_code = serializers.CharField()
    provider_reference = serializers.CharField(allow_null=True)
    pricing = PricingField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    _meta = IdempotencyMetaSerializer(read_only=True, required=False, source="idempotency_meta")


class PayinOutput(_PaymentOutput):
    status = serializers.ChoiceField(choices=PayinStatus.choices)
    wallet_impact = PayinWalletImpactOutput()
    history = PayinHistoryItemOutput(many=True, source="history_entries")
    source = PayinSourceOutput(source="*")
    refunded_amount = AmountField(
        source="refunded_total", help_text="What its completed refunds returned to the payer."
    )
    refunds = serializers.ListField(
        child=serializers.UUIDField(),
        source="refund_ids",
        help_text="The ids of its refunds, oldest first.",
    )


class PayoutOutput(_PaymentOutput):
    null_for_blank = ("provider_reference", "payment_reason_code", "payment_reason_text")

    status = serializers.ChoiceField(choices=PayoutStatus.choices)
    wallet_impact = PayoutWalletImpactOutput()
    history = PayoutHistoryItemOutput(many=True, source="history_entries")
    recipient = PayoutRecipientOutput(source="*")
    payment_reason_code = serializers.CharField(allow_null=True)
    payment_reason_text = serializers.CharField(allow_null=True)


class PayinListQuery(pagination.ListQueryInput):
    status = serializers.ChoiceField(choices=PayinStatus.choices, required=False)
    customer_id = serializers.UUIDField(required=False)


class PayoutListQuery(pagination.ListQueryInput):
    status = serializers.ChoiceField(choices=PayoutStatus.choices, required=False)
    customer_id = serializers.UUIDField(required=False)


class RefundCreateInput(InputSerializer):
    """Both optional: no `amount` refunds the whole refundable remainder of the payin."""

    amount = AmountField(
        required=False,
        help_text="In the payin's send_currency; at most what remains refundable of the payin.",
    )
    reason = TextLineField(required=False, max_length=255)


class RefundRecipientOutput(PayinSourceOutput):
    """The payin's payer, to whom the refund is paid."""

    party_attribute = "recipient"


class RefundHistoryItemOutput(PayinHistoryItemOutput):
    status = serializers.CharField(help_text="The status entered: pending, completed, failed.")


class RefundWalletImpactOutput(OutputSerializer):
    debit_amount = AmountField()
    currency = CurrencyField()


class RefundOutput(NullForBlank, OutputSerializer):
    null_for_blank = ("reason", "provider_reference", "failure_reason")

    id = serializers.UUIDField()
    merchant_id = serializers.UUIDField()
    payin_id = serializers.UUIDField()
    customer_id = serializers.UUIDField()
    status = serializers.ChoiceField(choices=RefundStatus.choices)
    amount = AmountField()
    currency = CurrencyField()
    reason = serializers.CharField(allow_null=True)
    recipient = RefundRecipientOutput(source="*")
    provider_reference = serializers.CharField(allow_null=True)
    failure_reason = serializers.CharField(allow_null=True)
    wallet_impact = RefundWalletImpactOutput()
    history = RefundHistoryItemOutput(many=True, source="history_entries")
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    _meta = IdempotencyMetaSerializer(read_only=True, required=False, source="idempotency_meta")


class RefundListQuery(pagination.ListQueryInput):
    status = serializers.ChoiceField(choices=RefundStatus.choices, required=False)
    payin_id = serializers.UUIDField(required=False)


PayinPageOutput = pagination.page_serializer("PayinPageOutput", PayinOutput)
RefundPageOutput = pagination.page_serializer("RefundPageOutput", RefundOutput)
PayoutPageOutput = pagination.page_serializer("PayoutPageOutput", PayoutOutput)


class BalanceItemOutput(serializers.Serializer):
    currency = CurrencyField()
    available = AmountField()
    reserved = AmountField()


class BalanceListOutput(serializers.Serializer):
    data = BalanceItemOutput(many=True)


class StatementQuery(serializers.Serializer):
    """GET /statements?from=&to=&currency= (`from` is a Python keyword: added in get_fields)."""

    to = FullDateField(
        help_text=(
            "Last day included (ISO 8601 date); at most 31 days from `from`, both included."
            " Before `from`, the statement is empty (its header row only)."
        )
    )
    currency = CurrencyField()

    def get_fields(self):
        fields = super().get_fields()
        return {
            "from": FullDateField(help_text="First day included (ISO 8601 date)."),
            **fields,
        }
