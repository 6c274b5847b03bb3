"""GET /payins/{id} reads the payin, its refunds and its history in one statement (PAYIN_READ):
its body is byte for byte what the payin's rows read through the ORM render."""

import pytest
from django.utils import timezone

from core.content import JsonRenderer
from payments import selectors
from payments.models import Payin, Refund
from payments.serializers import PayinOutput
from payments.services import payins, refunds
from tests.payments.conftest import create_quote, payin_body

pytestmark = pytest.mark.django_db


def _orm_read(payin_id) -> Payin:
    """The same payin read through the ORM, as the list of payins reads it."""
    payin = selectors._with_refunds(Payin.objects.filter(pk=payin_id)).get()
    payin.history_entries = list(payin.history.order_by("created_at", "id"))
    return payin


def _completed_payin(api, customer) -> str:
    quote = create_quote(api, "payin", customer_id=customer["id"])
    payin_id = api.post("/payins", payin_body(quote, customer)).json()["id"]
    payins.payin_transition(payin_id=payin_id, to="pending", at=timezone.now())
    payins.payin_transition(
        payin_id=payin_id, to="completed", at=timezone.now(), provider_reference="SIM-1"
    )
    return payin_id


def test_a_payin_with_refunds_reads_as_the_orm_renders_it(enabled_api, enabled_merchant, customer):
    payin_id = _completed_payin(enabled_api, customer)
    for amount in ("100", "200"):
        assert (
            enabled_api.post(f"/payins/{payin_id}/refunds", {"amount": amount}).status_code == 201
        )
    first = Refund.objects.filter(payin_id=payin_id).order_by("created_at").first()
    refunds.refund_transition(refund_id=first.id, to="completed", at=timezone.now())

    response = enabled_api.get(f"/payins/{payin_id}")

    assert response.status_code == 200
    expected = JsonRenderer().render(PayinOutput(_orm_read(payin_id)).data)
    assert response.content == expected
    body = response.json()
    assert body["refunded_amount"] == "100"
    assert len(body["refunds"]) == 2
    assert [h["status"] for h in body["history"]] == ["created", "pending", "completed"]


def test_a_new_payin_reads_as_the_orm_renders_it(enabled_api, enabled_merchant, customer):
    quote = create_quote(enabled_api, "payin", customer_id=customer["id"])
    payin_id = enabled_api.post("/payins", payin_body(quote, customer)).json()["id"]

    response = enabled_api.get(f"/payins/{payin_id}")

    assert response.content == JsonRenderer().render(PayinOutput(_orm_read(payin_id)).data)
    assert response.json()["refunds"] == []
    assert response.json()["refunded_amount"] == "0"


def test_another_merchants_payin_is_not_found(enabled_api, customer, other_merchant):
    payin_id = _completed_payin(enabled_api, customer)

    with pytest.raises(selectors.PayinNotFound):
        selectors.payin_get(merchant=other_merchant, payin_id=payin_id)
