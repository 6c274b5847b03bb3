from uuid import UUID

from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from kyc import selectors, services
from kyc.serializers import KycStatusSerializer, KycSubmitInput


class CustomerKycView(APIView):
    @extend_schema(
        operation_id="submitCustomerKyc",
        summary="Submit KYC documents",
        description=(
            "Records the documents (status `uploaded`) and puts the customer's kyc_status in "
            "`pending`; the files are then fetched and reviewed asynchronously. No "
            "Idempotency-Key: a repeated submission simply supersedes the previous one."
        ),
        request=KycSubmitInput,
        responses={201: KycStatusSerializer},
        tags=["customers"],
    )
    def post(self, request, customer_id: UUID):
        now = timezone.now()
        serializer = KycSubmitInput(data=request.data, context={"at": now})
        serializer.is_valid(raise_exception=True)
        state = services.kyc_submit(
            merchant=request.merchant,
            customer_id=customer_id,
            documents=serializer.validated_data["documents"],
            at=now,
        )
        return Response(KycStatusSerializer(state).data, status=201)

    @extend_schema(
        operation_id="getCustomerKyc",
        summary="Get a customer's KYC status",
        responses={200: KycStatusSerializer},
        tags=["customers"],
        description=(
            "The customer's KYC status and the documents of their latest submission, each "
            "with its own status and, when rejected, why."
        ),
    )
    def get(self, request, customer_id: UUID):
        state = selectors.kyc_state_get(merchant=request.merchant, customer_id=customer_id)
        return Response(KycStatusSerializer(state).data)
