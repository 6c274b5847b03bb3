"""The team page: owners invite teammates, change their role, remove them; ops see every team."""

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.contrib.auth.views import PasswordResetConfirmView
from django.template.response import TemplateResponse
from django.urls import reverse_lazy

from merchants import dashboard, team
from merchants.dashboard import MerchantScopedAdmin
from merchants.models import MembershipRole, MerchantMembership
from merchants.themed_forms import ThemedSetPasswordForm


class InviteForm(forms.ModelForm):
    username = forms.CharField(max_length=150, help_text="What your teammate types to log in.")
    email = forms.EmailField(required=False)

    class Meta:
        model = MerchantMembership
        fields = ["role"]

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # The least the teammate may need: an owner raises it deliberately.
        self.fields["role"].initial = MembershipRole.VIEWER


def _is_owner(request) -> bool:
    return dashboard.role_of(request.user) == MembershipRole.OWNER


@admin.register(MerchantMembership)
class MerchantMembershipAdmin(MerchantScopedAdmin):
    list_display = ["user", "merchant", "role", "last_login", "created_at"]
    list_filter = ["role", "merchant"]
    search_fields = ["user__username", "merchant__name"]
    list_select_related = ["user"]
    support_can_view = False

    @admin.display(description="last login")
    def last_login(self, membership: MerchantMembership) -> str:
        from merchants.display import timestamp

        return timestamp(membership.user.last_login)

    def has_add_permission(self, request, *args) -> bool:
        return dashboard.is_ops(request.user) or _is_owner(request)

    def has_change_permission(self, request, obj=None) -> bool:
        return dashboard.is_ops(request.user) or _is_owner(request)

    def has_delete_permission(self, request, obj=None) -> bool:
        return _is_owner(request) or dashboard.is_ops(request.user)

    def get_form(self, request, obj=None, change=False, **kwargs):
        if obj is None and _is_owner(request):
            kwargs["form"] = InviteForm
        return super().get_form(request, obj, change, **kwargs)

    def get_fields(self, request, obj=None):
        if _is_owner(request):
            return ["username", "email", "role"] if obj is None else ["user", "role"]
        return super().get_fields(request, obj)

    def get_readonly_fields(self, request, obj=None):
        return ["user"] if obj is not None and _is_owner(request) else []

    def get_actions(self, request):
        return {}  # removals go through the row's own page, one teammate at a time

    def save_model(self, request, obj, form, change) -> None:
        if not _is_owner(request):
            return super().save_model(request, obj, form, change)
        if change:
            team.teammate_change_role(membership=obj, by=request.user, role=obj.role)
            return None
        invitation = team.teammate_invite(
            merchant=dashboard.merchant_of(request.user),
            by=request.user,
            username=form.cleaned_data["username"],
            email=form.cleaned_data["email"],
            role=obj.role,
        )
        obj.pk, obj.user, obj.merchant = (
            invitation.membership.pk,
            invitation.membership.user,
            invitation.membership.merchant,
        )
        request._cowry_invite_url = request.build_absolute_uri(invitation.path)
        return None

    def response_add(self, request, obj, post_url_continue=None):
        url = getattr(request, "_cowry_invite_url", None)
        if url is None:
            return super().response_add(request, obj, post_url_continue)
        context = {
            **self.admin_site.each_context(request),
            "title": "Invitation link",
            "invite_url": url,
            "valid_days": settings.PASSWORD_RESET_TIMEOUT // 86400,
            "membership": MerchantMembership.objects.select_related("user").get(pk=obj.pk),
        }
        return TemplateResponse(request, "admin/merchants/merchantmembership/invited.html", context)

    def delete_model(self, request, obj) -> None:
        if _is_owner(request):
            team.teammate_remove(membership=obj, by=request.user)
        else:
            super().delete_model(request, obj)


class InviteAcceptView(PasswordResetConfirmView):
    """The invitation link: the teammate chooses a password, then logs in."""

    template_name = "admin/merchants/merchantmembership/accept.html"
    form_class = ThemedSetPasswordForm
    success_url = reverse_lazy("admin:login")
    reset_url_token = "choose-password"  # noqa: S105  (a URL segment, not a secret)

    def get_context_data(self, **kwargs):
        # The theme's colours and title, as on the login page: without them the page's
        # button was white on white.
        return {**admin.site.each_context(self.request), **super().get_context_data(**kwargs)}

    def form_valid(self, form):
        messages.success(self.request, "Your password is set: log in with it.")
        return super().form_valid(form)
