from datetime import datetime
from decimal import Decimal

import pytest

from payments.ledger.checks import ledger_check
from payments.ledger.journals import account_balances
from payments.models import Journal, JournalLine
from quotes.models import Quote
from tests.transfers.conftest import (
    CM_DECLINED,
    CM_PHONE,
    SN_DECLINED,
    SN_PHONE,
    ledger_is_clean,
    transfer_body,
)
from transfers.models import Transfer
from webhooks.models import Event

pytestmark = pytest.mark.django_db


def events_of(transfer_id: str) -> list[str]:
    return list(
        Event.objects.filter(data_id=transfer_id)
        .order_by("created_at")
        .values_list("event_type", flat=True)
    )


def test_transfer_is_created_pending_and_consumes_the_quote(
    enabled_api, enabled_merchant, customer, quote, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks() as callbacks:
        response = enabled_api.post("/transfers", transfer_body(quote, customer))

    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["status"] == "pending"
    assert body["payin_status"] == "pending"
    assert body["payout_status"] == "not_started"
    assert body["merchant_id"] == str(enabled_merchant.id)
    assert body["quote_id"] == quote["id"]
    assert body["customer_id"] == customer["id"]
    assert (body["send_amount"], body["send_currency"]) == ("10000", "XAF")
    assert (body["payin_amount"], body["payin_currency"]) == ("10000", "XAF")
    assert (body["receive_amount"], body["receive_currency"]) == ("9800", "XOF")
    assert (body["payout_amount"], body["payout_currency"]) == ("9800", "XOF")
    assert body["total_fee"] == "200"
    assert body["corridor_code"] == "CM-SN-XAF-XOF"
    assert body["corridor_type"] == "cross_border"
    assert body["payer"] == {
        "country_code": "CM",
        "rail_type": "mobile_money",
        "operator_code": "CM_MTN_MOMO",
        "phone": CM_PHONE,
        "bank_name": None,
        "bank_code": None,
        "account_name": None,
        "account_number": None,
    }
    assert body["recipient"]["operator_code"] == "SN_WAVE_MOMO"
    assert body["recipient"]["country_code"] == "SN"
    assert body["recipient"]["first_name"] == "Moussa"
    assert body["recipient"]["phone"] == SN_PHONE
    assert body["payment_reason_code"] == "FAMILY_SUPPORT"
    assert body["pricing"]["fx"]["rate"] == "1"
    assert body["execution"]["collection_reference"] is None
    assert body["execution"]["disbursement_attempt"] == 0
    assert [(h["status"], h["reason"]) for h in body["history"]] == [("pending", "created")]
    assert body["_meta"]["idempotency_replayed"] is False
    assert Quote.objects.get(pk=quote["id"]).status == "consumed"
    assert len(callbacks) == 1  # the collection waits for the commit
    assert enabled_api.get(f"/transfers/{body['id']}").json()["status"] == "pending"


def test_happy_path_collects_then_disburses_with_events_and_ledger(
    enabled_api, enabled_merchant, customer, quote, run
):
    response = run(enabled_api.post, "/transfers", transfer_body(quote, customer))
    assert response.status_code == 201, response.json()
    transfer_id = response.json()["id"]

    body = enabled_api.get(f"/transfers/{transfer_id}").json()
    assert (body["status"], body["payin_status"], body["payout_status"]) == (
        "completed",
        "completed",
        "completed",
    )
    assert [(h["status"], h["reason"]) for h in body["history"]] == [
        ("pending", "created"),
        ("collecting", "collection_submitted"),
        ("disbursing", "collection_completed"),
        ("completed", "disbursement_completed"),
    ]
    execution = body["execution"]
    assert execution["collection_reference"].startswith("SIM-")
    assert execution["disbursement_reference"].startswith("SIM-")
    assert execution["collection_reference"] != execution["disbursement_reference"]
    assert execution["collection_completed_at"] is not None
    assert execution["disbursement_completed_at"] is not None
    assert execution["disbursement_failed_at"] is None
    assert execution["disbursement_attempt"] == 1

    assert events_of(transfer_id) == [
        "transfer.payin.completed",
        "transfer.payout.completed",
        "transfer.completed",
    ]
    payin_leg = Event.objects.get(data_id=transfer_id, event_type="transfer.payin.completed")
    obj = payin_leg.payload["data"]["object"]
    assert payin_leg.payload["data"]["type"] == "transfer"
    assert obj["status"] == "disbursing"
    assert (obj["payin_status"], obj["payout_status"]) == ("completed", "pending")
    assert (obj["payin_amount"], obj["payin_currency"]) == ("10000", "XAF")
    assert (obj["payout_amount"], obj["payout_currency"]) == ("9800", "XOF")
    assert obj["payer_operator_code"] == "CM_MTN_MOMO"
    assert obj["recipient_operator_code"] == "SN_WAVE_MOMO"
    assert obj["collection_reference"] == execution["collection_reference"]
    assert obj["collection_completed_at"] is not None
    final = Event.objects.get(data_id=transfer_id, event_type="transfer.completed")
    obj = final.payload["data"]["object"]
    assert (obj["status"], obj["payin_status"], obj["payout_status"]) == (
        "completed",
        "completed",
        "completed",
    )
    assert (obj["send_amount"], obj["send_currency"]) == ("10000", "XAF")
    assert (obj["receive_amount"], obj["receive_currency"]) == ("9800", "XOF")
    assert obj["corridor_code"] == "CM-SN-XAF-XOF"
    assert obj["collection_completed_at"] and obj["disbursement_completed_at"]
    payout_leg = Event.objects.get(data_id=transfer_id, event_type="transfer.payout.completed")
    assert (
        payout_leg.payload["data"]["object"]["disbursement_reference"]
        == execution["disbursement_reference"]
    )

    # XAF side: collected from the payer operator, fee booked, net converted to XOF.
    assert account_balances(merchant=enabled_merchant, currency="XAF") == {
        "provider_clearing:CM_MTN_MOMO": Decimal("-10000"),
        "transfer_suspense": Decimal("0"),
        "fee_revenue": Decimal("200"),
        "fx_conversion": Decimal("9800"),
    }
    assert account_balances(merchant=enabled_merchant, currency="XOF") == {
        "fx_conversion": Decimal("-9800"),
        "provider_clearing:SN_WAVE_MOMO": Decimal("9800"),
    }
    assert ledger_is_clean()


def test_domestic_transfer_posts_one_journal_per_leg_in_one_currency(
    enabled_api, enabled_merchant, run
):
    from tests.transfers.conftest import create_customer, create_quote

    customer = create_customer(enabled_api)  # no sender details: domestic needs none
    quote = create_quote(
        enabled_api,
        customer_id=customer["id"],
        corridor="SN-SN-XOF-XOF",
        payer_operator="SN_ORANGE_MOMO",
        recipient_operator="SN_WAVE_MOMO",
    )
    response = run(
        enabled_api.post,
        "/transfers",
        transfer_body(quote, customer, payer_phone="+221770002222"),
    )
    assert response.status_code == 201, response.json()

    transfer = Transfer.objects.get(pk=response.json()["id"])
    assert transfer.status == "completed"
    assert account_balances(merchant=enabled_merchant, currency="XOF") == {
        "provider_clearing:SN_ORANGE_MOMO": Decimal("-10000"),
        "transfer_suspense": Decimal("0"),
        "fee_revenue": Decimal("200"),
        "provider_clearing:SN_WAVE_MOMO": Decimal("9800"),
    }
    assert ledger_is_clean()


def test_collection_declined_fails_the_transfer_and_never_disburses(
    enabled_api, enabled_merchant, customer, quote, run
):
    response = run(
        enabled_api.post, "/transfers", transfer_body(quote, customer, payer_phone=CM_DECLINED)
    )
    transfer_id = response.json()["id"]

    body = enabled_api.get(f"/transfers/{transfer_id}").json()
    assert (body["status"], body["payin_status"], body["payout_status"]) == (
        "failed",
        "failed",
        "cancelled",
    )
    assert [(h["status"], h["reason"]) for h in body["history"]] == [
        ("pending", "created"),
        ("collecting", "collection_submitted"),
        ("failed", "provider_declined"),
    ]
    assert body["execution"]["collection_failure_reason"] == "provider_declined"
    assert body["execution"]["collection_failed_at"] is not None
    assert body["execution"]["disbursement_reference"] is None
    assert events_of(transfer_id) == ["transfer.payin.failed", "transfer.failed"]
    obj = Event.objects.get(data_id=transfer_id, event_type="transfer.failed").payload["data"][
        "object"
    ]
    assert (obj["status"], obj["payin_status"], obj["payout_status"]) == (
        "failed",
        "failed",
        "cancelled",
    )
    # Why it failed, in the aggregate event itself: the final move's reason.
    assert obj["failure_reason"] == "provider_declined"
    assert obj["collection_failed_at"] == body["execution"]["collection_failed_at"]
    leg = Event.objects.get(data_id=transfer_id, event_type="transfer.payin.failed").payload
    assert leg["data"]["object"]["collection_submitted_at"] is not None
    # Nothing was collected, so nothing was posted.
    assert account_balances(merchant=enabled_merchant, currency="XAF") == {}
    assert account_balances(merchant=enabled_merchant, currency="XOF") == {}
    assert ledger_is_clean()


def test_disbursement_declined_leaves_the_money_in_suspense(
    enabled_api, enabled_merchant, customer, quote, run
):
    response = run(
        enabled_api.post, "/transfers", transfer_body(quote, customer, recipient_phone=SN_DECLINED)
    )
    transfer_id = response.json()["id"]

    body = enabled_api.get(f"/transfers/{transfer_id}").json()
    assert (body["status"], body["payin_status"], body["payout_status"]) == (
        "failed",
        "completed",
        "failed",
    )
    assert [(h["status"], h["reason"]) for h in body["history"]] == [
        ("pending", "created"),
        ("collecting", "collection_submitted"),
        ("disbursing", "collection_completed"),
        ("failed", "provider_declined"),
    ]
    assert body["execution"]["disbursement_failed_at"] is not None
    assert body["execution"]["disbursement_failure_reason"] == "provider_declined"
    assert body["execution"]["disbursement_completed_at"] is None
    # relaunchable, so not final: no aggregate transfer.failed (docs/api.md)
    assert events_of(transfer_id) == ["transfer.payin.completed", "transfer.payout.failed"]
    leg = Event.objects.get(data_id=transfer_id, event_type="transfer.payout.failed")
    obj = leg.payload["data"]["object"]
    assert obj["disbursement_failed_at"] is not None
    assert obj["disbursement_reference"] == body["execution"]["disbursement_reference"]
    assert (obj["payin_status"], obj["payout_status"]) == ("completed", "failed")
    # Collected, no fee yet, nothing paid out: all of it waits in transfer_suspense.
    assert account_balances(merchant=enabled_merchant, currency="XAF") == {
        "provider_clearing:CM_MTN_MOMO": Decimal("-10000"),
        "transfer_suspense": Decimal("10000"),
    }
    assert account_balances(merchant=enabled_merchant, currency="XOF") == {}
    assert ledger_is_clean()


@pytest.mark.parametrize("kind", ["transfer_collected", "transfer_settled", "transfer_disbursed"])
def test_check_ledger_names_a_transfer_journal_gone_missing(
    enabled_api, customer, quote, run, kind
):
    response = run(enabled_api.post, "/transfers", transfer_body(quote, customer))
    transfer_id = response.json()["id"]
    assert enabled_api.get(f"/transfers/{transfer_id}").json()["status"] == "completed"
    assert ledger_is_clean()

    journal = Journal.objects.get(resource_type="transfer", resource_id=transfer_id, kind=kind)
    JournalLine.objects.filter(journal=journal).delete()
    journal.delete()

    report = ledger_check()
    assert f"transfer {transfer_id} (completed) has no {kind} journal" in report["breaches"]
    assert not report["ok"]


def test_check_ledger_names_a_transfer_journal_its_status_does_not_allow(
    enabled_api, customer, quote, run
):
    response = run(
        enabled_api.post, "/transfers", transfer_body(quote, customer, recipient_phone=SN_DECLINED)
    )
    transfer_id = response.json()["id"]
    assert ledger_is_clean()  # collected, disbursement failed: only transfer_collected

    Transfer.objects.filter(pk=transfer_id).update(payin_status="failed")

    breaches = ledger_check()["breaches"]
    assert f"transfer {transfer_id} (failed) has a transfer_collected journal" in breaches


def test_create_replay_returns_the_same_transfer(enabled_api, customer, quote):
    body = transfer_body(quote, customer)
    first = enabled_api.post("/transfers", body, idempotency_key="tr-1")
    second = enabled_api.post("/transfers", body, idempotency_key="tr-1")

    assert first.status_code == second.status_code == 201
    assert second.json()["id"] == first.json()["id"]
    assert second.json()["_meta"] == {"idempotency_key": "tr-1", "idempotency_replayed": True}
    assert Transfer.objects.count() == 1


def test_create_without_idempotency_key_is_rejected(enabled_api, customer, quote):
    response = enabled_api.post("/transfers", transfer_body(quote, customer), idempotency_key=None)

    assert response.status_code == 400
    assert Transfer.objects.count() == 0


def test_event_times_are_the_apis_to_the_microsecond(enabled_api, customer, quote, run):
    """A webhook's snapshot reconciles exactly with GET, and a leg event and its aggregate
    event (stamped 1 µs apart) show different `created_at`, in order."""
    transfer_id = run(enabled_api.post, "/transfers", transfer_body(quote, customer)).json()["id"]

    events = {
        event["event"]: event
        for event in enabled_api.get("/events", data_id=transfer_id).json()["data"]
    }
    leg, aggregate = events["transfer.payout.completed"], events["transfer.completed"]
    assert datetime.fromisoformat(leg["created_at"]) < datetime.fromisoformat(
        aggregate["created_at"]
    )
    body = enabled_api.get(f"/transfers/{transfer_id}").json()
    snapshot = aggregate["data"]["object"]
    for name in ("collection_completed_at", "disbursement_completed_at"):
        assert snapshot[name] == body["execution"][name]
