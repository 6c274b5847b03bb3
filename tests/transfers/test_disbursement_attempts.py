"""Every disbursement attempt of a transfer is kept (TransferDisbursementAttempt): a relaunch
resets the transfer's disbursement columns, so an earlier attempt's provider reference, amount,
operator, times and outcome were left only in event payloads."""

import importlib
from datetime import timedelta
from decimal import Decimal

import pytest
from django.apps import apps
from django.db import connection, transaction
from django.urls import reverse
from django.utils import timezone

from payments import provider
from payments.models import ProviderDiscrepancy
from tests.factories import MerchantFactory
from tests.transfers.conftest import (
    SN_DECLINED,
    SN_OTHER_PHONE,
    SN_SILENT,
    create_quote,
    transfer_body,
)
from transfers.models import Transfer, TransferDisbursementAttempt
from transfers.services.submission import DISBURSEMENT_CALLBACK, disbursement_reference
from transfers.services.sweeps import transfers_fail_timed_out
from transfers.services.transitions import DISBURSEMENT_FAILED, transfer_transition
from webhooks.models import Event

pytestmark = pytest.mark.django_db

CHANGELIST = "admin:transfers_transfer_changelist"
NEW_RECIPIENT = {
    "recipient_type": "individual",
    "first_name": "Fatou",
    "last_name": "Sow",
    "phone": SN_OTHER_PHONE,
    "operator_code": "SN_ORANGE_MOMO",
    "country_code": "SN",
    "rail_type": "mobile_money",
}


def _relaunch(api, transfer_id, run, body: dict) -> None:
    response = run(api.post, f"/transfers/{transfer_id}/relaunch-payout", body)
    assert response.status_code == 202, response.json()


@pytest.fixture
def relaunched_twice(enabled_api, customer, quote, run) -> Transfer:
    """Attempt 1 (9800 to SN_WAVE_MOMO) declined; attempt 2, lowered to 9500, declined;
    attempt 3, 9000 to another recipient at SN_ORANGE_MOMO, paid."""
    created = run(
        enabled_api.post, "/transfers", transfer_body(quote, customer, recipient_phone=SN_DECLINED)
    )
    transfer_id = created.json()["id"]
    _relaunch(enabled_api, transfer_id, run, {"payout_amount": "9500"})
    _relaunch(enabled_api, transfer_id, run, {"payout_amount": "9000", "recipient": NEW_RECIPIENT})
    transfer = Transfer.objects.get(pk=transfer_id)
    assert (transfer.status, transfer.disbursement_attempt) == ("completed", 3)
    return transfer


def _attempts(transfer: Transfer) -> list[tuple]:
    return list(
        TransferDisbursementAttempt.objects.filter(transfer=transfer).values_list(
            "attempt",
            "provider_reference",
            "payout_amount",
            "payout_currency",
            "recipient_operator_code",
            "outcome",
            "failure_reason",
        )
    )


def _answered_references(transfer: Transfer) -> list[str]:
    """The provider reference each transfer.payout.* event carried, oldest first."""
    return [
        payload["data"]["object"]["disbursement_reference"]
        for payload in Event.objects.filter(
            data_id=transfer.id, event_type__startswith="transfer.payout."
        )
        .order_by("created_at")
        .values_list("payload", flat=True)
    ]


def test_a_transfer_relaunched_twice_keeps_its_three_attempts(relaunched_twice):
    transfer = relaunched_twice
    first, second, third = _answered_references(transfer)
    assert len({first, second, third}) == 3
    assert third == transfer.disbursement_reference

    assert _attempts(transfer) == [
        (1, first, Decimal("9800"), "XOF", "SN_WAVE_MOMO", "failed", "provider_declined"),
        (2, second, Decimal("9500"), "XOF", "SN_WAVE_MOMO", "failed", "provider_declined"),
        (3, third, Decimal("9000"), "XOF", "SN_ORANGE_MOMO", "completed", ""),
    ]
    rows = list(TransferDisbursementAttempt.objects.filter(transfer=transfer))
    assert all(row.submitted_at and row.answered_at >= row.submitted_at for row in rows)
    assert rows[2].answered_at == transfer.disbursement_completed_at


def test_a_relaunch_keeps_the_reference_its_attempt_got_after_its_answer(
    enabled_api, customer, quote, run
):
    """A reference stored after the attempt's answer was written (a late receipt, a repeated
    answer) is on the transfer's columns only: the relaunch, which resets them, writes it."""
    created = run(
        enabled_api.post, "/transfers", transfer_body(quote, customer, recipient_phone=SN_DECLINED)
    )
    transfer = Transfer.objects.get(pk=created.json()["id"])
    TransferDisbursementAttempt.objects.filter(transfer=transfer).update(provider_reference="")

    _relaunch(enabled_api, transfer.id, run, {})

    assert _attempts(transfer)[0][:2] == (1, transfer.disbursement_reference)
    assert _attempts(transfer)[1][:2] == (
        2,
        Transfer.objects.get(pk=transfer.pk).disbursement_reference,
    )


def test_an_attempt_in_flight_is_the_transfers_own_until_answered(
    enabled_api, customer, quote, run
):
    created = run(
        enabled_api.post, "/transfers", transfer_body(quote, customer, recipient_phone=SN_SILENT)
    )
    transfer = Transfer.objects.get(pk=created.json()["id"])
    assert transfer.status == "disbursing" and transfer.disbursement_reference

    assert _attempts(transfer) == []


def test_a_disbursement_failed_for_its_timeout_is_logged_with_the_transfer_and_merchant(
    enabled_api, customer, quote, run, caplog
):
    created = run(
        enabled_api.post, "/transfers", transfer_body(quote, customer, recipient_phone=SN_SILENT)
    )
    transfer = Transfer.objects.get(pk=created.json()["id"])
    Transfer.objects.filter(pk=transfer.pk).update(
        leg_timeout_at=timezone.now() - timedelta(seconds=1)
    )
    caplog.set_level("WARNING", logger="cowry.transfers")
    assert run(transfers_fail_timed_out, now=timezone.now()) == 1
    assert [r.getMessage() for r in caplog.records if r.name == "cowry.transfers"] == [
        f"Transfer {transfer.pk} of merchant {transfer.merchant_id}: disbursement failed, no"
        " provider answer by its timeout (provider_timeout)"
    ]


def test_a_disbursement_the_provider_declined_is_logged_with_the_transfer_and_merchant(
    enabled_api, customer, quote, run, caplog
):
    caplog.set_level("INFO", logger="cowry.transfers")
    created = run(
        enabled_api.post, "/transfers", transfer_body(quote, customer, recipient_phone=SN_DECLINED)
    )
    transfer = Transfer.objects.get(pk=created.json()["id"])
    assert transfer.status == "failed"
    assert [r.getMessage() for r in caplog.records if r.name == "cowry.transfers"] == [
        f"Transfer {transfer.pk} of merchant {transfer.merchant_id}: disbursement failed,"
        " declined by the provider (provider_declined)"
    ]
    assert SN_DECLINED not in caplog.text


class Abandoned(Exception):
    """Raised inside the caller's transaction after the move: it rolls back."""


@pytest.mark.django_db(transaction=True)
def test_a_decline_is_logged_once_its_move_commits_and_never_when_it_rolls_back(
    enabled_api, customer, quote, caplog
):
    caplog.set_level("INFO", logger="cowry.transfers")
    body = transfer_body(quote, customer, recipient_phone=SN_SILENT)
    transfer = Transfer.objects.get(pk=enabled_api.post("/transfers", body).json()["id"])
    assert transfer.status == "disbursing"

    def declines() -> list[str]:
        return [r.getMessage() for r in caplog.records if "declined by the provider" in r.msg]

    def decline() -> None:
        transfer_transition(
            transfer_id=transfer.pk,
            to=DISBURSEMENT_FAILED,
            reason="provider_declined",
            at=timezone.now(),
            attempt=1,
        )

    with pytest.raises(Abandoned), transaction.atomic():
        decline()
        raise Abandoned
    assert Transfer.objects.get(pk=transfer.pk).status == "disbursing"
    assert declines() == []

    decline()
    assert Transfer.objects.get(pk=transfer.pk).status == "failed"
    assert declines() == [
        f"Transfer {transfer.pk} of merchant {transfer.merchant_id}: disbursement failed,"
        " declined by the provider (provider_declined)"
    ]


def test_a_provider_completion_applied_by_support_completes_the_failed_attempt(
    enabled_api, customer, quote, run, staff_client
):
    created = run(
        enabled_api.post, "/transfers", transfer_body(quote, customer, recipient_phone=SN_SILENT)
    )
    transfer_id = created.json()["id"]
    Transfer.objects.filter(pk=transfer_id).update(
        leg_timeout_at=timezone.now() - timedelta(seconds=1)
    )
    run(transfers_fail_timed_out, now=timezone.now())
    reference = Transfer.objects.get(pk=transfer_id).disbursement_reference
    assert [row[5:] for row in _attempts(Transfer(pk=transfer_id))] == [
        ("failed", "provider_timeout")
    ]
    provider.deliver_answer(
        callback=DISBURSEMENT_CALLBACK,
        reference=disbursement_reference(transfer_id, 1),
        provider_reference=reference,
        outcome="completed",
    )
    discrepancy = ProviderDiscrepancy.objects.get(resource_id=transfer_id)
    support = staff_client(support=True)
    support.post(
        "/admin/payments/providerdiscrepancy/",
        {"action": "apply_provider_completion", "_selected_action": [str(discrepancy.pk)]},
    )

    transfer = Transfer.objects.get(pk=transfer_id)
    assert transfer.status == "completed"
    (attempt,) = TransferDisbursementAttempt.objects.filter(transfer=transfer)
    assert (attempt.attempt, attempt.provider_reference, attempt.outcome) == (
        1,
        reference,
        "completed",
    )
    assert (attempt.answered_at, attempt.failure_reason) == (transfer.disbursement_completed_at, "")


# The dashboard ----------------------------------------------------------------------------


def test_admin_search_by_the_first_attempts_reference_finds_the_transfer(
    relaunched_twice, enabled_merchant, staff_client
):
    first = _answered_references(relaunched_twice)[0]
    assert first != relaunched_twice.disbursement_reference  # not on the transfer's row now
    url = reverse(CHANGELIST)

    for viewer in (
        staff_client(support=True),
        staff_client(merchant=enabled_merchant, role="owner"),
    ):
        page = viewer.get(url, {"q": first})
        assert page.status_code == 200
        assert list(page.context["cl"].result_list) == [relaunched_twice]

    stranger = staff_client(merchant=MerchantFactory(), role="owner")
    assert list(stranger.get(url, {"q": first}).context["cl"].result_list) == []


def test_the_transfer_page_lists_every_attempt_to_support_and_merchant_staff(
    relaunched_twice, enabled_merchant, staff_client
):
    page = reverse("admin:transfers_transfer_change", args=[relaunched_twice.pk])
    references = _answered_references(relaunched_twice)

    for viewer in (
        staff_client(support=True),
        staff_client(merchant=enabled_merchant, role="owner"),
    ):
        response = viewer.get(page)
        assert response.status_code == 200
        (inline,) = [
            formset
            for formset in response.context["inline_admin_formsets"]
            if formset.opts.model is TransferDisbursementAttempt
        ]
        shown = [form.original for form in inline]
        assert [(row.attempt, row.provider_reference) for row in shown] == [
            (1, references[0]),
            (2, references[1]),
            (3, references[2]),
        ]
        assert not inline.has_add_permission and not inline.has_change_permission
        html = response.content.decode()
        for text in (*references, "9,800 XOF", "9,500 XOF", "9,000 XOF", "SN_ORANGE_MOMO"):
            assert text in html


# The data migration -----------------------------------------------------------------------

migration = importlib.import_module("transfers.migrations.0006_disbursement_attempts_fill")


def test_the_data_migration_recovers_the_attempts_of_existing_transfers(
    relaunched_twice, enabled_api, customer, run
):
    quote = create_quote(enabled_api, customer_id=customer["id"])
    in_flight = run(
        enabled_api.post, "/transfers", transfer_body(quote, customer, recipient_phone=SN_SILENT)
    ).json()["id"]
    written = _attempts(relaunched_twice)
    submitted = list(
        TransferDisbursementAttempt.objects.values_list("attempt", "submitted_at", "answered_at")
    )
    TransferDisbursementAttempt.objects.all().delete()  # as the rows were before this change

    assert migration.fill_disbursement_attempts(apps, connection.schema_editor()) == 3

    # each earlier attempt from its answer's event, the current one from the transfer's columns
    assert _attempts(relaunched_twice) == written
    recovered = list(
        TransferDisbursementAttempt.objects.values_list("attempt", "submitted_at", "answered_at")
    )
    assert recovered == [(1, None, submitted[0][2]), (2, None, submitted[1][2]), submitted[2]]
    assert not TransferDisbursementAttempt.objects.filter(transfer_id=in_flight).exists()

    assert migration.fill_disbursement_attempts(apps, connection.schema_editor()) == 0
    assert _attempts(relaunched_twice) == written
