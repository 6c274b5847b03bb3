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
