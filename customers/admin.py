from django.contrib import admin

from customers.models import Customer
from merchants.dashboard import MerchantScopedAdmin


@admin.register(Customer)
class CustomerAdmin(MerchantScopedAdmin):
    list_display = [
        "id",
        "name",
        "merchant",
        "external_ref",
        "customer_type",
        "kyc_status",
        "status",
        "created_at",
    ]
    list_filter = ["customer_type", "kyc_status", "status", "merchant"]
    search_fields = [
        "id",
        "external_ref",
        "first_name",
        "last_name",
        "business_name",
        "phone",
        "email",
    ]
    readonly_fields = ["id", "merchant", "kyc_status", "created_at", "updated_at"]

    @admin.display(description="name", ordering="last_name")
    def name(self, customer: Customer) -> str:
        """The person's or the business's name: support tells customers apart by it."""
        return str(customer)

    # KYC adds its documents, status history and support actions to this page (kyc/admin.py).
    inlines: list = []
    actions: list = []

    def has_add_permission(self, request, *args) -> bool:
        return False  # customers come from the API (POST /customers), with its validation

    def save_model(self, request, obj, form, change) -> None:
        # Only what the form changed: a whole-row save would write back kyc_status as read,
        # over a review decided meanwhile (with no history row for that move).
        changed = [name for name in form.changed_data if name not in self.readonly_fields]
        if changed:
            obj.save(update_fields=[*changed, "updated_at"])
