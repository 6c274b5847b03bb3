from django import forms
from django.contrib import admin
from unfold import admin as unfold_admin

from core import display
from core.dashboard import ShownAsListed
from merchants import dashboard
from merchants.dashboard import MerchantScopedAdmin
from quotes import prediction
from quotes.models import (
    Corridor,
    FeeSchedule,
    FxRate,
    MerchantCorridor,
    MerchantOperator,
    Operator,
    Quote,
)


class OperatorForm(forms.ModelForm):
    """Two operators of a country never list one network name (a number has one prediction)."""

    def clean(self):
        data = super().clean()
        if data.get("network_names") and data.get("country_code"):
            claimed = prediction.network_names_claimed_elsewhere(
                operator_id=self.instance.pk,
                country_code=data["country_code"],
                network_names=data["network_names"],
            )
            for code, names in claimed.items():
                self.add_error("network_names", f"{code} already lists {', '.join(names)}.")
        return data


@admin.register(Operator)
class OperatorAdmin(ShownAsListed, unfold_admin.ModelAdmin):
    """The catalog is ops' to edit; support staff also see it and set an operator's `status`
    (operational / delayed / closed), the only field they may change. Its limits show as the
    lists show amounts, "1,000,000 XOF"."""

    list_display = [
        "code",
        "name",
        "country_code",
        "currency",
        "rail_type",
        "min_amount",
        "max_amount",
        "status",
        "active",
    ]
    form = OperatorForm
    list_filter = [
        "status",
        "country_code",
        "currency",
        "rail_type",
        "active",
        "network_independent",
    ]
    # Only `status` is edited in the list (support's one field); ops switch `active` in the form.
    list_editable = ["status"]
    search_fields = ["code", "name"]

    def _support_only(self, request) -> bool:
        return dashboard.is_support(request.user) and not dashboard.is_ops(request.user)

    def has_module_permission(self, request) -> bool:
        return self._support_only(request) or super().has_module_permission(request)

    def has_view_permission(self, request, obj=None) -> bool:
        return self._support_only(request) or super().has_view_permission(request, obj)

    def has_change_permission(self, request, obj=None) -> bool:
        return self._support_only(request) or super().has_change_permission(request, obj)

    def has_add_permission(self, request) -> bool:
        return not self._support_only(request) and super().has_add_permission(request)

    def has_delete_permission(self, request, obj=None) -> bool:
        return not self._support_only(request) and super().has_delete_permission(request, obj)

    def get_list_display(self, request):
        return display.list_columns(self.model, super().get_list_display(request), hide=set())

    def get_readonly_fields(self, request, obj=None):
        if self._support_only(request):
            return self.shown_too(
                f.name for f in Operator._meta.fields if f.name not in ("id", "status")
            )
        return super().get_readonly_fields(request, obj)


@admin.register(Corridor)
class CorridorAdmin(unfold_admin.ModelAdmin):
    list_display = [
        "code",
        "corridor_type",
        "payer_country",
        "recipient_country",
        "requires_sender_details",
        "requires_kyc",
        "active",
    ]
    list_filter = ["corridor_type", "payer_country", "recipient_country", "requires_kyc", "active"]
    list_editable = ["requires_kyc", "active"]
    search_fields = ["code"]


class _ConfigurationAdmin(MerchantScopedAdmin):
    """Merchant-owned configuration: merchant staff and support read it; ops edit and delete."""

    def has_delete_permission(self, request, obj=None) -> bool:
        return dashboard.is_ops(request.user)


@admin.register(FeeSchedule)
class FeeScheduleAdmin(_ConfigurationAdmin):
    """Prices are ops' pages; a merchant reads its fee and rate on each quote and payment
    (the record page's pricing breakdown)."""

    support_can_view = False
    merchant_staff_can_view = False
    list_display = [
        "id",
        "merchant",
        "flow_type",
        "operator",
        "corridor",
        "percentage",
        "fixed_amount",
        "minimum_fee",
        "maximum_fee",
        "active",
    ]
    list_filter = ["flow_type", "active", "merchant"]
    search_fields = ["merchant__name", "operator__code", "corridor__code"]
    autocomplete_fields = ["merchant", "operator", "corridor"]


@admin.register(FxRate)
class FxRateAdmin(_ConfigurationAdmin):
    support_can_view = False
    merchant_staff_can_view = False
    list_display = [
        "source_currency",
        "target_currency",
        "merchant",
        "rate",
        "margin_percent",
        "updated_at",
    ]
    list_filter = ["source_currency", "target_currency", "merchant"]
    autocomplete_fields = ["merchant"]


@admin.register(Quote)
class QuoteAdmin(MerchantScopedAdmin):
    """Read-only: a quote is what the merchant was promised; nobody edits it afterwards."""

    list_display = [
        "id",
        "merchant",
        "flow_type",
        "status",
        "send_amount",
        "send_currency",
        "receive_amount",
        "receive_currency",
        "total_fee",
        "expires_at",
        "created_at",
    ]
    list_filter = ["flow_type", "status", "send_currency", "merchant"]
    search_fields = ["id", "operator_code", "corridor_code", "merchant__name"]
    date_hierarchy = "created_at"

    def get_readonly_fields(self, request, obj=None):
        return [field.name for field in self.model._meta.fields]

    def has_add_permission(self, request, *args) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(MerchantOperator)
class MerchantOperatorAdmin(_ConfigurationAdmin):
    """Which operators a merchant may use (merchant configuration)."""

    list_display = ["merchant", "operator", "enabled_at"]
    list_filter = ["operator__country_code", "merchant"]
    search_fields = ["merchant__name", "operator__code"]
    autocomplete_fields = ["merchant", "operator"]


@admin.register(MerchantCorridor)
class MerchantCorridorAdmin(_ConfigurationAdmin):
    """Which transfer corridors a merchant may use (merchant configuration)."""

    list_display = ["merchant", "corridor", "enabled_at"]
    list_filter = ["corridor__corridor_type", "merchant"]
    search_fields = ["merchant__name", "corridor__code"]
    autocomplete_fields = ["merchant", "corridor"]
