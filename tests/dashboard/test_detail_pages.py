"""A payment's page reads as fields, not JSON, with times in ISO 8601 (seconds and zone)."""

import re

import pytest

from tests.payments.conftest import create_customer, create_quote, payin_body

pytestmark = pytest.mark.django_db

ISO_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")


def test_a_payins_page_shows_labelled_pricing_and_iso_times(enabled_api, staff_client):
    customer = create_customer(enabled_api)
    payin = enabled_api.post("/payins", payin_body(create_quote(enabled_api, "payin"), customer))
    support = staff_client(support=True)

    page = support.get(f"/admin/payments/payin/{payin.json()['id']}/change/").content.decode()

    assert 'class="labelled"' in page
    assert "credit amount" in page  # the wallet impact, as a labelled field
    assert "locked at" in page  # the pricing's own fields
    assert "{&quot;credit_amount" not in page and '{"credit_amount' not in page  # no JSON
    assert ISO_TIME.search(page)
    assert not re.search(r"\b(a\.m\.|p\.m\.|noon|midnight)", page)


def test_a_wallets_page_has_a_statement_button_for_its_own_merchant_only(
    merchant, other_merchant, staff_client
):
    from decimal import Decimal

    from django.utils import timezone

    from payments.ledger.adjustments import wallet_credit
    from payments.models import Wallet

    for owner in (merchant, other_merchant):
        wallet_credit(
            merchant=owner, currency="XOF", amount=Decimal("100"), reason="f", at=timezone.now()
        )
    mine = Wallet.objects.get(merchant=merchant)
    theirs = Wallet.objects.get(merchant=other_merchant)
    viewer = staff_client(merchant=merchant, role="viewer")

    page = viewer.get(f"/admin/payments/wallet/{mine.pk}/change/").content.decode()
    button = f"/admin/payments/wallet/{mine.pk}/statement/"
    assert button in page
    opened = viewer.get(button)
    assert opened.status_code == 302
    assert f"merchant={merchant.pk}" in opened["Location"] and "currency=XOF" in opened["Location"]
    assert viewer.get(f"/admin/payments/wallet/{theirs.pk}/statement/").status_code == 404
