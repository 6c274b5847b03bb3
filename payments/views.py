from decimal import Decimal
from uuid import UUID

from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema
from rest_framework.renderers import BaseRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from core import pagination
from core.content import JsonErrors
from core.serializers import ErrorResponseSerializer
from merchants.idempotency import idempotent
from merchants.models import Merchant
from payments import selectors, statements
from payments.serializers import (
    BalanceListOutput,
    PayinCreateInput,
    PayinListQuery,
    PayinOutput,
    PayinPageOutput,
    PayoutCreateInput,
    PayoutListQuery,
    PayoutOutput,
    PayoutPageOutput,
    RefundCreateInput,
    RefundListQuery,
    RefundOutput,
    RefundPageOutput,
    StatementQuery,
)
from payments.services.payins import payin_create
from payments.services.payouts import payout_create
from payments.services.refunds import refund_create


class PayinCreateView(APIView):
    extra_error_statuses = ["400"]

    @extend_schema(
        operation_id="listPayins",
        parameters=[PayinListQuery],
        responses={200: PayinPageOutput},
        tags=["payins"],
        description="The merchant's payins, newest first, cursor-paginated.",
    )
    def get(self, request):
        query = pagination.parse_query(PayinListQuery, request.query_params)
        page = selectors.payin_list(merchant=request.merchant, **query)
        return Response(pagination.page_body(page, PayinOutput))

    @extend_schema(
        operation_id="createPayin",
        request=PayinCreateInput,
        responses={201: PayinOutput},
        tags=["payins"],
        description=(
            "Collect money from a payer into the merchant wallet with an active payin quote. "
            "Answers 201 with status `created`; the final status arrives by webhook or GET."
        ),
    )
    @idempotent
    def post(self, request):
        serializer = PayinCreateInput(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        payin = payin_create(
            merchant=request.merchant,
            quote_id=data["quote_id"],
            customer_id=data["customer_id"],
            source=dict(data["source"]),
            now=timezone.now(),
        )
        return Response(PayinOutput(payin).data, status=201)


class PayinDetailView(APIView):
    @extend_schema(
        operation_id="getPayin",
        responses={200: PayinOutput},
        tags=["payins"],
        description=(
            "One payin with its status (`created`, `pending`, `completed`, `failed`) and its "
            "history of moves."
        ),
    )
    def get(self, request, payin_id: UUID):
        payin = selectors.payin_get(merchant=request.merchant, payin_id=payin_id)
        return Response(PayinOutput(payin).data)


class PayoutCreateView(APIView):
    extra_error_statuses = ["400"]

    @extend_schema(
        operation_id="listPayouts",
        parameters=[PayoutListQuery],
        responses={200: PayoutPageOutput},
        tags=["payouts"],
        description="The merchant's payouts, newest first, cursor-paginated.",
    )
    def get(self, request):
        query = pagination.parse_query(PayoutListQuery, request.query_params)
        page = selectors.payout_list(merchant=request.merchant, **query)
        return Response(pagination.page_body(page, PayoutOutput))

    @extend_schema(
        operation_id="createPayout",
        request=PayoutCreateInput,
        responses={201: PayoutOutput},
        tags=["payouts"],
        description=(
            "Send money from the merchant wallet to a recipient with an active payout quote. "
            "send_amount + total_fee is reserved at once (400 insufficient_balance when the "
            "wallet is short). Answers 201 with status `pending`."
        ),
    )
    @idempotent
    def post(self, request):
        serializer = PayoutCreateInput(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        payout = payout_create(
            merchant=request.merchant,
            quote_id=data["quote_id"],
            customer_id=data["customer_id"],
            recipient=dict(data["recipient"]),
            payment_reason_code=data.get("payment_reason_code", ""),
            payment_reason_text=data.get("payment_reason_text", ""),
            now=timezone.now(),
        )
        return Response(PayoutOutput(payout).data, status=201)


class PayoutDetailView(APIView):
    @extend_schema(
        operation_id="getPayout",
        responses={200: PayoutOutput},
        tags=["payouts"],
        description=(
            "One payout with its status (`pending`, `completed`, `failed`) and its"
            " history of moves."
        ),
    )
    def get(self, request, payout_id: UUID):
        payout = selectors.payout_get(merchant=request.merchant, payout_id=payout_id)
        return Response(PayoutOutput(payout).data)


REFUND_EXAMPLE = {
    "id": "6a4f0c3e-2b1d-4e5f-9a8b-7c6d5e4f3a2b",
    "merchant_id": "0b9e2d4c-6f8a-4b1c-9d3e-5f7a9c1e3b5d",
    "payin_id": "3f2a9c8e-1d4b-4a6c-8e2f-9b7d5c3a1e0f",
    "customer_id": "8c7b6a5d-4e3f-4a2b-9c1d-0e9f8a7b6c5d",
    "status": "pending",
    "amount": "2500",
    "currency": "XAF",
    "reason": "Order cancelled",
    "recipient": {
        "phone": "+237650001234",
        "bank_name": None,
        "bank_code": None,
        "account_name": None,
        "account_number": None,
        "country_code": "CM",
        "rail_type": "mobile_money",
        "operator_code": "CM_MTN_MOMO",
    },
    "provider_reference": None,
    "failure_reason": None,
    "wallet_impact": {"debit_amount": "2500", "currency": "XAF"},
    "history": [{"status": "pending", "reason": None, "created_at": "2026-01-05T10:00:00Z"}],
    "created_at": "2026-01-05T10:00:00Z",
    "updated_at": "2026-01-05T10:00:00Z",
    "_meta": {"idempotency_key": "refund-order-1042", "idempotency_replayed": False},
}


class RefundCreateView(APIView):
    @extend_schema(
        operation_id="createRefund",
        request=RefundCreateInput,
        responses={201: RefundOutput},
        tags=["refunds"],
        description=(
            "Return money to the payer of a completed payin, in full (no `amount`: what remains "
            "refundable) or in part. The amount is reserved from the wallet at once (400 "
            "insufficient_balance when it is short) and released if the refund fails; the "
            "payin's fee is not returned. 400 payin_not_refundable for a payin that is not "
            "completed, 400 refund_exceeds_payin for more than remains refundable. Answers 201 "
            "with status `pending`; the final status arrives by webhook or GET."
        ),
        examples=[
            OpenApiExample(
                "partial refund",
                value={"amount": "2500", "reason": "Order cancelled"},
                request_only=True,
            ),
            OpenApiExample("refund of the rest", value={}, request_only=True),
            OpenApiExample(
                "created", value=REFUND_EXAMPLE, response_only=True, status_codes=["201"]
            ),
        ],
    )
    @idempotent
    def post(self, request, payin_id: UUID):
        serializer = RefundCreateInput(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        return refund_created(
            merchant=request.merchant,
            payin_id=payin_id,
            amount=data.get("amount"),
            reason=data.get("reason", ""),
        )


def refund_created(
    *, merchant: Merchant, payin_id: UUID, amount: Decimal | None, reason: str
) -> Response:
    """The refund created and its 201 answer: the API's and the dashboard's Refund button's,
    each under its idempotency key (merchants.idempotency)."""
    refund = refund_create(
        merchant=merchant, payin_id=payin_id, amount=amount, reason=reason, now=timezone.now()
    )
    return Response(RefundOutput(refund).data, status=201)


class RefundListView(APIView):
    extra_error_statuses = ["400"]  # a malformed filter or cursor

    @extend_schema(
        operation_id="listRefunds",
        parameters=[RefundListQuery],
        responses={200: RefundPageOutput},
        tags=["refunds"],
        description="The merchant's refunds, newest first, cursor-paginated.",
    )
    def get(self, request):
        query = pagination.parse_query(RefundListQuery, request.query_params)
        page = selectors.refund_list(merchant=request.merchant, **query)
        return Response(pagination.page_body(page, RefundOutput))


class RefundDetailView(APIView):
    @extend_schema(
        operation_id="getRefund",
        responses={200: RefundOutput},
        tags=["refunds"],
        description="One refund with its history; 404 for an id that is not the merchant's.",
        examples=[
            OpenApiExample(
                "completed",
                value={
                    **{k: v for k, v in REFUND_EXAMPLE.items() if k != "_meta"},
                    "status": "completed",
                    "provider_reference": "SIM-4b2e8f0a1c3d5e7f9a0b",
                },
                response_only=True,
            )
        ],
    )
    def get(self, request, refund_id: UUID):
        refund = selectors.refund_get(merchant=request.merchant, refund_id=refund_id)
        return Response(RefundOutput(refund).data)


class BalanceListView(APIView):
    @extend_schema(
        operation_id="listBalances",
        responses={200: BalanceListOutput},
        tags=["balances"],
        description=(
            "The wallet balances per currency, from the ledger: `available` can be spent, "
            "`reserved` is held for payouts in flight. Every currency is listed, at zero when "
            "nothing has moved in it yet."
        ),
    )
    def get(self, request):
        balances = selectors.balances_list(merchant=request.merchant)
        return Response(BalanceListOutput({"data": balances}).data)


class CSVRenderer(BaseRenderer):
    """text/csv, for the statements view only: the view hands it the CSV text."""

    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        return data.encode(self.charset) if isinstance(data, str) else data


class StatementView(JsonErrors, APIView):
    renderer_classes = [CSVRenderer]
    extra_error_statuses = ["400"]

    @extend_schema(
        operation_id="getStatement",
        parameters=[StatementQuery],
        responses={
            (200, "text/csv"): OpenApiResponse(
                response=OpenApiTypes.STR,
                description=(
                    "CSV with a header row; columns: "
                    + ", ".join(statements.COLUMNS)
                    + ". Amounts are DecimalStrings, a debit negative."
                ),
                examples=[
                    OpenApiExample(
                        "statement",
                        value=",".join(statements.COLUMNS)
                        + "\r\n2026-01-05T10:00:00+00:00,9b1d...,payin_completed,payin,"
                        "3f2a...,SIM-1234,merchant_available,9850,150,9850\r\n",
                        media_type="text/csv",
                    )
                ],
            ),
            # Errors are JSON (the API's error shape), not CSV.
            **{(status, "application/json"): ErrorResponseSerializer for status in (400, 401, 429)},
        },
        tags=["balances"],
        description=(
            "The merchant's ledger lines on its wallet (merchant_available, "
            "merchant_reserved) in one currency, for journals created from `from` to `to` "
            f"(whole UTC days, at most {statements.MAX_DAYS}); `to` before `from` is an empty "
            "range: the header row only. Errors are JSON."
        ),
    )
    def get(self, request):
        query = pagination.parse_query(StatementQuery, request.query_params)
        lines = statements.statement_lines(
            merchant=request.merchant,
            currency=query["currency"],
            from_date=query["from"],
            to_date=query["to"],
        )
        filename = f"statement-{query['currency']}-{query['from']}-{query['to']}.csv"
        return Response(
            statements.statement_csv(lines),
            headers={"Content-Disposition": f'attachment; filename="{filename}"'},
        )

    def is_document(self, response: Response) -> bool:
        return super().is_document(response) and isinstance(response.data, str)
