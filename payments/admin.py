"""Dashboard views of payments and the ledger. Everything here is read-only: money only moves
through the services (and credit_wallet / debit_wallet for manual adjustments); support's
actions (marking a payout stuck at the provider failed, resolving a provider discrepancy,
applying a provider's late completion to a failed transfer disbursement) are service calls
too."""

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse
from django.shortcuts import redirect
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.http import urlencode
from unfold import admin as unfold_admin
from unfold.decorators import action as unfold_action

from core import display, money
from core.dashboard import (
    ExactSearchMixin,
    ScopedInlineMixin,
    html_table,
    known_values_filter,
    past_timeout_filter,
)
from core.exceptions import DomainError
from core.record_page import RecordPage
from core.themed_forms import ThemedForm
from merchants import dashboard, object_actions
from merchants.dashboard import ReadOnlyAdmin
from merchants.models import Merchant
from payments import admin_records, admin_refunds, provider, selectors, statements
from payments.ledger.discrepancies import provider_discrepancy_resolve
from payments.models import (
    Journal,
    JournalLine,
    LedgerAccount,
    Payin,
    PayinHistory,
    Payout,
    PayoutHistory,
    ProviderDiscrepancy,
    Refund,
    RefundHistory,
    Wallet,
)
from payments.services.payouts import payout_mark_failed, payouts_stuck
from quotes import selectors as quote_selectors
from rails import selectors as rails_selectors
from webhooks import admin as webhook_admin


class ReadOnlyInline(ScopedInlineMixin, unfold_admin.TabularInline):
    extra = 0
    can_delete = False


class PayinHistoryInline(ReadOnlyInline):
    model = PayinHistory
    fields = ["status", "reason", "created_at"]


class PayoutHistoryInline(ReadOnlyInline):
    model = PayoutHistory
    fields = ["status", "reason", "created_at"]


class RefundHistoryInline(ReadOnlyInline):
    model = RefundHistory
    fields = ["status", "reason", "created_at"]


PAYMENT_LIST = [
    "id",
    "merchant",
    "status",
    "send_amount",
    "send_currency",
    "receive_amount",
    "operator_code",
    "provider_reference",
    "created_at",
]


# The operator and currency filters offer the catalog's codes and the currencies: Django's
# choices were a SELECT DISTINCT of each column over the whole table at every page load.
PAYMENT_FILTERS = [
    "status",
    past_timeout_filter(selectors.past_provider_timeout),
    ("operator_code", known_values_filter(quote_selectors.operator_codes)),
    ("send_currency", known_values_filter(lambda: money.CURRENCIES)),
    "merchant",
]


def discrepancies_table(resource_id) -> str:
    """The provider discrepancies of a payin, payout or transfer, each linked to its page in
    the reconciliation queue (for support and ops: merchant staff do not see the queue)."""
    rows = [
        (
            format_html(
                '<a href="{}">{}</a>',
                reverse("admin:payments_providerdiscrepancy_change", args=[discrepancy.pk]),
                display.timestamp(discrepancy.received_at),
            ),
            discrepancy.resource_type,
            discrepancy.provider_outcome,
            discrepancy.our_status,
            discrepancy.provider_reference or "—",
            f"resolved by {discrepancy.resolved_by}" if discrepancy.resolved_at else "open",
        )
        for discrepancy in selectors.provider_discrepancies_of(resource_id=resource_id)
    ]
    return html_table(
        ["received", "leg", "provider says", "ours", "provider reference", "state"], rows
    )


def provider_answers_table(connection: str, references: list[str]) -> str:
    """The connection a payment's legs went through and what its operator last said of each
    (MTN's status, raw code and transaction id), for support and ops. The simulator keeps no
    answers: pass no references for legs that only went through it (no query)."""
    rows = [
        (
            answer.reference,
            answer.connection,
            answer.product,
            answer.status,
            answer.raw_code or "—",
            answer.financial_transaction_id or "—",
            display.timestamp(answer.updated_at),
        )
        for answer in (rails_selectors.provider_answers_of(references) if references else [])
    ]
    head = format_html("<p>Connection: <strong>{}</strong></p>", connection)
    table = html_table(
        ["reference", "connection", "product", "status", "raw code", "transaction id", "at"], rows
    )
    return format_html("{}{}", head, table)


def sees_reconciliation(request) -> bool:
    return dashboard.is_ops(request.user) or dashboard.is_support(request.user)


class PaymentAdmin(RecordPage, ExactSearchMixin, ReadOnlyAdmin):
    """A payin's, payout's or refund's page: its header and timeline (admin_records), its
    details, pricing, webhook events with their deliveries and, for support and ops, its
    provider discrepancies; every column folded last. A pasted id or provider reference is
    found through an index (ExactSearchMixin)."""

    reference_forms = provider.REFERENCE_FORMS
    exact_reference_fields = ("provider_reference",)
    record_groups = admin_records.PAYMENT_GROUPS

    readonly_fields = ["webhook_events", "pricing_breakdown"]
    # The list shows the merchant only: left to Django, a bare select_related() joined every
    # non-null relation too (the quote, the customer and each one's merchant) for every row.
    list_select_related = ["merchant"]

    def get_readonly_fields(self, request, obj=None):
        fields = list(super().get_readonly_fields(request, obj))
        if not sees_reconciliation(request):
            return fields
        return [*fields, "provider_answers", "provider_discrepancies"]

    @admin.display(description="Provider's answers")
    @display.computed_once
    def provider_answers(self, obj) -> str:
        real = obj.provider_connection != provider.SIMULATOR
        return provider_answers_table(obj.provider_connection, [str(obj.pk)] if real else [])

    @admin.display(description="Pricing")
    def pricing_breakdown(self, obj) -> str:
        return admin_records.payment_breakdown(obj)

    @admin.display(description="Provider discrepancies")
    @display.computed_once
    def provider_discrepancies(self, obj) -> str:
        return discrepancies_table(obj.pk)

    @admin.display(description="Webhook events")
    @display.computed_once
    def webhook_events(self, obj) -> str:
        return webhook_admin.events_table(admin_records.events_of(obj))


@admin.register(Payin)
class PayinAdmin(admin_refunds.PayinRefunds, PaymentAdmin):
    list_display = PAYMENT_LIST
    list_filter = PAYMENT_FILTERS
    search_fields = [
        "=id",
        "provider_reference",
        "=quote__id",
        "=customer__id",
        "customer__external_ref",
        "source__phone",
        "merchant__name",
    ]
    date_hierarchy = "created_at"
    inlines = [PayinHistoryInline]

    def get_readonly_fields(self, request, obj=None):
        fields = list(super().get_readonly_fields(request, obj))
        if obj is None:
            return fields
        refunds = "refunds_and_button" if admin_refunds.may_refund(request, obj) else "refunds"
        return [*fields, refunds]

    def record(self, request, obj):
        return admin_records.payin_record(request, obj)

    @admin.display(description="Provider's answers")
    @display.computed_once
    def provider_answers(self, obj) -> str:
        """The payin's answers and its refunds' (a refund goes through its payin's connection):
        why a refund failed is read on the payin's page too."""
        if obj.provider_connection == provider.SIMULATOR:
            return provider_answers_table(obj.provider_connection, [])
        refunds = obj.refunds.order_by("created_at").values_list("pk", flat=True)
        references = [str(obj.pk), *(str(pk) for pk in refunds)]
        return provider_answers_table(obj.provider_connection, references)


@admin.register(Refund)
class RefundAdmin(PaymentAdmin):
    """Refunds are read-only: they are created by the API or the payin's Refund button."""

    list_display = [
        "id",
        "merchant",
        "status",
        "amount",
        "currency",
        "payin",
        "operator_code",
        "provider_reference",
        "created_at",
    ]
    list_filter = [
        "status",
        ("operator_code", known_values_filter(quote_selectors.operator_codes)),
        ("currency", known_values_filter(lambda: money.CURRENCIES)),
        "merchant",
    ]
    search_fields = ["=id", "provider_reference", "=payin__id", "=customer__id", "merchant__name"]
    date_hierarchy = "created_at"
    inlines = [RefundHistoryInline]
    readonly_fields = ["webhook_events"]  # a refund's pricing is its amount

    def record(self, request, obj):
        return admin_records.refund_record(request, obj)


@admin.register(Payout)
class PayoutAdmin(PaymentAdmin):
    # A payout's recipient receives its send amount (no receive column: the list fits 1400 px
    # for support); the debit is what left the wallet, fee included.
    list_display = [
        *(name for name in PAYMENT_LIST if name != "receive_amount"),
        "debit_amount",
    ]
    list_filter = PAYMENT_FILTERS
    search_fields = [
        "=id",
        "provider_reference",
        "=quote__id",
        "=customer__id",
        "customer__external_ref",
        "recipient__phone",
        "merchant__name",
    ]
    date_hierarchy = "created_at"
    inlines = [PayoutHistoryInline]
    actions = ["mark_failed"]
    actions_detail = ["mark_failed_detail"]

    def record(self, request, obj):
        return admin_records.payout_record(request, obj)

    def has_stuck_permission(self, request, object_id=None) -> bool:
        """Mark failed and its confirmation show on a payout stuck at the provider; a POST goes
        to the service, which checks under the payout's lock."""
        if object_id is None or request.method == "POST":
            return True
        return payouts_stuck(now=timezone.now()).filter(pk=object_id).exists()

    @unfold_action(
        description="Mark failed", url_path="mark-failed", permissions=["support", "stuck"]
    )
    def mark_failed_detail(self, request, object_id):
        def perform(payout: Payout, reason: str) -> str:
            payout_mark_failed(payout_id=payout.pk, actor=request.user, now=timezone.now())
            return f"Payout {payout.pk} marked failed; its reservation is released."

        return object_actions.confirm_then(
            self,
            request,
            object_id,
            title="Mark the payout failed",
            consequence=lambda p: format_html(
                "The {} reserved for it go back to {}'s available balance and the merchant gets "
                "payout.failed. Do it only once the provider confirmed it did not pay: if it "
                "did, that becomes a provider discrepancy.",
                display.amount(p.debit_amount, p.send_currency),
                p.merchant,
            ),
            perform=perform,
        )

    @admin.action(
        description="Mark failed (stuck at the provider, which confirmed it did not pay)",
        permissions=["support"],
    )
    def mark_failed(self, request, queryset) -> None:
        for payout in queryset:
            try:
                payout_mark_failed(payout_id=payout.pk, actor=request.user, now=timezone.now())
            except DomainError as exc:
                self.message_user(request, f"{payout.pk}: {exc.message}", messages.ERROR)
            else:
                self.message_user(request, f"Payout {payout.pk} marked failed.")


@admin.register(Wallet)
class WalletAdmin(ReadOnlyAdmin):
    list_display = ["merchant", "currency", "available", "reserved", "updated_at"]
    list_filter = ["currency"]
    search_fields = ["merchant__name", "merchant__id"]
    actions = ["download_statement"]
    actions_detail = ["download_statement_detail"]

    @unfold_action(description="Download a statement", url_path="statement")
    def download_statement_detail(self, request, object_id):
        """The statement form for this wallet; reading moves no money, so no confirmation."""
        wallet = self.get_object(request, object_id)  # scoped: another merchant's is a 404
        query = urlencode({"merchant": wallet.merchant_id, "currency": wallet.currency})
        return redirect(f"{reverse('admin:payments_wallet_statement')}?{query}")

    def get_urls(self):
        statement = path(
            "statement/",
            self.admin_site.admin_view(self.statement_view),
            name="payments_wallet_statement",
        )
        return [statement, *super().get_urls()]

    def statement_view(self, request):
        """GET form, then the CSV. Ops and support choose the merchant; merchant staff always
        get their own merchant's statement, whatever the request says."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        user = request.user
        everyone = dashboard.is_ops(user) or dashboard.is_support(user)
        own = dashboard.merchant_of(user)
        form = StatementForm(request.GET or None)
        if not everyone:
            del form.fields["merchant"]
        if form.is_bound and form.is_valid():
            merchant = form.cleaned_data.get("merchant") if everyone else own
            if merchant is None:
                form.add_error("merchant" if everyone else None, "Choose a merchant.")
            else:
                try:
                    lines = statements.statement_lines(
                        merchant=merchant,
                        currency=form.cleaned_data["currency"],
                        from_date=form.cleaned_data["date_from"],
                        to_date=form.cleaned_data["date_to"],
                    )
                except DomainError as exc:
                    form.add_error("date_to", exc.message)
                else:
                    name = (
                        f"statement-{merchant.pk}-{form.cleaned_data['currency']}-"
                        f"{form.cleaned_data['date_from']}-{form.cleaned_data['date_to']}.csv"
                    )
                    response = HttpResponse(
                        statements.statement_csv(lines), content_type="text/csv; charset=utf-8"
                    )
                    response["Content-Disposition"] = f'attachment; filename="{name}"'
                    return response
        return object_actions.action_page(
            request,
            self,
            title="Download a statement",
            consequence=f"The ledger lines of the wallet in one currency, at most"
            f" {statements.MAX_DAYS} days (whole UTC days), as CSV.",
            form=form,
            submit_label="Download CSV",
            cancel_url=reverse("admin:payments_wallet_changelist"),
            method="get",
            page_id="statement",
        )

    @admin.action(description="Download a statement of the selected wallet")
    def download_statement(self, request, queryset):
        wallet = queryset.first()
        if wallet is None:  # a stale selection, or a wallet this user cannot see
            self.message_user(request, "Select one of your wallets.", messages.WARNING)
            return None
        query = urlencode({"merchant": wallet.merchant_id, "currency": wallet.currency})
        return redirect(f"{reverse('admin:payments_wallet_statement')}?{query}")


class StatementForm(ThemedForm, forms.Form):
    merchant = forms.ModelChoiceField(queryset=Merchant.objects.all(), required=False)
    currency = forms.ChoiceField(choices=[(c, c) for c in money.CURRENCIES])
    date_from = forms.DateField(label="From", widget=forms.DateInput(attrs={"type": "date"}))
    date_to = forms.DateField(label="To", widget=forms.DateInput(attrs={"type": "date"}))


class JournalLineInline(ReadOnlyInline):
    model = JournalLine
    fields = ["account", "amount"]


@admin.register(Journal)
class JournalAdmin(ReadOnlyAdmin):
    """Ledger internals: ops only (a merchant reads its balances and statements)."""

    support_can_view = False
    merchant_staff_can_view = False
    list_display = ["created_at", "merchant", "currency", "kind", "resource_type", "resource_id"]
    list_filter = ["kind", "resource_type", "currency"]
    search_fields = ["resource_id", "merchant__name", "memo"]
    date_hierarchy = "created_at"
    inlines = [JournalLineInline]


@admin.register(JournalLine)
class JournalLineAdmin(ReadOnlyAdmin):
    support_can_view = False
    merchant_staff_can_view = False
    merchant_path = "journal__merchant"
    list_display = ["id", "journal", "account", "amount"]
    list_filter = ["account__code", "account__currency"]
    search_fields = ["journal__resource_id", "account__merchant__name"]


@admin.register(LedgerAccount)
class LedgerAccountAdmin(ReadOnlyAdmin):
    support_can_view = False
    merchant_staff_can_view = False
    list_display = ["merchant", "currency", "code", "created_at"]
    list_filter = ["currency", "code"]
    search_fields = ["merchant__name", "code"]


@admin.register(ProviderDiscrepancy)
class ProviderDiscrepancyAdmin(ReadOnlyAdmin):
    """Provider answers that contradict a final state: support reconciles, then resolves; a
    failed payin or transfer collection the provider collected, or a failed payout or returned
    transfer's disbursement it paid, is settled by ops with credit_wallet / debit_wallet
    --discrepancy, which resolves it with the adjustment."""

    merchant_staff_can_view = False
    list_display = [
        "received_at",
        "merchant",
        "resource_type",
        "resource_id",
        "provider_outcome",
        "our_status",
        "resolved_at",
    ]
    list_filter = ["resource_type", "provider_outcome", ("resolved_at", admin.EmptyFieldListFilter)]
    search_fields = ["=resource_id", "reference", "provider_reference"]
    readonly_fields = [f.name for f in ProviderDiscrepancy._meta.fields]
    actions = ["mark_resolved"]  # the transfers app adds its own (transfers.admin_discrepancies)

    @admin.action(
        description=(
            "Mark resolved (reconciled with the provider; a failed payin or payout it"
            " completed, a transfer whose collection we failed that it collected, or a"
            " returned transfer's disbursement it paid: ops run credit_wallet / debit_wallet"
            " --discrepancy instead, which credits or takes back the money and resolves it;"
            " a transfer disbursement reported"
            " paid, or a transfer collection reported failed: the provider confirmed it did not"
            " pay, or did collect, so the payout can be relaunched or the collected funds"
            " returned to the merchant's wallet)"
        ),
        permissions=["support"],
    )
    def mark_resolved(self, request, queryset) -> None:
        now = timezone.now()
        resolved = sum(
            provider_discrepancy_resolve(discrepancy_id=discrepancy_id, actor=request.user, now=now)
            for discrepancy_id in queryset.values_list("pk", flat=True)
        )
        self.message_user(request, f"Marked {resolved} discrepancy(ies) resolved.")
