from uuid import UUID

from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema
from rest_framework.renderers import BaseRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from config import pagination
from config.content import JsonErrors
from config.schema import ErrorResponseSerializer
from merchants.idempotency import idempotent
from payments import selectors, services, statements
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
    StatementQuery,
)


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
        payin = services.payin_create(
            merchant=request.merchant,
            quote_id=data["quote_id"],
            customer_id=data["customer_id"],
            source=dict(data["source"]),
            now=timezone.now(),
        )
        return Response(PayinOutput(payin).data, status=201)


class PayinDetailView(APIView):
    @extend_schema(operation_id="getPayin", responses={200: PayinOutput}, tags=["payins"])
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
        payout = services.payout_create(
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
    @extend_schema(operation_id="getPayout", responses={200: PayoutOutput}, tags=["payouts"])
    def get(self, request, payout_id: UUID):
        payout = selectors.payout_get(merchant=request.merchant, payout_id=payout_id)
        return Response(PayoutOutput(payout).data)


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
            f"(whole UTC days, at most {statements.MAX_DAYS}). Errors are JSON."
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
