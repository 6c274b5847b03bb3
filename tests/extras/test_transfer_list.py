"""GET /transfers: newest first, cursor pages, filters, scoping, query count."""

import pytest
from rest_framework.test import APIClient

from tests.extras.conftest import walk
from tests.transfers.conftest import (
    SENDER_DETAILS,
    SN_DECLINED,
    create_customer,
    create_quote,
    transfer_body,
)

pytestmark = pytest.mark.django_db


def make_transfer(api, customer, *, recipient_phone=None, settle=None) -> dict:
    quote = create_quote(api, customer_id=customer["id"])
    body = transfer_body(quote, customer)
    if recipient_phone:
        body = transfer_body(quote, customer, recipient_phone=recipient_phone)
    if settle:
        with settle(execute=True):
            response = api.post("/transfers", body)
    else:
        response = api.post("/transfers", body)
    assert response.status_code == 201, response.json()
    return response.json()


@pytest.fixture
def sender(enabled_api):
    return create_customer(enabled_api, **SENDER_DETAILS)


def test_transfers_are_listed_newest_first_and_like_get_by_id(enabled_api, sender):
    made = [make_transfer(enabled_api, sender)["id"] for _ in range(3)]

    items = walk(enabled_api, "/transfers", limit=2)

    assert [t["id"] for t in items] == made[::-1]
    assert items[0] == enabled_api.get(f"/transfers/{made[-1]}").json()


def test_transfer_filters_status_and_customer(
    enabled_api, sender, django_capture_on_commit_callbacks
):
    other = create_customer(enabled_api, **SENDER_DETAILS)
    failed = make_transfer(
        enabled_api, sender, recipient_phone=SN_DECLINED, settle=django_capture_on_commit_callbacks
    )
    completed = make_transfer(enabled_api, other, settle=django_capture_on_commit_callbacks)

    def ids(**params):
        response = enabled_api.get("/transfers", **params)
        assert response.status_code == 200, response.json()
        return [t["id"] for t in response.json()["data"]]

    assert ids(status="failed") == [failed["id"]]
    assert ids(status="completed") == [completed["id"]]
    assert ids(customer_id=sender["id"]) == [failed["id"]]
    assert enabled_api.get("/transfers", status="lost").status_code == 400


def test_transfers_are_the_merchants_own(enabled_api, sender, api):
    make_transfer(enabled_api, sender)

    assert api.get("/transfers").json()["data"] == []
    assert APIClient().get("/transfers").status_code == 401


def test_a_transfer_page_costs_a_fixed_number_of_queries(
    enabled_api, sender, django_assert_max_num_queries
):
    for _ in range(5):
        make_transfer(enabled_api, sender)
    first = enabled_api.get("/transfers", limit=2).json()

    with django_assert_max_num_queries(6):
        response = enabled_api.get("/transfers", limit=2, cursor=first["next_cursor"])

    assert len(response.json()["data"]) == 2
