"""A money record's page (payin, payout, refund, transfer) leads with what matters: a header with
the amount, the status, who and which operator, and the actions the user may take; then a
timeline (its history, the provider's answer, webhook deliveries, refunds, support actions with
who and why); then the details, pricing as a breakdown; the raw columns last, folded.

    class PayinAdmin(RecordPage, ...):
        def record(self, request, obj) -> Record: ...
        record_groups = [("Details", [...]), ("Pricing", ["pricing_breakdown"])]
"""

from dataclasses import dataclass, field
from datetime import datetime

from django.contrib.admin.models import LogEntry
from django.contrib.contenttypes.models import ContentType
from django.db import models
from django.utils.html import format_html, format_html_join

# A status's colour in the header: done, failed, on its way.
STATUS_TONES = {
    "completed": "bg-green-100 text-green-700",
    "succeeded": "bg-green-100 text-green-700",
    "failed": "bg-red-100 text-red-700",
    "cancelled": "bg-red-100 text-red-700",
    "returned": "bg-red-100 text-red-700",
}
WAITING_TONE = "bg-orange-100 text-orange-700"
RAW_COLUMNS = "All columns"


@dataclass(frozen=True)
class Action:
    label: str
    url: str
    danger: bool = False


@dataclass(frozen=True)
class Moment:
    """One line of the timeline: when, what, and who did it and why (support actions)."""

    at: datetime | None
    what: str
    detail: str = ""
    who: str = ""


@dataclass
class Record:
    kind: str  # "Payin"
    amount: str
    status: str
    facts: list[tuple[str, str]]  # (label, value): customer, operator, ...
    actions: list[Action] = field(default_factory=list)
    timeline: list[Moment] = field(default_factory=list)

    @property
    def status_tone(self) -> str:
        return STATUS_TONES.get(self.status, WAITING_TONE)

    @property
    def moments(self) -> list[Moment]:
        """The timeline, oldest first (a moment without a time last)."""
        return sorted(self.timeline, key=lambda m: (m.at is None, m.at or datetime.min))


def admin_actions(obj: models.Model) -> list[Moment]:
    """What people did on the record's page (a refund, a relaunch, mark failed): who, and the
    message with its reason, from the admin's log."""
    entries = LogEntry.objects.filter(
        content_type=ContentType.objects.get_for_model(obj, for_concrete_model=False),
        object_id=str(obj.pk),
    ).select_related("user")
    return [
        Moment(entry.action_time, entry.get_change_message(), who=entry.user.get_username())
        for entry in entries
    ]


def history(rows, *, what: str = "Status: {}") -> list[Moment]:
    """A state machine's history rows (status, reason, created_at) as moments."""
    return [Moment(row.created_at, what.format(row.status), row.reason) for row in rows]


def provider_leg(
    obj: models.Model, *, prefix: str = "", label: str = "provider", reference: str = ""
) -> list[Moment]:
    """When the leg went to the provider and what the provider answered; a transfer's legs
    are its `collection_` and `disbursement_` columns."""
    reference = reference or getattr(obj, "provider_reference", "")
    submitted, completed, failed = (
        getattr(obj, f"{prefix}{name}") for name in ("submitted_at", "completed_at", "failed_at")
    )
    moments = []
    if submitted:
        moments.append(Moment(submitted, f"Sent to the {label}"))
    if completed:
        moments.append(Moment(completed, f"The {label} answered: done", reference))
    if failed:
        why = getattr(obj, f"{prefix}failure_reason") or reference
        moments.append(Moment(failed, f"The {label} answered: failed", why))
    return moments


def deliveries(events) -> list[Moment]:
    """Each webhook event and the state of its deliveries to the merchant's endpoints."""
    moments = []
    for event in events:
        sent = [
            f"{delivery.endpoint.url}: {delivery.status} ({delivery.attempts} attempt"
            f"{'s' if delivery.attempts != 1 else ''})"
            for delivery in event.deliveries.all()
        ]
        detail = "; ".join(sent) or "no endpoint listens to it"
        moments.append(Moment(event.created_at, f"Webhook {event.event_type}", detail))
    return moments


def breakdown(rows: list[tuple[str, str]], *, note: str = "") -> str:
    """Pricing as a short statement: each (label, shown value) on its line, the last one (what
    the wallet receives or gives) in bold."""
    *lines, (label, value) = rows
    body = format_html_join(
        "",
        '<tr class="border-t border-base-200"><th class="font-normal pr-8 py-1 text-left">{}</th>'
        '<td class="py-1 text-right whitespace-nowrap">{}</td></tr>',
        lines,
    )
    total = format_html(
        '<tr class="border-t-2 border-base-300 font-semibold"><th class="pr-8 py-1 text-left">'
        '{}</th><td class="py-1 text-right whitespace-nowrap">{}</td></tr>',
        label,
        value,
    )
    table = format_html('<table class="pricing-breakdown text-sm">{}{}</table>', body, total)
    if note:
        return format_html('{}<p class="mt-2 text-base-500 text-sm">{}</p>', table, note)
    return table


class RecordPage:
    """A ModelAdmin mixin (first in the bases): the header and timeline above the page's
    fields (`record`), its fields grouped by `record_groups`, every other column folded under
    "All columns"."""

    change_form_outer_before_template = "admin/record_header.html"
    record_groups: list[tuple[str, list[str]]] = []

    def record(self, request, obj) -> Record:
        raise NotImplementedError

    def render_change_form(self, request, context, add=False, change=False, form_url="", obj=None):
        if obj is not None:
            context["record"] = self.record(request, obj)
        return super().render_change_form(request, context, add, change, form_url, obj)

    def get_fieldsets(self, request, obj=None):
        fieldsets = super().get_fieldsets(request, obj)
        if obj is None or not self.record_groups:
            return fieldsets
        names = [name for _, opts in fieldsets for name in opts["fields"]]
        placed: set = set()
        groups = []
        for title, wanted in self.record_groups:
            fields = [n for n in names if _base(n) in wanted and n not in placed]
            fields.sort(key=lambda n: wanted.index(_base(n)))
            placed.update(fields)
            if fields:
                groups.append((title, {"fields": fields}))
        rest = [n for n in names if n not in placed]
        if rest:
            groups.append((RAW_COLUMNS, {"fields": rest, "classes": ["collapse"]}))
        return groups


def _base(name) -> str:
    return name.removesuffix("_shown") if isinstance(name, str) else name
