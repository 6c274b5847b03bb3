"""Transfers in the dashboard: both legs, every disbursement attempt, history, execution,
events and ledger journals on one page, found by any attempt's provider reference too, and the
support actions (relaunch payout, mark disbursement failed, return the collected funds of a
failed disbursement to the merchant's wallet), each written to the audit log with who did it. A
provider's late completion of a failed disbursement is applied from the reconciliation queue
(payments.admin.ProviderDiscrepancyAdmin)."""

from collections.abc import Callable
from datetime import datetime

from django.contrib import admin, messages
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from unfold import admin as unfold_admin
from unfold.decorators import action as unfold_action

from core import display
from core.dashboard import (
    ExactSearchMixin,
    ScopedInlineMixin,
    html_table,
    known_values_filter,
    past_timeout_filter,
)
from core.exceptions import DomainError
from core.record_page import RecordPage
from merchants import object_actions
from merchants.dashboard import MerchantScopedAdmin
from payments import admin as payment_admin
from payments import provider
from quotes import selectors as quote_selectors
from transfers import admin_records, selectors
from transfers.models import Transfer, TransferDisbursementAttempt, TransferHistory
from transfers.services.relaunch import transfer_relaunch_payout
from transfers.services.submission import disbursement_reference
from transfers.services.support import (
    disbursement_stuck,
    transfer_mark_disbursement_failed,
    transfer_return_collected_funds,
)
from transfers.services.transitions import is_relaunchable
from webhooks import admin as webhook_admin


def _leg_value(value) -> str:
    if isinstance(value, datetime):
        return display.timestamp(value)
    return value or "—"


class TransferHistoryInline(ScopedInlineMixin, unfold_admin.TabularInline):
    model = TransferHistory
    fields = ["created_at", "status", "payin_status", "payout_status", "reason"]
    readonly_fields = fields
    extra = 0
    can_delete = False


class TransferDisbursementAttemptInline(ScopedInlineMixin, unfold_admin.TabularInline):
    """Every answered or replaced disbursement attempt; the one in flight is in the legs."""

    model = TransferDisbursementAttempt
    verbose_name = "disbursement attempt (answered or replaced)"
    fields = [
        "attempt",
        "provider_reference",
        "payout_amount",
        "recipient_operator_code",
        "times",
        "outcome",
        "failure_reason",
    ]
    readonly_fields = fields
    extra = 0
    can_delete = False

    @admin.display(description="submitted, answered")
    def times(self, obj: TransferDisbursementAttempt) -> str:
        """Both times in one column, so the table fits beside the page's sidebar at 1400 px."""
        return format_html(
            "{}<br>{}", display.timestamp(obj.submitted_at), display.timestamp(obj.answered_at)
        )


@admin.register(Transfer)
class TransferAdmin(RecordPage, ExactSearchMixin, MerchantScopedAdmin):
    # A pasted id or provider reference (either leg's, any attempt's) is found through an
    # index (ExactSearchMixin).
    reference_forms = provider.REFERENCE_FORMS
    exact_reference_fields = (
        "collection_reference",
        "disbursement_reference",
        "disbursement_attempts__provider_reference",
    )
    list_display = [
        "id",
        "merchant",
        "status",
        "leg_statuses",
        "corridor_code",
        "payin_amount",
        "payin_currency",
        "payout_amount",
        "payout_currency",
        "created_at",
    ]
    list_filter = [
        "status",
        "payin_status",
        "payout_status",
        past_timeout_filter(selectors.past_leg_timeout),
        # the catalog's codes: Django's choices read the whole table (SELECT DISTINCT)
        ("corridor_code", known_values_filter(quote_selectors.corridor_codes)),
        ("payer_operator_code", known_values_filter(quote_selectors.operator_codes)),
        ("recipient_operator_code", known_values_filter(quote_selectors.operator_codes)),
        "merchant",
    ]
    search_fields = [
        "=id",
        "=customer__id",
        "customer__external_ref",
        "collection_reference",
        "disbursement_reference",
        "disbursement_attempts__provider_reference",
        "payer__phone",
        "recipient__phone",
        "merchant__name",
    ]
    date_hierarchy = "created_at"
    list_select_related = ["merchant"]
    inlines = [TransferHistoryInline, TransferDisbursementAttemptInline]
    actions = ["relaunch_payout", "mark_disbursement_failed", "return_collected_funds"]
    actions_detail = [
        "relaunch_payout_detail",
        "mark_disbursement_failed_detail",
        "return_collected_funds_detail",
    ]
    fieldsets = [
        (
            None,
            {
                "fields": [
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
                ]
            },
        ),
        ("Legs", {"fields": ["legs"]}),
        ("Parties", {"fields": ["payer_party", "recipient_party"]}),
        ("Ledger", {"fields": ["suspense_held", "journals"]}),
        ("Webhook events", {"fields": ["events"]}),
        ("Pricing", {"fields": ["pricing_breakdown"]}),
        ("Pricing (locked by the quote)", {"fields": ["pricing_json"]}),
    ]
    readonly_fields = [
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
        "legs",
        "payer_party",
        "recipient_party",
        "suspense_held",
        "journals",
        "events",
        "pricing_json",
        "pricing_breakdown",
    ]
    record_groups = admin_records.TRANSFER_GROUPS

    def record(self, request, obj):
        return admin_records.transfer_record(request, obj)

    @admin.display(description="Pricing")
    def pricing_breakdown(self, obj: Transfer) -> str:
        return admin_records.transfer_breakdown(obj)

    def get_fieldsets(self, request, obj=None):
        fieldsets = list(super().get_fieldsets(request, obj))
        if payment_admin.sees_reconciliation(request):
            fieldsets.append(("Provider's answers", {"fields": ["provider_answers"]}))
            fieldsets.append(("Provider discrepancies", {"fields": ["provider_discrepancies"]}))
        return fieldsets

    def get_readonly_fields(self, request, obj=None):
        fields = super().get_readonly_fields(request, obj)
        return [*fields, "provider_answers", "provider_discrepancies"]

    @admin.display(description="Connections and raw codes")
    @display.computed_once
    def provider_answers(self, obj: Transfer) -> str:
        references = [str(obj.pk)] + [
            disbursement_reference(obj.pk, attempt)
            for attempt in range(1, obj.disbursement_attempt + 1)
        ]
        connections = (obj.collection_connection, obj.disbursement_connection)
        if set(connections) == {provider.SIMULATOR}:
            references = []  # the simulator keeps no answers
        shown = f"collection {connections[0]}, disbursement {connections[1]}"
        return payment_admin.provider_answers_table(shown, references)

    @admin.display(description="Provider discrepancies (both legs)")
    @display.computed_once
    def provider_discrepancies(self, obj: Transfer) -> str:
        return payment_admin.discrepancies_table(obj.pk)

    # Read-only for everyone, ops included: a transfer moves only through its state machine,
    # and saving this page would write back every column as it was read, over a leg's answer
    # applied meanwhile.
    def has_add_permission(self, request, *args) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    @admin.display(description="Collection and disbursement legs")
    @display.computed_once
    def legs(self, obj: Transfer) -> str:
        """A column per leg, a row per fact: the table fits beside its label at 1400 px."""
        payout = display.amount(obj.payout_amount, obj.payout_currency)
        if obj.quoted_payout_amount != obj.payout_amount:
            quoted = display.amount(obj.quoted_payout_amount, obj.payout_currency)
            payout = format_html("{} (quoted {})", payout, quoted)
        rows = [
            ("status", obj.payin_status, obj.payout_status),
            ("amount", display.amount(obj.payin_amount, obj.payin_currency), payout),
            ("operator", obj.payer_operator_code, obj.recipient_operator_code),
            ("provider reference", obj.collection_reference, obj.disbursement_reference),
            ("submitted", obj.collection_submitted_at, obj.disbursement_submitted_at),
            ("completed", obj.collection_completed_at, obj.disbursement_completed_at),
            ("failed", obj.collection_failed_at, obj.disbursement_failed_at),
            ("failure reason", obj.collection_failure_reason, obj.disbursement_failure_reason),
        ]
        return html_table(
            ["", "collection", f"disbursement (attempt {obj.disbursement_attempt})"],
            [
                (format_html("<strong>{}</strong>", label), *map(_leg_value, values))
                for label, *values in rows
            ],
        )

    @admin.display(description="collection → disbursement")
    def leg_statuses(self, obj: Transfer) -> str:
        """Both legs and a relaunched payout's attempt in one column, so the list fits a
        laptop's screen."""
        legs = f"{obj.payin_status} → {obj.payout_status}"
        if obj.disbursement_attempt > 1:
            return f"{legs} (attempt {obj.disbursement_attempt})"
        return legs

    def payer_party(self, obj: Transfer) -> str:
        return display.labelled(obj.payer)

    @admin.display(description="Recipient")
    def recipient_party(self, obj: Transfer) -> str:
        return display.labelled(obj.recipient)

    @admin.display(description="Held in transfer_suspense")
    @display.computed_once
    def suspense_held(self, obj: Transfer) -> str:
        held = selectors.transfer_suspense_held(transfer=obj)
        shown = display.amount(held, obj.payin_currency)
        return format_html('<span class="suspense-held">{}</span>', shown)

    @admin.display(description="Journals")
    @display.computed_once
    def journals(self, obj: Transfer) -> str:
        rows = [
            (
                display.timestamp(journal.created_at),
                journal.kind,
                journal.currency,
                format_html_join(
                    "",
                    "{}: {}<br>",
                    (
                        (line.account.code, display.amount(line.amount))
                        for line in journal.lines.all()
                    ),
                ),
            )
            for journal in selectors.transfer_journals(transfer=obj)
        ]
        return html_table(["at", "kind", "currency", "lines"], rows)

    @admin.display(description="Events")
    @display.computed_once
    def events(self, obj: Transfer) -> str:
        return webhook_admin.events_table(admin_records.events_of(obj))

    @admin.display(description="Pricing as locked by the quote")
    def pricing_json(self, obj: Transfer) -> str:
        return display.labelled(obj.pricing)

    def _detail(self, request, object_id, *, title: str, consequence, service) -> object:
        """A support action on the transfer's own page (merchants.object_actions)."""

        def perform(transfer: Transfer, reason: str) -> str:
            service(transfer)
            return f"{title}: done for transfer {transfer.pk}."

        return object_actions.confirm_then(
            self, request, object_id, title=title, consequence=consequence, perform=perform
        )

    # A support button and its confirmation page show on a transfer it can act on. A POST goes
    # to the service, which checks under the transfer's lock (and a confirmation sent twice
    # answers as the first did).
    def _transfer_where(self, request, object_id, can: Callable[[Transfer], bool]) -> bool:
        if object_id is None or request.method == "POST":
            return True
        transfer = self.get_object(request, object_id)
        return transfer is not None and can(transfer)

    def get_object(self, request, object_id, from_field=None):
        if request.method != "GET":
            return super().get_object(request, object_id, from_field)
        read = request.__dict__.setdefault("_transfers_read", {})  # the page and its buttons
        if (object_id, from_field) not in read:
            read[object_id, from_field] = super().get_object(request, object_id, from_field)
        return read[object_id, from_field]

    def has_relaunchable_permission(self, request, object_id=None) -> bool:
        return self._transfer_where(request, object_id, is_relaunchable)

    def has_stuck_disbursement_permission(self, request, object_id=None) -> bool:
        now = timezone.now()
        return self._transfer_where(request, object_id, lambda t: disbursement_stuck(t, now=now))

    @unfold_action(
        description="Relaunch payout", url_path="relaunch", permissions=["support", "relaunchable"]
    )
    def relaunch_payout_detail(self, request, object_id):
        return self._detail(
            request,
            object_id,
            title="Relaunch the payout",
            consequence=lambda t: format_html(
                "{} is sent again to the same recipient from the collected funds the transfer "
                "holds; nothing else leaves the merchant's wallet.",
                display.amount(t.payout_amount, t.payout_currency),
            ),
            service=lambda t: transfer_relaunch_payout(
                merchant=t.merchant, transfer_id=t.id, actor=request.user, now=timezone.now()
            ),
        )

    @unfold_action(
        description="Mark disbursement failed",
        url_path="mark-failed",
        permissions=["support", "stuck_disbursement"],
    )
    def mark_disbursement_failed_detail(self, request, object_id):
        return self._detail(
            request,
            object_id,
            title="Mark the disbursement failed",
            consequence=lambda t: format_html(
                "The stuck disbursement is recorded as failed (confirm first that the provider "
                "did not pay); the {} collected stay held, to relaunch or return.",
                display.amount(t.payin_amount, t.payin_currency),
            ),
            service=lambda t: transfer_mark_disbursement_failed(
                transfer_id=t.id, actor=request.user, now=timezone.now()
            ),
        )

    @unfold_action(
        description="Return collected funds",
        url_path="return-funds",
        permissions=["support", "relaunchable"],
    )
    def return_collected_funds_detail(self, request, object_id):
        return self._detail(
            request,
            object_id,
            title="Return the collected funds to the merchant's wallet",
            consequence=lambda t: (
                "The payout is given up for good: the funds collected for it are credited to "
                f"{t.merchant}'s {t.payin_currency} wallet and the transfer ends failed."
            ),
            service=lambda t: transfer_return_collected_funds(
                transfer_id=t.id, actor=request.user, now=timezone.now()
            ),
        )

    def _run(self, request, queryset, action, verb: str) -> None:
        done, refused = 0, []
        for transfer in queryset:
            try:
                action(transfer)
                done += 1
            except DomainError as exc:
                refused.append(f"{transfer.id}: {exc.message}")
        if done:
            self.message_user(request, f"{verb} for {done} transfer(s).")
        for message in refused:
            self.message_user(request, message, level=messages.ERROR)

    @admin.action(
        description="Relaunch payout (same recipient and amount)", permissions=["support"]
    )
    def relaunch_payout(self, request, queryset) -> None:
        self._run(
            request,
            queryset,
            lambda transfer: transfer_relaunch_payout(
                merchant=transfer.merchant,
                transfer_id=transfer.id,
                actor=request.user,
                now=timezone.now(),
            ),
            "Payout relaunched",
        )

    @admin.action(description="Mark disbursement failed (stuck leg)", permissions=["support"])
    def mark_disbursement_failed(self, request, queryset) -> None:
        self._run(
            request,
            queryset,
            lambda transfer: transfer_mark_disbursement_failed(
                transfer_id=transfer.id, actor=request.user, now=timezone.now()
            ),
            "Disbursement marked failed",
        )

    @admin.action(
        description="Return collected funds to merchant wallet (gives the payout up)",
        permissions=["support"],
    )
    def return_collected_funds(self, request, queryset) -> None:
        self._run(
            request,
            queryset,
            lambda transfer: transfer_return_collected_funds(
                transfer_id=transfer.id, actor=request.user, now=timezone.now()
            ),
            "Collected funds returned to the merchant's wallet",
        )
