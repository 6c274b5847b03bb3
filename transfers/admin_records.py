"""The header, timeline and pricing breakdown of a transfer's page (core.record_page)."""

from django.urls import reverse
from django.utils.html import format_html

from core import display, record_page
from core.record_page import Moment, Record
from merchants import dashboard
from transfers import selectors
from transfers.models import Transfer

TRANSFER_GROUPS = [
    (
        "Details",
        [
            "id",
            "merchant",
            "customer",
            "quote",
            "status",
            "corridor_code",
            "corridor_type",
            "payment_reason_code",
            "created_at",
            "updated_at",
        ],
    ),
    ("Legs", ["legs"]),
    ("Pricing", ["pricing_breakdown"]),
    ("Parties", ["payer_party", "recipient_party"]),
    ("Webhook events", ["events"]),
    ("Ledger", ["suspense_held", "journals"]),
    ("Provider discrepancies", ["provider_discrepancies"]),
]


def _phone(party: dict) -> str:
    return party.get("phone") or party.get("account_number") or "—"


def events_of(transfer: Transfer) -> list:
    """The transfer's webhook events with their deliveries, read once for the page's timeline
    and its events table."""
    if not hasattr(transfer, "_webhook_events"):
        transfer._webhook_events = list(selectors.transfer_events(transfer=transfer))
    return transfer._webhook_events


def transfer_record(request, transfer: Transfer) -> Record:
    customer_url = reverse("admin:customers_customer_change", args=[transfer.customer_id])
    facts = [
        (
            "Customer",
            format_html(
                '<a class="text-primary-600" href="{}">{}</a>', customer_url, transfer.customer
            ),
        ),
        ("Payer", f"{_phone(transfer.payer)} ({transfer.payer_operator_code})"),
        ("Recipient", f"{_phone(transfer.recipient)} ({transfer.recipient_operator_code})"),
        ("Recipient receives", display.amount(transfer.payout_amount, transfer.payout_currency)),
        ("Legs", f"collection {transfer.payin_status}, disbursement {transfer.payout_status}"),
        ("Created", display.timestamp(transfer.created_at)),
    ]
    if dashboard.merchant_of(request.user) is None:
        facts.append(("Merchant", str(transfer.merchant)))
    history = [
        Moment(
            row.created_at,
            f"Status: {row.status} (collection {row.payin_status},"
            f" disbursement {row.payout_status})",
            row.reason,
        )
        for row in transfer.history.all()
    ]
    return Record(
        kind="Transfer",
        amount=display.amount_text(transfer.payin_amount, transfer.payin_currency),
        status=transfer.status,
        facts=facts,
        timeline=[
            *history,
            *record_page.provider_leg(
                transfer,
                prefix="collection_",
                label="collection provider",
                reference=transfer.collection_reference,
            ),
            *record_page.provider_leg(
                transfer,
                prefix="disbursement_",
                label="disbursement provider",
                reference=transfer.disbursement_reference,
            ),
            *record_page.deliveries(events_of(transfer)),
            *record_page.admin_actions(transfer),
        ],
    )


def transfer_breakdown(transfer: Transfer) -> str:
    """What the payer pays, the fee, the rate and what the recipient receives."""
    rate = display.amount_text(transfer.fx_rate)
    return record_page.breakdown(
        [
            ("The payer pays", display.amount(transfer.payin_amount, transfer.payin_currency)),
            ("Fee (included)", display.amount(transfer.total_fee, transfer.payin_currency)),
            ("Exchange rate", f"1 {transfer.payin_currency} = {rate} {transfer.payout_currency}"),
            (
                "The recipient receives",
                display.amount(transfer.payout_amount, transfer.payout_currency),
            ),
        ]
    )
