from datetime import date

from rest_framework import serializers

from core import pagination
from core.fields import (
    CountryCodeField,
    EmailAddressField,
    FullDateField,
    PhoneField,
    StrictCharField,
    TextLineField,
)
from core.serializers import IdempotencyMetaSerializer, NullForBlank, RejectUnknownFields
from customers.models import CustomerStatus, CustomerType, IdType, KycStatus


class CustomerCreateInput(RejectUnknownFields):
    external_ref = TextLineField(required=False, max_length=128)
    customer_type = serializers.ChoiceField(
        choices=CustomerType.choices, required=False, default=CustomerType.INDIVIDUAL
    )
    first_name = TextLineField(required=False, max_length=100)
    last_name = TextLineField(required=False, max_length=100)
    business_name = TextLineField(required=False, max_length=200)
    id_number = TextLineField(required=False, max_length=64)
    id_type = serializers.ChoiceField(choices=IdType.choices, required=False)
    email = EmailAddressField(required=False, max_length=254)
    phone = PhoneField(required=False)
    country_code = CountryCodeField(required=False)
    nationality_code = CountryCodeField(required=False)
    date_of_birth = FullDateField(required=False)
    address_line1 = TextLineField(required=False, max_length=255)
    city = TextLineField(required=False, max_length=100)
    occupation = TextLineField(required=False, max_length=100)
    source_of_funds = TextLineField(required=False, max_length=100)

    def validate_date_of_birth(self, value: date) -> date:
        if value >= date.today():
            raise serializers.ValidationError("date_of_birth must be in the past.")
        return value


class CustomerOutput(NullForBlank, serializers.Serializer):
    id = serializers.UUIDField()
    merchant_id = serializers.UUIDField()
    external_ref = serializers.CharField(allow_null=True)
    customer_type = serializers.ChoiceField(choices=CustomerType.choices)
    first_name = serializers.CharField(allow_null=True)
    last_name = serializers.CharField(allow_null=True)
    business_name = serializers.CharField(allow_null=True)
    id_number = serializers.CharField(allow_null=True)
    id_type = serializers.ChoiceField(choices=IdType.choices, allow_null=True)
    email = serializers.EmailField(allow_null=True)
    phone = serializers.CharField(allow_null=True)
    country_code = serializers.CharField(allow_null=True)
    nationality_code = serializers.CharField(allow_null=True)
    date_of_birth = serializers.DateField(allow_null=True)
    address_line1 = serializers.CharField(allow_null=True)
    city = serializers.CharField(allow_null=True)
    occupation = serializers.CharField(allow_null=True)
    source_of_funds = serializers.CharField(allow_null=True)
    kyc_status = serializers.ChoiceField(choices=KycStatus.choices)
    status = serializers.CharField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    _meta = IdempotencyMetaSerializer(read_only=True, required=False, source="idempotency_meta")


class CustomerListQuery(pagination.ListQueryInput):
    status = serializers.ChoiceField(choices=CustomerStatus.choices, required=False)
    external_ref = StrictCharField(required=False, max_length=128)


CustomerPageOutput = pagination.page_serializer("CustomerPageOutput", CustomerOutput)
