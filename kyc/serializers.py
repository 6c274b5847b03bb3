from urllib.parse import urlsplit

from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.validators import URLValidator
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from core import netguard
from core.fields import (
    CountryCodeField,
    FullDateField,
    StrictCharField,
    TextLineField,
    country_date,
    latest_country_date,
)
from core.serializers import NullForBlank, RejectUnknownFields
from customers.models import KycStatus
from kyc.models import DocumentStatus, DocumentType, ReviewStatus

MAX_DOCUMENTS_PER_SUBMISSION = 10
FILE_URL_FIELDS = ("front_file_url", "back_file_url", "selfie_file_url")
_http_url = URLValidator(schemes=["http", "https"])


@extend_schema_field(OpenApiTypes.URI)
class KycFileUrlField(StrictCharField):
    """A public http(s) URL the service can fetch. Hostnames are checked again on the
    connected address at fetch time; here a literal private address is refused at once."""

    default_error_messages = {
        "invalid_url": "Enter a valid http or https URL.",
        "port": "The URL's port must be between 1 and 65535.",
        "credentials": "The URL must not contain a user name or password.",
        "private": "The URL must lead to a public address.",
    }

    def __init__(self, **kwargs):
        kwargs.setdefault("max_length", 2048)
        super().__init__(**kwargs)

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        try:
            _http_url(value)
        except DjangoValidationError:
            self.fail("invalid_url")
        if not netguard.url_port_valid(value):  # as for a webhook URL: never fetchable
            self.fail("port")
        parts = urlsplit(value)
        if parts.username or parts.password:
            self.fail("credentials")
        if netguard.url_has_private_literal(value):
            self.fail("private")
        return value


class KycDocumentTypeField(serializers.ChoiceField):
    default_error_messages = {
        "invalid_choice": (
            '"{input}" is not a valid document_type; allowed values: '
            + ", ".join(DocumentType.values)
            + "."
        ),
    }

    def __init__(self, **kwargs):
        super().__init__(choices=DocumentType.choices, **kwargs)


class KycDocumentInput(RejectUnknownFields):
    document_type = KycDocumentTypeField()
    document_number = TextLineField(required=False, max_length=64)
    issue_country_code = CountryCodeField(required=False)
    issue_date = FullDateField(required=False)
    expiry_date = FullDateField(required=False)
    front_file_url = KycFileUrlField(required=False)
    back_file_url = KycFileUrlField(required=False)
    selfie_file_url = KycFileUrlField(required=False)

    def validate(self, attrs):
        # Today where the document was issued (any of the service's countries when it does not
        # say): issued at 00:30 in Douala, 23:30 UTC the day before, it is not in the future.
        issue_date, country = attrs.get("issue_date"), attrs.get("issue_country_code")
        at = self.context.get("at") or timezone.now()
        today = country_date(at, country) if country else latest_country_date(at)
        if issue_date and issue_date > today:
            raise serializers.ValidationError(
                {"issue_date": ["issue_date cannot be in the future."]}
            )
        if not any(attrs.get(field) for field in FILE_URL_FIELDS):
            raise serializers.ValidationError(
                {
                    field: ["At least one of front_file_url, back_file_url, selfie_file_url."]
                    for field in FILE_URL_FIELDS
                }
            )
        issue_date, expiry_date = attrs.get("issue_date"), attrs.get("expiry_date")
        if issue_date and expiry_date and expiry_date <= issue_date:
            raise serializers.ValidationError(
                {"expiry_date": ["expiry_date must be after issue_date."]}
            )
        return attrs


class KycSubmitInput(RejectUnknownFields):
    documents = KycDocumentInput(
        many=True, allow_empty=False, max_length=MAX_DOCUMENTS_PER_SUBMISSION
    )


class KycDocumentOutput(NullForBlank, serializers.Serializer):
    id = serializers.UUIDField()
    document_type = serializers.ChoiceField(choices=DocumentType.choices)
    document_number = serializers.CharField(allow_null=True)
    issue_country_code = serializers.CharField(allow_null=True)
    issue_date = serializers.DateField(allow_null=True)
    expiry_date = serializers.DateField(allow_null=True)
    front_file_url = serializers.URLField(allow_null=True)
    back_file_url = serializers.URLField(allow_null=True)
    selfie_file_url = serializers.URLField(allow_null=True)
    status = serializers.ChoiceField(
        choices=DocumentStatus.choices,
        help_text="uploaded on arrival, then fetched or fetch_failed once the files are "
        "downloaded.",
    )
    failure_reason = serializers.CharField(
        allow_null=True,
        help_text="Why the files could not be fetched, e.g. `front_file_url: http_status_404`.",
    )
    review_status = serializers.ChoiceField(choices=ReviewStatus.choices)
    rejection_reason = serializers.CharField(
        allow_null=True, help_text="Why the review rejected this document."
    )
    created_at = serializers.DateTimeField()


class KycStatusSerializer(serializers.Serializer):
    customer_id = serializers.UUIDField()
    kyc_status = serializers.ChoiceField(choices=KycStatus.choices)
    documents = KycDocumentOutput(many=True, help_text="The documents of the latest submission.")

    class Meta:
        ref_name = "KycStatus"
