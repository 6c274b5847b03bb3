from uuid import UUID

from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from core import pagination
from merchants.idempotency import idempotent
from transfers import selectors
from transfers.serializers import (
    TransferCreateInput,
    TransferListQuery,
    TransferOutput,
    TransferPageOutput,
    TransferRelaunchPayoutInput,
)
from transfers.services.create import transfer_create
from transfers.services.relaunch import transfer_relaunch_payout


class TransferCreateView(APIView):
    extra_error_statuses = ["400"]

    @extend_schema(
        operation_id="listTransfers",
        parameters=[TransferListQuery],
        responses={200: TransferPageOutput},
        tags=["transfers"],
        description="The merchant's transfers, newest first, cursor-paginated.",
    )
    def get(self, request):
        query = pagination.parse_query(TransferListQuery, request.query_params)
        page = selectors.transfer_list(merchant=request.merchant, **query)
        return Response(pagination.page_body(page, TransferOutput))

    @extend_schema(
        operation_id="createTransfer",
        request=TransferCreateInput,
        responses={201: TransferOutput},
        tags=["transfers"],
        description=(
            "Collect from the payer, then disburse to the recipient, with an active transfer "
            "quote. Answers 201 with status `pending`; `transfer.*` webhook events report each "
            "leg and the final status. Cross-border corridors require the sender details "
            "(customer address_line1, city, occupation, source_of_funds; the last two also as "
            "sender_occupation / sender_source_of_funds); each missing one is named in the 400."
        ),
    )
    @idempotent
    def post(self, request):
        serializer = TransferCreateInput(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        transfer = transfer_create(
            merchant=request.merchant,
            quote_id=data["quote_id"],
            customer_id=data["customer_id"],
            payer=dict(data["payer"]),
            recipient=dict(data["recipient"]),
            payment_reason_code=data.get("payment_reason_code", ""),
            sender_source_of_funds=data.get("sender_source_of_funds", ""),
            sender_occupation=data.get("sender_occupation", ""),
            now=timezone.now(),
        )
        return Response(TransferOutput(transfer).data, status=201)


class TransferDetailView(APIView):
    @extend_schema(
        operation_id="getTransfer",
        responses={200: TransferOutput},
        tags=["transfers"],
        description=(
            "One transfer with its status, the status of each leg (payin_status, "
            "payout_status) and its history."
        ),
    )
    def get(self, request, transfer_id: UUID):
        transfer = selectors.transfer_get(merchant=request.merchant, transfer_id=transfer_id)
        return Response(TransferOutput(transfer).data)


class TransferRelaunchPayoutView(APIView):
    extra_error_statuses = ["409"]

    @extend_schema(
        operation_id="relaunchTransferPayout",
        request=TransferRelaunchPayoutInput,
        responses={202: TransferOutput},
        tags=["transfers"],
        description=(
            "Retry the failed disbursement leg of a transfer (status `failed`, payin_status "
            "`completed`, payout_status `failed`) without collecting again; otherwise 409 "
            "`transfer_not_relaunchable`. The body is optional: `payout_amount` (not above the "
            "original) and a replacement `recipient` (same country and rail). Answers 202 with "
            "the transfer `disbursing`, payout_status `pending`."
        ),
    )
    @idempotent
    def post(self, request, transfer_id: UUID):
        serializer = TransferRelaunchPayoutInput(data=request.data)  # no body parses as {}
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        recipient = data.get("recipient")
        transfer = transfer_relaunch_payout(
            merchant=request.merchant,
            transfer_id=transfer_id,
            payout_amount=data.get("payout_amount"),
            recipient=dict(recipient) if recipient is not None else None,
            now=timezone.now(),
        )
        return Response(TransferOutput(transfer).data, status=202)
