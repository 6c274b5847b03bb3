"""A payin's, payout's, refund's and transfer's page leads with its header (amount, status,
customer, operator, the role's actions), then its timeline, then details with pricing as a
breakdown, every raw column folded last."""

import re

import pytest

from payments.models import Refund
from tests.dashboard.conftest import page_token
from tests.transfers.conftest import SENDER_DETAILS, transfer_body
from tests.transfers.conftest import create_customer as create_sender
from tests.transfers.conftest import create_quote as create_transfer_quote

pytestmark = pytest.mark.django_db


def text_of(response) -> str:
    """The page's text, a space where a tag was (a table's cells apart)."""
    return " ".join(re.sub(r"<[^>]+>", " ", response.content.decode()).split())


def test_a_payins_page_leads_with_amount_status_customer_and_the_refund_button(
    staff_client, enabled_merchant, completed_payin
):
    owner = staff_client(merchant=enabled_merchant, role="owner")
    path = f"/admin/payments/payin/{completed_payin['id']}/change/"
    page = owner.get(path).content.decode()
    header = page[page.index('id="record-header"') : page.index('id="record-timeline"')]
    assert "10,000 XOF" in header and ">completed<" in header
    assert "Awa Diallo" in header and "SN_ORANGE_MOMO" in header
    assert f"/admin/payments/payin/{completed_payin['id']}/refund/" in header
    # then the timeline, then the details; the raw columns folded last
    order = [
        re.search(mark, page).start()
        for mark in ("record-timeline", r">\s*Details\s*<", r">\s*All columns\s*<")
    ]
    assert order == sorted(order)
    assert re.search(r"<details>\s*<summary>[\s\S]{0,600}All columns", page)
    text = text_of(owner.get(path))
    assert "Status: completed" in text and "The provider answered: done" in text
    assert "The customer pays 10,000 XOF Fee -150 XOF Your wallet receives 9,850 XOF" in text

    viewer = staff_client(merchant=enabled_merchant, role="viewer")
    page = viewer.get(path).content.decode()
    header = page[page.index('id="record-header"') : page.index('id="record-timeline"')]
    assert "10,000 XOF" in header and "/refund/" not in header  # only an owner refunds


def test_a_refund_and_who_did_it_and_why_are_on_the_payins_timeline(
    staff_client, enabled_merchant, completed_payin, django_capture_on_commit_callbacks
):
    owner = staff_client(merchant=enabled_merchant, role="owner", username="ama")
    refund_url = f"/admin/payments/payin/{completed_payin['id']}/refund/"
    with django_capture_on_commit_callbacks(execute=True):
        owner.post(
            refund_url,
            {
                "amount": "2500",
                "reason": "Order cancelled",
                "token": page_token(owner.get(refund_url)),
            },
        )
    text = text_of(owner.get(f"/admin/payments/payin/{completed_payin['id']}/change/"))
    assert "Refund of 2,500 XOF: completed Order cancelled" in text
    assert re.search(r"Refunded 2,500 XOF \([0-9a-f-]+\)\. Reason: Order cancelled by ama", text)

    refund = Refund.objects.get()
    text = text_of(owner.get(f"/admin/payments/refund/{refund.pk}/change/"))
    assert "Refund" in text and "2,500 XOF" in text and "Order cancelled" in text


def test_a_transfers_page_leads_with_its_amount_legs_and_rate(
    enabled_api, staff_client, django_capture_on_commit_callbacks
):
    customer = create_sender(enabled_api, **SENDER_DETAILS)
    quote = create_transfer_quote(enabled_api, customer_id=customer["id"])
    with django_capture_on_commit_callbacks(execute=True):
        transfer = enabled_api.post("/transfers", transfer_body(quote, customer)).json()
    support = staff_client(support=True)
    page = support.get(f"/admin/transfers/transfer/{transfer['id']}/change/")
    header = page.content.decode().split('id="record-timeline"')[0]
    assert "10,000 XAF" in header and "record-status" in header
    assert enabled_api.merchant.name in header  # support acts knowing whose it is
    text = text_of(page)
    assert "The payer pays 10,000 XAF" in text and "Exchange rate 1 XAF =" in text
    assert "The collection provider answered: done" in text
