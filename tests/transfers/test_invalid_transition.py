"""invalid_transition is one error, core.transitions.InvalidTransition: a
transfer's refused move is caught as a payment's is, and each refusal answers the same 409 body
as before."""

import pytest
from django.utils import timezone

from core.content import JsonRenderer
from core.exceptions import build_error_response
from core.transitions import InvalidTransition
from payments.services.payouts import PayoutNotStuck
from tests.transfers.conftest import transfer_body
from transfers.services.support import transfer_mark_disbursement_failed
from transfers.services.transitions import COLLECTION_SUBMITTED, transfer_transition

pytestmark = pytest.mark.django_db


def _body(error: Exception) -> tuple[int, bytes]:
    response = build_error_response(error)
    return response.status_code, JsonRenderer().render(response.data)


def _refused(message: str) -> tuple[int, bytes]:
    return 409, (
        b'{"error":{"code":"conflict","message":"' + message.encode() + b'",'
        b'"reason":"invalid_transition"}}'
    )


def test_a_transfers_refusals_are_the_one_invalid_transition(enabled_api, customer, quote, run):
    transfer_id = run(enabled_api.post, "/transfers", transfer_body(quote, customer)).json()["id"]
    now = timezone.now()

    with pytest.raises(InvalidTransition) as moved:
        transfer_transition(transfer_id=transfer_id, to=COLLECTION_SUBMITTED, at=now)
    with pytest.raises(InvalidTransition) as marked:
        transfer_mark_disbursement_failed(transfer_id=transfer_id, actor=None, now=now)

    assert _body(moved.value) == _refused(
        "A transfer in ('completed', 'completed', 'completed') cannot make the move "
        "collection_submitted."
    )
    assert _body(marked.value) == _refused(
        "Only a transfer whose disbursement leg is in flight (disbursing) can have it marked "
        "failed; this one is completed."
    )


def test_a_payout_not_stuck_answers_as_before():
    assert _body(PayoutNotStuck()) == _refused(
        "Only a payout stuck at the provider can be marked failed: pending, received by the "
        "provider (it has a provider reference) and past its provider timeout."
    )
