"""GET /customers, /quotes, /payins, /payouts: newest first, cursor pages, filters, scoping."""

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from customers.models import Customer
from quotes.models import Quote
from tests.extras.conftest import (
    DECLINED_PHONE,
    SILENT_PHONE,
    create_customer,
    create_payin,
    create_payout,
    create_quote,
    fund,
    walk,
)

pytestmark = pytest.mark.django_db


def test_customer_list_is_newest_first_and_pages_cover_everything_once(api):
    created = [create_customer(api, external_ref=f"ref-{i}")["id"] for i in range(7)]

    first = api.get("/customers", limit=3).json()
    everything = walk(api, "/customers", limit=3)

    assert [c["id"] for c in first["data"]] == created[::-1][:3]
    assert first["has_more"] is True and isinstance(first["next_cursor"], str)
    assert [c["id"] for c in everything] == created[::-1]


def test_items_are_the_same_as_get_by_id(api):
    customer = create_customer(api, external_ref="same")

    listed = api.get("/customers").json()["data"][0]

    assert listed == api.get(f"/customers/{customer['id']}").json()


def test_rows_with_the_same_created_at_are_neither_skipped_nor_repeated(api):
    ids = {create_customer(api)["id"] for _ in range(5)}
    Customer.objects.filter(merchant=api.merchant).update(created_at=timezone.now())

    pages = walk(api, "/customers", limit=2)

    assert len(pages) == 5 and {c["id"] for c in pages} == ids


def test_rows_created_while_paging_do_not_shift_the_next_page(api):
    older = [create_customer(api)["id"] for _ in range(4)]
    first = api.get("/customers", limit=2).json()
    create_customer(api)

    second = api.get("/customers", limit=2, cursor=first["next_cursor"]).json()

    assert [c["id"] for c in second["data"]] == older[::-1][2:4]
    assert second["has_more"] is False and second["next_cursor"] is None


def test_empty_list(api):
    assert api.get("/customers").json() == {"data": [], "has_more": False, "next_cursor": None}


def test_default_limit_is_20(api):
    Customer.objects.bulk_create(Customer(merchant=api.merchant) for _ in range(21))

    body = api.get("/customers").json()

    assert len(body["data"]) == 20 and body["has_more"] is True


@pytest.mark.parametrize("limit", ["0", "101", "-1", "ten", "2.5"])
def test_invalid_limit_is_a_400_naming_limit(api, limit):
    response = api.get("/customers", limit=limit)

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "bad_request"
    assert "limit" in response.json()["error"]["fields"]


@pytest.mark.parametrize("cursor", ["garbage", "eyJ4Ijox", "W10", "WyJub3QgYSBkYXRlIiwgIngiXQ"])
def test_invalid_cursor_is_a_400_naming_cursor(api, cursor):
    response = api.get("/customers", cursor=cursor)

    assert response.status_code == 400
    assert list(response.json()["error"]["fields"]) == ["cursor"]


def test_unknown_status_is_a_400_naming_status(api):
    response = api.get("/payins", status="done")

    assert response.status_code == 400
    assert list(response.json()["error"]["fields"]) == ["status"]


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"created_gte": "yesterday"}, "created_gte"),
        ({"created_lt": "2024-13-01T00:00:00Z"}, "created_lt"),
        ({"customer_id": "not-a-uuid"}, "customer_id"),
    ],
)
def test_invalid_filters_are_a_400_naming_the_parameter(api, params, field):
    response = api.get("/payouts", **params)

    assert response.status_code == 400
    assert field in response.json()["error"]["fields"]


@pytest.mark.parametrize("gap", [timedelta(0), timedelta(days=-1)])
def test_a_created_lt_not_after_created_gte_is_an_empty_page(api, gap):
    """An empty range is no rows, not an error: every value the schema allows is accepted."""
    create_customer(api)
    since = timezone.now() - timedelta(days=1)
    bounds = {"created_gte": since.isoformat(), "created_lt": (since + gap).isoformat()}

    assert len(api.get("/customers", created_gte=since.isoformat()).json()["data"]) == 1
    for path in (
        "/customers",
        "/quotes",
        "/payins",
        "/payouts",
        "/refunds",
        "/transfers",
        "/events",
    ):
        response = api.get(path, **bounds)
        assert response.status_code == 200, (path, response.content)
        assert response.json() == {"data": [], "has_more": False, "next_cursor": None}


def test_customer_filters_external_ref_status_and_created_range(api):
    a = create_customer(api, external_ref="A")
    b = create_customer(api, external_ref="B")
    Customer.objects.filter(pk=b["id"]).update(status="blocked")
    past = timezone.now() - timedelta(days=3)
    Customer.objects.filter(pk=a["id"]).update(created_at=past)

    by_ref = api.get("/customers", external_ref="A").json()["data"]
    blocked = api.get("/customers", status="blocked").json()["data"]
    recent = api.get("/customers", created_gte=(past + timedelta(days=1)).isoformat()).json()
    old = api.get("/customers", created_lt=(past + timedelta(seconds=1)).isoformat()).json()

    assert [c["id"] for c in by_ref] == [a["id"]]
    assert [c["id"] for c in blocked] == [b["id"]]
    assert [c["id"] for c in recent["data"]] == [b["id"]]
    assert [c["id"] for c in old["data"]] == [a["id"]]


def test_lists_show_only_the_merchants_own_resources(enabled_api, make_api, enabled_merchant):
    mine = create_customer(enabled_api)
    create_payin(enabled_api, mine)
    other = make_api(enabled_merchant.__class__.objects.create(name="Other"))
    from tests.catalog import enable_everything

    enable_everything(other.merchant)
    theirs = create_customer(other)
    create_payin(other, theirs)

    for path in ("/customers", "/quotes", "/payins"):
        ids = {item["id"] for item in other.get(path).json()["data"]}
        mine_ids = {item["id"] for item in enabled_api.get(path).json()["data"]}
        assert ids and mine_ids and not ids & mine_ids
    # A filter on another merchant's customer finds nothing.
    assert other.get("/payins", customer_id=mine["id"]).json()["data"] == []


@pytest.mark.parametrize("path", ["/customers", "/quotes", "/payins", "/payouts"])
def test_lists_need_credentials(db, path):
    response = APIClient().get(path)

    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthorized"


def test_quote_list_filters_status_flow_and_customer(enabled_api, customer):
    payin_quote = create_quote(enabled_api, "payin", customer_id=customer["id"])
    payout_quote = create_quote(enabled_api, "payout")
    expired = create_quote(enabled_api, "payin")
    Quote.objects.filter(pk=expired["id"]).update(expires_at=timezone.now() - timedelta(seconds=1))

    active = {q["id"] for q in enabled_api.get("/quotes", status="active").json()["data"]}
    shown_expired = enabled_api.get("/quotes", status="expired").json()["data"]
    payouts = enabled_api.get("/quotes", flow_type="payout").json()["data"]
    by_customer = enabled_api.get("/quotes", customer_id=customer["id"]).json()["data"]

    assert active == {payin_quote["id"], payout_quote["id"]}
    assert [(q["id"], q["status"]) for q in shown_expired] == [(expired["id"], "expired")]
    assert [q["id"] for q in payouts] == [payout_quote["id"]]
    assert [q["id"] for q in by_customer] == [payin_quote["id"]]


def test_payin_list_filters_by_status_and_customer(
    enabled_api, customer, django_capture_on_commit_callbacks
):
    settle = django_capture_on_commit_callbacks
    other_customer = create_customer(enabled_api)
    failed = create_payin(enabled_api, customer, phone=DECLINED_PHONE, settle=settle)
    pending = create_payin(enabled_api, customer, phone=SILENT_PHONE, settle=settle)
    completed = create_payin(enabled_api, other_customer, settle=settle)

    def ids(**params):
        return [p["id"] for p in enabled_api.get("/payins", **params).json()["data"]]

    assert ids(status="failed") == [failed["id"]]
    assert ids(status="completed") == [completed["id"]]
    assert ids(customer_id=customer["id"]) == [pending["id"], failed["id"]]
    listed = enabled_api.get("/payins", customer_id=other_customer["id"]).json()["data"][0]
    assert listed == enabled_api.get(f"/payins/{completed['id']}").json()


def test_payout_list_filters_by_status(
    enabled_api, enabled_merchant, customer, django_capture_on_commit_callbacks
):
    settle = django_capture_on_commit_callbacks
    fund(enabled_merchant, "100000")
    failed = create_payout(enabled_api, customer, phone=DECLINED_PHONE, settle=settle)
    completed = create_payout(enabled_api, customer, settle=settle)

    failed_ids = [p["id"] for p in enabled_api.get("/payouts", status="failed").json()["data"]]
    all_items = walk(enabled_api, "/payouts", limit=1)

    assert failed_ids == [failed["id"]]
    assert [p["id"] for p in all_items] == [completed["id"], failed["id"]]
    assert all_items[1]["history"]


@pytest.mark.parametrize(
    ("path", "make"),
    [
        ("/customers", lambda api, c: create_customer(api)),
        ("/quotes", lambda api, c: create_quote(api)),
        ("/payins", lambda api, c: create_payin(api, c)),
        ("/payouts", lambda api, c: create_payout(api, c)),
    ],
)
def test_a_page_costs_a_fixed_number_of_queries(
    enabled_api, enabled_merchant, customer, path, make, django_assert_max_num_queries
):
    fund(enabled_merchant, "100000")
    for _ in range(6):
        make(enabled_api, customer)
    first = enabled_api.get(path, limit=5).json()
    assert first["has_more"] is True

    # Auth (key lookup, merchant, last-used), the page, the history prefetch: not one per row.
    with django_assert_max_num_queries(6):
        response = enabled_api.get(path, limit=5, cursor=first["next_cursor"])

    assert response.status_code == 200 and len(response.json()["data"]) >= 1
