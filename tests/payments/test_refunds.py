"""Refunds of completed payins: the wallet's reservation, the provider's answer, the limits."""

import uuid
from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from payments import provider
from payments.ledger.adjustments import wallet_debit
from payments.ledger.checks import ledger_check
from payments.ledger.discrepancies import provider_discrepancy_resolve
from payments.ledger.journals import account_balances
from payments.models import Journal, ProviderDiscrepancy, Refund
from payments.provider import sandbox_gateway
from payments.provider.simulator import SimulatorGateway
from payments.services.payins import payin_apply_provider_result
from payments.services.refunds import refund_apply_provider_result
from payments.services.submission import refund_submit
from payments.services.sweeps import (
    RESUBMIT_AFTER_SECONDS,
    payments_ask_provider,
    payments_fail_timed_out,
    refunds_stale_submissions,
)
from tests.payments.conftest import (
    SN_PHONE,
    create_quote,
    fund,
    payin_body,
)
from tests.support import wallet_balance
from webhooks.models import Delivery, Event
from webhooks.services.endpoints import endpoint_add

pytestmark = pytest.mark.django_db

PAYS_IN_ONLY_PHONE = "+221770001998"


def _balances(merchant):
    return wallet_balance(merchant=merchant, currency="XOF")


def _completed_payin(api, customer, captured, phone: str = SN_PHONE) -> dict:
    """A payin of 10000 XOF, completed (the merchant is credited 9850)."""
    with captured(execute=True):
        response = api.post("/payins", payin_body(create_quote(api, "payin"), customer, phone))
    assert response.status_code == 201, response.json()
    payin = api.get(f"/payins/{response.json()['id']}").json()
    assert payin["status"] == "completed"
    return payin


def _check_ledger():
    report = ledger_check()
    assert report["breaches"] == []


def test_full_refund_reserves_the_amount_then_completes_to_the_payer(
    enabled_api, enabled_merchant, customer, django_capture_on_commit_callbacks
):
    payin = _completed_payin(enabled_api, customer, django_capture_on_commit_callbacks)
    assert (payin["refunded_amount"], payin["refunds"]) == ("0", [])
    fund(enabled_merchant, "1000")  # 9850 + 1000: the fee is not returned
    with django_capture_on_commit_callbacks() as callbacks:
        response = enabled_api.post(f"/payins/{payin['id']}/refunds", {"reason": "Cancelled"})
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["status"] == "pending"
    assert (body["amount"], body["currency"]) == ("10000", "XOF")
    assert body["payin_id"] == payin["id"]
    assert body["customer_id"] == payin["customer_id"]
    assert body["reason"] == "Cancelled"
    assert body["recipient"]["phone"] == SN_PHONE
    assert body["recipient"]["operator_code"] == "SN_ORANGE_MOMO"
    assert body["wallet_impact"] == {"debit_amount": "10000", "currency": "XOF"}
    assert body["_meta"]["idempotency_replayed"] is False
    assert _balances(enabled_merchant) == (Decimal("850"), Decimal("10000"))
    _check_ledger()

    with django_capture_on_commit_callbacks(execute=True):
        for callback in callbacks:
            callback()

    refund = enabled_api.get(f"/refunds/{body['id']}").json()
    assert refund["status"] == "completed"
    assert refund["provider_reference"].startswith("SIM-")
    assert [h["status"] for h in refund["history"]] == ["pending", "completed"]
    assert _balances(enabled_merchant) == (Decimal("850"), Decimal("0"))
    balances = account_balances(merchant=enabled_merchant, currency="XOF")
    assert balances["provider_clearing:SN_ORANGE_MOMO"] == Decimal("0")  # collected, paid back
    payin = enabled_api.get(f"/payins/{payin['id']}").json()
    assert (payin["refunded_amount"], payin["refunds"]) == ("10000", [body["id"]])
    event = Event.objects.get(data_id=body["id"])
    assert (event.event_type, event.payload["data"]["type"]) == ("refund.completed", "refund")
    obj = event.payload["data"]["object"]
    assert obj["payin_id"] == payin["id"]
    assert (obj["amount"], obj["status"], obj["currency"]) == ("10000", "completed", "XOF")
    assert obj["completed_at"] is not None
    _check_ledger()
    # nothing is left to refund
    again = enabled_api.post(f"/payins/{payin['id']}/refunds", {"amount": "1"})
    assert (again.status_code, again.json()["error"]["reason"]) == (400, "refund_exceeds_payin")


def test_partial_refunds_up_to_the_payin_amount(
    enabled_api, enabled_merchant, customer, django_capture_on_commit_callbacks
):
    payin = _completed_payin(enabled_api, customer, django_capture_on_commit_callbacks)
    fund(enabled_merchant, "5000")
    path = f"/payins/{payin['id']}/refunds"
    with django_capture_on_commit_callbacks(execute=True):
        first = enabled_api.post(path, {"amount": "4000"})
    assert first.status_code == 201, first.json()
    assert _balances(enabled_merchant) == (Decimal("10850"), Decimal("0"))
    _check_ledger()
    too_much = enabled_api.post(path, {"amount": "6001"})
    assert too_much.status_code == 400
    assert too_much.json()["error"]["reason"] == "refund_exceeds_payin"
    with django_capture_on_commit_callbacks(execute=True):
        rest = enabled_api.post(path)  # no body: the whole remainder
    assert rest.status_code == 201, rest.json()
    assert rest.json()["amount"] == "6000"
    assert _balances(enabled_merchant) == (Decimal("4850"), Decimal("0"))
    payin = enabled_api.get(f"/payins/{payin['id']}").json()
    assert payin["refunded_amount"] == "10000"
    assert payin["refunds"] == [first.json()["id"], rest.json()["id"]]
    _check_ledger()


def test_refund_declined_to_a_998_payer_releases_the_reservation(
    enabled_api, enabled_merchant, customer, django_capture_on_commit_callbacks, caplog
):
    caplog.set_level("INFO", logger="cowry.payments")
    payin = _completed_payin(
        enabled_api, customer, django_capture_on_commit_callbacks, PAYS_IN_ONLY_PHONE
    )
    with django_capture_on_commit_callbacks(execute=True):
        response = enabled_api.post(f"/payins/{payin['id']}/refunds", {"amount": "5000"})
    assert response.status_code == 201, response.json()
    refund = enabled_api.get(f"/refunds/{response.json()['id']}").json()
    assert (refund["status"], refund["failure_reason"]) == ("failed", "provider_declined")
    assert _balances(enabled_merchant) == (Decimal("9850"), Decimal("0"))
    kinds = set(Journal.objects.filter(resource_id=refund["id"]).values_list("kind", flat=True))
    assert kinds == {"refund_reserved", "refund_released"}
    event = Event.objects.get(data_id=refund["id"])
    assert event.event_type == "refund.failed"
    assert event.payload["data"]["object"]["failure_reason"] == "provider_declined"
    assert (
        f"Refund {refund['id']} of merchant {enabled_merchant.pk} failed: declined by the"
        " provider (provider_declined)"
    ) in [r.getMessage() for r in caplog.records if r.levelname == "INFO"]
    payin = enabled_api.get(f"/payins/{payin['id']}").json()
    assert (payin["refunded_amount"], payin["refunds"]) == ("0", [refund["id"]])
    _check_ledger()
    # a failed refund gives its amount back to the refundable remainder
    retry = enabled_api.post(f"/payins/{payin['id']}/refunds", {"amount": "9850"})
    assert retry.status_code == 201, retry.json()


def test_refund_larger_than_the_available_balance_is_refused_and_changes_nothing(
    enabled_api, enabled_merchant, customer, django_capture_on_commit_callbacks
):
    payin = _completed_payin(enabled_api, customer, django_capture_on_commit_callbacks)
    response = enabled_api.post(f"/payins/{payin['id']}/refunds")  # 10000 > 9850
    assert response.status_code == 400
    assert response.json()["error"]["reason"] == "insufficient_balance"
    assert Refund.objects.count() == 0
    assert _balances(enabled_merchant) == (Decimal("9850"), Decimal("0"))


@pytest.mark.parametrize("phone", ["+221770001999", "+221770001000"], ids=["pending", "failed"])
def test_a_payin_that_is_not_completed_cannot_be_refunded(
    enabled_api, enabled_merchant, customer, django_capture_on_commit_callbacks, phone
):
    fund(enabled_merchant, "20000")
    with django_capture_on_commit_callbacks(execute=True):
        payin = enabled_api.post(
            "/payins", payin_body(create_quote(enabled_api, "payin"), customer, phone)
        ).json()
    response = enabled_api.post(f"/payins/{payin['id']}/refunds", {"amount": "100"})
    assert response.status_code == 400
    assert response.json()["error"]["reason"] == "payin_not_refundable"
    assert Refund.objects.count() == 0
    assert _balances(enabled_merchant) == (Decimal("20000"), Decimal("0"))


def test_a_payin_the_provider_reported_failed_after_completing_is_not_refunded(
    enabled_api, enabled_merchant, customer, django_capture_on_commit_callbacks
):
    """A reversal: the provider says the collection failed after all, so the payer may never
    have paid; refunding them would pay out money the provider says it does not hold, until
    support reconciles it."""
    from merchants import services as merchant_services

    fund(enabled_merchant, "20000")
    payin = _completed_payin(enabled_api, customer, django_capture_on_commit_callbacks)
    payin_apply_provider_result(
        reference=payin["id"],
        provider_reference=payin["provider_reference"],
        outcome="failed",
        reason="reversed",
        at=timezone.now(),
    )
    response = enabled_api.post(f"/payins/{payin['id']}/refunds", {"amount": "100"})
    assert response.status_code == 400, response.json()
    assert response.json()["error"]["reason"] == "payin_not_refundable"
    assert Refund.objects.count() == 0
    assert _balances(enabled_merchant) == (Decimal("29850"), Decimal("0"))

    support = merchant_services.staff_user_create(
        username="agent", password="pw-1-staff-login", support=True
    )
    discrepancy = ProviderDiscrepancy.objects.get(resource_id=payin["id"])
    provider_discrepancy_resolve(discrepancy_id=discrepancy.pk, actor=support, now=timezone.now())
    with django_capture_on_commit_callbacks(execute=True):
        response = enabled_api.post(f"/payins/{payin['id']}/refunds", {"amount": "100"})
    assert response.status_code == 201, response.json()
    _check_ledger()


def test_another_merchants_payin_or_refund_is_not_found(
    enabled_api, enabled_merchant, customer, django_capture_on_commit_callbacks, other_api
):
    payin = _completed_payin(enabled_api, customer, django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        refund = enabled_api.post(f"/payins/{payin['id']}/refunds", {"amount": "100"}).json()
    other = other_api
    response = other.post(f"/payins/{payin['id']}/refunds", {"amount": "100"})
    assert response.status_code == 404
    assert other.get(f"/refunds/{refund['id']}").status_code == 404
    assert other.get("/refunds").json()["data"] == []
    assert enabled_api.post(f"/payins/{uuid.uuid4()}/refunds").status_code == 404
    assert Refund.objects.count() == 1


def test_refund_body_is_validated(
    enabled_api, enabled_merchant, customer, django_capture_on_commit_callbacks
):
    payin = _completed_payin(enabled_api, customer, django_capture_on_commit_callbacks)
    path = f"/payins/{payin['id']}/refunds"
    for body, reason, field in (
        ({"amount": 100}, "invalid_request", "amount"),
        ({"amount": "0"}, "amount_below_minimum", "amount"),
        ({"amount": "99"}, "amount_below_minimum", "amount"),
        ({"amount": "10.5"}, "invalid_amount_precision", "amount"),
        ({"reason": "x" * 256}, "invalid_request", "reason"),
        # a misspelt optional field would otherwise refund the whole payin
        ({"amout": "100"}, "invalid_request", "amout"),
        ({"amount": "100", "currency": "XOF"}, "invalid_request", "currency"),
    ):
        response = enabled_api.post(path, body)
        assert response.status_code == 400, (body, response.json())
        error = response.json()["error"]
        assert (error["reason"], list(error["fields"])) == (reason, [field]), body
    assert enabled_api.post(path, {"amount": "10"}, idempotency_key=None).status_code == 400
    assert Refund.objects.count() == 0


def test_a_replayed_refund_is_the_same_refund_and_another_body_is_a_conflict(
    enabled_api, enabled_merchant, customer, django_capture_on_commit_callbacks
):
    payin = _completed_payin(enabled_api, customer, django_capture_on_commit_callbacks)
    path = f"/payins/{payin['id']}/refunds"
    with django_capture_on_commit_callbacks(execute=True):
        first = enabled_api.post(path, {"amount": "1000"}, idempotency_key="refund-1")
    replay = enabled_api.post(path, {"amount": "1000"}, idempotency_key="refund-1")
    assert replay.status_code == 201
    assert replay.json()["id"] == first.json()["id"]
    assert replay.json()["_meta"]["idempotency_replayed"] is True
    conflict = enabled_api.post(path, {"amount": "2000"}, idempotency_key="refund-1")
    assert conflict.status_code == 409
    assert Refund.objects.count() == 1
    assert _balances(enabled_merchant) == (Decimal("8850"), Decimal("0"))


def test_refunds_list_pages_and_filters(
    enabled_api, enabled_merchant, customer, django_capture_on_commit_callbacks
):
    first = _completed_payin(enabled_api, customer, django_capture_on_commit_callbacks)
    second = _completed_payin(enabled_api, customer, django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        ids = [
            enabled_api.post(f"/payins/{payin['id']}/refunds", {"amount": "100"}).json()["id"]
            for payin in (first, second, second)
        ]
    page = enabled_api.get("/refunds", limit=2).json()
    assert [item["id"] for item in page["data"]] == ids[::-1][:2]
    assert page["has_more"] is True
    rest = enabled_api.get("/refunds", limit=2, cursor=page["next_cursor"]).json()
    assert [item["id"] for item in rest["data"]] == [ids[0]]
    only = enabled_api.get("/refunds", payin_id=first["id"]).json()["data"]
    assert [item["id"] for item in only] == [ids[0]]
    assert enabled_api.get("/refunds", status="failed").json()["data"] == []
    assert len(enabled_api.get("/refunds", status="completed").json()["data"]) == 3
    assert enabled_api.get("/refunds", status="nope").status_code == 400


def test_refunds_appear_in_the_statement(
    enabled_api, enabled_merchant, customer, django_capture_on_commit_callbacks
):
    payin = _completed_payin(enabled_api, customer, django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        refund = enabled_api.post(f"/payins/{payin['id']}/refunds", {"amount": "500"}).json()
    today = refund["created_at"][:10]
    csv = enabled_api.get("/statements", **{"from": today, "to": today, "currency": "XOF"})
    text = csv.content.decode()
    assert f"refund_reserved,refund,{refund['id']}" in text
    assert f"refund_completed,refund,{refund['id']}" in text


@sandbox_gateway("silent-disbursements")
class SilentDisbursementsGateway(SimulatorGateway):
    """The simulator, receiving disbursements but never answering them, even when asked."""

    def submit_disbursement(self, **kwargs):
        return provider.ProviderReceipt(provider_reference="SIM-00000000000000000001")

    def transaction_status(self, *, kind, **kwargs):
        receipt = super().transaction_status(kind=kind, **kwargs)
        if kind == provider.DISBURSEMENT:
            return provider.ProviderReceipt(provider_reference=receipt.provider_reference)
        return receipt


@sandbox_gateway("unanswered-disbursements")
class UnansweredDisbursementsGateway(SimulatorGateway):
    """The simulator, whose answer to a disbursement is lost: only asking gets it."""

    def submit_disbursement(self, **kwargs):
        return provider.ProviderReceipt(provider_reference="SIM-00000000000000000002")


def _pending_refund(api, customer, captured, *, amount: str = "3000") -> dict:
    payin = _completed_payin(api, customer, captured)
    with captured(execute=True):
        refund = api.post(f"/payins/{payin['id']}/refunds", {"amount": amount})
    assert refund.status_code == 201, refund.json()
    assert Refund.objects.get(pk=refund.json()["id"]).status == "pending"
    return refund.json()


def test_a_refund_the_provider_never_answers_fails_at_its_timeout_and_is_released(
    enabled_api, enabled_merchant, customer, django_capture_on_commit_callbacks, settings
):
    settings.PAYMENTS_PROVIDER_GATEWAY = "silent-disbursements"
    refund = _pending_refund(enabled_api, customer, django_capture_on_commit_callbacks)
    assert _balances(enabled_merchant) == (Decimal("6850"), Decimal("3000"))
    later = timezone.now() + timedelta(seconds=settings.PROVIDER_TIMEOUT_SECONDS + 1)
    assert payments_fail_timed_out(now=later) == 1
    refund = enabled_api.get(f"/refunds/{refund['id']}").json()
    assert (refund["status"], refund["failure_reason"]) == ("failed", "provider_timeout")
    assert _balances(enabled_merchant) == (Decimal("9850"), Decimal("0"))
    _check_ledger()


def test_a_lost_answer_is_asked_of_the_provider_and_applied(
    enabled_api, enabled_merchant, customer, django_capture_on_commit_callbacks, settings
):
    settings.PAYMENTS_PROVIDER_GATEWAY = "unanswered-disbursements"
    refund = _pending_refund(enabled_api, customer, django_capture_on_commit_callbacks)
    later = timezone.now() + timedelta(seconds=60)
    assert payments_ask_provider(now=later) == 1
    assert enabled_api.get(f"/refunds/{refund['id']}").json()["status"] == "completed"
    assert _balances(enabled_merchant) == (Decimal("6850"), Decimal("0"))
    _check_ledger()


def test_a_lost_submission_is_found_by_the_sweep_and_sent(
    enabled_api, enabled_merchant, customer, django_capture_on_commit_callbacks, broker_down, caplog
):
    payin = _completed_payin(enabled_api, customer, django_capture_on_commit_callbacks)
    with broker_down(), django_capture_on_commit_callbacks(execute=True):
        response = enabled_api.post(f"/payins/{payin['id']}/refunds", {"amount": "3000"})
    assert response.status_code == 201, response.json()
    refund = response.json()
    assert (refund["status"], Refund.objects.get(pk=refund["id"]).submitted_at) == ("pending", None)
    lost = f"payments.tasks.submit_refund (refund_id={refund['id']}) left to its sweep"
    assert lost in caplog.text
    later = timezone.now() + timedelta(seconds=RESUBMIT_AFTER_SECONDS + 1)
    assert refunds_stale_submissions(now=later) == [uuid.UUID(refund["id"])]
    assert caplog.records[-1].getMessage() == (
        f"Resubmitting Refund {refund['id']} of merchant {enabled_merchant.pk}: its provider"
        " submission was lost (logged again every 10 min while it stays lost)"
    )
    refund_submit(refund_id=uuid.UUID(refund["id"]), now=later)
    assert enabled_api.get(f"/refunds/{refund['id']}").json()["status"] == "completed"
    assert refunds_stale_submissions(now=later) == []
    _check_ledger()


def test_a_refund_paid_after_its_timeout_is_a_discrepancy_ops_take_back_with_a_debit(
    enabled_api, enabled_merchant, customer, django_capture_on_commit_callbacks, settings
):
    settings.PAYMENTS_PROVIDER_GATEWAY = "silent-disbursements"
    fund(enabled_merchant, "1000")
    refund = _pending_refund(enabled_api, customer, django_capture_on_commit_callbacks)
    later = timezone.now() + timedelta(seconds=settings.PROVIDER_TIMEOUT_SECONDS + 1)
    assert payments_fail_timed_out(now=later) == 1
    assert _balances(enabled_merchant) == (Decimal("10850"), Decimal("0"))

    refund_apply_provider_result(
        reference=refund["id"],
        provider_reference="SIM-00000000000000000001",
        outcome="completed",
        reason="",
        at=later,
    )
    assert enabled_api.get(f"/refunds/{refund['id']}").json()["status"] == "failed"
    discrepancy = ProviderDiscrepancy.objects.get(resource_id=refund["id"])
    assert (discrepancy.resource_type, discrepancy.our_status) == ("refund", "failed")
    wallet_debit(
        merchant=enabled_merchant,
        currency="XOF",
        amount=Decimal("3000"),
        reason="refund paid after its timeout",
        discrepancy_id=discrepancy.pk,
    )
    discrepancy.refresh_from_db()
    assert discrepancy.resolved_at is not None
    assert _balances(enabled_merchant) == (Decimal("7850"), Decimal("0"))
    _check_ledger()


def test_a_failed_refund_the_provider_paid_still_counts_against_the_payin(
    enabled_api, enabled_merchant, customer, django_capture_on_commit_callbacks, settings
):
    """The payer has the 3000 of a refund we failed and the provider paid: refunding the payin
    again may return only the 7000 left, before and after ops take the 3000 back."""
    settings.PAYMENTS_PROVIDER_GATEWAY = "silent-disbursements"
    fund(enabled_merchant, "20000")
    refund = _pending_refund(enabled_api, customer, django_capture_on_commit_callbacks)
    payin_id = refund["payin_id"]
    later = timezone.now() + timedelta(seconds=settings.PROVIDER_TIMEOUT_SECONDS + 1)
    assert payments_fail_timed_out(now=later) == 1
    refund_apply_provider_result(
        reference=refund["id"],
        provider_reference="SIM-00000000000000000001",
        outcome="completed",
        reason="",
        at=later,
    )
    too_much = enabled_api.post(f"/payins/{payin_id}/refunds", {"amount": "7001"})
    assert too_much.json()["error"]["reason"] == "refund_exceeds_payin", too_much.json()
    discrepancy = ProviderDiscrepancy.objects.get(resource_id=refund["id"])
    wallet_debit(
        merchant=enabled_merchant,
        currency="XOF",
        amount=Decimal("3000"),
        reason="refund paid after its timeout",
        discrepancy_id=discrepancy.pk,
    )
    rest = enabled_api.post(f"/payins/{payin_id}/refunds")
    assert rest.status_code == 201, rest.json()
    assert rest.json()["amount"] == "7000"
    _check_ledger()
    # The nightly check counts the paid failed refund too: one unit more held is a breach.
    Refund.objects.filter(pk=rest.json()["id"]).update(amount=Decimal("7001"))
    beyond = f"payin {payin_id} of 10000.00 has 10001.00 refunded or being refunded"
    assert beyond in ledger_check()["breaches"]


def test_refund_events_are_listed_and_delivered_to_endpoints_subscribed_to_them(
    enabled_api, enabled_merchant, customer, django_capture_on_commit_callbacks
):
    endpoint, _ = endpoint_add(
        merchant=enabled_merchant,
        url="https://hooks.example.com/refunds",
        event_types=["refund.completed", "refund.failed"],
        now=timezone.now(),
    )
    payin = _completed_payin(enabled_api, customer, django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        refund = enabled_api.post(f"/payins/{payin['id']}/refunds", {"amount": "100"}).json()
    events = enabled_api.get("/events").json()["data"]
    listed = [event for event in events if event["data"]["id"] == refund["id"]]
    assert [event["event"] for event in listed] == ["refund.completed"]
    assert listed[0]["data"]["object"]["wallet_impact"] == {
        "debit_amount": "100",
        "currency": "XOF",
    }
    delivered = Delivery.objects.filter(endpoint=endpoint).values_list(
        "event__event_type", flat=True
    )
    assert list(delivered) == ["refund.completed"]  # not the payin's event
