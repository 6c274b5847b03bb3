"""The header, timeline and pricing breakdown of a payin's, payout's and refund's page
(core.record_page): what a merchant or support reads first."""

from django.urls import reverse
from django.utils.html import format_html

from core import display, record_page
from core.record_page import Action, Moment, Record
from merchants import dashboard
from payments import admin_refunds
from payments.models import Payin, Payout, Refund
from webhooks import selectors as webhook_selectors

DETAILS = [
    "id",
    "merchant",
    "customer",
    "payin",
    "quote",
    "operator_code",
    "country_code",
    "rail_type",
    "provider_reference",
    "failure_reason",
    "reason",
    "created_at",
    "submitted_at",
    "completed_at",
    "failed_at",
]
PAYMENT_GROUPS = [
    ("Details", DETAILS),
    ("Pricing", ["pricing_breakdown"]),
    ("Refunds", ["refunds", "refunds_and_button"]),
    ("Webhook events", ["webhook_events"]),
    ("Provider discrepancies", ["provider_discrepancies"]),
]


def _party(data: dict) -> str:
    return data.get("phone") or data.get("account_number") or "—"


def _customer(obj) -> str:
    url = reverse("admin:customers_customer_change", args=[obj.customer_id])
    return format_html('<a class="text-primary-600" href="{}">{}</a>', url, obj.customer)


def _operator(obj) -> str:
    name = obj.pricing.get("routing", {}).get("operator", {}).get("name")
    return f"{name} ({obj.operator_code})" if name else obj.operator_code


def _facts(request, obj, *party: tuple[str, str]) -> list[tuple[str, str]]:
    facts = [("Customer", _customer(obj)), *party, ("Operator", _operator(obj))]
    if dashboard.merchant_of(request.user) is None:  # support and ops: whose it is
        facts.append(("Merchant", str(obj.merchant)))
    facts.append(("Created", display.timestamp(obj.created_at)))
    return facts


def events_of(obj) -> list:
    """The record's webhook events with their deliveries, read once for the page's timeline and
    its events table."""
    if not hasattr(obj, "_webhook_events"):
        events = webhook_selectors.events_about(data_type=obj._meta.model_name, data_id=obj.pk)
        obj._webhook_events = list(events)
    return obj._webhook_events


def _timeline(obj, history_rows) -> list[Moment]:
    return [
        *record_page.history(history_rows),
        *record_page.provider_leg(obj),
        *record_page.deliveries(events_of(obj)),
        *record_page.admin_actions(obj),
    ]


def payin_record(request, payin: Payin) -> Record:
    actions = []
    if admin_refunds.may_refund(request, payin):
        actions.append(Action("Refund", reverse("admin:payments_payin_refund", args=[payin.pk])))
    refunds = [
        Moment(
            refund.created_at,
            f"Refund of {display.amount_text(refund.amount, refund.currency)}: {refund.status}",
            refund.reason,
        )
        for refund in payin.refunds.order_by("created_at")
    ]
    return Record(
        kind="Payin",
        amount=display.amount_text(payin.send_amount, payin.send_currency),
        status=payin.status,
        facts=_facts(request, payin, ("Payer", _party(payin.source))),
        actions=actions,
        timeline=[*_timeline(payin, payin.history.all()), *refunds],
    )


def payout_record(request, payout: Payout) -> Record:
    return Record(
        kind="Payout",
        amount=display.amount_text(payout.send_amount, payout.send_currency),
        status=payout.status,
        facts=_facts(request, payout, ("Recipient", _party(payout.recipient))),
        timeline=_timeline(payout, payout.history.all()),
    )


def refund_record(request, refund: Refund) -> Record:
    payin_url = reverse("admin:payments_payin_change", args=[refund.payin_id])
    payin = format_html('<a class="text-primary-600" href="{}">{}</a>', payin_url, refund.payin_id)
    return Record(
        kind="Refund",
        amount=display.amount_text(refund.amount, refund.currency),
        status=refund.status,
        facts=[
            ("Customer", _customer(refund)),
            ("Paid back to", _party(refund.recipient)),
            ("Operator", refund.operator_code),
            ("Of payin", payin),
            ("Reason", refund.reason or "—"),
            ("Created", display.timestamp(refund.created_at)),
        ],
        timeline=[
            *record_page.history(refund.history.all()),
            *record_page.provider_leg(refund),
            *record_page.admin_actions(refund),
        ],
    )


def payment_breakdown(obj) -> str:
    """Amount, fee and what the wallet receives (a payin) or gives (a payout)."""
    impact = obj.wallet_impact or obj.pricing.get("wallet_impact", {})
    if isinstance(obj, Payin):
        credited = impact.get("credit_amount", obj.receive_amount)
        return record_page.breakdown(
            [
                ("The customer pays", display.amount(obj.send_amount, obj.send_currency)),
                ("Fee", display.amount(-obj.total_fee, obj.send_currency)),
                ("Your wallet receives", display.amount(credited, obj.receive_currency)),
            ]
        )
    return record_page.breakdown(
        [
            ("The recipient receives", display.amount(obj.receive_amount, obj.receive_currency)),
            ("Fee", display.amount(obj.total_fee, obj.send_currency)),
            ("Your wallet pays", display.amount(obj.debit_amount, obj.send_currency)),
        ]
    )
