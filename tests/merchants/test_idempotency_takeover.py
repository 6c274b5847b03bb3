"""A request that stalls past IDEMPOTENCY_LOCK_TIMEOUT_SECONDS has its key taken over by a
retry (its claim looks abandoned). When the stalled request finally ends, it must touch only
the record it claimed itself: its completion must not overwrite the retry's stored response
(nor commit a second resource for the key), and its release must not free the retry's claim
while the retry still runs.

Real threads and connections, through the API: a request is stopped inside its handler by
the service its view calls (wrapped to wait for the test; the service itself runs as usual)."""

import itertools
import threading
import uuid
from collections.abc import Callable, Iterator

import pytest
from django.db import connection, transaction

from customers import services as customer_services
from customers.models import Customer
from merchants.models import IdempotencyRecord, IdempotencyStatus
from payments import views as payment_views
from payments.models import Payin
from quotes import services as quote_services
from quotes.models import Quote, QuoteStatus
from tests.locks import waiting_for_a_lock
from tests.payments.conftest import create_customer, create_quote, payin_body
from tests.support import MerchantClient
from tests.test_query_counts import QUOTE

pytestmark = pytest.mark.django_db(transaction=True)


class Stalls:
    """The first `count` calls of a service each stop (before or after the service ran) until
    the test lets them go; the requests making them run in threads."""

    def __init__(self, monkeypatch) -> None:
        self.monkeypatch = monkeypatch
        self.arrived: list[threading.Event] = []
        self.go: list[threading.Event] = []
        self.threads: list[threading.Thread] = []

    def install(self, module, name: str, *, count: int = 1, before: bool = False) -> None:
        real = getattr(module, name)
        self.arrived = [threading.Event() for _ in range(count)]
        self.go = [threading.Event() for _ in range(count)]
        calls = itertools.count()

        def stalled(*args, **kwargs):
            number = next(calls)

            def stop() -> None:
                if number < count:
                    self.arrived[number].set()
                    assert self.go[number].wait(timeout=30)

            if before:
                stop()
            result = real(*args, **kwargs)
            if not before:
                stop()
            return result

        self.monkeypatch.setattr(module, name, stalled)

    def post(self, client: MerchantClient, path: str, body: dict, key: str) -> Callable:
        """POST in a thread; returns a function that waits for its response."""
        answer: list = []

        def send() -> None:
            try:
                answer.append(client.post(path, body, idempotency_key=key))
            finally:
                connection.close()

        thread = threading.Thread(target=send)
        self.threads.append(thread)
        thread.start()

        def response():
            thread.join(timeout=60)
            assert not thread.is_alive()
            return answer[0]

        return response

    def release(self) -> None:
        for event in self.go:
            event.set()
        for thread in self.threads:
            thread.join(timeout=60)


@pytest.fixture
def stalls(monkeypatch) -> Iterator[Stalls]:
    stalls = Stalls(monkeypatch)
    yield stalls
    # A test that failed midway leaves its requests waiting: they end before the flush.
    stalls.release()


def _endpoint(path: str, api: MerchantClient):
    """(the service its view calls, the body, the resources it creates)."""
    if path == "/customers":
        return (customer_services, "customer_create"), {"first_name": "Awa"}, Customer.objects
    if path == "/quotes/payin":
        return (quote_services, "quote_create_collection"), QUOTE, Quote.objects
    body = payin_body(create_quote(api), create_customer(api))
    return (payment_views, "payin_create"), body, Payin.objects


# Not /payins: a stalled payin holds its quote's row lock, so the retry of the same body waits
# for it rather than running (a payin of another quote: the test after this one).
@pytest.mark.parametrize("path", ["/customers", "/quotes/payin"])
def test_a_stalled_request_whose_key_was_taken_over_leaves_the_retrys_result_alone(
    enabled_merchant, settings, stalls, path
):
    """The stalled request wrote its resource in its transaction before it stopped; the
    retry's resource is the key's. The stalled one keeps nothing and answers what the key's
    record says: the retry's response, replayed."""
    api, first = MerchantClient(enabled_merchant), MerchantClient(enabled_merchant)
    (module, service), body, created = _endpoint(path, api)
    before = created.count()
    stalls.install(module, service)
    key = str(uuid.uuid4())

    first_response = stalls.post(first, path, body, key)
    assert stalls.arrived[0].wait(timeout=30)  # its key claimed, its resource written
    settings.IDEMPOTENCY_LOCK_TIMEOUT_SECONDS = 0  # its claim now looks abandoned
    retry = api.post(path, body, idempotency_key=key)
    assert retry.status_code == 201, retry.json()
    assert retry.json()["_meta"]["idempotency_replayed"] is False
    settings.IDEMPOTENCY_LOCK_TIMEOUT_SECONDS = 60
    stalls.go[0].set()
    stalled = first_response()

    assert stalled.status_code == 201, stalled.json()
    assert stalled.json()["id"] == retry.json()["id"]
    assert stalled.json()["_meta"]["idempotency_replayed"] is True
    replay = api.post(path, body, idempotency_key=key)
    assert replay.status_code == 201
    assert replay.json()["id"] == retry.json()["id"]
    assert replay.json()["_meta"]["idempotency_replayed"] is True
    assert created.count() == before + 1
    assert created.filter(pk=retry.json()["id"]).exists()
    record = IdempotencyRecord.objects.get(merchant=enabled_merchant, key=key)
    assert record.status == IdempotencyStatus.COMPLETED
    assert record.response_body["id"] == retry.json()["id"]


def test_a_stalled_payin_whose_key_was_taken_over_consumes_nothing(
    enabled_merchant, settings, stalls
):
    """The retry under the key has another body (another quote): the stalled payin finds its
    claim gone when it completes, keeps nothing at all, not even the quote's consumption, and
    answers as the key's record says (another request's body: 409)."""
    api, first = MerchantClient(enabled_merchant), MerchantClient(enabled_merchant)
    customer = create_customer(api)
    stalled_quote, retry_quote = create_quote(api), create_quote(api)
    stalls.install(payment_views, "payin_create")
    key = str(uuid.uuid4())

    first_response = stalls.post(first, "/payins", payin_body(stalled_quote, customer), key)
    assert stalls.arrived[0].wait(timeout=30)
    settings.IDEMPOTENCY_LOCK_TIMEOUT_SECONDS = 0
    retry = api.post("/payins", payin_body(retry_quote, customer), idempotency_key=key)
    assert retry.status_code == 201, retry.json()
    settings.IDEMPOTENCY_LOCK_TIMEOUT_SECONDS = 60
    stalls.go[0].set()
    stalled = first_response()

    assert stalled.status_code == 409, stalled.json()
    assert stalled.json()["error"]["reason"] == "idempotency_key_reused"
    assert Quote.objects.get(pk=stalled_quote["id"]).status == QuoteStatus.ACTIVE
    assert list(Payin.objects.values_list("id", flat=True)) == [uuid.UUID(retry.json()["id"])]
    record = IdempotencyRecord.objects.get(merchant=enabled_merchant, key=key)
    assert record.response_body["id"] == retry.json()["id"]
    replay = api.post("/payins", payin_body(retry_quote, customer), idempotency_key=key)
    assert replay.json()["id"] == retry.json()["id"]


def test_a_stalled_request_that_fails_leaves_the_retrys_claim_in_place(
    enabled_merchant, settings, stalls
):
    """The stalled request fails after its key was taken over (its external_ref was used by
    then). Its release must not free the retry's claim: a third request with the key, while
    the retry still runs, is a 409, not a second run."""
    api = MerchantClient(enabled_merchant)
    first, second = MerchantClient(enabled_merchant), MerchantClient(enabled_merchant)
    body = {"first_name": "Awa", "external_ref": "ref-1"}
    stalls.install(customer_services, "customer_create", count=2, before=True)
    key = str(uuid.uuid4())

    first_response = stalls.post(first, "/customers", body, key)
    assert stalls.arrived[0].wait(timeout=30)
    stalled_claim = IdempotencyRecord.objects.get(merchant=enabled_merchant, key=key)
    settings.IDEMPOTENCY_LOCK_TIMEOUT_SECONDS = 0
    second_response = stalls.post(second, "/customers", body, key)
    assert stalls.arrived[1].wait(timeout=30)  # the retry took the key over and runs
    settings.IDEMPOTENCY_LOCK_TIMEOUT_SECONDS = 60
    retry_claim = IdempotencyRecord.objects.get(merchant=enabled_merchant, key=key)
    assert retry_claim.pk != stalled_claim.pk
    assert api.post("/customers", body).status_code == 201  # ref-1 is used, under another key
    stalls.go[0].set()
    stalled = first_response()

    assert stalled.status_code == 400
    assert stalled.json()["error"]["reason"] == "duplicate_external_ref"
    record = IdempotencyRecord.objects.get(merchant=enabled_merchant, key=key)
    assert (record.pk, record.status) == (retry_claim.pk, IdempotencyStatus.IN_PROGRESS)
    third = api.post("/customers", body, idempotency_key=key)
    assert third.status_code == 409, third.json()
    assert third.json()["error"]["reason"] == "request_in_progress"

    stalls.go[1].set()
    assert second_response().status_code == 400  # the retry fails as well: ref-1 is used
    assert not IdempotencyRecord.objects.filter(merchant=enabled_merchant, key=key).exists()
    assert Customer.objects.filter(merchant=enabled_merchant).count() == 1


@pytest.mark.parametrize("path", ["/customers", "/quotes/payin"])
def test_a_take_over_that_waited_for_the_stalled_requests_completion_leaves_it(
    enabled_merchant, settings, stalls, path
):
    """The retry reads the stalled request's claim as abandoned, and its delete waits while
    the stalled request completes that record (the test holds the record's row lock, so both
    wait for it, the completion first). The completed record and its resource stay the key's;
    the retry answers them, replayed, and runs nothing."""
    api, first = MerchantClient(enabled_merchant), MerchantClient(enabled_merchant)
    (module, service), body, created = _endpoint(path, api)
    before = created.count()
    stalls.install(module, service)
    key = str(uuid.uuid4())

    first_response = stalls.post(first, path, body, key)
    assert stalls.arrived[0].wait(timeout=30)
    claim = IdempotencyRecord.objects.get(merchant=enabled_merchant, key=key)
    with transaction.atomic():
        IdempotencyRecord.objects.select_for_update().get(pk=claim.pk)
        stalls.go[0].set()
        waiting_for_a_lock(1)  # the stalled request's completion
        settings.IDEMPOTENCY_LOCK_TIMEOUT_SECONDS = 0
        retry_response = stalls.post(api, path, body, key)
        waiting_for_a_lock(2)  # and the retry's delete of the claim
    stalled, retry = first_response(), retry_response()

    assert stalled.status_code == 201, stalled.json()
    assert stalled.json()["_meta"]["idempotency_replayed"] is False
    assert retry.status_code == 201, retry.json()
    assert retry.json()["_meta"]["idempotency_replayed"] is True
    assert retry.json()["id"] == stalled.json()["id"]
    assert created.count() == before + 1
    record = IdempotencyRecord.objects.get(merchant=enabled_merchant, key=key)
    assert (record.pk, record.status) == (claim.pk, IdempotencyStatus.COMPLETED)
