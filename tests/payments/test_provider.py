from decimal import Decimal

import pytest

from payments import provider
from payments.provider.simulator import SimulatorGateway, simulated_outcome
from payments.services.payins import payin_apply_provider_result
from payments.services.payouts import payout_apply_provider_result
from payments.services.refunds import refund_apply_provider_result
from payments.services.transitions import PAYIN_CALLBACK, PAYOUT_CALLBACK, REFUND_CALLBACK
from transfers.services.submission import (
    COLLECTION_CALLBACK,
    DISBURSEMENT_CALLBACK,
    transfer_apply_collection_result,
    transfer_apply_disbursement_result,
)

calls = []
TEST_LEG = "test_leg"


@provider.answer_applier(TEST_LEG)
def record(**kwargs):
    calls.append(kwargs)


def test_each_leg_reaches_the_function_that_applies_its_answers():
    assert provider.ANSWER_APPLIERS | {TEST_LEG: record} == {
        PAYIN_CALLBACK: payin_apply_provider_result,
        PAYOUT_CALLBACK: payout_apply_provider_result,
        REFUND_CALLBACK: refund_apply_provider_result,
        COLLECTION_CALLBACK: transfer_apply_collection_result,
        DISBURSEMENT_CALLBACK: transfer_apply_disbursement_result,
        TEST_LEG: record,
    }


def test_the_sandbox_connection_uses_the_gateway_its_setting_names(settings):
    @provider.sandbox_gateway("test-declines-everything")
    class DeclinesEverything(SimulatorGateway):
        pass

    assert type(provider.gateway()) is SimulatorGateway
    settings.PAYMENTS_PROVIDER_GATEWAY = "test-declines-everything"
    assert type(provider.gateway()) is DeclinesEverything
    assert type(provider.gateway(provider.SIMULATOR)) is DeclinesEverything


def test_two_sandbox_gateways_cannot_share_a_name():
    with pytest.raises(ValueError, match="simulator"):

        @provider.sandbox_gateway(provider.SIMULATOR)
        class Another(SimulatorGateway):
            pass


def test_an_unknown_leg_is_refused():
    with pytest.raises(ValueError):
        provider.deliver_answer(
            callback="payments.services.payins.payin_apply_provider_result",
            reference="x",
            provider_reference="y",
            outcome="completed",
        )


@pytest.mark.parametrize(
    ("party", "kind", "expected"),
    [
        ("+221770001000", provider.COLLECTION, ("failed", "provider_declined")),
        ("+221770001000", provider.DISBURSEMENT, ("failed", "provider_declined")),
        ("+221770001999", provider.COLLECTION, None),
        ("+221770001999", provider.DISBURSEMENT, None),
        ("+221770001234", provider.COLLECTION, ("completed", "")),
        ("+221770001234", provider.DISBURSEMENT, ("completed", "")),
        ("+221770001998", provider.COLLECTION, ("completed", "")),
        ("+221770001998", provider.DISBURSEMENT, ("failed", "provider_declined")),
        ("000123000", provider.COLLECTION, ("failed", "provider_declined")),
    ],
)
def test_the_outcome_is_decided_by_the_last_three_digits_and_the_kind_of_leg(party, kind, expected):
    assert simulated_outcome(party, kind=kind) == expected


def _leg(phone: str = "+221770001234") -> dict:
    return {
        "reference": "leg-1",
        "amount": Decimal("1000"),
        "currency": "XOF",
        "operator_code": "SN_ORANGE_MOMO",
        "phone": phone,
        "callback": TEST_LEG,
    }


def test_a_delayed_simulator_answers_through_the_callback_with_a_stable_reference(settings):
    calls.clear()
    settings.PROVIDER_SIMULATION_DELAY_SECONDS = 1  # its task runs eagerly in tests
    first = SimulatorGateway().submit_disbursement(**_leg())
    second = SimulatorGateway().submit_disbursement(**_leg())
    assert first == second
    assert first.provider_reference.startswith("SIM-")
    assert first.outcome is None  # the answer comes later, through the callback
    assert SimulatorGateway().submit_collection(**_leg()) != first
    assert [call["outcome"] for call in calls] == ["completed"] * 3
    assert calls[0]["reference"] == "leg-1"
    assert calls[0]["provider_reference"] == first.provider_reference
    assert calls[0]["at"] is not None


@pytest.mark.parametrize(
    ("phone", "outcome", "reason"),
    [("+221770001234", "completed", ""), ("+221770001000", "failed", "provider_declined")],
)
def test_an_instant_simulator_answers_in_the_receipt(settings, phone, outcome, reason):
    calls.clear()
    settings.PROVIDER_SIMULATION_DELAY_SECONDS = 0
    receipt = SimulatorGateway().submit_collection(**_leg(phone))

    assert (receipt.outcome, receipt.reason) == (outcome, reason)
    assert receipt == SimulatorGateway().submit_collection(**_leg(phone))  # the same transaction
    assert calls == []  # nothing called back: the submitter applies the receipt's answer

    provider.receipt_answer_deliver(receipt, callback=_leg()["callback"], reference="leg-1")
    assert [
        (c["reference"], c["provider_reference"], c["outcome"], c["reason"]) for c in calls
    ] == [("leg-1", receipt.provider_reference, outcome, reason)]


def test_a_receipt_without_an_answer_delivers_nothing():
    calls.clear()
    provider.receipt_answer_deliver(
        provider.ProviderReceipt(provider_reference="SIM-x"),
        callback=_leg()["callback"],
        reference="x",
    )
    assert calls == []


def test_a_silent_party_gets_no_answer(settings):
    calls.clear()
    SimulatorGateway().submit_collection(
        reference="leg-2",
        amount=Decimal("1000"),
        currency="XOF",
        operator_code="SN_ORANGE_MOMO",
        phone="+221770001999",
        callback=TEST_LEG,
    )
    assert calls == []


def test_an_unknown_outcome_is_refused():
    with pytest.raises(ValueError):
        provider.deliver_answer(
            callback=TEST_LEG,
            reference="x",
            provider_reference="y",
            outcome="maybe",
        )
