from uuid import UUID

from django.utils import timezone
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from core import pagination
from merchants.idempotency import idempotent
from quotes import prediction, selectors, services
from quotes.models import FlowType
from quotes.serializers import (
    CorridorListOutput,
    OperatorListOutput,
    OperatorPredictInput,
    OperatorPredictionOutput,
    QuoteCollectionInput,
    QuoteListQuery,
    QuoteOutput,
    QuotePageOutput,
    QuoteTransferInput,
)


def _create_collection_quote(request, flow_type: str) -> Response:
    serializer = QuoteCollectionInput(data=request.data)
    serializer.is_valid(raise_exception=True)
    data = serializer.validated_data
    quote = services.quote_create_collection(
        merchant=request.merchant,
        flow_type=flow_type,
        now=timezone.now(),
        customer_id=data.get("customer_id"),
        country_code=data["country_code"],
        operator_code=data["operator_code"],
        rail_type=data["rail_type"],
        send_amount=data["send_amount"],
        send_currency=data["send_currency"],
    )
    return Response(QuoteOutput(quote).data, status=201)


class QuotePayinCreateView(APIView):
    @extend_schema(
        operation_id="createPayinQuote",
        request=QuoteCollectionInput,
        responses={201: QuoteOutput},
        tags=["quotes"],
        description=(
            "Prices a collection from a customer's mobile money account: fees, the amount "
            "credited to the wallet, and an expiry (15 minutes). A payin must use it before "
            "it expires; each quote is used once."
        ),
    )
    @idempotent
    def post(self, request):
        return _create_collection_quote(request, FlowType.PAYIN)


class QuotePayoutCreateView(APIView):
    @extend_schema(
        operation_id="createPayoutQuote",
        request=QuoteCollectionInput,
        responses={201: QuoteOutput},
        tags=["quotes"],
        description=(
            "Prices a disbursement to a mobile money account: fees and the amount debited from "
            "the wallet (send_amount plus fees), valid 15 minutes. A payout must use it before "
            "it expires; each quote is used once."
        ),
    )
    @idempotent
    def post(self, request):
        return _create_collection_quote(request, FlowType.PAYOUT)


class QuoteTransferCreateView(APIView):
    @extend_schema(
        operation_id="createTransferQuote",
        request=QuoteTransferInput,
        responses={201: QuoteOutput},
        tags=["quotes"],
        description=(
            "Prices a two-leg transfer on a corridor: collection from the payer, disbursement"
            " to the recipient, fees and the FX rate when currencies differ, valid 15 "
            "minutes."
        ),
    )
    @idempotent
    def post(self, request):
        serializer = QuoteTransferInput(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        quote = services.quote_create_transfer(
            merchant=request.merchant,
            now=timezone.now(),
            customer_id=data.get("customer_id"),
            corridor_code=data["corridor_code"],
            payer_operator_code=data["payer_operator_code"],
            recipient_operator_code=data["recipient_operator_code"],
            payout_currency=data["payout_currency"],
            payin_amount=data.get("payin_amount"),
            payin_currency=data.get("payin_currency"),
            payout_amount=data.get("payout_amount"),
            send_amount=data.get("send_amount"),
            send_currency=data.get("send_currency"),
        )
        return Response(QuoteOutput(quote).data, status=201)


class QuoteDetailView(APIView):
    @extend_schema(
        operation_id="getQuote",
        responses={200: QuoteOutput},
        tags=["quotes"],
        description=(
            "One quote: its amounts, fees, FX rate, wallet impact and expiry (`active`, "
            "`consumed` or `expired`)."
        ),
    )
    def get(self, request, quote_id: UUID):
        quote = selectors.quote_get(merchant=request.merchant, quote_id=quote_id)
        return Response(QuoteOutput(quote).data)


class QuoteListView(APIView):
    extra_error_statuses = ["400"]

    @extend_schema(
        operation_id="listQuotes",
        parameters=[QuoteListQuery],
        responses={200: QuotePageOutput},
        tags=["quotes"],
        description=(
            "The merchant's quotes, newest first, cursor-paginated. `status` filters on the "
            "status shown: an active quote past expires_at is `expired`."
        ),
    )
    def get(self, request):
        query = pagination.parse_query(QuoteListQuery, request.query_params)
        page = selectors.quote_list(merchant=request.merchant, now=timezone.now(), **query)
        return Response(pagination.page_body(page, QuoteOutput))


class OperatorListView(APIView):
    @extend_schema(
        operation_id="listOperators",
        responses={200: OperatorListOutput},
        tags=["configuration"],
        description=(
            "The operators this merchant can quote payins and payouts on right now, with "
            "their limits, status (`operational`, `delayed`: answers are slow, `closed`: new "
            "quotes are refused with 400 `operator_closed`) and the fees that apply per flow."
        ),
    )
    def get(self, request):
        operators = selectors.operators_available_for(merchant=request.merchant)
        return Response(OperatorListOutput({"data": operators}).data)


class CorridorListView(APIView):
    @extend_schema(
        operation_id="listCorridors",
        responses={200: CorridorListOutput},
        tags=["configuration"],
        description=(
            "The transfer corridors this merchant can quote right now, with their "
            "requirements (sender details, approved KYC) and the transfer fees that apply."
        ),
    )
    def get(self, request):
        corridors = selectors.corridors_available_for(merchant=request.merchant)
        return Response(CorridorListOutput({"data": corridors}).data)


PREDICT_EXAMPLES = [
    OpenApiExample("A Senegalese number", value={"phone": "+221 77 000 12 34"}, request_only=True),
    OpenApiExample(
        "Orange Senegal with Wave beside it",
        value={
            "phone": "+221770001234",
            "country_code": "SN",
            "operator_code": "SN_ORANGE_MOMO",
            "rail_type": "mobile_money",
            "operator_status": "operational",
            "enabled": True,
            "also_usable": ["SN_WAVE_MOMO"],
        },
        response_only=True,
        status_codes=["200"],
    ),
    OpenApiExample(
        "A number outside the catalog",
        value={
            "error": {
                "code": "bad_request",
                "message": "No operator in the catalog covers FR numbers.",
                "reason": "operator_unknown",
                "fields": {"phone": ["No operator in the catalog covers FR numbers."]},
            }
        },
        response_only=True,
        status_codes=["400"],
    ),
]


class OperatorPredictView(APIView):
    @extend_schema(
        operation_id="predictOperator",
        request=OperatorPredictInput,
        responses={200: OperatorPredictionOutput},
        examples=PREDICT_EXAMPLES,
        tags=["configuration"],
        description=(
            "The catalog operator a mobile number belongs to, from its network's prefix (a "
            "number moved to another network keeps its prefix), and the country's wallets that "
            "work with any network's number. Creates nothing: no Idempotency-Key. 400 "
            "`phone_invalid`: not a valid number in international form; 400 "
            "`operator_unknown`: a valid number of a country or network outside the catalog."
        ),
    )
    def post(self, request):
        serializer = OperatorPredictInput(data=request.data)
        serializer.is_valid(raise_exception=True)
        result = prediction.operator_predict(
            merchant=request.merchant, phone=serializer.validated_data["phone"]
        )
        return Response(OperatorPredictionOutput(result).data)
