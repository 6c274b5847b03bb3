from uuid import UUID

from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from core import pagination
from merchants.idempotency import idempotent
from webhooks import selectors
from webhooks.serializers import (
    EventListQuery,
    EventOutput,
    EventPageOutput,
    EventResendFailedInput,
    EventResendFailedOutput,
    EventResendInput,
)
from webhooks.services.resend import event_resend_for_merchant, events_resend_failed


class EventListView(APIView):
    extra_error_statuses = ["400"]

    @extend_schema(
        operation_id="listEvents",
        parameters=[EventListQuery],
        responses={200: EventPageOutput},
        tags=["events"],
        description=(
            "The merchant's webhook events, newest first, cursor-paginated: each is the "
            "envelope that was sent, with `delivery_status` (`none`: no endpoint was "
            "subscribed, `pending`, `failed`, `succeeded`). Use it to recover missed events."
        ),
    )
    def get(self, request):
        query = pagination.parse_query(EventListQuery, request.query_params)
        page = selectors.event_list(merchant=request.merchant, **query)
        return Response(pagination.page_body(page, EventOutput))


class EventDetailView(APIView):
    @extend_schema(
        operation_id="getEvent",
        responses={200: EventOutput},
        tags=["events"],
        description=(
            "One webhook event exactly as it was sent (id, type, created_at, data.object), "
            "with a summary of its deliveries."
        ),
    )
    def get(self, request, event_id: UUID):
        event = selectors.event_get(merchant=request.merchant, event_id=event_id)
        return Response(EventOutput(event).data)


class EventResendView(APIView):
    @extend_schema(
        operation_id="resendEvent",
        request=None,
        responses={202: EventOutput},
        tags=["events"],
        description=(
            "Deliver the event again now, same event id and body, to every enabled endpoint "
            "subscribed to it: a new delivery with a fresh attempt count, or, where a delivery "
            "of the event is still pending, that delivery, made due now (it is not sent a "
            "second time at its retry). 409 `no_webhook_endpoint` when there is none."
        ),
    )
    @idempotent
    def post(self, request, event_id: UUID):
        EventResendInput(data=request.data).is_valid(raise_exception=True)  # no body parses as {}
        event = event_resend_for_merchant(
            merchant=request.merchant, event_id=event_id, now=timezone.now()
        )
        return Response(EventOutput(event).data, status=202)


class EventResendFailedView(APIView):
    @extend_schema(
        operation_id="resendFailedEvents",
        request=EventResendFailedInput,
        responses={202: EventResendFailedOutput},
        tags=["events"],
        description=(
            "Recover what each enabled endpoint did not get since `since`: every failed "
            "delivery created since then is re-sent to its endpoint (unless already re-sent), "
            "and every event recorded since then that an endpoint is subscribed to but never "
            "got, because it was disabled when the event happened, is sent to it (only events "
            "recorded after the endpoint was created; never test events). Same event ids and "
            "bodies, signed afresh. Calling again sends nothing twice. Answers the number of "
            "deliveries made."
        ),
    )
    @idempotent
    def post(self, request):
        serializer = EventResendFailedInput(data=request.data)
        serializer.is_valid(raise_exception=True)
        resent = events_resend_failed(
            merchant=request.merchant,
            since=serializer.validated_data["since"],
            now=timezone.now(),
        )
        return Response(EventResendFailedOutput({"resent": resent}).data, status=202)
