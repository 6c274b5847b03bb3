"""A search that is one whole id or provider reference, pasted from a merchant's ticket, finds
its row by equality through an index (core.dashboard.ExactSearchMixin): never by
UPPER(id::text), a cast or a LIKE, which read every row. Pinned by the SQL's shape and the
plan's, never a time. Merchant staff find only their own rows; every other search is Django's."""

import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from customers.models import Customer
from payments import provider
from payments.models import Payin, Payout
from payments.provider import simulator
from tests.dashboard.test_admin_scoping import _result_pks
from tests.dashboard.test_changelists import worlds  # noqa: F401 (a fixture)
from transfers.models import Transfer, TransferDisbursementAttempt

pytestmark = pytest.mark.django_db

PAGES = {
    Payin: ("/admin/payments/payin/", "payments_payin"),
    Payout: ("/admin/payments/payout/", "payments_payout"),
    Transfer: ("/admin/transfers/transfer/", "transfers_transfer"),
}


def _reference() -> str:
    return "SIM-" + uuid.uuid4().hex[:20]


@pytest.fixture
def referenced(worlds):  # noqa: F811
    """Every payin, payout and transfer with provider references of its own, and each
    transfer with an answered attempt whose reference is no longer in its columns."""
    for model in (Payin, Payout):
        for row in model.objects.all():
            model.objects.filter(pk=row.pk).update(provider_reference=_reference())
    for transfer in Transfer.objects.all():
        Transfer.objects.filter(pk=transfer.pk).update(
            collection_reference=_reference(), disbursement_reference=_reference()
        )
        TransferDisbursementAttempt.objects.create(
            transfer=transfer,
            attempt=99,
            provider_reference=_reference(),
            payout_amount=transfer.payout_amount,
            payout_currency=transfer.payout_currency,
            recipient_operator_code=transfer.recipient_operator_code,
            outcome="failed",
        )
    return worlds


def _search(client, model, term: str):
    page, table = PAGES[model]
    client.get(page)  # the session's first read of the user is not the page's
    with CaptureQueriesContext(connection) as queries:
        response = client.get(page, {"q": term})
    assert response.status_code == 200
    on_table = [q["sql"] for q in queries.captured_queries if f'"{table}"' in q["sql"]]
    return _result_pks(response), on_table


def _assert_exact(sqls: list[str]) -> None:
    assert sqls
    for sql in sqls:
        assert "UPPER(" not in sql and "::text" not in sql and "LIKE" not in sql, sql


def _terms(row) -> list[str]:
    """The whole ids and references of a row support may paste."""
    if isinstance(row, Transfer):
        attempt = row.disbursement_attempts.get(attempt=99)
        return [
            str(row.pk),
            str(row.customer_id),
            row.collection_reference,
            row.disbursement_reference,
            attempt.provider_reference,
        ]
    return [str(row.pk), str(row.quote_id), str(row.customer_id), row.provider_reference]


def test_the_simulators_references_are_whole_references():
    reference = simulator._provider_reference("collection", "payin-1")
    assert any(form.fullmatch(reference) for form in provider.REFERENCE_FORMS)
    assert not any(form.fullmatch(reference[:-1]) for form in provider.REFERENCE_FORMS)


@pytest.mark.parametrize("model", list(PAGES))
def test_support_finds_a_pasted_id_or_reference_by_equality(referenced, staff_client, model):
    support = staff_client(support=True)
    row = model.objects.filter(merchant=referenced[1]).first()
    for term in _terms(row):
        found, sqls = _search(support, model, f"  {term} ")  # pasted with blanks round it
        expected = {row.pk}
        if term == str(row.customer_id):  # the customer's rows, this one among them
            expected = set(model.objects.filter(customer_id=row.customer_id).values_list("pk"))
            expected = {pk for (pk,) in expected}
        assert found == expected, term
        _assert_exact(sqls)
    # a UUID without its hyphens or in capitals is the same id
    found, sqls = _search(support, model, row.pk.hex.upper())
    assert found == {row.pk}
    _assert_exact(sqls)


@pytest.mark.parametrize("model", list(PAGES))
def test_merchant_staff_find_their_own_row_by_its_id_and_never_anothers(
    referenced, staff_client, model
):
    alpha, bravo, _ = referenced
    staff = staff_client(merchant=alpha, role="viewer")
    own = model.objects.filter(merchant=alpha).first()
    for term in _terms(own)[::3]:  # its id and one of its references
        found, sqls = _search(staff, model, term)
        assert found == {own.pk}, term
        _assert_exact(sqls)
    other = model.objects.filter(merchant=bravo).first()
    for term in _terms(other):
        found, _ = _search(staff, model, term)
        assert found == set(), term


@pytest.mark.parametrize("model", list(PAGES))
def test_a_pasted_ids_rows_are_read_through_an_index(referenced, staff_client, model):
    """Support's search, the one over every merchant's rows. (Merchant staff's narrows by the
    merchant first: on a test's few rows the planner reads them all through its index.)"""
    support = staff_client(support=True)
    row = model.objects.filter(merchant=referenced[0]).first()
    _, table = PAGES[model]
    for term in _terms(row):
        _, sqls = _search(support, model, term)
        rows_query = next(sql for sql in sqls if sql.startswith(f'SELECT "{table}"."id"'))
        with connection.cursor() as cursor:
            cursor.execute("SET enable_seqscan = off")  # a test's tiny table is cheaper to scan
            try:
                cursor.execute(f"EXPLAIN {rows_query}")
                plan = "\n".join(line for (line,) in cursor.fetchall())
            finally:
                cursor.execute("RESET enable_seqscan")
        # every condition of the search is an index's, none a filter over rows read anyway
        assert f"Seq Scan on {table}" not in plan and "Filter:" not in plan, (term, plan)
        assert "Index Cond" in plan, (term, plan)


@pytest.mark.parametrize("model", list(PAGES))
def test_other_searches_are_djangos_as_before(referenced, staff_client, model):
    support = staff_client(support=True)
    row = model.objects.filter(merchant=referenced[1]).first()
    # a part of an id or of a reference, a reference in capitals: contains, any case
    reference = row.provider_reference if model is not Transfer else row.collection_reference
    for term in (reference[:12], reference.upper(), reference[4:]):
        found, sqls = _search(support, model, term)
        assert row.pk in found, term
        assert any("LIKE" in sql for sql in sqls), term
    found, _ = _search(support, model, "Bravo")
    assert found == set(model.objects.filter(merchant=referenced[1]).values_list("pk", flat=True))
    # an external ref that is a UUID itself: no id is it, so Django's search finds it
    external_ref = str(uuid.uuid4())
    Customer.objects.filter(pk=row.customer_id).update(external_ref=external_ref)
    found, _ = _search(support, model, external_ref)
    assert found == set(
        model.objects.filter(customer_id=row.customer_id).values_list("pk", flat=True)
    )
    # a whole id nothing has
    found, _ = _search(support, model, str(uuid.uuid4()))
    assert found == set()
