from decimal import Decimal

import pytest

from payments import provider
from payments.provider.simulator import SimulatorGateway, simulated_outcome

calls = []


def record(**kwargs):
    calls.append(kwargs)


@pytest.mark.parametrize(
    ("party", "expected"),
    [
        ("+221770001000", ("failed", "provider_declined")),
        ("+221770001999", None),
        ("+221770001234", ("completed", "")),
        ("000123000", ("failed", "provider_declined")),
    ],
)
def test_the_outcome_is_decided_by_the_last_three_digits(party, expected):
    assert simulated_outcome(party) == expected


def test_the_simulator_answers_through_the_callback_with_a_stable_reference(settings):
    calls.clear()
    settings.PROVIDER_SIMULATION_DELAY_SECONDS = 0
    kwargs = {
        "reference": "leg-1",
        "amount": Decimal("1000"),
        "currency": "XOF",
        "operator_code": "SN_ORANGE_MOMO",
        "phone": "+221770001234",
        "callback": "tests.payments.test_provider.record",
    }
    first = SimulatorGateway().submit_disbursement(**kwargs)
    second = SimulatorGateway().submit_disbursement(**kwargs)
    assert first == second
    assert first.provider_reference.startswith("SIM-")
    assert SimulatorGateway().submit_collection(**kwargs) != first
    assert [call["outcome"] for call in calls] == ["completed"] * 3
    assert calls[0]["reference"] == "leg-1"
    assert calls[0]["provider_reference"] == first.provider_reference
    assert calls[0]["at"] is not None


def test_a_silent_party_gets_no_answer(settings):
    calls.clear()
    SimulatorGateway().submit_collection(
        reference="leg-2",
        amount=Decimal("1000"),
        currency="XOF",
        operator_code="SN_ORANGE_MOMO",
        phone="+221770001999",
        callback="tests.payments.test_provider.record",
    )
    assert calls == []


def test_an_unknown_outcome_is_refused():
    with pytest.raises(ValueError):
        provider.deliver_answer(
            callback="tests.payments.test_provider.record",
            reference="x",
            provider_reference="y",
            outcome="maybe",
        )
