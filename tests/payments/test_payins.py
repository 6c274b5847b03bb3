import uuid
from decimal import Decimal

import pytest
from django.db import transaction
from django.utils import timezone

from payments.ledger.checks import ledger_breaches
from payments.ledger.journals import account_balances
from payments.models import Payin
from payments.services.payins import payin_transition
from tests.payments.conftest import (
    DECLINED_PHONE,
    SILENT_PHONE,
    SN_PHONE,
    create_customer,
    create_quote,
    payin_body,
)
from webhooks.models import Event

pytestmark = pytest.mark.django_db


def _create(api, body, capture):
    with capture(execute=True):
        response = api.post("/payins", body)
    return response


def test_payin_is_created_then_completes_and_credits_the_wallet(
    enabled_api, enabled_merchant, customer, django_capture_on_commit_callbacks
):
    quote = create_quote(enabled_api, "payin", customer_id=customer["id"])
    with django_capture_on_commit_callbacks() as callbacks:
        response = enabled_api.post("/payins", payin_body(quote, customer))
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["status"] == "created"
    assert body["quote_id"] == quote["id"]
    assert body["customer_id"] == customer["id"]
    assert body["merchant_id"] == str(enabled_merchant.id)
    assert body["send_amount"] == "10000"
    assert body["receive_amount"] == "9850"
    assert body["send_currency"] == body["receive_currency"] == "XOF"
    assert body["wallet_impact"] == {"credit_amount": "9850", "currency": "XOF"}
    assert body["source"] == {
        "phone": SN_PHONE,
        "bank_name": None,
        "bank_code": None,
        "account_name": None,
        "account_number": None,
        "country_code": "SN",
        "rail_type": "mobile_money",
        "operator_code": "SN_ORANGE_MOMO",
    }
    assert [h["status"] for h in body["history"]] == ["created"]
    assert body["_meta"]["idempotency_replayed"] is False
    assert len(callbacks) == 1  # the provider submission waits for the commit

    with django_capture_on_commit_callbacks(execute=True):
        callbacks[0]()

    payin = enabled_api.get(f"/payins/{body['id']}").json()
    assert payin["status"] == "completed"
    assert [h["status"] for h in payin["history"]] == ["created", "pending", "completed"]
    assert payin["provider_reference"].startswith("SIM-")
    assert account_balances(merchant=enabled_merchant, currency="XOF") == {
        "merchant_available": Decimal("9850"),
        "fee_revenue": Decimal("150"),
        "provider_clearing:SN_ORANGE_MOMO": Decimal("-10000"),
    }
    event = Event.objects.get(data_id=body["id"])
    assert event.event_type == "payin.completed"
    obj = event.payload["data"]["object"]
    assert obj["status"] == "completed"
    assert obj["wallet_impact"] == {"credit_amount": "9850", "currency": "XOF"}
    assert obj["completed_at"] is not None
    for key in (
        "id",
        "send_amount",
        "send_currency",
        "receive_amount",
        "receive_currency",
        "country_code",
        "operator_code",
        "rail_type",
    ):
        assert key in obj
    assert ledger_breaches() == []


def test_payin_declined_by_the_provider_fails_and_credits_nothing(
    enabled_api, enabled_merchant, customer, django_capture_on_commit_callbacks, caplog
):
    caplog.set_level("INFO", logger="cowry.payments")
    quote = create_quote(enabled_api, "payin")
    response = _create(
        enabled_api, payin_body(quote, customer, DECLINED_PHONE), django_capture_on_commit_callbacks
    )
    assert response.status_code == 201
    payin = enabled_api.get(f"/payins/{response.json()['id']}").json()
    assert payin["status"] == "failed"
    assert payin["history"][-1] == {
        "status": "failed",
        "reason": "provider_declined",
        "created_at": payin["history"][-1]["created_at"],
    }
    assert account_balances(merchant=enabled_merchant, currency="XOF") == {}
    assert Event.objects.get(data_id=payin["id"]).event_type == "payin.failed"
    declined = (
        f"Payin {payin['id']} of merchant {enabled_merchant.pk} failed: declined by the provider"
        " (provider_declined)"
    )
    assert [r.getMessage() for r in caplog.records if r.name == "cowry.payments"] == [declined]


class Abandoned(Exception):
    """Raised inside the caller's transaction after the move: it rolls back."""


@pytest.mark.django_db(transaction=True)
def test_a_decline_is_logged_once_its_move_commits_and_never_when_it_rolls_back(
    enabled_api, enabled_merchant, customer, caplog
):
    caplog.set_level("INFO", logger="cowry.payments")
    quote = create_quote(enabled_api, "payin")
    payin_id = enabled_api.post("/payins", payin_body(quote, customer, SILENT_PHONE)).json()["id"]
    assert Payin.objects.get(pk=payin_id).status == "pending"

    def declines() -> list[str]:
        return [r.getMessage() for r in caplog.records if "declined by the provider" in r.msg]

    def decline() -> None:
        payin_transition(
            payin_id=uuid.UUID(payin_id), to="failed", reason="provider_declined", at=timezone.now()
        )

    with pytest.raises(Abandoned), transaction.atomic():
        decline()
        raise Abandoned
    assert Payin.objects.get(pk=payin_id).status == "pending"
    assert declines() == []

    decline()
    assert Payin.objects.get(pk=payin_id).status == "failed"
    assert declines() == [
        f"Payin {payin_id} of merchant {enabled_merchant.pk} failed: declined by the provider"
        " (provider_declined)"
    ]


def test_a_repeated_provider_answer_changes_nothing(
    enabled_api, enabled_merchant, customer, django_capture_on_commit_callbacks
):
    from payments import provider
    from payments.services.transitions import PAYIN_CALLBACK

    quote = create_quote(enabled_api, "payin")
    response = _create(enabled_api, payin_body(quote, customer), django_capture_on_commit_callbacks)
    payin = Payin.objects.get(pk=response.json()["id"])
    for outcome in ("completed", "failed"):
        provider.deliver_answer(
            callback=PAYIN_CALLBACK,
            reference=str(payin.id),
            provider_reference=payin.provider_reference,
            outcome=outcome,
        )
    payin.refresh_from_db()
    assert payin.status == "completed"
    assert payin.history.count() == 3
    assert Event.objects.filter(data_id=payin.id).count() == 1
    assert account_balances(merchant=enabled_merchant, currency="XOF")[
        "merchant_available"
    ] == Decimal("9850")


def test_get_payin_of_another_merchant_is_404(
    enabled_api, customer, other_api, django_capture_on_commit_callbacks
):
    quote = create_quote(enabled_api, "payin")
    response = _create(enabled_api, payin_body(quote, customer), django_capture_on_commit_callbacks)
    other = other_api.get(f"/payins/{response.json()['id']}")
    assert other.status_code == 404
    assert other.json()["error"]["code"] == "not_found"
    assert enabled_api.get(f"/payins/{uuid.uuid4()}").status_code == 404
    assert enabled_api.get("/payins/not-a-uuid").status_code == 404


def test_idempotent_replay_returns_the_same_payin(enabled_api, customer):
    quote = create_quote(enabled_api, "payin")
    body = payin_body(quote, customer)
    first = enabled_api.post("/payins", body, idempotency_key="k-1")
    second = enabled_api.post("/payins", body, idempotency_key="k-1")
    assert first.status_code == second.status_code == 201
    assert first.json()["id"] == second.json()["id"]
    assert second.json()["_meta"] == {"idempotency_key": "k-1", "idempotency_replayed": True}
    assert Payin.objects.count() == 1


def test_payin_without_idempotency_key_is_400(enabled_api, customer):
    quote = create_quote(enabled_api, "payin")
    response = enabled_api.post("/payins", payin_body(quote, customer), idempotency_key=None)
    assert response.status_code == 400
    assert Payin.objects.count() == 0


def test_payin_for_a_quote_with_another_customer_is_400(enabled_api, customer):
    other_customer = create_customer(enabled_api, first_name="Other")
    quote = create_quote(enabled_api, "payin", customer_id=other_customer["id"])
    response = enabled_api.post("/payins", payin_body(quote, customer))
    assert response.status_code == 400
    assert response.json()["error"]["reason"] == "quote_customer_mismatch"
    assert enabled_api.get(f"/quotes/{quote['id']}").json()["status"] == "active"
