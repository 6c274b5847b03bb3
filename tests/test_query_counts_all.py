"""Pinned query counts of every other API endpoint (the hot ones are in test_query_counts.py),
so an N+1 or an extra lookup cannot creep back unnoticed. A list is counted with several rows
on its page, so a query per row would show. A change here must be deliberate: update the
number and say why. Counted inside the test's transaction (after-commit work, such as a
provider submission or a KYC fetch, is not counted: it runs in the worker)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from payments.models import Payin
from payments.services.submission import payin_submit
from tests.kyc.test_kyc_api import passport
from tests.payments.conftest import create_quote as payment_quote
from tests.payments.conftest import fund, payout_body
from tests.quotes.test_quotes_api import TRANSFER
from tests.test_query_counts import QUOTE
from tests.transfers.conftest import (
    SENDER_DETAILS,
    SN_DECLINED,
    transfer_body,
)
from tests.transfers.conftest import create_customer as transfer_customer
from tests.transfers.conftest import create_quote as transfer_quote
from webhooks.services.endpoints import endpoint_add

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(enabled_api):
    enabled_api.get("/customers/00000000-0000-0000-0000-000000000000")  # last_used_at once
    return enabled_api


@pytest.fixture
def customer(api) -> dict:
    return transfer_customer(api, **SENDER_DETAILS)


def _payout(api, customer: dict) -> dict:
    quote = payment_quote(api, "payout")
    response = api.post("/payouts", payout_body(quote, customer))
    assert response.status_code == 201, response.json()
    return response.json()


def _count(django_assert_num_queries, expected: int, call, status: int = 200):
    with django_assert_num_queries(expected):
        response = call()
    assert response.status_code == status, response.content
    return response


def test_customers_and_kyc(api, customer, django_assert_num_queries):
    for _ in range(2):
        transfer_customer(api)
    _count(django_assert_num_queries, 1, lambda: api.get("/customers"))
    url = f"/customers/{customer['id']}/kyc"
    _count(
        django_assert_num_queries,
        12,
        lambda: api.post(url, {"documents": [passport()]}, idempotency_key=None),
        201,
    )
    _count(django_assert_num_queries, 3, lambda: api.get(url))


def test_quotes(api, customer, django_assert_num_queries):
    _count(django_assert_num_queries, 7, lambda: api.post("/quotes/payout", QUOTE), 201)
    transfer = {**TRANSFER, "customer_id": customer["id"]}
    _count(django_assert_num_queries, 12, lambda: api.post("/quotes/transfer", transfer), 201)
    _count(django_assert_num_queries, 1, lambda: api.get("/quotes"))
    _count(django_assert_num_queries, 2, lambda: api.get("/operators"))
    _count(django_assert_num_queries, 2, lambda: api.get("/corridors"))


def test_payouts_and_wallet(api, enabled_merchant, customer, django_assert_num_queries):
    fund(enabled_merchant, "100000")
    quote = payment_quote(api, "payout")
    _count(
        django_assert_num_queries,
        18,
        lambda: api.post("/payouts", payout_body(quote, customer)),
        201,
    )
    payouts = [_payout(api, customer) for _ in range(2)]
    _count(django_assert_num_queries, 2, lambda: api.get(f"/payouts/{payouts[0]['id']}"))
    _count(django_assert_num_queries, 2, lambda: api.get("/payouts"))
    _count(django_assert_num_queries, 1, lambda: api.get("/balances"))
    today = timezone.now().date().isoformat()
    statement = {"from": today, "to": today, "currency": "XOF"}
    _count(django_assert_num_queries, 4, lambda: api.get("/statements", **statement))


def test_transfers(api, customer, django_capture_on_commit_callbacks, django_assert_num_queries):
    quote = transfer_quote(api, customer_id=customer["id"])
    _count(
        django_assert_num_queries,
        16,
        lambda: api.post("/transfers", transfer_body(quote, customer)),
        201,
    )
    declined = transfer_quote(api, customer_id=customer["id"])
    with django_capture_on_commit_callbacks(execute=True):  # the legs run, as in the worker
        body = transfer_body(declined, customer, recipient_phone=SN_DECLINED)
        failed = api.post("/transfers", body).json()
    _count(django_assert_num_queries, 2, lambda: api.get(f"/transfers/{failed['id']}"))
    _count(django_assert_num_queries, 2, lambda: api.get("/transfers"))
    _count(
        django_assert_num_queries,
        16,  # one is the look for a provider answer support has not reconciled (a discrepancy)
        lambda: api.post(f"/transfers/{failed['id']}/relaunch-payout"),
        202,
    )


def test_events(
    api, enabled_merchant, customer, django_capture_on_commit_callbacks, django_assert_num_queries
):
    endpoint_add(
        merchant=enabled_merchant,
        url="https://hooks.example.com/cowry",
        event_types=[],
        now=timezone.now(),
    )
    for _ in range(3):
        quote = payment_quote(api, "payin")
        body = {"quote_id": quote["id"], "customer_id": customer["id"]}
        with django_capture_on_commit_callbacks(execute=True):  # completed, events recorded
            api.post("/payins", {**body, "source": {"phone": "+221770001234"}})
    _count(django_assert_num_queries, 2, lambda: api.get("/payins"))
    events = api.get("/events").json()["data"]
    assert len(events) >= 3
    _count(django_assert_num_queries, 1, lambda: api.get("/events"))
    _count(django_assert_num_queries, 1, lambda: api.get(f"/events/{events[0]['id']}"))
    _count(  # its delivery is waiting for a retry: made due now, and read back, not a new one;
        django_assert_num_queries,  # and the merchant's row locked, so two re-sends take turns
        14,
        lambda: api.post(f"/events/{events[0]['id']}/resend"),
        202,
    )
    since = (timezone.now() - timedelta(hours=1)).isoformat()
    _count(  # the enabled endpoints read, then one read of the events each missed
        django_assert_num_queries,
        10,
        lambda: api.post("/events/resend-failed", {"since": since}),
        202,
    )


def test_refunds(
    api, enabled_merchant, customer, django_capture_on_commit_callbacks, django_assert_num_queries
):
    fund(enabled_merchant, "10000")
    payin_ids = []
    for _ in range(3):
        quote = payment_quote(api, "payin")
        body = {"quote_id": quote["id"], "customer_id": customer["id"]}
        with django_capture_on_commit_callbacks(execute=True):  # completed
            payin = api.post("/payins", {**body, "source": {"phone": "+221770001234"}}).json()
        payin_ids.append(payin["id"])
    refund_ids = [
        api.post(f"/payins/{payin_id}/refunds", {"amount": "100"}).json()["id"]
        for payin_id in payin_ids[:2]
    ]
    _count(
        django_assert_num_queries,
        # as a payout's, less its quote: the payin locked, its refunds summed, its operator's
        # limits read, the refund and its history inserted, the reservation posted
        16,
        lambda: api.post(f"/payins/{payin_ids[2]}/refunds", {"amount": "100"}),
        201,
    )
    _count(django_assert_num_queries, 2, lambda: api.get(f"/refunds/{refund_ids[0]}"))
    _count(django_assert_num_queries, 2, lambda: api.get("/refunds"))
    _count(django_assert_num_queries, 1, lambda: api.get(f"/payins/{payin_ids[0]}"))


def test_the_worker_submits_a_payin_the_provider_answers_at_once(
    api, customer, settings, django_assert_num_queries
):
    """Worker side: the submit task of a payin whose receipt carries the answer (the sandbox
    with no delay). The wallet and its ledger accounts exist (a first payin made them)."""
    settings.PROVIDER_SIMULATION_DELAY_SECONDS = 0
    payins = []
    for _ in range(2):
        quote = payment_quote(api, "payin")
        body = {"quote_id": quote["id"], "customer_id": customer["id"]}
        payins.append(api.post("/payins", {**body, "source": {"phone": "+221770001234"}}).json())
    payin_submit(payin_id=payins[0]["id"], now=timezone.now())
    # 9 in two transactions: the move to pending with its history (PAYIN_SUBMISSION); the
    # answer's locked read (PAYIN_LOCKED) and its completion with its journal, wallet, event
    # and deliveries in one statement (PAYIN_COMPLETION), which stores the receipt's reference
    with django_assert_num_queries(9):
        payin_submit(payin_id=payins[1]["id"], now=timezone.now())
    assert Payin.objects.get(pk=payins[1]["id"]).provider_reference.startswith("SIM-")
