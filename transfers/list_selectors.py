"""GET /transfers: the list read and its query parameters. A page is a range scan of
transfer_merchant_page (merchant, -created_at, -id), or of transfer_merchant_status_page when
filtered by status."""

from datetime import datetime
from uuid import UUID

from rest_framework import serializers

from config import pagination
from merchants.models import Merchant
from transfers.models import Transfer, TransferStatus
from transfers.serializers import TransferOutput


class TransferListQuery(pagination.ListQueryInput):
    status = serializers.ChoiceField(choices=TransferStatus.choices, required=False)
    customer_id = serializers.UUIDField(required=False)


TransferPageOutput = pagination.page_serializer("TransferPageOutput", TransferOutput)


def transfer_list(
    *,
    merchant: Merchant,
    page: pagination.PageRequest,
    status: str | None = None,
    customer_id: UUID | None = None,
    created_gte: datetime | None = None,
    created_lt: datetime | None = None,
) -> pagination.Page:
    """The merchant's transfers with their history, newest first, one page."""
    queryset = pagination.filtered(
        Transfer.objects.filter(merchant=merchant),
        status=status,
        customer_id=customer_id,
        created_gte=created_gte,
        created_lt=created_lt,
    )
    return pagination.paginate(queryset.prefetch_related("history"), page=page)
