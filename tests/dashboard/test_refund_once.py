"""The Refund button's confirmation creates one refund however often it is sent: its one-time
token is the refund's idempotency key, the API's own path (merchants.idempotency.run_keyed)."""

import time
from decimal import Decimal

import pytest
from django.db import transaction
from django.test import Client

from payments.models import Journal, Payin, Refund
from tests import locks
from tests.dashboard.conftest import page_token
from tests.support import wallet_balance

pytestmark = pytest.mark.django_db


def refund_url(payin: dict) -> str:
    return f"/admin/payments/payin/{payin['id']}/refund/"


def reservations() -> int:
    return Journal.objects.filter(kind="refund_reserved", resource_type="refund").count()


def test_the_same_confirmation_sent_twice_creates_one_refund_and_shows_it(
    staff_client, enabled_merchant, completed_payin, django_capture_on_commit_callbacks
):
    owner = staff_client(merchant=enabled_merchant, role="owner")
    url = refund_url(completed_payin)
    form = {"amount": "2500", "reason": "Order cancelled", "token": page_token(owner.get(url))}

    with django_capture_on_commit_callbacks(execute=True):
        first = owner.post(url, form)
    second = owner.post(url, form, follow=True)  # a double click, or back and submit again

    refund = Refund.objects.get()
    assert first.status_code == 302
    assert first["Location"] == f"/admin/payments/refund/{refund.pk}/change/"
    assert second.redirect_chain == [(first["Location"], 302)]
    assert "was already created; nothing more leaves the wallet" in second.content.decode()
    assert (refund.amount, refund.status) == (Decimal("2500"), "completed")
    assert reservations() == 1
    assert wallet_balance(merchant=enabled_merchant, currency="XOF") == (
        Decimal("7350"),
        Decimal("0"),
    )
    history = owner.get(f"/admin/payments/payin/{completed_payin['id']}/history/")
    assert history.content.decode().count("Refunded 2,500 XOF") == 1


def test_the_page_shown_again_is_a_new_confirmation(
    staff_client, enabled_merchant, completed_payin
):
    owner = staff_client(merchant=enabled_merchant, role="owner")
    url = refund_url(completed_payin)
    tokens = [page_token(owner.get(url)) for _ in range(2)]
    assert tokens[0] != tokens[1]
    for token in tokens:
        assert owner.post(url, {"amount": "1000", "token": token}).status_code == 302
    assert Refund.objects.count() == reservations() == 2


def test_a_confirmation_sent_again_for_another_amount_creates_nothing_more(
    staff_client, enabled_merchant, completed_payin
):
    owner = staff_client(merchant=enabled_merchant, role="owner")
    url = refund_url(completed_payin)
    token = page_token(owner.get(url))
    assert owner.post(url, {"amount": "2500", "token": token}).status_code == 302

    again = owner.post(url, {"amount": "3000", "token": token})

    assert again.status_code == 200
    assert "already confirmed for another refund" in again.content.decode()
    assert page_token(again) != token
    assert Refund.objects.count() == reservations() == 1


@pytest.mark.parametrize("token", [None, "", "short", "x" * 31 + "!"])
def test_a_submit_without_its_pages_token_creates_nothing(
    staff_client, enabled_merchant, completed_payin, token
):
    owner = staff_client(merchant=enabled_merchant, role="owner")
    form = {"amount": "2500"} | ({} if token is None else {"token": token})

    response = owner.post(refund_url(completed_payin), form)

    assert response.status_code == 200
    assert "This page is out of date" in response.content.decode()
    assert page_token(response)
    assert Refund.objects.count() == reservations() == 0


@pytest.mark.django_db(transaction=True)
def test_a_double_click_while_the_first_submit_runs_creates_one_refund(
    staff_client, enabled_merchant, completed_payin
):
    owner = staff_client(merchant=enabled_merchant, role="owner")
    url = refund_url(completed_payin)
    form = {"amount": "2500", "token": page_token(owner.get(url))}
    clicks = [owner, Client()]
    clicks[1].cookies.update(owner.cookies)  # the same browser's session
    answers: list = []
    with transaction.atomic():  # the first submit to claim the token waits on the payin's lock
        Payin.objects.select_for_update().get(pk=completed_payin["id"])
        threads = [locks.start(lambda c=c: c.post(url, form), answers) for c in clicks]
        locks.waiting_for_a_lock(1)
        deadline = time.monotonic() + 30
        while not answers and time.monotonic() < deadline:  # the other found it in progress
            time.sleep(0.01)
    for thread in threads:
        thread.join(timeout=30)

    refund = Refund.objects.get()
    assert sorted(answer["Location"] for answer in answers) == [
        f"/admin/payments/payin/{completed_payin['id']}/change/",
        f"/admin/payments/refund/{refund.pk}/change/",
    ]
    assert reservations() == 1
