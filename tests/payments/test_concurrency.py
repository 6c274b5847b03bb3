"""Real threads on PostgreSQL: the row locks, not luck, keep the ledger right."""

from decimal import Decimal

import pytest

from payments.ledger.checks import ledger_breaches
from payments.models import Payin, Payout
from tests.locks import together
from tests.payments.conftest import (
    SILENT_PHONE,
    create_customer,
    create_quote,
    fund,
    payin_body,
    payout_body,
)
from tests.support import MerchantClient, wallet_balance

pytestmark = pytest.mark.django_db(transaction=True)


def test_concurrent_payouts_never_overdraw_the_wallet(enabled_merchant):
    api = MerchantClient(enabled_merchant)
    customer = create_customer(api)
    fund(enabled_merchant, "30000")  # room for two debits of 10200, not three
    quotes = [create_quote(api, "payout") for _ in range(5)]
    clients = [MerchantClient(enabled_merchant) for _ in range(5)]

    def work(i):
        response = clients[i].post("/payouts", payout_body(quotes[i], customer, SILENT_PHONE))
        return response.status_code, response.json()

    results = together(work, 5)

    created = [body for status, body in results if status == 201]
    refused = [body for status, body in results if status == 400]
    assert len(created) == 2, results
    assert len(refused) == 3
    assert {body["error"]["reason"] for body in refused} == {"insufficient_balance"}
    assert Payout.objects.count() == 2
    assert wallet_balance(merchant=enabled_merchant, currency="XOF") == (
        Decimal("9600"),
        Decimal("20400"),
    )
    assert ledger_breaches() == []


def test_two_payments_racing_for_one_quote_have_exactly_one_winner(enabled_merchant):
    api = MerchantClient(enabled_merchant)
    customer = create_customer(api)
    quote = create_quote(api, "payin")
    clients = [MerchantClient(enabled_merchant) for _ in range(4)]

    def work(i):
        response = clients[i].post("/payins", payin_body(quote, customer, SILENT_PHONE))
        return response.status_code, response.json()

    results = together(work, 4)

    statuses = sorted(status for status, _ in results)
    assert statuses == [201, 400, 400, 400], results
    reasons = {body["error"]["reason"] for status, body in results if status == 400}
    assert reasons == {"quote_consumed"}
    assert Payin.objects.count() == 1


def _silent_payout(merchant) -> str:
    """A payout of 10000 XOF from a 20000 float, waiting for a provider that never answers."""
    api = MerchantClient(merchant)
    customer = create_customer(api)
    fund(merchant, "20000")
    quote = create_quote(api, "payout")
    return api.post("/payouts", payout_body(quote, customer, SILENT_PHONE)).json()["id"]


def test_concurrent_provider_answers_post_the_ledger_once(enabled_merchant):
    from payments import provider
    from payments.services.transitions import PAYOUT_CALLBACK

    payout_id = _silent_payout(enabled_merchant)

    def work(i):
        provider.deliver_answer(
            callback=PAYOUT_CALLBACK,
            reference=payout_id,
            provider_reference="SIM-x",
            outcome=provider.COMPLETED if i % 2 == 0 else provider.FAILED,
            reason="" if i % 2 == 0 else "provider_declined",
        )

    together(work, 6)

    payout = Payout.objects.get(pk=payout_id)
    assert payout.status in ("completed", "failed")
    assert payout.history.count() == 2
    available, reserved = wallet_balance(merchant=enabled_merchant, currency="XOF")
    assert reserved == 0
    assert available == (Decimal("9800") if payout.status == "completed" else Decimal("20000"))
    assert ledger_breaches() == []


def test_two_support_agents_marking_one_payout_failed_have_one_winner(enabled_merchant):
    from django.utils import timezone

    from merchants import services as merchant_services
    from merchants.models import AuditLogEntry
    from payments.services.payouts import PayoutNotStuck, payout_mark_failed
    from webhooks.models import Event

    payout_id = _silent_payout(enabled_merchant)
    Payout.objects.filter(pk=payout_id).update(provider_timeout_at=timezone.now())
    agents = [
        merchant_services.staff_user_create(
            username=f"agent-{i}", password="pw-1-staff-login", support=True
        )
        for i in range(4)
    ]

    def work(i):
        try:
            payout_mark_failed(payout_id=payout_id, actor=agents[i], now=timezone.now())
        except PayoutNotStuck:
            return "refused"
        return "marked"

    assert sorted(together(work, 4)) == ["marked", "refused", "refused", "refused"]
    assert Payout.objects.get(pk=payout_id).history.count() == 2
    assert AuditLogEntry.objects.filter(target=payout_id).count() == 1
    assert Event.objects.filter(data_id=payout_id).count() == 1
    assert wallet_balance(merchant=enabled_merchant, currency="XOF") == (
        Decimal("20000"),
        Decimal("0"),
    )
    assert ledger_breaches() == []


def test_provider_answers_and_new_payouts_on_one_merchant_never_deadlock(enabled_merchant):
    """Answers lock a payment then the wallet; new payouts lock the wallet and, at commit,
    key-share the merchant row. Locking only the payment row keeps the two orders compatible."""
    from payments import provider
    from payments.services.transitions import PAYIN_CALLBACK

    api = MerchantClient(enabled_merchant)
    customer = create_customer(api)
    fund(enabled_merchant, "1000000")
    payin_ids = [
        api.post("/payins", payin_body(create_quote(api, "payin"), customer, SILENT_PHONE)).json()[
            "id"
        ]
        for _ in range(6)
    ]
    payout_quotes = [create_quote(api, "payout") for _ in range(6)]
    clients = [MerchantClient(enabled_merchant) for _ in range(12)]

    def work(i):
        if i % 2 == 0:
            provider.deliver_answer(
                callback=PAYIN_CALLBACK,
                reference=payin_ids[i // 2],
                provider_reference=f"SIM-{i}",
                outcome=provider.COMPLETED,
            )
            return 200
        return clients[i].post("/payouts", payout_body(payout_quotes[i // 2], customer)).status_code

    statuses = together(work, 12)

    assert statuses.count(201) == 6
    assert Payin.objects.filter(pk__in=payin_ids, status="completed").count() == 6
    assert ledger_breaches() == []
