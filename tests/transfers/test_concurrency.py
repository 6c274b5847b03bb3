"""Races on real PostgreSQL with real threads: each thread is its own request and connection."""

import threading
import uuid

import pytest
from django.db import connection, transaction
from django.test import override_settings
from django.utils import timezone
from rest_framework.test import APIClient

from payments.models import Wallet
from payments.provider import sandbox_gateway
from payments.provider.simulator import SimulatorGateway
from tests.locks import waiting_for_a_lock
from tests.transfers.conftest import (
    SENDER_DETAILS,
    SN_DECLINED,
    SN_PHONE,
    SN_SILENT,
    create_customer,
    create_quote,
    ledger_is_clean,
    transfer_body,
)
from transfers.models import Transfer, TransferHistory
from transfers.services.submission import transfer_apply_disbursement_result
from webhooks.models import Event

CM_SILENT = "+237670001999"
THREADS = 6


@sandbox_gateway("retried-disbursements-never-answer")
class RetriedDisbursementsNeverAnswerGateway(SimulatorGateway):
    """The real simulator, except that the provider never answers a relaunched disbursement
    (attempt 2 and later), so the winning relaunch stays in flight while the others race."""

    def submit_disbursement(self, **kwargs):
        if not kwargs["reference"].endswith(":1"):
            kwargs["phone"] = kwargs["phone"][:-3] + "999"
        return super().submit_disbursement(**kwargs)


def race(api, requests: list[tuple[str, dict | None]]) -> list:
    """Send the requests at once from one thread each; returns the responses in order."""
    barrier = threading.Barrier(len(requests), timeout=60)
    responses: list = [None] * len(requests)

    def send(index: int, path: str, body: dict | None) -> None:
        client = APIClient()
        client.credentials(HTTP_X_API_KEY=api.api_key, HTTP_X_API_SECRET=api.api_secret)
        try:
            barrier.wait()
            responses[index] = client.post(
                path, body, format="json", HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4())
            )
        finally:
            connection.close()

    threads = [
        threading.Thread(target=send, args=(i, path, body))
        for i, (path, body) in enumerate(requests)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return responses


@pytest.mark.django_db(transaction=True)
def test_racing_relaunches_start_exactly_one_disbursement(enabled_api):
    customer = create_customer(enabled_api, **SENDER_DETAILS)
    quote = create_quote(enabled_api, customer_id=customer["id"])
    with override_settings(PAYMENTS_PROVIDER_GATEWAY="retried-disbursements-never-answer"):
        created = enabled_api.post(
            "/transfers", transfer_body(quote, customer, recipient_phone=SN_DECLINED)
        )
        transfer_id = created.json()["id"]
        assert Transfer.objects.get(pk=transfer_id).payout_status == "failed"

        path = f"/transfers/{transfer_id}/relaunch-payout"
        responses = race(enabled_api, [(path, None)] * THREADS)

    statuses = sorted(r.status_code for r in responses)
    assert statuses == [202] + [409] * (THREADS - 1), [r.json() for r in responses]
    for response in responses:
        if response.status_code == 409:
            assert response.json()["error"]["reason"] == "transfer_not_relaunchable"
    transfer = Transfer.objects.get(pk=transfer_id)
    assert (transfer.status, transfer.payout_status, transfer.disbursement_attempt) == (
        "disbursing",
        "pending",
        2,
    )
    assert transfer.disbursement_reference.startswith("SIM-")  # attempt 2 was submitted once
    assert (
        TransferHistory.objects.filter(transfer_id=transfer_id, reason="payout_relaunched").count()
        == 1
    )
    assert (
        Event.objects.filter(data_id=transfer_id, event_type="transfer.payin.completed").count()
        == 1
    )
    assert ledger_is_clean()


@pytest.mark.django_db(transaction=True)
def test_two_transfers_racing_for_one_quote_create_one(enabled_api):
    customer = create_customer(enabled_api, **SENDER_DETAILS)
    quote = create_quote(enabled_api, customer_id=customer["id"])
    body = transfer_body(quote, customer)

    responses = race(enabled_api, [("/transfers", body)] * 2)

    statuses = sorted(r.status_code for r in responses)
    assert statuses == [201, 400], [r.json() for r in responses]
    loser = next(r for r in responses if r.status_code == 400)
    assert loser.json()["error"]["reason"] == "quote_consumed"
    assert Transfer.objects.count() == 1
    transfer = Transfer.objects.get()
    assert transfer.status == "completed"
    assert Event.objects.filter(data_id=transfer.id, event_type="transfer.completed").count() == 1
    assert ledger_is_clean()


@pytest.mark.django_db(transaction=True)
def test_a_relaunch_after_a_paid_after_all_answer_is_refused_even_mid_answer(
    enabled_api, monkeypatch
):
    """The provider says attempt 1, which we had failed, paid after all. Its transition is
    refused and the ProviderDiscrepancy that blocks a relaunch is recorded: a relaunch that
    came in between took the lock the answer had released and paid the recipient twice. The
    answer now keeps the transfer locked until the discrepancy is recorded."""
    from payments import provider
    from payments.ledger.discrepancies import provider_discrepancy_record
    from payments.models import ProviderDiscrepancy
    from transfers.services import submission as transfer_submission
    from transfers.services.submission import DISBURSEMENT_CALLBACK

    record = provider_discrepancy_record
    recording, go = threading.Event(), threading.Event()

    def record_once_the_relaunch_came(**kwargs):
        recording.set()
        go.wait(timeout=30)
        return record(**kwargs)

    monkeypatch.setattr(
        transfer_submission, "provider_discrepancy_record", record_once_the_relaunch_came
    )
    customer = create_customer(enabled_api, **SENDER_DETAILS)
    quote = create_quote(enabled_api, customer_id=customer["id"])
    body = transfer_body(quote, customer, recipient_phone=SN_DECLINED)
    transfer_id = enabled_api.post("/transfers", body).json()["id"]
    assert Transfer.objects.get(pk=transfer_id).payout_status == "failed"

    def answer() -> None:
        try:
            provider.deliver_answer(
                callback=DISBURSEMENT_CALLBACK,
                reference=f"{transfer_id}:1",
                provider_reference="SIM-attempt-1",
                outcome=provider.COMPLETED,
            )
        finally:
            connection.close()

    relaunched: list = []

    def relaunch() -> None:
        client = APIClient()
        client.credentials(
            HTTP_X_API_KEY=enabled_api.api_key, HTTP_X_API_SECRET=enabled_api.api_secret
        )
        try:
            relaunched.append(
                client.post(
                    f"/transfers/{transfer_id}/relaunch-payout",
                    None,
                    format="json",
                    HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4()),
                )
            )
        finally:
            connection.close()

    answering = threading.Thread(target=answer)
    answering.start()
    assert recording.wait(timeout=30)  # the answer was refused; the discrepancy is next
    relaunching = threading.Thread(target=relaunch)
    relaunching.start()
    relaunching.join(timeout=2)  # done already if nothing held it back
    if relaunching.is_alive():
        waiting_for_a_lock(1)  # for the answer's lock, as it should
    go.set()
    answering.join(timeout=30)
    relaunching.join(timeout=30)

    [response] = relaunched
    assert response.status_code == 409, response.json()
    assert "paid after all" in response.json()["error"]["message"]
    assert Transfer.objects.get(pk=transfer_id).disbursement_attempt == 1
    assert ProviderDiscrepancy.objects.get(resource_id=transfer_id).our_status == "failed"
    assert ledger_is_clean()


@pytest.mark.django_db(transaction=True)
def test_opposite_cross_currency_transfers_completing_at_once_do_not_deadlock(
    enabled_api, enabled_merchant
):
    """A XAF->XOF and a XOF->XAF transfer of one merchant complete at the same moment. Each
    completion posts a journal in each currency, locking the merchant's wallet in it: taken in
    the money's direction, the first would hold XAF and wait for XOF while the second held XOF
    and waited for XAF. Lined up so (the XAF wallet held until both wait), both complete."""
    customer = create_customer(enabled_api, **SENDER_DETAILS)
    to_sn = create_quote(enabled_api, customer_id=customer["id"])
    to_cm = create_quote(
        enabled_api,
        customer_id=customer["id"],
        corridor="SN-CM-XOF-XAF",
        payer_operator="SN_WAVE_MOMO",
        recipient_operator="CM_MTN_MOMO",
    )
    transfer_ids = [
        enabled_api.post(
            "/transfers", transfer_body(to_sn, customer, recipient_phone=SN_SILENT)
        ).json()["id"],
        enabled_api.post(
            "/transfers",
            transfer_body(to_cm, customer, payer_phone=SN_PHONE, recipient_phone=CM_SILENT),
        ).json()["id"],
    ]
    assert [Transfer.objects.get(pk=i).status for i in transfer_ids] == ["disbursing"] * 2

    held, release = threading.Event(), threading.Event()

    def hold_the_xaf_wallet() -> None:
        try:
            with transaction.atomic():
                Wallet.objects.select_for_update().get(merchant=enabled_merchant, currency="XAF")
                held.set()
                release.wait(30)
        finally:
            connection.close()

    failures: list[BaseException] = []

    def complete(transfer_id: str) -> None:
        try:
            transfer_apply_disbursement_result(
                reference=f"{transfer_id}:1",
                provider_reference=f"SIM-{transfer_id[:8]}",
                outcome="completed",
                reason="",
                at=timezone.now(),
            )
        except BaseException as exc:  # the test reports it
            failures.append(exc)
        finally:
            connection.close()

    holder = threading.Thread(target=hold_the_xaf_wallet)
    holder.start()
    assert held.wait(20)
    completions = []
    for waiting, transfer_id in enumerate(transfer_ids, start=1):
        completions.append(threading.Thread(target=complete, args=(transfer_id,)))
        completions[-1].start()
        waiting_for_a_lock(waiting)
    release.set()
    for thread in [holder, *completions]:
        thread.join(60)

    assert failures == []
    assert [Transfer.objects.get(pk=i).status for i in transfer_ids] == ["completed"] * 2
    assert ledger_is_clean()
