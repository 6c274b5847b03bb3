from datetime import timedelta

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html
from unfold import admin as unfold_admin

from core import display, secret_once
from core.dashboard import ScopedInlineMixin
from core.exceptions import DomainError
from core.themed_forms import ThemedForm
from merchants import dashboard, object_actions, services
from merchants.dashboard import MerchantScopedAdmin
from merchants.models import ApiKey, AuditLogEntry, Merchant


def _show_secret_once(request, *, api_key: ApiKey, secret: str) -> HttpResponseRedirect:
    """Post/redirect/get: the secret waits in the session, encrypted, for one page view."""
    secret_once.hold(request, kind="api_key", object_id=api_key.pk, secret=secret)
    return HttpResponseRedirect(reverse("admin:merchants_apikey_secret", args=[api_key.pk]))


class ApiKeyInline(ScopedInlineMixin, unfold_admin.TabularInline):
    model = ApiKey
    extra = 0
    fields = ["key", "label", "created_at", "last_used_at", "expires_at", "revoked_at"]
    readonly_fields = fields
    show_change_link = True


@admin.register(Merchant)
class MerchantAdmin(MerchantScopedAdmin):
    merchant_path = "pk"
    list_display = ["name", "id", "status", "created_at"]
    list_filter = ["status"]
    search_fields = ["name", "=id"]
    readonly_fields = ["id", "created_at", "updated_at"]
    inlines = [ApiKeyInline]

    def has_add_permission(self, request, *args) -> bool:
        return dashboard.is_ops(request.user)

    def has_change_permission(self, request, obj=None) -> bool:
        owner = dashboard.role_of(request.user) == "owner"
        return dashboard.is_ops(request.user) or owner

    def get_fields(self, request, obj=None):
        if dashboard.is_ops(request.user):
            return super().get_fields(request, obj)
        return ["name", "status", "require_two_factor"]

    def get_readonly_fields(self, request, obj=None):
        if dashboard.is_ops(request.user):
            return self.readonly_fields
        return ["name", "status"]  # an owner sets only the team's login rule

    def save_model(self, request, obj, form, change) -> None:
        super().save_model(request, obj, form, change)
        if change and "require_two_factor" in form.changed_data:
            from merchants import team

            team.audit_two_factor_rule(merchant=obj, by=request.user)


class ApiKeyCreateForm(forms.ModelForm):
    class Meta:
        model = ApiKey
        fields = ["merchant", "label", "expires_at"]


class RotateForm(ThemedForm, forms.Form):
    grace_hours = forms.IntegerField(
        min_value=0,
        max_value=24 * 30,
        initial=24,
        help_text="How long the old key keeps working, in hours.",
    )


@admin.register(ApiKey)
class ApiKeyAdmin(MerchantScopedAdmin):
    list_display = ["key", "merchant", "label", "state", "created_at", "last_used_at"]
    list_filter = ["merchant"]
    search_fields = ["key", "label", "merchant__name"]
    readonly_fields = [
        "merchant",
        "key",
        "label",
        "created_at",
        "last_used_at",
        "expires_at",
        "revoked_at",
    ]
    fields = readonly_fields
    form = ApiKeyCreateForm
    change_form_template = "admin/merchants/apikey/change_form.html"

    @admin.display(description="state")
    def state(self, obj: ApiKey) -> str:
        """Its expiry in the state's column, so the list fits 1400 px for support and ops."""
        from django.utils import timezone

        now = timezone.now()
        if obj.revoked_at:
            return "revoked"
        if obj.expires_at and obj.expires_at <= now:
            return "expired"
        if obj.expires_at:
            return format_html("expires {}", display.timestamp(obj.expires_at))
        return "active"

    def has_add_permission(self, request, *args) -> bool:
        # Adding and rotating show a new secret: only to its merchant's owners and developers
        # (ops issue a merchant's first key with `create_api_key`, and may revoke any key).
        return dashboard.can_manage_credentials(request.user)

    def has_change_permission(self, request, obj=None) -> bool:
        # A key changes only by rotation or revocation; save_model issues a key, so a Save on
        # an existing key's page would mint a second one whose secret nobody is shown.
        return False

    def get_fields(self, request, obj=None):
        if obj is None:
            return ["label", "expires_at"]
        return self.readonly_fields

    def get_readonly_fields(self, request, obj=None):
        return [] if obj is None else self.readonly_fields

    def save_model(self, request, obj, form, change) -> None:
        merchant = dashboard.merchant_of(request.user)
        issued = services.api_key_create_by(
            merchant=merchant, actor=request.user, label=obj.label, expires_at=obj.expires_at
        )
        # The admin logs the addition of `obj` (the form's instance): it names the issued key.
        obj.pk, obj.key, obj.merchant = issued.api_key.pk, issued.api_key.key, merchant
        request._cowry_issued = issued

    def response_add(self, request, obj, post_url_continue=None):
        issued = request._cowry_issued
        return _show_secret_once(request, api_key=issued.api_key, secret=issued.secret)

    def get_urls(self):
        custom = [
            path(
                "<int:key_id>/secret/",
                self.admin_site.admin_view(self.secret_view),
                name="merchants_apikey_secret",
            ),
            path(
                "<int:key_id>/rotate/",
                self.admin_site.admin_view(self.rotate_view),
                name="merchants_apikey_rotate",
            ),
            path(
                "<int:key_id>/revoke/",
                self.admin_site.admin_view(self.revoke_view),
                name="merchants_apikey_revoke",
            ),
        ]
        return custom + super().get_urls()

    def _scoped_key(self, request, key_id: int) -> ApiKey:
        api_key = self.get_queryset(request).filter(pk=key_id).first()
        if api_key is None:
            raise Http404("Not found.")
        return api_key

    def secret_view(self, request, key_id: int):
        api_key = self._scoped_key(request, key_id)
        secret = secret_once.take(request, kind="api_key", object_id=api_key.pk)
        response = TemplateResponse(
            request,
            "admin/merchants/apikey/secret_once.html",
            {
                **self.admin_site.each_context(request),
                "api_key": api_key,
                "secret": secret,
                "opts": self.model._meta,
                "title": f"API key {api_key.key}",
            },
        )
        response["Cache-Control"] = "no-store"
        return response

    def rotate_view(self, request, key_id: int):
        api_key = self._scoped_key(request, key_id)
        if not dashboard.can_manage_credentials(request.user):
            raise PermissionDenied
        form = RotateForm(request.POST or None)
        if request.method == "POST" and form.is_valid():
            try:
                issued = services.api_key_rotate(
                    api_key_id=api_key.pk,
                    actor=request.user,
                    grace=timedelta(hours=form.cleaned_data["grace_hours"]),
                )
            except DomainError as exc:
                messages.error(request, exc.message)
                return HttpResponseRedirect(
                    reverse("admin:merchants_apikey_change", args=[api_key.pk])
                )
            hours = form.cleaned_data["grace_hours"]
            self.log_change(request, api_key, f"Rotated; the old secret works {hours} h more.")
            return _show_secret_once(request, api_key=issued.api_key, secret=issued.secret)
        return object_actions.action_page(
            request,
            self,
            title=f"Rotate API key {api_key.key}?",
            consequence="A new key and secret are created, shown once. The old key keeps"
            " working for the grace period, then expires.",
            form=form,
            submit_label="Rotate",
            cancel_url=reverse("admin:merchants_apikey_change", args=[api_key.pk]),
        )

    def revoke_view(self, request, key_id: int):
        api_key = self._scoped_key(request, key_id)
        if not dashboard.can_change_credentials(request.user):
            raise PermissionDenied
        if request.method == "POST":
            try:
                services.api_key_revoke_by(api_key_id=api_key.pk, actor=request.user)
                messages.success(request, f"Revoked {api_key.key}: it stopped working at once.")
            except DomainError as exc:
                messages.error(request, exc.message)
            return HttpResponseRedirect(reverse("admin:merchants_apikey_change", args=[api_key.pk]))
        return object_actions.action_page(
            request,
            self,
            title=f"Revoke API key {api_key.key}?",
            consequence="The key stops working at once: every request with it gets 401.",
            form=None,
            submit_label="Revoke",
            cancel_url=reverse("admin:merchants_apikey_change", args=[api_key.pk]),
            danger=True,
        )

    def render_change_form(self, request, context, *args, **kwargs):
        context["can_rotate_keys"] = dashboard.can_manage_credentials(request.user)
        context["can_revoke_keys"] = dashboard.can_change_credentials(request.user)
        return super().render_change_form(request, context, *args, **kwargs)


@admin.register(AuditLogEntry)
class AuditLogEntryAdmin(MerchantScopedAdmin):
    list_display = ["created_at", "merchant", "actor_label", "action", "target"]
    list_filter = ["action", "merchant"]
    search_fields = ["target", "actor_label"]
    readonly_fields = ["created_at", "merchant", "actor_label", "action", "target", "detail"]
    fields = readonly_fields
    support_can_view = True

    def has_add_permission(self, request, *args) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


from merchants import admin_team  # noqa: E402, F401  (the team page registers itself)
