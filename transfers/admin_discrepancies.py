"""The provider discrepancies' admin action of the transfers app: apply the provider's late
completion to a failed transfer disbursement. Added to payments' ProviderDiscrepancyAdmin from
TransfersConfig.ready(): payments never imports transfers."""

from django.contrib import admin, messages
from django.utils import timezone

from core.exceptions import DomainError
from payments import admin as payment_admin
from transfers.services.support import transfer_apply_provider_completion


@admin.action(
    description=(
        "Apply the provider's completion (a failed transfer disbursement the provider paid)"
    ),
    permissions=["support"],
)
def apply_provider_completion(modeladmin, request, queryset) -> None:
    for discrepancy_id in queryset.values_list("pk", flat=True):
        try:
            transfer = transfer_apply_provider_completion(
                discrepancy_id=discrepancy_id, actor=request.user, now=timezone.now()
            )
        except DomainError as exc:
            modeladmin.message_user(request, f"{discrepancy_id}: {exc.message}", messages.ERROR)
        else:
            modeladmin.message_user(
                request, f"Transfer {transfer.pk} completed with the provider's answer."
            )


def register() -> None:
    """Called once from TransfersConfig.ready()."""
    discrepancy_admin = payment_admin.ProviderDiscrepancyAdmin
    if apply_provider_completion not in discrepancy_admin.actions:
        discrepancy_admin.actions = [*discrepancy_admin.actions, apply_provider_completion]
