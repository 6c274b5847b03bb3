"""The sandbox phone ending 998 in a transfer, through Redis and a real worker: the collection
from it completes, the disbursement to it is declined (provider_declined)."""

import pytest

from tests.support import MerchantClient
from tests.transfers.conftest import (
    SENDER_DETAILS,
    create_customer,
    create_quote,
    ledger_is_clean,
    transfer_body,
)
from tests.worker import celery_worker, wait_until
from transfers.models import Transfer

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

CM_PAYS_ONLY = "+237670001998"
SN_PAYS_ONLY = "+221770001998"


def test_a_transfer_collects_from_a_998_phone_and_its_disbursement_to_one_is_declined(
    enabled_merchant,
):
    api = MerchantClient(enabled_merchant)
    sender = create_customer(api, **SENDER_DETAILS)
    quote = create_quote(api, customer_id=sender["id"])
    body = transfer_body(quote, sender, payer_phone=CM_PAYS_ONLY, recipient_phone=SN_PAYS_ONLY)
    with celery_worker() as worker:
        created = api.post("/transfers", body)
        assert created.status_code == 201, created.json()
        path = f"/transfers/{created.json()['id']}"

        def disbursement_answered() -> bool:
            assert worker.poll() is None, "the worker died"
            return api.get(path).json()["payout_status"] in ("completed", "failed")

        assert wait_until(disbursement_answered, timeout=60), api.get(path).json()
    transfer = api.get(path).json()
    execution = transfer["execution"]
    assert (transfer["payin_status"], execution["collection_failure_reason"]) == (
        "completed",
        None,
    )
    assert (transfer["payout_status"], execution["disbursement_failure_reason"]) == (
        "failed",
        "provider_declined",
    )
    assert transfer["status"] == "failed"
    assert Transfer.objects.get(pk=transfer["id"]).disbursement_attempt == 1
    assert ledger_is_clean()
