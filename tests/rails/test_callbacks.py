"""MTN's callbacks: a hint that the status is worth reading, refused cheaply when forged."""

import io
import json
import logging
from urllib.parse import urlsplit

import pytest
from django.core.management import call_command
from django.db import connection as db_connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from payments.models import Payin
from payments.provider.mtn_momo import MtnMomoGateway
from rails import selectors, services
from rails.models import ProviderAnswer
from tests.payments.conftest import create_customer, payin_body
from tests.rails.conftest import CM_PHONE, CONNECTION, cm_quote, connection_add, tokens_forget
from tests.support import MerchantClient
from webhooks.models import Event

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def pending_payin(enabled_merchant, fake_mtn, settings) -> Payin:
    """A payin MTN took and decided (completed), whose callback never came."""
    settings.ALLOW_PRIVATE_NETWORK_URLS = True
    connection_add(fake_mtn, callback_base="https://cowry.example")
    services.operator_route_set(operator_code="CM_MTN_MOMO", name=CONNECTION, at=timezone.now())
    selectors.memo_forget()
    fake_mtn.switches.lose_callbacks = True
    api = MerchantClient(enabled_merchant)
    customer = create_customer(api, phone=CM_PHONE)
    payin_id = api.post("/payins", payin_body(cm_quote(api), customer, CM_PHONE)).json()["id"]
    yield Payin.objects.get(pk=payin_id)
    tokens_forget()


def _path(*, leg: str, reference: str, secret: str | None = None) -> str:
    gateway = MtnMomoGateway(selectors.connection_settings(CONNECTION))
    url = urlsplit(gateway.callback_url(leg=leg, reference=reference))
    return f"{url.path}?s={secret}" if secret is not None else f"{url.path}?{url.query}"


def _writes(queries) -> list[str]:
    return [
        q["sql"]
        for q in queries.captured_queries
        if q["sql"].split()[0].upper() in ("INSERT", "UPDATE", "DELETE")
    ]


BODY = {"status": "SUCCESSFUL", "financialTransactionId": "1", "externalId": "x"}


@pytest.mark.parametrize(
    ("secret", "body", "status"),
    [
        ("wrong-secret", json.dumps(BODY), 403),
        ("", json.dumps(BODY), 403),
        (None, "not json", 400),
        (None, "[1, 2]", 400),
    ],
)
def test_a_forged_or_malformed_callback_changes_nothing_and_reads_no_status(
    client, fake_mtn, pending_payin, secret, body, status
):
    reads = len(fake_mtn.status_reads)
    path = _path(leg="payin", reference=str(pending_payin.id), secret=secret)
    with CaptureQueriesContext(db_connection) as queries:
        response = client.post(path, body, content_type="application/json")
    assert response.status_code == status
    assert response.json()["error"]["code"] in ("forbidden", "bad_request")
    assert _writes(queries) == []
    assert len(fake_mtn.status_reads) == reads
    assert Payin.objects.get(pk=pending_payin.id).status == "pending"
    assert not ProviderAnswer.objects.filter(reference=str(pending_payin.id)).exists()


def test_a_callback_is_a_hint_the_status_decides(client, fake_mtn, pending_payin):
    fake_mtn.switches.declines = {}
    forged = {"status": "FAILED", "reason": "APPROVAL_REJECTED"}  # MTN says SUCCESSFUL
    path = _path(leg="payin", reference=str(pending_payin.id))
    response = client.put(path, json.dumps(forged), content_type="application/json")
    assert response.status_code == 200
    payin = Payin.objects.get(pk=pending_payin.id)
    assert payin.status == "completed"
    events = Event.objects.filter(data_id=payin.id).count()
    # a duplicate, and one for a reference MTN never got: 200, nothing changes
    assert client.post(path, json.dumps(forged), content_type="application/json").status_code == 200
    unknown = _path(leg="payin", reference="6b0e2d4c-3f1a-4c2b-9d8e-7a6b5c4d3e2f")
    assert client.post(unknown, "{}", content_type="application/json").status_code == 200
    assert Event.objects.filter(data_id=payin.id).count() == events
    assert Payin.objects.get(pk=payin.id).status == "completed"


def test_a_declined_payin_keeps_mtns_raw_code(client, fake_mtn, enabled_merchant, settings):
    settings.ALLOW_PRIVATE_NETWORK_URLS = True
    connection_add(fake_mtn, callback_base="https://cowry.example")
    services.operator_route_set(operator_code="CM_MTN_MOMO", name=CONNECTION, at=timezone.now())
    selectors.memo_forget()
    fake_mtn.switches.lose_callbacks = True
    fake_mtn.switches.declines = {CM_PHONE[1:]: "NOT_ENOUGH_FUNDS"}
    api = MerchantClient(enabled_merchant)
    customer = create_customer(api, phone=CM_PHONE)
    payin_id = api.post("/payins", payin_body(cm_quote(api), customer, CM_PHONE)).json()["id"]
    path = _path(leg="payin", reference=payin_id)
    assert client.post(path, "{}", content_type="application/json").status_code == 200
    payin = Payin.objects.get(pk=payin_id)
    assert (payin.status, payin.failure_reason) == ("failed", "insufficient_funds")
    assert ProviderAnswer.objects.get(reference=payin_id).raw_code == "NOT_ENOUGH_FUNDS"
    assert api.get(f"/payins/{payin_id}").json()["history"][-1]["reason"] == "insufficient_funds"
    tokens_forget()


def test_a_409_is_read_not_failed(fake_mtn, pending_payin):
    """A resubmission of a leg MTN has (a retry after a lost receipt): 409, then its status."""
    from payments.services.submission import payin_submit

    Payin.objects.filter(pk=pending_payin.id).update(provider_reference="")
    payin_submit(payin_id=pending_payin.id, now=timezone.now())
    payin = Payin.objects.get(pk=pending_payin.id)
    assert payin.status == "completed"
    statuses = [s for m, p, ref, s in fake_mtn.requests if p.endswith("/requesttopay")]
    assert statuses == [202, 409]


def test_no_credential_token_or_callback_secret_reaches_a_log_line(
    client, fake_mtn, enabled_merchant, settings, caplog
):
    """Every log line, DEBUG included (the HTTP client's too), of submissions, a 401 and its new
    token, forged and genuine callbacks, and provider_check OK then FAIL."""
    caplog.set_level(logging.DEBUG)
    settings.ALLOW_PRIVATE_NETWORK_URLS = True
    connection_add(fake_mtn, callback_base="https://cowry.example")
    services.operator_route_set(operator_code="CM_MTN_MOMO", name=CONNECTION, at=timezone.now())
    selectors.memo_forget()
    fake_mtn.switches.lose_callbacks = True
    api = MerchantClient(enabled_merchant)
    customer = create_customer(api, phone=CM_PHONE)
    payin_id = api.post("/payins", payin_body(cm_quote(api), customer, CM_PHONE)).json()["id"]
    tokens = set(fake_mtn.tokens)
    forged = _path(leg="payin", reference=payin_id, secret="forged")
    assert client.post(forged, "{}", content_type="application/json").status_code == 403
    path = _path(leg="payin", reference=payin_id)
    assert client.post(path, "{}", content_type="application/json").status_code == 200
    assert Payin.objects.get(pk=payin_id).status == "completed"
    fake_mtn.expire_tokens()  # the next call is a 401, then a new token
    api.post("/payins", payin_body(cm_quote(api), customer, CM_PHONE))
    tokens |= set(fake_mtn.tokens)
    call_command("provider_check", CONNECTION, "--msisdn", CM_PHONE[1:], stdout=io.StringIO())
    tokens |= set(fake_mtn.tokens)
    wrong = json.loads(json.dumps(fake_mtn.credentials))
    wrong["collection"]["api_key"] = "not-the-key"
    wrong["disbursement"]["subscription_key"] = "not-the-subscription-key"
    services.connection_update(name=CONNECTION, credentials=wrong, at=timezone.now())
    with pytest.raises(SystemExit):
        call_command("provider_check", CONNECTION, stdout=io.StringIO())

    logged = caplog.text
    assert "Provider callback refused" in logged
    assert '"POST /disbursement/token/ HTTP/1.1" 401' in logged  # the HTTP client's DEBUG lines
    credentials = [*fake_mtn.credentials.values(), *wrong.values()]
    secrets_ = [value for each in credentials for value in each.values()]
    secrets_ += [selectors.connection_settings(CONNECTION).callback_secret, *tokens]
    assert len(tokens) >= 2
    for secret in secrets_:
        assert secret not in logged
    tokens_forget()
