from uuid import UUID

from drf_spectacular.utils import extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from core import pagination
from customers import selectors, services
from customers.serializers import (
    CustomerCreateInput,
    CustomerListQuery,
    CustomerOutput,
    CustomerPageOutput,
)
from merchants.idempotency import idempotent


class CustomerCreateView(APIView):
    extra_error_statuses = ["400"]

    @extend_schema(
        operation_id="listCustomers",
        parameters=[CustomerListQuery],
        responses={200: CustomerPageOutput},
        tags=["customers"],
        description="The merchant's customers, newest first, cursor-paginated.",
    )
    def get(self, request):
        query = pagination.parse_query(CustomerListQuery, request.query_params)
        page = selectors.customer_list(merchant=request.merchant, **query)
        return Response(pagination.page_body(page, CustomerOutput))

    @extend_schema(
        operation_id="createCustomer",
        request=CustomerCreateInput,
        responses={201: CustomerOutput},
        tags=["customers"],
        description=(
            "Registers one of the merchant's customers (the payer or recipient of payments). "
            "`external_ref` is the merchant's own id for them, unique per merchant. A new "
            "customer's kyc_status is `not_started`."
        ),
    )
    @idempotent
    def post(self, request):
        serializer = CustomerCreateInput(data=request.data)
        serializer.is_valid(raise_exception=True)
        customer = services.customer_create(
            merchant=request.merchant, data=serializer.validated_data
        )
        return Response(CustomerOutput(customer).data, status=201)


class CustomerDetailView(APIView):
    @extend_schema(
        operation_id="getCustomer",
        responses={200: CustomerOutput},
        tags=["customers"],
        description=(
            "One customer of the merchant, with their kyc_status and status (`active` or "
            "`blocked`)."
        ),
    )
    def get(self, request, customer_id: UUID):
        customer = selectors.customer_get(merchant=request.merchant, customer_id=customer_id)
        return Response(CustomerOutput(customer).data)
