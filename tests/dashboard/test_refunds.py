"""The dashboard's refunds: the owner's Refund button and confirmation, the read-only pages."""

from decimal import Decimal

import pytest
from django.utils.html import strip_tags

from payments.models import Refund
from tests.dashboard.conftest import page_token
from tests.support import wallet_balance

pytestmark = pytest.mark.django_db


def confirm(client, refund_url: str, data: dict):
    """The confirmation page shown, then submitted with `data` and the page's one-time token."""
    return client.post(refund_url, {**data, "token": page_token(client.get(refund_url))})


def test_the_owner_refunds_a_payin_after_a_confirmation_saying_what_leaves_the_wallet(
    staff_client, enabled_merchant, completed_payin, django_capture_on_commit_callbacks
):
    owner = staff_client(merchant=enabled_merchant, role="owner")
    page = owner.get(f"/admin/payments/payin/{completed_payin['id']}/change/")
    refund_url = f"/admin/payments/payin/{completed_payin['id']}/refund/"
    assert refund_url in page.content.decode()
    confirmation = owner.get(refund_url)
    assert confirmation.status_code == 200
    text = " ".join(strip_tags(confirmation.content.decode()).split())
    assert "leaves your wallet" in text and "10000" not in text  # as the lists show amounts
    assert "paid 10,000 XOF; 10,000 XOF can still be refunded" in text

    with django_capture_on_commit_callbacks(execute=True):
        response = confirm(owner, refund_url, {"amount": "2500", "reason": "Order cancelled"})
    refund = Refund.objects.get()
    assert response.status_code == 302
    assert response["Location"] == f"/admin/payments/refund/{refund.pk}/change/"
    assert (refund.amount, refund.status, refund.reason) == (
        Decimal("2500"),
        "completed",
        "Order cancelled",
    )
    assert wallet_balance(merchant=enabled_merchant, currency="XOF") == (
        Decimal("7350"),
        Decimal("0"),
    )
    assert owner.get(f"/admin/payments/refund/{refund.pk}/change/").status_code == 200
    assert owner.get("/admin/payments/refund/").status_code == 200
    history = owner.get(f"/admin/payments/payin/{completed_payin['id']}/history/")
    assert "Refunded 2,500 XOF" in history.content.decode()
    assert "Reason: Order cancelled" in history.content.decode()


def test_a_refund_beyond_the_wallet_is_refused_on_the_confirmation_page(
    staff_client, enabled_merchant, completed_payin
):
    owner = staff_client(merchant=enabled_merchant, role="owner")
    response = confirm(owner, f"/admin/payments/payin/{completed_payin['id']}/refund/", {})
    assert response.status_code == 200
    assert "available balance is too low" in response.content.decode()
    assert Refund.objects.count() == 0


def test_only_the_owner_sees_and_uses_the_refund_button(
    staff_client, enabled_merchant, completed_payin
):
    refund_url = f"/admin/payments/payin/{completed_payin['id']}/refund/"
    for client in (
        staff_client(merchant=enabled_merchant, role="developer"),
        staff_client(support=True),
    ):
        page = client.get(f"/admin/payments/payin/{completed_payin['id']}/change/")
        assert page.status_code == 200
        assert refund_url not in page.content.decode()
        assert client.post(refund_url, {"amount": "100"}).status_code == 403
    assert Refund.objects.count() == 0


def test_support_sees_every_merchants_refunds_and_staff_only_their_own(
    staff_client,
    enabled_merchant,
    completed_payin,
    other_merchant,
    django_capture_on_commit_callbacks,
):
    owner = staff_client(merchant=enabled_merchant, role="owner")
    with django_capture_on_commit_callbacks(execute=True):
        confirm(owner, f"/admin/payments/payin/{completed_payin['id']}/refund/", {"amount": "100"})
    refund = Refund.objects.get()
    page = f"/admin/payments/refund/{refund.pk}/change/"
    assert staff_client(support=True).get(page).status_code == 200
    stranger = staff_client(merchant=other_merchant, role="owner")
    assert stranger.get(page).status_code == 404
    assert str(refund.pk) not in stranger.get("/admin/payments/refund/").content.decode()
