"""The coalesced submitter: committed payins and payouts wake one `submit_payments` task that
drains every payment waiting for its provider submission, each exactly once."""

import re
import threading
import uuid
from datetime import timedelta
from decimal import Decimal

import pytest
from django.core.cache import cache
from django.db import connection
from django.utils import timezone

from payments import ledger, provider, selectors, services
from payments.models import Payin, PayinHistory, Payout, PayoutHistory
from tests.payments.conftest import create_customer, create_quote, fund, payin_body, payout_body
from tests.support import MerchantClient
from tests.worker import wait_until
from webhooks.models import Event

pytestmark = pytest.mark.django_db(transaction=True)


def _create_waiting(api, customer, *, payins: int, payouts: int) -> tuple[list[str], list[str]]:
    """Payments committed while a submitter is "waiting to start": nothing is enqueued for
    them, they wait in the database for the next submitter."""
    cache.set(services.SUBMITTER_WAKE_KEY, 1, timeout=60)
    payin_ids = [
        api.post("/payins", payin_body(create_quote(api, "payin"), customer)).json()["id"]
        for _ in range(payins)
    ]
    payout_ids = [
        api.post("/payouts", payout_body(create_quote(api, "payout"), customer)).json()["id"]
        for _ in range(payouts)
    ]
    assert set(Payin.objects.filter(pk__in=payin_ids).values_list("status", flat=True)) == {
        "created"
    }
    assert not Payout.objects.filter(pk__in=payout_ids, submitted_at__isnull=False).exists()
    return payin_ids, payout_ids


def _funded_waiting(merchant, *, payins: int, payouts: int):
    """A client, a customer, and _create_waiting's payments for them, the merchant's wallet
    funded to pay them: (api, customer, payin ids, payout ids)."""
    api = MerchantClient(merchant)
    customer = create_customer(api)
    fund(merchant, "100000")
    return (api, customer, *_create_waiting(api, customer, payins=payins, payouts=payouts))


def test_racing_submitters_submit_every_waiting_payment_exactly_once(enabled_merchant):
    api, _customer, payin_ids, payout_ids = _funded_waiting(enabled_merchant, payins=12, payouts=4)

    barrier = threading.Barrier(4, timeout=60)

    def submitter(index: int) -> None:
        try:
            barrier.wait()
            services.payments_submit_waiting()
        finally:
            connection.close()

    threads = [threading.Thread(target=submitter, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    for payin_id in payin_ids:
        payin = api.get(f"/payins/{payin_id}").json()
        assert payin["status"] == "completed"
        assert [entry["status"] for entry in payin["history"]] == [
            "created",
            "pending",
            "completed",
        ]
    for payout_id in payout_ids:
        assert api.get(f"/payouts/{payout_id}").json()["status"] == "completed"
    assert PayinHistory.objects.filter(payin_id__in=payin_ids, status="pending").count() == 12
    assert PayoutHistory.objects.filter(payout_id__in=payout_ids).count() == 8
    assert Event.objects.filter(event_type="payin.completed").count() == 12
    assert Event.objects.filter(event_type="payout.completed").count() == 4
    assert ledger.ledger_breaches() == []
    # 100000 float + 12 payins of 9850 - 4 payouts of (10000 + 200 fee)
    assert selectors.wallet_balance(merchant=enabled_merchant, currency="XOF") == (
        Decimal("177400"),
        Decimal("0"),
    )


def test_a_claim_moves_payins_to_pending_in_one_statement_and_payouts_in_one_more(
    enabled_merchant, django_assert_num_queries
):
    _api, _customer, payin_ids, payout_ids = _funded_waiting(enabled_merchant, payins=3, payouts=2)
    now = timezone.now()

    with django_assert_num_queries(1):  # a full claim of payins: no room for payouts
        first = services._submission_claim(now=now, size=2)
    with django_assert_num_queries(2):  # no BEGIN/COMMIT: each statement is its own
        second = services._submission_claim(now=now, size=10)

    assert [payment.pk for payment in first + second] == [
        *map(uuid.UUID, payin_ids),
        *map(uuid.UUID, payout_ids),
    ]
    assert {p.status for p in first + second[:1]} == {"pending"}
    for payin in Payin.objects.filter(pk__in=payin_ids):
        assert (payin.status, payin.submitted_at) == ("pending", now)
        assert list(payin.history.values_list("status", "reason", "created_at")) == [
            ("created", "", payin.created_at),
            ("pending", services.REASON_SUBMITTED, now),
        ]
    assert set(Payout.objects.filter(pk__in=payout_ids).values_list("submitted_at", flat=True)) == {
        now
    }
    assert services._submission_claim(now=now) == []  # nothing is claimed twice


def test_a_short_claim_of_payins_spares_the_payouts_claim_when_none_is_waiting(
    enabled_merchant, django_assert_num_queries
):
    api, customer, payin_ids, _ = _funded_waiting(enabled_merchant, payins=2, payouts=0)
    now = timezone.now()

    with django_assert_num_queries(1):  # the payins' statement says no payout is waiting
        claimed = services._submission_claim(now=now)
    assert [payin.pk for payin in claimed] == [*map(uuid.UUID, payin_ids)]

    # a payout waiting, and no payin to say so: the payouts' claim finds it
    payout = api.post("/payouts", payout_body(create_quote(api, "payout"), customer)).json()
    with django_assert_num_queries(2):
        assert [p.pk for p in services._submission_claim(now=now)] == [uuid.UUID(payout["id"])]


@pytest.mark.parametrize(
    ("claim", "index"),
    [("payins", "payin_awaiting_submission"), ("payouts", "payout_awaiting_submission")],
)
def test_a_claims_generic_plan_reads_the_partial_index_of_those_waiting(claim, index):
    """Prepared once per connection, a claim is planned afresh at every run unless its generic
    plan (the one for any parameter values) is as good: the statuses it waits for are in its
    text, so that plan can use the partial index of the payments waiting."""
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL's plans")
    names: list[str] = []

    def positional(match) -> str:
        if match.group(1) not in names:
            names.append(match.group(1))
        return f"${names.index(match.group(1)) + 1}"

    sql = re.sub(r"%\((\w+)\)s", positional, services._claim_statements()[claim])
    with connection.cursor() as cursor:
        cursor.execute("SET plan_cache_mode = force_generic_plan")
        cursor.execute("SET enable_seqscan = off")  # an empty table is read whole otherwise
        cursor.execute(f"PREPARE claim AS {sql}")
        try:
            cursor.execute(f"EXPLAIN EXECUTE claim({', '.join(['NULL'] * len(names))})")
            plan = "\n".join(row[0] for row in cursor.fetchall())
        finally:
            cursor.execute("DEALLOCATE claim")
            cursor.execute("RESET plan_cache_mode")
            cursor.execute("RESET enable_seqscan")
    assert f"Index Scan using {index}" in plan, plan


class FlakyGateway:
    """Unreachable for its first request, then the simulator."""

    calls = 0

    def submit_collection(self, **kwargs):
        type(self).calls += 1
        if type(self).calls == 1:
            raise provider.ProviderUnavailable("connection refused")
        from payments.provider.simulator import SimulatorGateway

        return SimulatorGateway().submit_collection(**kwargs)


def test_a_provider_outage_hands_the_payment_to_its_retrying_task(enabled_merchant, settings):
    settings.PAYMENTS_PROVIDER_GATEWAY = "tests.payments.test_submitter.FlakyGateway"
    FlakyGateway.calls = 0
    api = MerchantClient(enabled_merchant)
    customer = create_customer(api)
    (payin_id,), _ = _create_waiting(api, customer, payins=1, payouts=0)

    assert services.payments_submit_waiting() == 1

    assert FlakyGateway.calls == 2  # the submitter's attempt, then submit_payin's
    payin = api.get(f"/payins/{payin_id}").json()
    assert payin["status"] == "completed"
    assert [entry["status"] for entry in payin["history"]] == ["created", "pending", "completed"]


def test_a_created_payin_wakes_a_submitter_that_submits_it(enabled_merchant):
    api = MerchantClient(enabled_merchant)
    customer = create_customer(api)
    quote = create_quote(api, "payin")

    payin_id = api.post("/payins", payin_body(quote, customer)).json()["id"]

    assert api.get(f"/payins/{payin_id}").json()["status"] == "completed"
    assert cache.get(services.SUBMITTER_WAKE_KEY) is None  # the submitter started and cleared it


@pytest.mark.worker
def test_payments_created_back_to_back_all_complete_through_a_real_worker(
    enabled_merchant, celery_worker_process
):
    api = MerchantClient(enabled_merchant)
    customer = create_customer(api)
    quotes = [create_quote(api, "payin") for _ in range(30)]

    payin_ids = [api.post("/payins", payin_body(quote, customer)).json()["id"] for quote in quotes]

    def all_completed() -> bool:
        assert celery_worker_process.poll() is None, "the worker died"
        statuses = Payin.objects.filter(pk__in=payin_ids).values_list("status", flat=True)
        return set(statuses) == {"completed"}

    assert wait_until(all_completed, timeout=90)
    assert PayinHistory.objects.filter(payin_id__in=payin_ids, status="pending").count() == 30
    assert Event.objects.filter(data_id__in=payin_ids, event_type="payin.completed").count() == 30
    assert ledger.ledger_breaches() == []


def test_with_redis_unreachable_a_payin_is_still_created_and_left_to_the_sweep(
    enabled_merchant, settings, caplog
):
    api = MerchantClient(enabled_merchant)
    customer = create_customer(api)
    quote = create_quote(api, "payin")
    settings.REDIS_URL = "redis://127.0.0.1:1/0"  # nothing listens there

    response = api.post("/payins", payin_body(quote, customer))

    assert response.status_code == 201  # the rate limit fails open, the wake-up fails quietly
    payin = Payin.objects.get(pk=response.json()["id"])
    assert payin.status == "created"
    # logged once, by the rate limit: the wake-up then leaves Redis (and the broker) alone
    assert caplog.text.count("Rate limits not counted for 5.0s: Redis is unreachable") == 1
    later = payin.created_at + timedelta(seconds=services.RESUBMIT_AFTER_SECONDS + 1)
    assert services.payments_stale_submissions(now=later)[0] == [payin.pk]
