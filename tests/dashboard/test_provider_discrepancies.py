import pytest
from django.utils import timezone

from merchants.models import AuditLogEntry
from payments.ledger.discrepancies import provider_discrepancy_resolve
from payments.models import ProviderDiscrepancy
from tests.dashboard.conftest import late_completion

pytestmark = pytest.mark.django_db

CHANGELIST = "/admin/payments/providerdiscrepancy/"


@pytest.fixture
def discrepancy(merchant):
    return late_completion(merchant)


def test_support_sees_and_resolves_a_discrepancy_with_an_audit_entry(discrepancy, staff_client):
    support = staff_client(support=True)
    assert str(discrepancy.resource_id) in support.get(CHANGELIST).content.decode()

    support.post(CHANGELIST, {"action": "mark_resolved", "_selected_action": [discrepancy.pk]})

    discrepancy.refresh_from_db()
    assert discrepancy.resolved_at is not None
    assert discrepancy.resolved_by == "user-support-x"
    assert AuditLogEntry.objects.filter(target=str(discrepancy.resource_id)).count() == 1


def test_mark_resolved_points_support_at_the_ops_commands_that_settle_payins_and_payouts(
    discrepancy, staff_client
):
    """A failed payin or payout the provider completed is settled, and resolved, by
    credit_wallet / debit_wallet --discrepancy: crediting by hand and then clicking "Mark
    resolved" can be forgotten, or done twice."""
    page = staff_client(support=True).get(CHANGELIST).content.decode()

    assert "Mark resolved (reconciled with the provider; a failed payin or payout" in page
    assert "ops run credit_wallet / debit_wallet --discrepancy instead" in page
    assert "reconciled by hand" not in page


def test_mark_resolved_says_a_resolved_transfer_discrepancy_unblocks_relaunch_and_return(
    discrepancy, staff_client
):
    """Both wait for the discrepancy of a transfer's disbursement reported paid, or of its
    collection reported failed: support is told that resolving it lets either go ahead."""
    page = staff_client(support=True).get(CHANGELIST).content.decode()

    assert (
        "a transfer disbursement reported paid, or a transfer collection reported failed: the "
        "provider confirmed it did not pay, or did collect, so the payout can be relaunched or "
        "the collected funds returned to the merchant&#x27;s wallet)"
    ) in page


def test_merchant_staff_do_not_see_the_reconciliation_queue(discrepancy, merchant, staff_client):
    owner = staff_client(merchant=merchant, role="owner")
    assert owner.get(CHANGELIST).status_code == 403
    owner.post(CHANGELIST, {"action": "mark_resolved", "_selected_action": [discrepancy.pk]})
    assert ProviderDiscrepancy.objects.get(pk=discrepancy.pk).resolved_at is None


@pytest.mark.django_db(transaction=True)
def test_racing_clicks_on_mark_resolved_record_one_resolution(merchant):
    """Each click read the discrepancy unresolved and wrote its own audit entry; the row is
    locked first now, and the second finds it resolved."""
    import threading

    from django.contrib.auth import get_user_model
    from django.db import connection

    discrepancy = late_completion(merchant, reference="ref-race")
    agents = [get_user_model().objects.create_user(f"agent-{i}", is_staff=True) for i in range(6)]
    barrier = threading.Barrier(len(agents), timeout=60)
    results: list[bool] = []

    def click(agent) -> None:
        try:
            barrier.wait()
            results.append(
                provider_discrepancy_resolve(
                    discrepancy_id=discrepancy.pk, actor=agent, now=timezone.now()
                )
            )
        finally:
            connection.close()

    threads = [threading.Thread(target=click, args=(agent,)) for agent in agents]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(results) == [False] * 5 + [True]
    assert AuditLogEntry.objects.filter(target=str(discrepancy.resource_id)).count() == 1
