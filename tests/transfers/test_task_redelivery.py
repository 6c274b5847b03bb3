"""A transfer's provider answers and leg submissions delivered several times at once (acks_late
redelivery after a worker died, the sweep of lost submissions of two beats): each leg moves
once, each event and journal is recorded once, and the disbursement is submitted for its one
attempt.

Real threads on their own connections run the task bodies at the same moment (a barrier)."""

import pytest

from payments import tasks as payment_tasks
from payments.models import Journal
from tests.locks import at_once
from tests.support import MerchantClient
from tests.transfers.conftest import (
    SENDER_DETAILS,
    SN_SILENT,
    create_customer,
    create_quote,
    ledger_is_clean,
    transfer_body,
)
from transfers import tasks
from transfers.models import Transfer, TransferHistory
from transfers.services.submission import (
    COLLECTION_CALLBACK,
    DISBURSEMENT_CALLBACK,
    disbursement_reference,
)
from webhooks.models import Event

pytestmark = pytest.mark.django_db(transaction=True)

RUNS = 3
CM_SILENT = "+237670001999"


def _events(transfer_id) -> list[str]:
    return sorted(Event.objects.filter(data_id=transfer_id).values_list("event_type", flat=True))


def test_a_collection_answer_delivered_three_times_at_once_moves_the_transfer_once(
    enabled_merchant,
):
    api = MerchantClient(enabled_merchant)
    sender = create_customer(api, **SENDER_DETAILS)
    quote = create_quote(api, customer_id=sender["id"])
    body = transfer_body(quote, sender, payer_phone=CM_SILENT, recipient_phone=SN_SILENT)
    transfer_id = api.post("/transfers", body).json()["id"]
    transfer = Transfer.objects.get(pk=transfer_id)
    assert transfer.status == "collecting" and transfer.collection_reference
    answer = {
        "callback": COLLECTION_CALLBACK,
        "reference": transfer_id,
        "provider_reference": transfer.collection_reference,
        "outcome": "completed",
    }

    at_once(lambda: payment_tasks.deliver_provider_answer(**answer), RUNS)

    transfer.refresh_from_db()
    assert (transfer.status, transfer.disbursement_attempt) == ("disbursing", 1)
    assert transfer.disbursement_reference  # attempt 1 submitted (the provider stays silent)
    reasons = TransferHistory.objects.filter(transfer_id=transfer_id).values_list(
        "reason", flat=True
    )
    assert list(reasons).count("collection_completed") == 1
    assert _events(transfer_id) == ["transfer.payin.completed"]
    assert Journal.objects.filter(resource_id=transfer_id).count() == 1
    assert ledger_is_clean()

    # The disbursement's submission delivered again, at once: nothing more happens.
    at_once(lambda: tasks.submit_transfer_disbursement(transfer_id=transfer_id, attempt=1), RUNS)
    assert Transfer.objects.get(pk=transfer_id).disbursement_reference == (
        transfer.disbursement_reference
    )
    assert _events(transfer_id) == ["transfer.payin.completed"]

    # Its answer, three times at once: the transfer completes once.
    disbursed = {
        "callback": DISBURSEMENT_CALLBACK,
        "reference": disbursement_reference(transfer.id, 1),
        "provider_reference": transfer.disbursement_reference,
        "outcome": "completed",
    }
    at_once(lambda: payment_tasks.deliver_provider_answer(**disbursed), RUNS)

    transfer.refresh_from_db()
    assert (transfer.status, transfer.payout_status) == ("completed", "completed")
    assert _events(transfer_id) == [
        "transfer.completed",
        "transfer.payin.completed",
        "transfer.payout.completed",
    ]
    assert ledger_is_clean()
