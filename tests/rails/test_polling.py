"""Legs MTN has not answered are polled by beat: first PROVIDER_POLL_AFTER_SECONDS after their
call (a due time stored at submission), then at growing intervals whose due times are in the
database, until the provider timeout. Payins, payouts, refunds and both legs of a transfer."""

from datetime import timedelta

import pytest
from django.utils import timezone

from payments.models import Payin, Payout, Refund
from payments.provider.mtn_momo import reference_id
from payments.services.sweeps import payments_ask_provider
from rails import selectors, services
from tests.payments.conftest import create_customer, fund, payin_body, payout_body
from tests.rails.conftest import (
    CM_PHONE,
    CONNECTION,
    cm_quote,
    cm_transfer,
    connection_add,
    tokens_forget,
)
from tests.support import MerchantClient
from transfers.models import Transfer
from transfers.services.sweeps import transfers_ask_overdue_answers

pytestmark = pytest.mark.django_db(transaction=True)

RECIPIENT = "+237670002222"


@pytest.fixture
def routed(fake_mtn, settings):
    settings.ALLOW_PRIVATE_NETWORK_URLS = True
    settings.PROVIDER_POLL_AFTER_SECONDS = 60
    connection_add(fake_mtn, callback_base="https://cowry.example")
    services.operator_route_set(operator_code="CM_MTN_MOMO", name=CONNECTION, at=timezone.now())
    selectors.memo_forget()
    yield fake_mtn
    tokens_forget()


def _reads(fake, reference: str) -> int:
    return sum(1 for _, each in fake.status_reads if each == reference_id(reference))


def _polled_at_growing_intervals(fake, model, pk: str) -> None:
    """A pending leg: not asked before PROVIDER_POLL_AFTER_SECONDS (though past the simulator's
    overdue mark), then asked at 60 s, 120 s, 240 s; it completes at the poll after MTN decides."""
    submitted = model.objects.get(pk=pk).submitted_at
    assert model.objects.get(pk=pk).provider_poll_at == submitted + timedelta(seconds=60)
    assert payments_ask_provider(now=submitted + timedelta(seconds=31)) == 0
    assert payments_ask_provider(now=submitted + timedelta(seconds=59)) == 0
    assert _reads(fake, pk) == 0  # not due yet
    first = submitted + timedelta(seconds=60)
    assert payments_ask_provider(now=first) == 0
    assert _reads(fake, pk) == 1
    due = model.objects.get(pk=pk).provider_poll_at
    assert due == first + timedelta(seconds=60)
    assert payments_ask_provider(now=due - timedelta(seconds=1)) == 0
    assert _reads(fake, pk) == 1  # not due
    assert payments_ask_provider(now=due) == 0
    assert _reads(fake, pk) == 2
    # the interval grows: as long as the leg has waited (120 s), more than 60 s
    later = model.objects.get(pk=pk).provider_poll_at
    assert later == due + (due - submitted)
    fake.switches.pending = False  # the party approves
    assert payments_ask_provider(now=later) == 1
    assert _reads(fake, pk) == 3
    assert model.objects.get(pk=pk).status == "completed"


def test_an_unanswered_payin_is_polled_after_poll_after_seconds_then_at_growing_intervals(
    enabled_merchant, routed
):
    routed.switches.pending = True  # the payer has not approved yet
    api = MerchantClient(enabled_merchant)
    customer = create_customer(api, phone=CM_PHONE)
    payin_id = api.post("/payins", payin_body(cm_quote(api), customer, CM_PHONE)).json()["id"]
    _polled_at_growing_intervals(routed, Payin, payin_id)


def test_an_unanswered_payout_is_polled_after_poll_after_seconds_then_at_growing_intervals(
    enabled_merchant, routed
):
    routed.switches.pending = True
    api = MerchantClient(enabled_merchant)
    customer = create_customer(api, phone=CM_PHONE)
    fund(enabled_merchant, "20000", currency="XAF")
    quote = cm_quote(api, "payout", amount="5000")
    payout_id = api.post("/payouts", payout_body(quote, customer, CM_PHONE)).json()["id"]
    _polled_at_growing_intervals(routed, Payout, payout_id)


def test_an_unanswered_refund_is_polled_after_poll_after_seconds_then_at_growing_intervals(
    enabled_merchant, routed
):
    api = MerchantClient(enabled_merchant)
    customer = create_customer(api, phone=CM_PHONE)
    payin_id = api.post("/payins", payin_body(cm_quote(api), customer, CM_PHONE)).json()["id"]
    assert payments_ask_provider(now=timezone.now() + timedelta(seconds=60)) == 1
    assert Payin.objects.get(pk=payin_id).status == "completed"
    routed.switches.pending = True
    response = api.post(f"/payins/{payin_id}/refunds", {"amount": "1000"})
    assert response.status_code == 201, response.json()
    _polled_at_growing_intervals(routed, Refund, response.json()["id"])


def _leg_polled_after_poll_after_seconds(fake, transfer_id: str, reference: str, *, answers: int):
    """The leg in flight is asked PROVIDER_POLL_AFTER_SECONDS after its call, not at the
    simulator's overdue mark; `answers` is what that first poll applies (0: MTN still waits)."""
    transfer = Transfer.objects.get(pk=transfer_id)
    submitted = (
        transfer.collection_submitted_at
        if transfer.status == "collecting"
        else transfer.disbursement_submitted_at
    )
    assert transfer.leg_poll_at == submitted + timedelta(seconds=60)
    assert transfers_ask_overdue_answers(now=submitted + timedelta(seconds=31)) == 0
    assert transfers_ask_overdue_answers(now=submitted + timedelta(seconds=59)) == 0
    assert _reads(fake, reference) == 0
    assert transfers_ask_overdue_answers(now=submitted + timedelta(seconds=60)) == answers
    assert _reads(fake, reference) == 1
    if not answers:  # asked again later: as long as it has waited since it moved (~60 s)
        again = Transfer.objects.get(pk=transfer_id).leg_poll_at - submitted
        assert timedelta(seconds=120) <= again < timedelta(seconds=121)


def test_both_legs_of_a_transfer_and_a_relaunch_are_polled_after_poll_after_seconds(
    enabled_merchant, routed
):
    fake = routed
    fake.switches.pending = True
    fake.switches.declines = {RECIPIENT[1:]: "PAYEE_NOT_ALLOWED_TO_RECEIVE"}
    api = MerchantClient(enabled_merchant)
    customer = create_customer(api, phone=CM_PHONE)
    transfer_id = cm_transfer(api, customer, recipient_phone=RECIPIENT)
    assert Transfer.objects.get(pk=transfer_id).status == "collecting"
    _leg_polled_after_poll_after_seconds(fake, transfer_id, transfer_id, answers=0)
    fake.switches.pending = False  # the payer approves; the disbursement is sent (and declined)
    assert transfers_ask_overdue_answers(now=Transfer.objects.get(pk=transfer_id).leg_poll_at) == 1
    transfer = Transfer.objects.get(pk=transfer_id)
    assert (transfer.status, transfer.disbursement_attempt) == ("disbursing", 1)
    _leg_polled_after_poll_after_seconds(fake, transfer_id, f"{transfer_id}:1", answers=1)
    assert Transfer.objects.get(pk=transfer_id).payout_status == "failed"
    fake.switches.declines = {}
    fake.switches.pending = True
    response = api.post(f"/transfers/{transfer_id}/relaunch-payout")
    assert response.status_code == 202, response.json()
    assert Transfer.objects.get(pk=transfer_id).disbursement_attempt == 2
    _leg_polled_after_poll_after_seconds(fake, transfer_id, f"{transfer_id}:2", answers=0)
    fake.switches.pending = False
    assert transfers_ask_overdue_answers(now=Transfer.objects.get(pk=transfer_id).leg_poll_at) == 1
    assert api.get(f"/transfers/{transfer_id}").json()["status"] == "completed"
