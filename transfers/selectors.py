"""Reads of the transfers app. A page of GET /transfers is a range scan of
transfer_merchant_page (merchant, -created_at, -id), or of transfer_merchant_status_page when
filtered by status."""

from datetime import datetime
from decimal import Decimal
from uuid import UUID

from django.db.models import QuerySet

from core import pagination
from core.exceptions import NotFound
from merchants.models import Merchant
from payments import selectors as payment_selectors
from payments.ledger.accounts import TRANSFER_SUSPENSE
from payments.models import Journal
from transfers.models import Transfer, TransferStatus
from webhooks import selectors as webhook_selectors
from webhooks.models import Event


class TransferNotFound(NotFound):
    reason = "transfer_not_found"
    message = "The transfer does not exist."


def transfer_get(*, merchant: Merchant, transfer_id: UUID, lock: bool = False) -> Transfer:
    """The merchant's transfer with its history; another merchant's is indistinguishable from
    none (404). `lock=True` (inside a transaction) holds its row until commit."""
    queryset = Transfer.objects.filter(merchant=merchant, pk=transfer_id).select_related("merchant")
    if lock:
        queryset = queryset.select_for_update(of=("self",))
    else:
        queryset = queryset.prefetch_related("history")
    transfer = queryset.first()
    if transfer is None:
        raise TransferNotFound()
    return transfer


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


def transfer_events(*, transfer: Transfer) -> QuerySet[Event]:
    """The webhook events of the transfer, oldest first, with their deliveries."""
    return webhook_selectors.events_about(data_type="transfer", data_id=transfer.id)


def transfer_journals(*, transfer: Transfer) -> QuerySet[Journal]:
    """The ledger journals of the transfer with their lines, oldest first."""
    return payment_selectors.journals_of(resource_type="transfer", resource_id=transfer.id)


def transfer_suspense_held(*, transfer: Transfer) -> Decimal:
    """What this transfer holds in transfer_suspense (payin currency): the collected amount
    until the disbursement completes, then zero."""
    return payment_selectors.account_total_of(
        resource_type="transfer", resource_id=transfer.id, account_code=TRANSFER_SUSPENSE
    )


IN_FLIGHT = (TransferStatus.PENDING, TransferStatus.COLLECTING, TransferStatus.DISBURSING)


def past_leg_timeout(rows: QuerySet[Transfer], *, now: datetime) -> QuerySet[Transfer]:
    """The transfers among `rows` whose current leg waits for the provider past its timeout."""
    return rows.filter(status__in=IN_FLIGHT, leg_timeout_at__lt=now)
