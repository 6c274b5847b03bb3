"""What a provider call's start (PAYIN_SUBMISSION, one statement) writes: a created payin moved
to pending with its history row, a pending one's new start recorded, and nothing at all for a
payin that is not waiting for a call."""

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from payments import provider
from payments.models import Payin
from payments.services import payins
from payments.services.submission import payin_submit
from tests.payments.conftest import (
    COLLECTIONS_COUNTED,
    COLLECTIONS_DOWN,
    SILENT_PHONE,
    SN_PHONE,
    CollectionsCountedGateway,
    create_quote,
    payin_body,
)

pytestmark = pytest.mark.django_db


def _created_payin(api, customer, phone: str = SN_PHONE) -> Payin:
    quote = create_quote(api, "payin", customer_id=customer["id"])
    response = api.post("/payins", payin_body(quote, customer, phone))
    assert response.status_code == 201, response.json()
    return Payin.objects.get(pk=response.json()["id"])


def _history(payin: Payin) -> list[tuple]:
    return list(payin.history.values_list("status", "reason", "created_at"))


@pytest.fixture
def counted(settings):
    settings.PAYMENTS_PROVIDER_GATEWAY = COLLECTIONS_COUNTED
    CollectionsCountedGateway.calls.clear()
    return CollectionsCountedGateway.calls


def test_a_created_payin_moves_to_pending_with_its_history_before_the_call(
    enabled_api, customer, counted
):
    payin = _created_payin(enabled_api, customer)
    now = timezone.now()

    payin_submit(payin_id=payin.id, now=now)

    payin.refresh_from_db()
    assert payin.submitted_at == now
    assert _history(payin)[1] == ("pending", "submitted_to_provider", now)
    assert counted == [str(payin.id)]
    # then the simulator's answer (in its receipt here) completed it
    assert [status for status, _, _ in _history(payin)] == ["created", "pending", "completed"]
    assert payin.status == "completed"


def test_a_pending_payin_without_a_receipt_records_its_new_call_alone(
    enabled_api, customer, settings, counted
):
    payin = _created_payin(enabled_api, customer, SILENT_PHONE)  # the sandbox never answers it
    first = timezone.now()
    settings.PAYMENTS_PROVIDER_GATEWAY = COLLECTIONS_DOWN
    with pytest.raises(provider.ProviderUnavailable):  # the task retries: pending, no reference
        payin_submit(payin_id=payin.id, now=first)
    payin.refresh_from_db()
    assert (payin.status, payin.provider_reference, payin.updated_at) == ("pending", "", first)
    settings.PAYMENTS_PROVIDER_GATEWAY = COLLECTIONS_COUNTED
    again = first + timedelta(seconds=40)

    payin_submit(payin_id=payin.id, now=again)

    payin.refresh_from_db()
    assert payin.status == "pending"
    assert payin.submitted_at == again
    assert payin.updated_at == first  # no move: its status changed at the first call
    assert payin.provider_reference.startswith("SIM-")  # this call's receipt
    assert _history(payin)[1:] == [("pending", "submitted_to_provider", first)]
    assert counted == [str(payin.id)]


@pytest.mark.parametrize("why", ["failed", "answered", "timed out"])
def test_a_payin_not_waiting_for_a_call_gets_none_and_nothing_is_written(
    enabled_api, customer, counted, why
):
    payin = _created_payin(enabled_api, customer)
    now = timezone.now()
    if why == "failed":
        payins.payin_transition(payin_id=payin.id, to="failed", reason="declined", at=now)
    elif why == "answered":
        payins.payin_transition(payin_id=payin.id, to="pending", at=now)
        Payin.objects.filter(pk=payin.id).update(provider_reference="SIM-received")
    else:
        now = payin.provider_timeout_at
    before = Payin.objects.values().get(pk=payin.id)
    history = _history(payin)

    payin_submit(payin_id=payin.id, now=now + timedelta(seconds=1))

    assert Payin.objects.values().get(pk=payin.id) == before
    assert _history(payin) == history
    assert counted == []


def test_an_unknown_payin_is_an_error_not_a_silent_skip(db):
    with pytest.raises(Payin.DoesNotExist):
        payin_submit(payin_id=uuid.uuid4(), now=timezone.now())
