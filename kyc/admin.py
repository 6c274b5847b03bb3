"""KYC in the dashboard: documents (with fetch and review status and links to the stored
files, served only to logged-in staff), the kyc_status history, and the support actions used
on the customer admin."""

import mimetypes
from uuid import UUID

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import FileResponse, Http404, HttpRequest
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html_join
from unfold import admin as unfold_admin

from core.dashboard import ScopedInlineMixin
from core.exceptions import DomainError
from customers.admin import CustomerAdmin
from kyc import services
from kyc.models import FILE_SIDES, KycDocument, KycStatusChange, KycSubmission
from merchants.dashboard import ReadOnlyAdmin


def _file_links(document: KycDocument) -> str:
    links = [
        (reverse("admin:kyc_kycdocument_file", args=[document.pk, side]), side)
        for side in FILE_SIDES
        if getattr(document, f"{side}_file")
    ]
    if not links:
        return "—"
    return format_html_join(" · ", '<a href="{}" target="_blank">{}</a>', links)


class KycDocumentInline(ScopedInlineMixin, unfold_admin.TabularInline):
    model = KycDocument
    extra = 0
    can_delete = False
    show_change_link = True
    fields = [
        "submission",
        "document_type",
        "document_number",
        "expiry_date",
        "status",
        "failure_reason",
        "review_status",
        "rejection_reason",
        "stored_files",
        "created_at",
    ]
    readonly_fields = fields
    ordering = ["-created_at", "position"]

    @admin.display(description="files")
    def stored_files(self, document: KycDocument) -> str:
        return _file_links(document)


class KycStatusChangeInline(ScopedInlineMixin, unfold_admin.TabularInline):
    model = KycStatusChange
    extra = 0
    can_delete = False
    fields = ["created_at", "from_status", "to_status", "reason", "changed_by", "submission"]
    readonly_fields = fields


def _decide(modeladmin, request, queryset, *, approve: bool) -> None:
    now = timezone.now()
    done, refused = 0, []
    for customer_id in queryset.values_list("pk", flat=True):
        try:
            services.kyc_decide_by_hand(
                customer_id=customer_id, approve=approve, user=request.user, at=now
            )
            done += 1
        except DomainError as exc:
            refused.append(f"{customer_id}: {exc.message}")
    verb = "approved" if approve else "rejected"
    if done:
        modeladmin.message_user(request, f"KYC {verb} by hand for {done} customer(s).")
    for message in refused:
        modeladmin.message_user(request, message, level=messages.ERROR)


@admin.action(description="Approve KYC by hand (support)", permissions=["support"])
def approve_kyc_by_hand(modeladmin, request, queryset) -> None:
    _decide(modeladmin, request, queryset, approve=True)


@admin.action(description="Reject KYC by hand (support)", permissions=["support"])
def reject_kyc_by_hand(modeladmin, request, queryset) -> None:
    _decide(modeladmin, request, queryset, approve=False)


@admin.register(KycDocument)
class KycDocumentAdmin(ReadOnlyAdmin):
    merchant_path = "customer__merchant"
    list_display = [
        "id",
        "customer",
        "document_type",
        "status",
        "review_status",
        "created_at",
    ]
    list_filter = ["status", "review_status", "document_type"]
    search_fields = ["id", "customer__id", "document_number"]
    list_select_related = ["customer"]
    readonly_fields = [
        "id",
        "submission",
        "customer",
        "position",
        "document_type",
        "document_number",
        "issue_country_code",
        "issue_date",
        "expiry_date",
        "front_file_url",
        "back_file_url",
        "selfie_file_url",
        "stored_files",
        "status",
        "failure_reason",
        "fetched_at",
        "review_status",
        "rejection_reason",
        "reviewed_at",
        "created_at",
    ]
    fields = readonly_fields

    @admin.display(description="stored files")
    def stored_files(self, document: KycDocument) -> str:
        return _file_links(document)

    def get_urls(self):
        return [
            path(
                "<uuid:document_id>/file/<str:side>",
                self.admin_site.admin_view(self.file_view),
                name="kyc_kycdocument_file",
            ),
            *super().get_urls(),
        ]

    def file_view(self, request: HttpRequest, document_id: UUID, side: str) -> FileResponse:
        """A stored file, to staff who may view KYC documents; never public under MEDIA_URL."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        document = self.get_queryset(request).filter(pk=document_id).first()
        if document is None or side not in FILE_SIDES or not getattr(document, f"{side}_file"):
            raise Http404
        stored = getattr(document, f"{side}_file")
        content_type = mimetypes.guess_type(stored.name)[0] or "application/octet-stream"
        response = FileResponse(stored.open("rb"), content_type=content_type)
        response["X-Content-Type-Options"] = "nosniff"
        response["Content-Security-Policy"] = "default-src 'none'; img-src 'self'"
        return response


@admin.register(KycSubmission)
class KycSubmissionAdmin(ReadOnlyAdmin):
    merchant_path = "customer__merchant"
    list_display = ["id", "customer", "number", "outcome", "created_at", "reviewed_at"]
    list_filter = ["outcome"]
    search_fields = ["id", "customer__id"]
    readonly_fields = ["id", "customer", "number", "outcome", "created_at", "reviewed_at"]
    fields = readonly_fields


# The customer's page shows their KYC: documents with fetch/review status and file links, the
# status history, and the support actions that approve or reject by hand (recorded with who).
CustomerAdmin.inlines = [KycDocumentInline, KycStatusChangeInline]
CustomerAdmin.actions = [approve_kyc_by_hand, reject_kyc_by_hand]
