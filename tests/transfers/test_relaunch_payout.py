import uuid
from decimal import Decimal

import pytest
from django.db import transaction
from django.test import override_settings
from django.utils import timezone
from rest_framework.test import APIClient

from payments import provider
from payments.ledger.journals import account_balances
from payments.models import ProviderDiscrepancy
from payments.provider import sandbox_gateway
from payments.provider.simulator import SimulatorGateway
from tests.locks import start, waiting_for_a_lock
from tests.transfers.conftest import (
    SENDER_DETAILS,
    SN_DECLINED,
    SN_OTHER_PHONE,
    SN_SILENT,
    create_customer,
    create_quote,
    events_of,
    field_paths,
    ledger_is_clean,
    transfer_body,
)
from transfers.models import Transfer, TransferHistory
from transfers.services.submission import COLLECTION_CALLBACK, DISBURSEMENT_CALLBACK
from transfers.services.sweeps import transfers_fail_timed_out
from webhooks.models import Event

pytestmark = pytest.mark.django_db


@sandbox_gateway("first-disbursement-declined")
class FirstDisbursementDeclinedGateway(SimulatorGateway):
    """The real simulator, except that the provider declines every first disbursement
    attempt (a transient recipient-side problem): a retry of the same recipient succeeds."""

    def submit_disbursement(self, **kwargs):
        if kwargs["reference"].endswith(":1"):
            kwargs["phone"] = kwargs["phone"][:-3] + "000"
        return super().submit_disbursement(**kwargs)


@pytest.fixture
def failed_payout(enabled_api, customer, quote, run) -> dict:
    """A transfer whose collection completed and whose disbursement was declined."""
    response = run(
        enabled_api.post, "/transfers", transfer_body(quote, customer, recipient_phone=SN_DECLINED)
    )
    body = enabled_api.get(f"/transfers/{response.json()['id']}").json()
    assert (body["status"], body["payin_status"], body["payout_status"]) == (
        "failed",
        "completed",
        "failed",
    )
    return body


def test_relaunch_without_body_retries_same_recipient_and_amount_and_completes(
    enabled_api, enabled_merchant, customer, quote, run
):
    with override_settings(PAYMENTS_PROVIDER_GATEWAY="first-disbursement-declined"):
        created = run(enabled_api.post, "/transfers", transfer_body(quote, customer))
        transfer_id = created.json()["id"]
        failed = enabled_api.get(f"/transfers/{transfer_id}").json()
        assert failed["status"] == "failed"
        first_reference = failed["execution"]["disbursement_reference"]

        with run.capture() as callbacks:
            response = enabled_api.post(f"/transfers/{transfer_id}/relaunch-payout")
        assert response.status_code == 202, response.json()
        body = response.json()
        assert (body["status"], body["payin_status"], body["payout_status"]) == (
            "disbursing",
            "completed",
            "pending",
        )
        assert body["payout_amount"] == "9800"
        assert body["recipient"] == failed["recipient"]
        assert body["execution"]["disbursement_attempt"] == 2
        assert body["execution"]["disbursement_failed_at"] is None
        assert (
            body["execution"]["collection_reference"] == failed["execution"]["collection_reference"]
        )
        assert body["_meta"]["idempotency_replayed"] is False
        assert len(callbacks) == 1
        run(callbacks[0])

    final = enabled_api.get(f"/transfers/{transfer_id}").json()
    assert (final["status"], final["payin_status"], final["payout_status"]) == (
        "completed",
        "completed",
        "completed",
    )
    assert final["execution"]["disbursement_reference"] != first_reference
    assert [(h["status"], h["reason"]) for h in final["history"]] == [
        ("pending", "created"),
        ("collecting", "collection_submitted"),
        ("disbursing", "collection_completed"),
        ("failed", "provider_declined"),
        ("disbursing", "payout_relaunched"),
        ("completed", "disbursement_completed"),
    ]
    # one aggregate event, when the transfer is final
    assert events_of(transfer_id) == [
        "transfer.payin.completed",
        "transfer.payout.failed",
        "transfer.payout.completed",
        "transfer.completed",
    ]
    # The payer was collected from once only.
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


def test_relaunch_without_body_that_fails_again_keeps_the_money_in_suspense(
    enabled_api, enabled_merchant, failed_payout, run
):
    transfer_id = failed_payout["id"]
    response = run(enabled_api.post, f"/transfers/{transfer_id}/relaunch-payout")
    assert response.status_code == 202

    body = enabled_api.get(f"/transfers/{transfer_id}").json()
    assert (body["status"], body["payin_status"], body["payout_status"]) == (
        "failed",
        "completed",
        "failed",
    )
    assert body["execution"]["disbursement_attempt"] == 2
    assert events_of(transfer_id) == [
        "transfer.payin.completed",
        "transfer.payout.failed",
        "transfer.payout.failed",
    ]
    assert account_balances(merchant=enabled_merchant, currency="XAF") == {
        "provider_clearing:CM_MTN_MOMO": Decimal("-10000"),
        "transfer_suspense": Decimal("10000"),
    }
    assert ledger_is_clean()


def test_relaunch_with_lower_amount_and_new_recipient_pays_them_and_credits_the_difference(
    enabled_api, enabled_merchant, failed_payout, run
):
    transfer_id = failed_payout["id"]
    response = run(
        enabled_api.post,
        f"/transfers/{transfer_id}/relaunch-payout",
        {
            "payout_amount": "9000",
            "recipient": {
                "recipient_type": "individual",
                "first_name": "Fatou",
                "last_name": "Sow",
                "phone": SN_OTHER_PHONE,
                "operator_code": "SN_ORANGE_MOMO",
                "country_code": "SN",
                "rail_type": "mobile_money",
            },
        },
    )
    assert response.status_code == 202, response.json()
    assert response.json()["payout_amount"] == "9000"
    assert response.json()["recipient"]["operator_code"] == "SN_ORANGE_MOMO"

    body = enabled_api.get(f"/transfers/{transfer_id}").json()
    assert body["status"] == "completed"
    assert (body["payout_amount"], body["receive_amount"]) == ("9000", "9000")
    assert body["payin_amount"] == "10000"
    assert body["recipient_operator_code"] == "SN_ORANGE_MOMO"
    assert body["recipient"]["first_name"] == "Fatou"
    assert body["recipient"]["phone"] == SN_OTHER_PHONE
    final = Event.objects.get(data_id=transfer_id, event_type="transfer.completed")
    assert final.payload["data"]["object"]["receive_amount"] == "9000"
    assert final.payload["data"]["object"]["failure_reason"] is None
    assert final.payload["data"]["object"]["recipient_operator_code"] == "SN_ORANGE_MOMO"
    # 9000 to the new operator; the 800 not paid out goes to the merchant's XOF wallet.
    assert account_balances(merchant=enabled_merchant, currency="XOF") == {
        "fx_conversion": Decimal("-9800"),
        "provider_clearing:SN_ORANGE_MOMO": Decimal("9000"),
        "merchant_available": Decimal("800"),
    }
    assert enabled_merchant.wallets.get(currency="XOF").available == Decimal("800")
    assert ledger_is_clean()


def _unchanged(transfer_id, before: Transfer) -> None:
    after = Transfer.objects.get(pk=transfer_id)
    for name in (
        "status",
        "payin_status",
        "payout_status",
        "payout_amount",
        "recipient",
        "recipient_operator_code",
        "disbursement_attempt",
        "updated_at",
    ):
        assert getattr(after, name) == getattr(before, name), name


def test_payout_amount_above_the_original_is_rejected_and_changes_nothing(
    enabled_api, failed_payout
):
    before = Transfer.objects.get(pk=failed_payout["id"])
    response = enabled_api.post(
        f"/transfers/{before.id}/relaunch-payout", {"payout_amount": "9801"}
    )

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "bad_request"
    assert error["reason"] == "payout_amount_above_original"
    assert "payout_amount" in error["fields"]
    _unchanged(before.id, before)


@pytest.mark.parametrize(
    ("body", "reason", "field"),
    [
        ({"payout_amount": "9000.5"}, "invalid_amount_precision", "payout_amount"),
        ({"payout_amount": "0"}, "invalid_amount", "payout_amount"),
        ({"payout_amount": "50"}, "amount_below_minimum", "payout_amount"),
        ({"payout_amount": 9000}, "invalid_request", "payout_amount"),
        (
            {
                "recipient": {
                    "first_name": "A",
                    "last_name": "B",
                    "phone": "+2250700001234",
                    "country_code": "CI",
                }
            },
            "party_routing_mismatch",
            "recipient.country_code",
        ),
        (
            {
                "recipient": {
                    "first_name": "A",
                    "last_name": "B",
                    "phone": "+221770001111",
                    "operator_code": "CI_WAVE_MOMO",
                }
            },
            "party_routing_mismatch",
            "recipient.operator_code",
        ),
        (
            {
                "recipient": {
                    "first_name": "A",
                    "last_name": "B",
                    "phone": "+221770001111",
                    "rail_type": "bank_transfer",
                }
            },
            "party_routing_mismatch",
            "recipient.rail_type",
        ),
        (
            {
                "recipient": {
                    "first_name": "A",
                    "last_name": "B",
                    "phone": "+221770001111",
                    "operator_code": "SN_NOPE_MOMO",
                }
            },
            "unknown_operator",
            "recipient.operator_code",
        ),
        (
            {"recipient": {"first_name": "A", "phone": "+221770001111"}},
            "invalid_request",
            "recipient.last_name",
        ),
        (
            {"recipient": {"first_name": "A", "last_name": "B"}},
            "invalid_request",
            "recipient.phone",
        ),
        # a misspelt field would otherwise relaunch the whole amount to the same recipient
        ({"payout_amont": "5000"}, "invalid_request", "payout_amont"),
        (
            {"payout_amount": "5000", "recipeint": {"phone": "+221770001111"}},
            "invalid_request",
            "recipeint",
        ),
        (
            {
                "recipient": {
                    "first_name": "A",
                    "last_name": "B",
                    "phone": "+221770001111",
                    "account_number": "123",
                }
            },
            "invalid_request",
            "recipient.account_number",
        ),
    ],
)
def test_bad_relaunch_body_is_a_400_naming_the_field(
    enabled_api, failed_payout, body, reason, field
):
    before = Transfer.objects.get(pk=failed_payout["id"])
    response = enabled_api.post(f"/transfers/{before.id}/relaunch-payout", body)

    assert response.status_code == 400, response.json()
    error = response.json()["error"]
    assert error["reason"] == reason
    assert field in field_paths(error["fields"]), error
    _unchanged(before.id, before)


@pytest.mark.parametrize("body", ["null", "[]", "0", '""', "false"])
def test_a_relaunch_body_that_is_not_an_object_is_a_400_and_relaunches_nothing(
    enabled_api, failed_payout, body
):
    before = Transfer.objects.get(pk=failed_payout["id"])
    response = enabled_api.client.post(
        f"/transfers/{before.id}/relaunch-payout",
        data=body,
        content_type="application/json",
        HTTP_IDEMPOTENCY_KEY=f"relaunch-{body}",
    )

    assert response.status_code == 400, response.json()
    assert response.json()["error"]["code"] == "bad_request"
    _unchanged(before.id, before)


def test_relaunch_to_an_operator_not_enabled_is_rejected(
    enabled_api, enabled_merchant, failed_payout
):
    from quotes.models import MerchantOperator

    MerchantOperator.objects.filter(
        merchant=enabled_merchant, operator__code="SN_FREE_MOMO"
    ).delete()
    before = Transfer.objects.get(pk=failed_payout["id"])
    response = enabled_api.post(
        f"/transfers/{before.id}/relaunch-payout",
        {
            "recipient": {
                "first_name": "A",
                "last_name": "B",
                "phone": "+221770001111",
                "operator_code": "SN_FREE_MOMO",
            }
        },
    )

    assert response.status_code == 400
    assert response.json()["error"]["reason"] == "operator_not_enabled"
    assert "recipient.operator_code" in field_paths(response.json()["error"]["fields"])
    _unchanged(before.id, before)


def test_relaunch_to_another_operator_closed_by_support_is_rejected_its_own_is_not(
    enabled_api, failed_payout, run
):
    """A replacement operator is a route the quote never locked: closed, it is refused as a
    new quote would be. The transfer's own operator, closed since, still pays (its route was
    locked by the quote)."""
    from quotes.models import Operator

    Operator.objects.filter(code__in=["SN_FREE_MOMO", "SN_WAVE_MOMO"]).update(status="closed")
    before = Transfer.objects.get(pk=failed_payout["id"])
    elsewhere = {"first_name": "A", "last_name": "B", "phone": "+221770001111"}
    response = enabled_api.post(
        f"/transfers/{before.id}/relaunch-payout",
        {"recipient": {**elsewhere, "operator_code": "SN_FREE_MOMO"}},
    )

    assert response.status_code == 400
    assert response.json()["error"]["reason"] == "operator_closed"
    assert "recipient.operator_code" in field_paths(response.json()["error"]["fields"])
    _unchanged(before.id, before)
    assert before.recipient_operator_code == "SN_WAVE_MOMO"
    assert run(enabled_api.post, f"/transfers/{before.id}/relaunch-payout").status_code == 202


def assert_not_relaunchable(api, transfer_id) -> None:
    before = Transfer.objects.get(pk=transfer_id)
    history = TransferHistory.objects.filter(transfer_id=transfer_id).count()
    events = Event.objects.filter(data_id=transfer_id).count()
    response = api.post(f"/transfers/{transfer_id}/relaunch-payout")
    assert response.status_code == 409, response.json()
    assert response.json()["error"]["code"] == "conflict"
    assert response.json()["error"]["reason"] == "transfer_not_relaunchable"
    _unchanged(transfer_id, before)
    assert TransferHistory.objects.filter(transfer_id=transfer_id).count() == history
    assert Event.objects.filter(data_id=transfer_id).count() == events


def test_pending_transfer_is_not_relaunchable(enabled_api, customer, quote):
    response = enabled_api.post("/transfers", transfer_body(quote, customer))  # not submitted
    assert response.json()["status"] == "pending"
    assert_not_relaunchable(enabled_api, response.json()["id"])


def test_completed_transfer_is_not_relaunchable(enabled_api, customer, quote, run):
    response = run(enabled_api.post, "/transfers", transfer_body(quote, customer))
    assert Transfer.objects.get(pk=response.json()["id"]).status == "completed"
    assert_not_relaunchable(enabled_api, response.json()["id"])
    assert ledger_is_clean()


def test_transfer_whose_collection_failed_is_not_relaunchable(enabled_api, customer, quote, run):
    from tests.transfers.conftest import CM_DECLINED

    response = run(
        enabled_api.post, "/transfers", transfer_body(quote, customer, payer_phone=CM_DECLINED)
    )
    assert Transfer.objects.get(pk=response.json()["id"]).payin_status == "failed"
    assert_not_relaunchable(enabled_api, response.json()["id"])


def test_disbursing_transfer_is_not_relaunchable(enabled_api, customer, quote, run):
    response = run(
        enabled_api.post, "/transfers", transfer_body(quote, customer, recipient_phone=SN_SILENT)
    )
    assert Transfer.objects.get(pk=response.json()["id"]).status == "disbursing"
    assert_not_relaunchable(enabled_api, response.json()["id"])
    assert ledger_is_clean()


def test_relaunch_needs_an_idempotency_key_and_replays(enabled_api, failed_payout):
    transfer_id = failed_payout["id"]
    missing = enabled_api.post(f"/transfers/{transfer_id}/relaunch-payout", idempotency_key=None)
    assert missing.status_code == 400
    assert Transfer.objects.get(pk=transfer_id).disbursement_attempt == 1

    first = enabled_api.post(f"/transfers/{transfer_id}/relaunch-payout", idempotency_key="r-1")
    again = enabled_api.post(f"/transfers/{transfer_id}/relaunch-payout", idempotency_key="r-1")
    assert first.status_code == again.status_code == 202
    assert again.json()["_meta"]["idempotency_replayed"] is True
    assert Transfer.objects.get(pk=transfer_id).disbursement_attempt == 2


def test_stuck_disbursement_times_out_then_relaunches(enabled_api, disbursing, run):
    transfer = disbursing

    assert transfers_fail_timed_out(now=timezone.now()) == 0  # not due yet
    assert run(transfers_fail_timed_out, now=transfer.leg_timeout_at) == 1

    body = enabled_api.get(f"/transfers/{transfer.id}").json()
    assert (body["status"], body["payin_status"], body["payout_status"]) == (
        "failed",
        "completed",
        "failed",
    )
    assert body["history"][-1]["reason"] == "provider_timeout"
    assert events_of(transfer.id) == ["transfer.payin.completed", "transfer.payout.failed"]

    relaunched = run(
        enabled_api.post,
        f"/transfers/{transfer.id}/relaunch-payout",
        {"recipient": {"first_name": "Moussa", "last_name": "Ndiaye", "phone": SN_OTHER_PHONE}},
    )
    assert relaunched.status_code == 202
    assert Transfer.objects.get(pk=transfer.id).status == "completed"
    assert ledger_is_clean()


def test_no_relaunch_while_the_provider_says_the_timed_out_attempt_paid(
    enabled_api, disbursing, run
):
    """The provider answered "completed" for the attempt the sweep had failed: a relaunch
    would pay the recipient a second time. Refused until support resolves the discrepancy."""
    from payments import provider

    transfer = disbursing
    assert run(transfers_fail_timed_out, now=transfer.leg_timeout_at) == 1
    provider.deliver_answer(
        callback=DISBURSEMENT_CALLBACK,
        reference=f"{transfer.id}:1",
        provider_reference=transfer.disbursement_reference,
        outcome="completed",
    )
    discrepancy = ProviderDiscrepancy.objects.get(resource_id=transfer.id)
    assert discrepancy.provider_outcome == "completed"

    refused = run(enabled_api.post, f"/transfers/{transfer.id}/relaunch-payout", {})

    assert refused.status_code == 409
    assert refused.json()["error"]["reason"] == "transfer_not_relaunchable"
    assert "paid after all" in refused.json()["error"]["message"]
    assert Transfer.objects.get(pk=transfer.id).disbursement_attempt == 1

    discrepancy.resolved_at, discrepancy.resolved_by = timezone.now(), "support"
    discrepancy.save()  # support reconciled it (the provider reversed its payment, say)
    relaunched = run(enabled_api.post, f"/transfers/{transfer.id}/relaunch-payout", {})
    assert relaunched.status_code == 202
    assert ledger_is_clean()


def _collection_reversed(transfer_id) -> None:
    """The provider says the transfer's completed collection failed after all (a reversal)."""
    provider.deliver_answer(
        callback=COLLECTION_CALLBACK,
        reference=str(transfer_id),
        provider_reference="SIM-reversed",
        outcome="failed",
        reason="reversed",
    )


def test_no_relaunch_while_the_provider_says_the_completed_collection_failed(
    enabled_api, failed_payout, run
):
    """The provider reversed the collection after we completed it: the money in suspense may
    never have been collected, and a relaunch would pay it out. Refused until support has
    reconciled (here: the provider confirms it did collect the money)."""
    transfer_id = failed_payout["id"]
    _collection_reversed(transfer_id)
    discrepancy = ProviderDiscrepancy.objects.get(resource_id=transfer_id)
    assert (discrepancy.resource_type, discrepancy.provider_outcome) == (
        "transfer_collection",
        "failed",
    )

    with run.capture(execute=True) as callbacks:
        assert_not_relaunchable(enabled_api, transfer_id)
    assert callbacks == []  # no disbursement enqueued
    refused = enabled_api.post(f"/transfers/{transfer_id}/relaunch-payout").json()["error"]
    assert refused["message"] == (
        "The provider reported this transfer's collection as failed after it completed (a "
        "reversal, say): the money may never have been collected, and a relaunch would pay out "
        "money the provider says it does not hold. Support reconciles it first (marks the "
        "discrepancy resolved once the provider confirms it collected the money)."
    )
    assert ledger_is_clean()

    discrepancy.resolved_at, discrepancy.resolved_by = timezone.now(), "support"
    discrepancy.save()
    relaunched = run(enabled_api.post, f"/transfers/{transfer_id}/relaunch-payout", {})
    assert relaunched.status_code == 202, relaunched.json()
    assert Transfer.objects.get(pk=transfer_id).disbursement_attempt == 2
    assert ledger_is_clean()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("first", ["reversal", "relaunch"])
def test_a_relaunch_racing_the_collections_reversal_pays_nothing_out_after_it(enabled_api, first):
    """The relaunch and the provider's "failed" for the completed collection reach the
    transfer while its row is locked (as by an action in flight), in either order. The answer
    first: it is recorded as a discrepancy and the relaunch, which then waits for the row,
    sees it and is refused. The relaunch first: it goes out (to a recipient the provider is
    still working on) and the answer, arriving after, is kept for reconciliation."""
    customer = create_customer(enabled_api, **SENDER_DETAILS)
    quote = create_quote(enabled_api, customer_id=customer["id"])
    created = enabled_api.post(
        "/transfers", transfer_body(quote, customer, recipient_phone=SN_DECLINED)
    )
    transfer_id = created.json()["id"]
    assert Transfer.objects.get(pk=transfer_id).payout_status == "failed"
    results: list = []

    def relaunch():
        client = APIClient()
        client.credentials(
            HTTP_X_API_KEY=enabled_api.api_key, HTTP_X_API_SECRET=enabled_api.api_secret
        )
        return client.post(
            f"/transfers/{transfer_id}/relaunch-payout",
            {"recipient": {"first_name": "Moussa", "last_name": "Ndiaye", "phone": SN_SILENT}},
            format="json",
            HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4()),
        )

    def reversal():
        _collection_reversed(transfer_id)
        return "answered"

    works = [reversal, relaunch] if first == "reversal" else [relaunch, reversal]
    with transaction.atomic():
        Transfer.objects.select_for_update().get(pk=transfer_id)
        threads = []
        for count, work in enumerate(works, start=1):
            threads.append(start(work, results))
            waiting_for_a_lock(count)
    for thread in threads:
        thread.join(timeout=60)

    [response] = [result for result in results if result != "answered"]
    discrepancy = ProviderDiscrepancy.objects.get(resource_id=transfer_id)
    assert (discrepancy.resource_type, discrepancy.provider_outcome) == (
        "transfer_collection",
        "failed",
    )
    transfer = Transfer.objects.get(pk=transfer_id)
    if first == "reversal":
        assert response.status_code == 409, response.json()
        assert response.json()["error"]["reason"] == "transfer_not_relaunchable"
        assert "never have been collected" in response.json()["error"]["message"]
        assert (transfer.status, transfer.payout_status, transfer.disbursement_attempt) == (
            "failed",
            "failed",
            1,
        )
        assert events_of(transfer_id) == ["transfer.payin.completed", "transfer.payout.failed"]
    else:
        assert response.status_code == 202, response.json()
        assert (transfer.status, transfer.payout_status, transfer.disbursement_attempt) == (
            "disbursing",
            "pending",
            2,
        )
        assert discrepancy.our_status == "completed"
    assert account_balances(merchant=transfer.merchant, currency="XAF") == {
        "provider_clearing:CM_MTN_MOMO": Decimal("-10000"),
        "transfer_suspense": Decimal("10000"),
    }
    assert ledger_is_clean()
