"""The delivery pages of the dashboard: each delivery with its attempts."""

from django.contrib import admin
from unfold import admin as unfold_admin

from merchants.dashboard import MerchantScopedAdmin, ScopedInlineMixin, known_values_filter
from webhooks import services
from webhooks.models import Delivery, DeliveryAttempt


class DeliveryAttemptInline(ScopedInlineMixin, unfold_admin.TabularInline):
    model = DeliveryAttempt
    extra = 0
    can_delete = False
    fields = [
        "number",
        "url",
        "started_at",
        "finished_at",
        "response_status",
        "duration_ms",
        "error",
        "response_body",
    ]
    readonly_fields = fields


@admin.register(Delivery)
class DeliveryAdmin(MerchantScopedAdmin):
    merchant_path = "event__merchant"
    list_display = [
        "id",
        "event",
        "merchant",
        "status",
        "attempts",
        "next_attempt_at",
        "delivered_at",
        "created_at",
    ]
    list_filter = [
        "status",
        "event__merchant",
        ("event__event_type", known_values_filter(lambda: services.EVENT_TYPES)),
    ]
    search_fields = ["id", "event__id", "event__data_id"]
    fields = [
        "id",
        "event",
        "endpoint",
        "status",
        "attempts",
        "next_attempt_at",
        "dispatched_at",
        "delivered_at",
        "last_error",
        "created_at",
        "updated_at",
    ]
    readonly_fields = fields
    inlines = [DeliveryAttemptInline]

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("event__merchant", "endpoint")

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        # Saving the page would write back the delivery as read, over the sender's progress.
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    @admin.display(description="merchant")
    def merchant(self, obj: Delivery):
        return obj.event.merchant
