"""The main support changelists: found by the merchant's name, in a pinned number of queries
whatever the number of rows (an N+1 cannot creep in unnoticed), and merchant staff learn
nothing of another merchant through them. A change of a number here must be deliberate."""

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from tests.dashboard.conftest import shown_choices
from tests.dashboard.test_admin_scoping import _build_merchant_world, _result_pks
from tests.factories import MerchantFactory

pytestmark = pytest.mark.django_db

PAYMENT_PAGES = [
    ("/admin/payments/payin/", "payins"),
    ("/admin/payments/payout/", "payouts"),
    ("/admin/transfers/transfer/", "transfers"),
]
# A searched page: the session, the user, support or not, the membership, the merchant
# filter's merchants, the count of what matched (never of the whole table besides), the
# user's permissions (2), the page's rows, the date hierarchy (2) and the catalog's operator
# codes (transfers: corridor, payer and recipient operator codes; currencies are constants).
SEARCHED_PAGE_QUERIES = {"payins": 13, "payouts": 13, "transfers": 15}


@pytest.fixture
def worlds(settings, django_capture_on_commit_callbacks):
    """Three merchants, each with a customer, a payin, a payout, a transfer, their events and
    deliveries, made through the API; two of them share the word "Trading"."""
    merchants = [
        MerchantFactory(name=name) for name in ("Alpha Trading", "Bravo Trading", "Charlie Foods")
    ]
    for merchant in merchants:
        with django_capture_on_commit_callbacks(execute=True):
            _build_merchant_world(merchant, settings)
    return merchants


def _get(client, page: str, params: dict | None = None):
    with CaptureQueriesContext(connection) as queries:
        response = client.get(page, params or {})
    assert response.status_code == 200
    return response, len(queries)


@pytest.mark.parametrize(("page", "related"), PAYMENT_PAGES)
def test_support_finds_a_merchants_payments_by_its_name_in_a_pinned_number_of_queries(
    worlds, staff_client, page, related
):
    alpha, bravo, _ = worlds
    support = staff_client(support=True)
    support.get(page)  # the session's first read of the user is not the page's

    response, queries = _get(support, page, {"q": "bravo"})
    assert _result_pks(response) == set(getattr(bravo, related).values_list("pk", flat=True))
    assert queries == SEARCHED_PAGE_QUERIES[related]

    response, _ = _get(support, page, {"q": "Trading"})
    expected = {
        pk for m in (alpha, bravo) for pk in getattr(m, related).values_list("pk", flat=True)
    }
    assert _result_pks(response) == expected


@pytest.mark.parametrize(("page", "related"), PAYMENT_PAGES)
def test_merchant_staff_learn_no_other_merchants_name_by_searching(
    worlds, staff_client, page, related
):
    charlie = worlds[2]
    staff = staff_client(merchant=charlie, role="viewer")
    own = set(getattr(charlie, related).values_list("pk", flat=True))

    for term in ("Alpha", "bravo trading", "Trading", "Brav"):
        response, _ = _get(staff, page, {"q": term})
        assert _result_pks(response) == set(), term
        page_text = response.content.decode()
        assert "Alpha Trading" not in page_text and "Bravo Trading" not in page_text, term
    for term in ("Charlie", "foods", "a"):  # "a" is in every merchant's name
        response, _ = _get(staff, page, {"q": term})
        assert _result_pks(response) == own, term
        assert "Alpha Trading" not in response.content.decode()


COUNTED_PAGES = [
    ("/admin/payments/payin/", "payments_payin"),
    ("/admin/payments/payout/", "payments_payout"),
    ("/admin/transfers/transfer/", "transfers_transfer"),
    ("/admin/webhooks/event/", "webhooks_event"),
    ("/admin/webhooks/delivery/", "webhooks_delivery"),
    ("/admin/customers/customer/", "customers_customer"),
]
# Every main support changelist, for support and for merchant staff: the session, the user,
# whether the user has a second factor (1),
# support or not, the membership and its merchant (support: the merchant filter's merchants),
# the count of what matched (not of everything too: show_full_result_count is off), the
# user's permissions (2), the page's rows, then per page: payins, payouts and transfers their
# date hierarchy (2) and the catalog's codes for their filters (1; transfers 3: corridors and
# operators twice), events their date hierarchy (2); event types and currencies are
# constants, never read from the table. Nothing per row.
CHANGELIST_QUERIES = {
    "/admin/payments/payin/": 13,
    "/admin/payments/payout/": 13,
    "/admin/transfers/transfer/": 15,
    "/admin/webhooks/event/": 12,
    "/admin/webhooks/delivery/": 10,
    "/admin/customers/customer/": 10,
}


@pytest.mark.parametrize("page", CHANGELIST_QUERIES)
def test_a_support_changelist_takes_the_same_pinned_queries_for_more_rows(
    settings, django_capture_on_commit_callbacks, staff_client, page
):
    merchants = [MerchantFactory(name=name) for name in ("Alpha", "Bravo", "Charlie")]
    for merchant in merchants[:2]:
        with django_capture_on_commit_callbacks(execute=True):
            _build_merchant_world(merchant, settings)
    support = staff_client(support=True)
    support.get(page)  # the session's first read of the user is not the page's
    fewer, fewer_queries = _get(support, page)

    with django_capture_on_commit_callbacks(execute=True):
        _build_merchant_world(merchants[2], settings)
    more, more_queries = _get(support, page)

    rows = len(fewer.context["cl"].result_list), len(more.context["cl"].result_list)
    assert 2 <= rows[0] < rows[1], rows
    assert (fewer_queries, more_queries) == (CHANGELIST_QUERIES[page],) * 2


@pytest.mark.parametrize("page", CHANGELIST_QUERIES)
def test_a_changelist_takes_merchant_staff_the_pinned_queries(worlds, staff_client, page):
    staff = staff_client(merchant=worlds[0], role="viewer")
    staff.get(page)
    response, queries = _get(staff, page)
    assert response.context["cl"].result_list
    assert queries == CHANGELIST_QUERIES[page]


def _client(worlds, staff_client, who: str) -> Client:
    """A logged-in browser: ops (a journal is theirs alone), support, or merchant staff."""
    if who == "ops":
        client = Client()
        client.force_login(get_user_model().objects.create_superuser("olu", password="pw-1234567"))
        return client
    if who == "support":
        return staff_client(support=True)
    return staff_client(merchant=worlds[0], role="viewer")


@pytest.mark.parametrize(
    ("page", "table"),
    [
        ("/admin/payments/payin/", "payments_payin"),
        ("/admin/payments/payout/", "payments_payout"),
        ("/admin/transfers/transfer/", "transfers_transfer"),
        ("/admin/customers/customer/", "customers_customer"),
    ],
)
def test_a_changelists_rows_are_read_with_their_merchant_and_nothing_else(
    worlds, staff_client, page, table
):
    support = staff_client(support=True)
    with CaptureQueriesContext(connection) as queries:
        assert support.get(page).status_code == 200
    rows_query = next(
        query["sql"]
        for query in queries.captured_queries
        if query["sql"].startswith(f'SELECT "{table}"."id"')
    )
    assert rows_query.count(" JOIN ") == 1 and 'JOIN "merchants_merchant"' in rows_query


def _counts(queries, table: str) -> list[str]:
    return [
        query["sql"]
        for query in queries.captured_queries
        if query["sql"].startswith("SELECT COUNT(*)") and f'"{table}"' in query["sql"]
    ]


@pytest.mark.parametrize(("page", "table"), COUNTED_PAGES)
def test_a_changelist_counts_only_what_it_shows_exactly_while_it_is_small(
    worlds, staff_client, page, table
):
    support = staff_client(support=True)
    support.get(page)
    with CaptureQueriesContext(connection) as queries:
        response = support.get(page)
    cl = response.context["cl"]
    assert cl.result_count == len(cl.result_list) >= 3
    # one count, stopped at the limit: never a second one of the whole table
    (count,) = _counts(queries, table)
    assert " LIMIT 10001" in count


@pytest.mark.parametrize(("page", "table"), COUNTED_PAGES)
@pytest.mark.parametrize("who", ["support", "merchant staff"])
def test_a_long_changelist_takes_the_planners_estimate_and_never_counts_every_row(
    worlds, staff_client, settings, page, table, who
):
    settings.DASHBOARD_EXACT_COUNT_LIMIT = 0  # every list is long
    client = _client(worlds, staff_client, who)
    client.get(page)
    with CaptureQueriesContext(connection) as queries:
        response = client.get(page)
    cl = response.context["cl"]
    assert cl.result_list and cl.result_count >= 1  # the estimate, never below the limit
    (count,) = _counts(queries, table)
    assert " LIMIT 1)" in count  # read up to the limit and one more, no further
    assert [q for q in queries.captured_queries if q["sql"].startswith("EXPLAIN ")]


@pytest.mark.parametrize("status", [None, "succeeded", "failed", "pending"])
def test_the_event_list_is_never_distinct_and_filters_by_delivery_status_with_exists(
    worlds, staff_client, status
):
    from webhooks.models import Delivery, Event

    event = Event.objects.filter(deliveries__isnull=False).first()
    delivery = event.deliveries.first()
    Delivery.objects.create(  # a second delivery of the same event, in the same status
        event=event,
        endpoint=delivery.endpoint,
        status=delivery.status,
        next_attempt_at=delivery.next_attempt_at,
        created_at=delivery.created_at,
        updated_at=delivery.updated_at,
    )
    support = staff_client(support=True)
    support.get("/admin/webhooks/event/")
    with CaptureQueriesContext(connection) as queries:
        response = support.get(
            "/admin/webhooks/event/", {"deliveries__status": status} if status else {}
        )

    shown = [obj.pk for obj in response.context["cl"].result_list]
    expected = Event.objects.all()
    if status:
        expected = expected.filter(deliveries__status=status)
    assert sorted(shown) == sorted(set(expected.values_list("pk", flat=True)))  # each once
    event_queries = [q["sql"] for q in queries.captured_queries if '"webhooks_event"' in q["sql"]]
    # no DISTINCT over the event's columns, its payload and body (the rows, the count)
    assert not [sql for sql in event_queries if "DISTINCT" in sql and '"body"' in sql]
    rows_query = next(sql for sql in event_queries if sql.startswith('SELECT "webhooks_event"'))
    assert ("EXISTS(" in rows_query) == bool(status)
    assert 'JOIN "webhooks_delivery"' not in rows_query


def _plan_without_sorting(sql: str) -> str:
    """PostgreSQL's plan for the query when it may not sort (a sort costs it the earth): a plan
    with a Sort node left in it has no index that gives the rows in the page's order."""
    with connection.cursor() as cursor:
        cursor.execute("SET enable_sort = off")
        try:
            cursor.execute(f"EXPLAIN {sql}")
            return "\n".join(row[0] for row in cursor.fetchall())
        finally:
            cursor.execute("RESET enable_sort")


@pytest.mark.parametrize(
    ("page", "table", "who"),
    [
        *[(page, table, "support") for page, table in COUNTED_PAGES],
        ("/admin/payments/journal/", "payments_journal", "ops"),
        *[(page, table, "merchant staff") for page, table in COUNTED_PAGES],
    ],
)
def test_a_changelists_page_is_read_in_an_indexs_order_not_sorted(
    worlds, staff_client, page, table, who
):
    client = _client(worlds, staff_client, who)
    client.get(page)
    with CaptureQueriesContext(connection) as queries:
        assert client.get(page).status_code == 200
    rows_query = next(
        query["sql"]
        for query in queries.captured_queries
        if query["sql"].startswith(f'SELECT "{table}"."id"')
    )
    assert f'ORDER BY "{table}"."created_at" DESC, "{table}"."id" DESC' in rows_query
    plan = _plan_without_sorting(rows_query)
    assert "Sort" not in plan, plan


@pytest.mark.parametrize(("page", "table"), COUNTED_PAGES)
@pytest.mark.parametrize("who", ["support", "merchant staff"])
def test_a_changelists_filters_offer_known_values_without_reading_the_table(
    worlds, staff_client, page, table, who
):
    client = _client(worlds, staff_client, who)
    client.get(page)
    with CaptureQueriesContext(connection) as queries:
        response = client.get(page)
    # Django's choices for a column were SELECT DISTINCT "table"."column" over the table
    assert not [
        q["sql"] for q in queries.captured_queries if q["sql"].startswith('SELECT DISTINCT "')
    ]
    cl = response.context["cl"]
    choices = {spec.title: shown_choices(spec, cl) for spec in cl.filter_specs}
    if table in ("payments_payin", "payments_payout"):
        assert {"SN_ORANGE_MOMO", "SN_WAVE_MOMO"} <= set(choices["operator code"])
        assert choices["send currency"] == ["All", "XAF", "XOF"]
    if table == "transfers_transfer":
        assert "SN-SN-XOF-XOF" in choices["corridor code"]
    if table in ("webhooks_event", "webhooks_delivery"):
        assert "payin.completed" in choices["event type"]
