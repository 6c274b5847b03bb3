import threading
import uuid
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from customers.models import Customer
from merchants import idempotency
from merchants.models import IdempotencyRecord, IdempotencyStatus
from tests.catalog import TRANSFER_QUOTE
from tests.factories import MerchantFactory
from tests.support import MerchantClient

pytestmark = pytest.mark.django_db


def test_post_without_idempotency_key_is_400_and_creates_nothing(api):
    response = api.post("/customers", {"first_name": "Awa"}, idempotency_key=None)
    assert response.status_code == 400
    assert response.json()["error"]["reason"] == "idempotency_key_missing"
    assert Customer.objects.count() == 0


def test_first_response_carries_meta_not_replayed(api):
    response = api.post("/customers", {"first_name": "Awa"}, idempotency_key="key-1")
    assert response.status_code == 201
    assert response.json()["_meta"] == {"idempotency_key": "key-1", "idempotency_replayed": False}


def test_replay_returns_same_status_and_body_and_creates_nothing_more(api):
    first = api.post("/customers", {"first_name": "Awa"}, idempotency_key="key-1")
    replay = api.post("/customers", {"first_name": "Awa"}, idempotency_key="key-1")

    assert replay.status_code == 201
    assert replay.json()["_meta"] == {"idempotency_key": "key-1", "idempotency_replayed": True}
    first_body = {k: v for k, v in first.json().items() if k != "_meta"}
    replay_body = {k: v for k, v in replay.json().items() if k != "_meta"}
    assert replay_body == first_body
    assert Customer.objects.count() == 1


def test_same_key_with_another_body_is_409(api):
    api.post("/customers", {"first_name": "Awa"}, idempotency_key="key-1")
    response = api.post("/customers", {"first_name": "Binta"}, idempotency_key="key-1")
    assert response.status_code == 409
    assert response.json()["error"] == {
        "code": "conflict",
        "message": idempotency.IdempotencyKeyReused.message,
        "reason": "idempotency_key_reused",
    }
    assert Customer.objects.count() == 1


def test_key_still_in_progress_is_409(api):
    body = {"first_name": "Awa"}
    IdempotencyRecord.objects.create(
        merchant=api.merchant,
        key="busy",
        method="POST",
        path="/customers",
        fingerprint=idempotency.request_fingerprint(method="POST", path="/customers", body=body),
        status=IdempotencyStatus.IN_PROGRESS,
        locked_at=timezone.now(),
        expires_at=timezone.now() + timedelta(days=1),
    )
    response = api.post("/customers", body, idempotency_key="busy")
    assert response.status_code == 409
    assert response.json()["error"]["reason"] == "request_in_progress"
    assert Customer.objects.count() == 0


def test_abandoned_in_progress_key_is_taken_over(api, settings):
    body = {"first_name": "Awa"}
    IdempotencyRecord.objects.create(
        merchant=api.merchant,
        key="crashed",
        method="POST",
        path="/customers",
        fingerprint=idempotency.request_fingerprint(method="POST", path="/customers", body=body),
        status=IdempotencyStatus.IN_PROGRESS,
        locked_at=timezone.now() - timedelta(seconds=settings.IDEMPOTENCY_LOCK_TIMEOUT_SECONDS + 1),
        expires_at=timezone.now() + timedelta(days=1),
    )
    assert api.post("/customers", body, idempotency_key="crashed").status_code == 201


def test_failed_request_releases_its_key(api):
    bad = api.post("/customers", {"email": "nope"}, idempotency_key="key-1")
    assert bad.status_code == 400
    assert not IdempotencyRecord.objects.filter(key="key-1").exists()

    good = api.post("/customers", {"email": "awa@example.com"}, idempotency_key="key-1")
    assert good.status_code == 201
    assert good.json()["_meta"]["idempotency_replayed"] is False


@pytest.mark.parametrize("key", ["clé-1", "prix-€-1", "tab\tkey"])
def test_a_key_outside_printable_ascii_is_refused_alike(api, key):
    """A server hands a header's other bytes over decoded as latin-1: "clé" was stored and
    echoed as "clÃ©" while "€" (0x82 once decoded) was refused."""
    as_received = key.encode("utf-8").decode("latin-1")
    response = api.post("/customers", {"first_name": "A"}, idempotency_key=as_received)
    assert response.status_code == 400
    assert response.json()["error"]["reason"] == "idempotency_key_invalid"
    assert not Customer.objects.exists()


def test_a_retry_spelling_the_path_id_in_capitals_is_the_same_request(api):
    from webhooks.models import Event
    from webhooks.services.endpoints import endpoint_set

    endpoint_set(merchant=api.merchant, url="https://93.184.216.34/hook", now=timezone.now())
    event = Event.objects.create(
        merchant=api.merchant,
        event_type="payin.completed",
        data_type="payin",
        data_id=uuid.uuid4(),
        payload={},
        created_at=timezone.now(),
    )
    first = api.post(f"/events/{event.id}/resend", idempotency_key="resend-1")
    again = api.post(f"/events/{str(event.id).upper()}/resend", idempotency_key="resend-1")
    assert first.status_code == again.status_code == 202, (first.json(), again.json())
    assert again.json()["_meta"]["idempotency_replayed"] is True


def test_keys_are_scoped_per_merchant(api, other_api):
    first = api.post("/customers", {"first_name": "Awa"}, idempotency_key="shared")
    second = other_api.post("/customers", {"first_name": "Awa"}, idempotency_key="shared")
    assert first.status_code == second.status_code == 201
    assert first.json()["id"] != second.json()["id"]
    assert second.json()["_meta"]["idempotency_replayed"] is False


def test_expired_key_can_be_used_again(api, settings):
    settings.IDEMPOTENCY_KEY_TTL_SECONDS = 0
    first = api.post("/customers", {"first_name": "Awa"}, idempotency_key="key-1")
    second = api.post("/customers", {"first_name": "Awa"}, idempotency_key="key-1")
    assert second.status_code == 201
    assert second.json()["id"] != first.json()["id"]
    assert second.json()["_meta"]["idempotency_replayed"] is False


def test_purge_removes_only_expired_records(api):
    api.post("/customers", {"first_name": "Awa"}, idempotency_key="fresh")
    api.post("/customers", {"first_name": "Binta"}, idempotency_key="old")
    IdempotencyRecord.objects.filter(key="old").update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )

    assert idempotency.purge_expired() == 1
    assert list(IdempotencyRecord.objects.values_list("key", flat=True)) == ["fresh"]


def _post_together(merchant, path: str, body: dict, key: str, *, count: int) -> list:
    """`count` threads POST the same body with the same Idempotency-Key at once."""
    barrier = threading.Barrier(count, timeout=60)
    responses, lock = [], threading.Lock()

    def send() -> None:
        client = MerchantClient(merchant)
        barrier.wait()
        try:
            response = client.post(path, body, idempotency_key=key)
            with lock:
                responses.append(response)
        finally:
            connection.close()

    threads = [threading.Thread(target=send) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return responses


@pytest.mark.django_db(transaction=True)
def test_ten_concurrent_identical_requests_create_exactly_one_customer():
    merchant = MerchantFactory()
    body = {"first_name": "Awa", "external_ref": "race-1"}
    responses = _post_together(merchant, "/customers", body, str(uuid.uuid4()), count=10)

    assert Customer.objects.filter(merchant=merchant).count() == 1
    customer_id = str(Customer.objects.get(merchant=merchant).id)
    statuses = sorted(r.status_code for r in responses)
    assert set(statuses) <= {201, 409}
    assert statuses.count(201) >= 1
    for response in responses:
        if response.status_code == 201:
            assert response.json()["id"] == customer_id
        else:
            assert response.json()["error"]["reason"] == "request_in_progress"


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("path", ["/quotes/payin", "/payins"])
def test_concurrent_identical_posts_whose_writes_go_with_the_key_create_one_resource(
    enabled_merchant, path
):
    """POST /quotes/payin and POST /payins send their rows with the key's record in one
    statement (a quote's POST without a transaction): one resource, and every 201 is it."""
    from payments.models import Payin
    from quotes.models import Quote
    from tests.payments.conftest import create_customer, create_quote, payin_body

    api = MerchantClient(enabled_merchant)
    if path == "/payins":
        body = payin_body(create_quote(api, "payin"), create_customer(api))
        created = Payin.objects.filter(merchant=enabled_merchant)
    else:
        body = {
            "country_code": "SN",
            "operator_code": "SN_ORANGE_MOMO",
            "rail_type": "mobile_money",
            "send_amount": "10000",
            "send_currency": "XOF",
        }
        created = Quote.objects.filter(merchant=enabled_merchant)
    before = created.count()
    key = str(uuid.uuid4())
    responses = _post_together(enabled_merchant, path, body, key, count=8)

    assert created.count() == before + 1
    resource_id = str(created.order_by("-created_at").first().id)
    assert {r.status_code for r in responses} <= {201, 409}
    assert [r.json()["id"] for r in responses if r.status_code == 201][:1] == [resource_id]
    assert all(r.json()["id"] == resource_id for r in responses if r.status_code == 201)
    record = IdempotencyRecord.objects.get(merchant=enabled_merchant, key=key)
    assert record.status == IdempotencyStatus.COMPLETED
    assert record.response_body["id"] == resource_id


def _post_raw(api, path: str, text: str, key: str):
    """POST `text` as it is, for bodies a JSON encoder would not spell that way."""
    return api.client.generic(
        "POST", path, text.encode(), content_type="application/json", HTTP_IDEMPOTENCY_KEY=key
    )


def test_a_retry_whose_json_is_spelled_otherwise_replays(api):
    """The same parsed body: key order, whitespace and \\u escapes do not make a new request."""
    first = _post_raw(api, "/customers", '{"first_name":"Aïssa","last_name":"Diallo"}', "k")
    again = _post_raw(
        api, "/customers", '{ "last_name" : "Diallo",\n  "first_name" : "A\\u00efssa" }', "k"
    )
    assert first.status_code == again.status_code == 201
    assert again.json()["_meta"]["idempotency_replayed"] is True
    assert again.json()["id"] == first.json()["id"]
    assert Customer.objects.count() == 1


def test_a_value_spelled_otherwise_is_another_request(enabled_api):
    """ "10000" and "10000.00" quote the same amount, but the key was used with another body
    (decisions: what counts as the same request)."""
    from quotes.models import Quote

    body = {
        "country_code": "SN",
        "operator_code": "SN_ORANGE_MOMO",
        "rail_type": "mobile_money",
        "send_amount": "10000",
        "send_currency": "XOF",
    }
    assert enabled_api.post("/quotes/payin", body, idempotency_key="q").status_code == 201
    again = enabled_api.post(
        "/quotes/payin", {**body, "send_amount": "10000.00"}, idempotency_key="q"
    )
    assert again.status_code == 409
    assert again.json()["error"]["reason"] == "idempotency_key_reused"
    assert Quote.objects.filter(merchant=enabled_api.merchant).count() == 1


def test_a_key_used_on_another_endpoint_is_409_and_runs_nothing(enabled_api):
    from quotes.models import Quote

    assert enabled_api.post("/customers", {"first_name": "A"}, idempotency_key="k").status_code
    body = {
        "country_code": "SN",
        "operator_code": "SN_ORANGE_MOMO",
        "rail_type": "mobile_money",
        "send_amount": "10000",
        "send_currency": "XOF",
    }
    response = enabled_api.post("/quotes/payin", body, idempotency_key="k")
    assert response.status_code == 409
    assert response.json()["error"]["reason"] == "idempotency_key_reused"
    assert not Quote.objects.exists()


@pytest.mark.parametrize(
    ("key", "status", "reason"),
    [
        ("k" * idempotency.MAX_KEY_LENGTH, 201, None),
        ("k" * (idempotency.MAX_KEY_LENGTH + 1), 400, "idempotency_key_invalid"),
        ("", 400, "idempotency_key_missing"),
        ("   ", 400, "idempotency_key_missing"),
        ("k\x7f", 400, "idempotency_key_invalid"),
    ],
    ids=["255", "256", "empty", "blank", "DEL"],
)
def test_the_keys_length_and_characters(api, key, status, reason):
    response = api.post("/customers", {"first_name": "A"}, idempotency_key=key)
    assert response.status_code == status
    assert response.json().get("error", {}).get("reason") == reason
    assert Customer.objects.count() == (1 if status == 201 else 0)


def _one_created(responses: list, *, created: int, status: int) -> None:
    """Of identical racing requests: one resource, every success is it, the rest 409s."""
    assert created == 1
    assert {r.status_code for r in responses} <= {status, 409}, [r.json() for r in responses]
    assert len({r.json()["id"] for r in responses if r.status_code == status}) == 1
    for response in responses:
        if response.status_code == 409:
            assert response.json()["error"]["reason"] == "request_in_progress"


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("flow", ["payout", "transfer"])
def test_racing_identical_quote_and_payment_posts_create_one_each(enabled_merchant, flow):
    """The POSTs the tests above do not race: /quotes/payout, /payouts, /quotes/transfer,
    /transfers and /transfers/{id}/relaunch-payout, each six times at once under one key."""
    from payments.models import Payout
    from quotes.models import Quote
    from tests.payments import conftest as payments
    from tests.transfers import conftest as transfers
    from transfers.models import Transfer, TransferHistory

    api = MerchantClient(enabled_merchant)
    quotes = Quote.objects.filter(merchant=enabled_merchant)
    if flow == "payout":
        payments.fund(enabled_merchant, "1000000")
        customer = payments.create_customer(api)
        quote_body = {
            "country_code": "SN",
            "operator_code": "SN_ORANGE_MOMO",
            "rail_type": "mobile_money",
            "send_amount": "10000",
            "send_currency": "XOF",
        }
        quote_path = "/quotes/payout"
    else:
        customer = transfers.create_customer(api, **transfers.SENDER_DETAILS)
        quote_body = {**TRANSFER_QUOTE, "customer_id": customer["id"]}
        quote_path = "/quotes/transfer"
    responses = _post_together(enabled_merchant, quote_path, quote_body, "quote", count=6)
    _one_created(responses, created=quotes.count(), status=201)

    if flow == "payout":
        quote = payments.create_quote(api, "payout")
        body = payments.payout_body(quote, customer)
        responses = _post_together(enabled_merchant, "/payouts", body, "payout", count=6)
        _one_created(responses, created=Payout.objects.count(), status=201)
        return
    quote = transfers.create_quote(api, customer_id=customer["id"])
    body = transfers.transfer_body(quote, customer, recipient_phone=transfers.SN_DECLINED)
    responses = _post_together(enabled_merchant, "/transfers", body, "transfer", count=6)
    _one_created(responses, created=Transfer.objects.count(), status=201)
    transfer = Transfer.objects.get()
    assert transfer.payout_status == "failed"  # the simulator declined it: it can be relaunched
    path = f"/transfers/{transfer.id}/relaunch-payout"
    responses = _post_together(enabled_merchant, path, None, "relaunch", count=6)
    relaunches = TransferHistory.objects.filter(transfer=transfer, reason="payout_relaunched")
    _one_created(responses, created=relaunches.count(), status=202)


@pytest.mark.django_db(transaction=True)
def test_racing_identical_re_sends_add_one_delivery(merchant):
    from tests.webhooks.conftest import record_event
    from webhooks.models import Delivery
    from webhooks.services.endpoints import endpoint_set

    endpoint_set(merchant=merchant, url="https://93.184.216.34/hook", now=timezone.now())
    event = record_event(merchant)
    Delivery.objects.filter(event=event).update(status="succeeded")
    responses = _post_together(merchant, f"/events/{event.id}/resend", None, "resend", count=6)
    _one_created(responses, created=Delivery.objects.filter(event=event).count() - 1, status=202)
