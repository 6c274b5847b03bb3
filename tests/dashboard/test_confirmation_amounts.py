"""Each confirmation page of a support action says the money it moves as the lists show it,
"10,200 XOF", not "10200 XOF" (display.amount); the refund's page is in test_refunds."""

import re
from datetime import timedelta

import pytest
from django.utils import timezone
from django.utils.html import strip_tags

from payments.models import Payout
from tests.payments import conftest as payments
from tests.transfers.conftest import (
    SENDER_DETAILS,
    SN_DECLINED,
    SN_SILENT,
    create_customer,
    create_quote,
    transfer_body,
)
from transfers.models import Transfer

pytestmark = pytest.mark.django_db


def consequence(client, url: str) -> str:
    """The confirmation page's sentence on what happens, as its reader sees it."""
    page = client.get(url)
    assert page.status_code == 200, url
    shown = re.search(r'id="consequence"[^>]*>(.*?)</div>', page.content.decode(), re.S).group(1)
    return " ".join(strip_tags(shown).split())


def transfer(api, capture, phone: str) -> Transfer:
    """A transfer of 10,000 XAF (9,800 XOF paid out) whose payout the provider declined, or
    never answers (past its leg timeout)."""
    sender = create_customer(api, **SENDER_DETAILS)
    quote = create_quote(api, customer_id=sender["id"])
    with capture(execute=True):
        created = api.post("/transfers", transfer_body(quote, sender, recipient_phone=phone))
    assert created.status_code == 201, created.json()
    due = timezone.now() - timedelta(seconds=1)
    Transfer.objects.filter(pk=created.json()["id"]).update(leg_timeout_at=due)
    return Transfer.objects.get(pk=created.json()["id"])


def test_a_stuck_payouts_mark_failed_page_says_the_reserve_as_the_lists_do(
    staff_client, enabled_api, enabled_merchant, django_capture_on_commit_callbacks
):
    payments.fund(enabled_merchant, "50000")
    customer = payments.create_customer(enabled_api)
    quote = payments.create_quote(enabled_api, "payout", amount="10000")
    with django_capture_on_commit_callbacks(execute=True):
        payout = enabled_api.post(
            "/payouts", payments.payout_body(quote, customer, payments.SILENT_PHONE)
        ).json()
    due = timezone.now() - timedelta(seconds=1)
    Payout.objects.filter(pk=payout["id"]).update(provider_timeout_at=due)

    said = consequence(
        staff_client(support=True), f"/admin/payments/payout/{payout['id']}/mark-failed/"
    )

    assert said.startswith("The 10,200 XOF reserved for it go back to ")  # 10,000 and the fee


def test_a_transfers_confirmation_pages_say_its_amounts_as_the_lists_do(
    staff_client, enabled_api, django_capture_on_commit_callbacks
):
    support = staff_client(support=True)
    declined = transfer(enabled_api, django_capture_on_commit_callbacks, SN_DECLINED)
    silent = transfer(enabled_api, django_capture_on_commit_callbacks, SN_SILENT)
    page = "/admin/transfers/transfer/{}/{}/"

    relaunch = consequence(support, page.format(declined.pk, "relaunch"))
    mark_failed = consequence(support, page.format(silent.pk, "mark-failed"))

    assert relaunch.startswith("9,800 XOF is sent again to the same recipient")
    assert "; the 10,000 XAF collected stay held, to relaunch or return." in mark_failed
