"""Fill TransferDisbursementAttempt for the transfers made before it: every attempt a
transfer.payout.completed / transfer.payout.failed event recorded (its data.object is the
transfer as that answer left it: attempt, provider reference, payout amount and operator,
answer time, failure reason; the last event of an attempt wins, as a provider's completion
applied by support after a failure), then the current attempt of every transfer whose
disbursement was answered, from its own columns (which also hold its last call's start). An
attempt still in flight is left to the transfer's columns, as the code does; an attempt
already written is left as it is, so a second run writes nothing. Backwards: nothing (0005
drops the table)."""

from decimal import Decimal

from django.db import migrations
from django.utils.dateparse import parse_datetime

ANSWERED = ["completed", "failed", "cancelled"]  # cancelled: failed, then its money returned
PAYOUT_EVENTS = {"transfer.payout.completed": "completed", "transfer.payout.failed": "failed"}
CHUNK = 500


def _when(value):
    return parse_datetime(value) if value else None


def _from_events(Event, transfer_ids) -> dict:
    rows = {}
    events = (
        Event.objects.filter(
            data_type="transfer", data_id__in=transfer_ids, event_type__in=list(PAYOUT_EVENTS)
        )
        .order_by("created_at", "id")
        .values_list("data_id", "event_type", "payload")
    )
    for transfer_id, event_type, payload in events:
        seen = payload.get("data", {}).get("object", {})
        if not seen.get("disbursement_attempt"):
            continue
        outcome = PAYOUT_EVENTS[event_type]
        rows[(transfer_id, seen["disbursement_attempt"])] = {
            "provider_reference": seen.get("disbursement_reference") or "",
            "payout_amount": Decimal(seen["payout_amount"]),
            "payout_currency": seen["payout_currency"],
            "recipient_operator_code": seen["recipient_operator_code"],
            "submitted_at": None,
            "answered_at": _when(seen.get(f"disbursement_{outcome}_at")),
            "outcome": outcome,
            "failure_reason": seen.get("disbursement_failure_reason") or "",
        }
    return rows


def fill_disbursement_attempts(apps, schema_editor) -> int:
    """Write the attempts that can be recovered; returns how many were written."""
    Transfer = apps.get_model("transfers", "Transfer")
    Attempt = apps.get_model("transfers", "TransferDisbursementAttempt")
    Event = apps.get_model("webhooks", "Event")
    transfers = Transfer.objects.filter(disbursement_attempt__gte=1).order_by("pk")
    written, after = 0, None
    while True:
        chunk = transfers.filter(pk__gt=after) if after else transfers
        chunk = list(chunk[:CHUNK])
        if not chunk:
            return written
        after = chunk[-1].pk
        ids = [transfer.pk for transfer in chunk]
        rows = _from_events(Event, ids)
        for transfer in chunk:
            if transfer.payout_status not in ANSWERED:
                continue
            completed = transfer.payout_status == "completed"
            rows[(transfer.pk, transfer.disbursement_attempt)] = {
                "provider_reference": transfer.disbursement_reference,
                "payout_amount": transfer.payout_amount,
                "payout_currency": transfer.payout_currency,
                "recipient_operator_code": transfer.recipient_operator_code,
                "submitted_at": transfer.disbursement_submitted_at,
                "answered_at": transfer.disbursement_completed_at
                if completed
                else transfer.disbursement_failed_at,
                "outcome": "completed" if completed else "failed",
                "failure_reason": transfer.disbursement_failure_reason,
            }
        there = set(Attempt.objects.filter(transfer_id__in=ids).values_list("transfer_id", "attempt"))
        new = [
            Attempt(transfer_id=transfer_id, attempt=attempt, **values)
            for (transfer_id, attempt), values in rows.items()
            if (transfer_id, attempt) not in there
        ]
        Attempt.objects.bulk_create(new)
        written += len(new)


class Migration(migrations.Migration):

    dependencies = [
        ("transfers", "0005_disbursement_attempts"),
        ("webhooks", "0007_endpoint_delivery_settings_changed_at"),
    ]

    operations = [
        migrations.RunPython(
            fill_disbursement_attempts, migrations.RunPython.noop, elidable=False
        ),
    ]
