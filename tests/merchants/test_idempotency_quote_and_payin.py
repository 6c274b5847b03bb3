"""The Idempotency-Key contract on POST /quotes/payin and /payins: the key's answer comes
before the body's, as the key is claimed before the handler runs."""

from datetime import timedelta

import pytest
from django.utils import timezone

from merchants import idempotency
from merchants.models import IdempotencyRecord, IdempotencyStatus
from payments.models import Payin
from quotes.models import Quote
from tests.payments.conftest import create_customer, create_quote, payin_body
from tests.support import MerchantClient
from tests.test_query_counts import QUOTE

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(enabled_merchant) -> MerchantClient:
    return MerchantClient(enabled_merchant)


@pytest.fixture(params=["/quotes/payin", "/payins"])
def endpoint(request, api):
    """(path, a valid body, an invalid body, what the endpoint creates)."""
    if request.param == "/payins":
        body = payin_body(create_quote(api), create_customer(api))
        return "/payins", body, {**body, "source": {}}, Payin.objects.all()
    return "/quotes/payin", QUOTE, {**QUOTE, "send_amount": "-1"}, Quote.objects.all()


def _hold(api, path: str, body: dict, key: str, *, locked_at=None) -> None:
    """Another request's record of the key, still in progress."""
    IdempotencyRecord.objects.create(
        merchant=api.merchant,
        key=key,
        method="POST",
        path=path,
        fingerprint=idempotency.request_fingerprint(method="POST", path=path, body=body),
        status=IdempotencyStatus.IN_PROGRESS,
        locked_at=locked_at or timezone.now(),
        expires_at=timezone.now() + timedelta(days=1),
    )


def test_a_key_in_progress_is_409_and_nothing_is_created(api, endpoint):
    path, body, _, created = endpoint
    before = created.count()
    _hold(api, path, body, "busy")

    response = api.post(path, body, idempotency_key="busy")

    assert response.status_code == 409
    assert response.json()["error"]["reason"] == "request_in_progress"
    assert created.count() == before
    assert IdempotencyRecord.objects.get(key="busy").status == IdempotencyStatus.IN_PROGRESS


def test_an_abandoned_key_is_taken_over_and_the_request_runs(api, endpoint, settings):
    path, body, _, created = endpoint
    before = created.count()
    stale = timezone.now() - timedelta(seconds=settings.IDEMPOTENCY_LOCK_TIMEOUT_SECONDS + 1)
    _hold(api, path, body, "crashed", locked_at=stale)

    response = api.post(path, body, idempotency_key="crashed")

    assert response.status_code == 201
    assert response.json()["_meta"]["idempotency_replayed"] is False
    assert created.count() == before + 1
    record = IdempotencyRecord.objects.get(key="crashed")
    assert record.status == IdempotencyStatus.COMPLETED
    assert record.response_body["id"] == response.json()["id"]


def test_a_replay_answers_the_stored_response_and_creates_nothing(api, endpoint):
    path, body, _, created = endpoint
    first = api.post(path, body, idempotency_key="k")
    count = created.count()

    replay = api.post(path, body, idempotency_key="k")

    assert replay.status_code == 201
    assert replay.json()["id"] == first.json()["id"]
    assert replay.json()["_meta"]["idempotency_replayed"] is True
    assert created.count() == count


def test_a_used_key_with_an_invalid_body_is_409_not_400(api, endpoint):
    """As if the key had been claimed first: it is the key's answer, not the body's."""
    path, body, invalid, created = endpoint
    api.post(path, body, idempotency_key="k")
    count = created.count()

    response = api.post(path, invalid, idempotency_key="k")

    assert response.status_code == 409
    assert response.json()["error"]["reason"] == "idempotency_key_reused"
    assert created.count() == count


def test_a_key_in_progress_answers_an_invalid_body_with_409(api, endpoint):
    path, _, invalid, _ = endpoint
    _hold(api, path, invalid, "busy")

    response = api.post(path, invalid, idempotency_key="busy")

    assert response.status_code == 409
    assert response.json()["error"]["reason"] == "request_in_progress"


def test_an_invalid_body_leaves_no_record_and_the_key_free(api, endpoint):
    path, body, invalid, created = endpoint
    before = created.count()

    assert api.post(path, invalid, idempotency_key="k").status_code == 400
    assert not IdempotencyRecord.objects.filter(key="k").exists()
    good = api.post(path, body, idempotency_key="k")
    assert good.status_code == 201
    assert good.json()["_meta"]["idempotency_replayed"] is False
    assert created.count() == before + 1


def test_a_refusal_after_the_read_releases_the_key(api):
    """The quote is read, then refused: the key is free again."""
    customer = create_customer(api)
    quote = create_quote(api)
    Quote.objects.filter(pk=quote["id"]).update(expires_at=timezone.now() - timedelta(seconds=1))

    refused = api.post("/payins", payin_body(quote, customer), idempotency_key="k")

    assert refused.status_code == 400
    assert refused.json()["error"]["reason"] == "quote_expired"
    assert not IdempotencyRecord.objects.filter(key="k").exists()
    fresh = payin_body(create_quote(api), customer)
    assert api.post("/payins", fresh, idempotency_key="k").status_code == 201


def test_a_release_by_record_id_leaves_another_requests_claim_alone(api):
    """The key may be another request's by the time a request releases its claim (taken over
    as abandoned): the release names the record it claimed."""
    _hold(api, "/payins", {}, "k")
    theirs = IdempotencyRecord.objects.get(key="k")

    idempotency._release(theirs.pk + 1)
    assert IdempotencyRecord.objects.filter(pk=theirs.pk).exists()
    idempotency._release(theirs.pk)
    assert not IdempotencyRecord.objects.filter(pk=theirs.pk).exists()
