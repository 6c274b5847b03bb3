"""The team page: owners invite teammates, change their role, remove them; ops see every team."""

import copy
from datetime import timedelta

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.contrib.auth import login as auth_login
from django.contrib.auth import password_validation
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.utils import timezone
from django.views import View
from django_otp import login as otp_login
from unfold.widgets import UnfoldAdminPasswordWidget

from core.themed_forms import ThemedForm
from merchants import dashboard, invites, logins, team, two_factor, two_factor_views
from merchants.dashboard import MerchantScopedAdmin
from merchants.models import InvitePurpose, MembershipRole, MerchantMembership, StaffInvite


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
        from core.display import timestamp

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
            "valid_days": settings.STAFF_INVITE_TTL_SECONDS // 86400,
            "membership": MerchantMembership.objects.select_related("user").get(pk=obj.pk),
        }
        return TemplateResponse(request, "admin/merchants/merchantmembership/invited.html", context)

    def delete_model(self, request, obj) -> None:
        if _is_owner(request):
            team.teammate_remove(membership=obj, by=request.user)
        else:
            super().delete_model(request, obj)


class AcceptForm(ThemedForm, forms.Form):
    """An invite: the new password twice; an enrolment link: the login's password. Either way
    the authenticator's first code when one is being set up."""

    def __init__(self, *args, request, invite: StaffInvite, enrolling: bool, **kwargs):
        super().__init__(*args, **kwargs)
        self.request, self.invite = request, invite
        widget = UnfoldAdminPasswordWidget(attrs={"autocomplete": "new-password"})
        if invite.purpose == InvitePurpose.INVITE:
            self.fields["new_password1"] = forms.CharField(label="New password", widget=widget)
            self.fields["new_password2"] = forms.CharField(label="Again", widget=widget)
        else:
            self.fields["password"] = forms.CharField(
                label="Your password", widget=UnfoldAdminPasswordWidget()
            )
        if enrolling:
            self.fields["token"] = copy.deepcopy(two_factor_views.CodeForm.base_fields["token"])

    def clean(self):
        cleaned = super().clean()
        user = self.invite.user
        if self.invite.purpose == InvitePurpose.INVITE:
            new, again = cleaned.get("new_password1"), cleaned.get("new_password2")
            if new and again and new != again:
                raise forms.ValidationError("The two passwords differ.")
            if new:
                password_validation.validate_password(new, user)
        elif cleaned.get("password"):
            username, address = user.get_username(), logins.client_address(self.request)
            if not logins.attempt_allowed(username=username, address=address):
                raise forms.ValidationError("Too many failed attempts: try again later.")
            if not user.check_password(cleaned["password"]):
                raise forms.ValidationError("That password is not right.")
            logins.attempt_succeeded(username=username, address=address)
        return cleaned


class InviteAcceptView(View):
    """An invite or enrolment link (merchants.invites). Its token is swapped at once for a
    session-held one, kept out of the next page's Referer and of the access log; then the login
    chooses its password (an invite) and sets up its authenticator (where required)."""

    template_name = "admin/merchants/merchantmembership/accept.html"
    session_key = "_cowry_invite"

    def dispatch(self, request, uidb64: str, token: str):
        now = timezone.now()
        if token != invites.ACCEPT_SEGMENT:
            invite = invites.link_open(uidb64=uidb64, token=token, now=now)
            if invite is None:
                return self._invalid(request)
            request.session[self.session_key] = invite.pk
            return redirect("dashboard-invite", uidb64=uidb64, token=invites.ACCEPT_SEGMENT)
        held = request.session.get(self.session_key)
        invite = (
            invites.link_get(invite_id=held, uidb64=uidb64, now=now)
            if isinstance(held, int)
            else None
        )
        if invite is None or request.method not in ("GET", "POST"):
            return self._invalid(request)
        user = invite.user
        enrolling = not two_factor.has_second_factor(user) and (
            invite.purpose == InvitePurpose.ENROLMENT or two_factor.is_required(user)
        )
        device = two_factor.pending_device(user) if enrolling else None
        form = AcceptForm(request.POST or None, request=request, invite=invite, enrolling=enrolling)
        if request.method == "POST" and form.is_valid():
            try:
                codes = invites.link_accept(
                    invite=invite,
                    new_password=form.cleaned_data.get("new_password1"),
                    device=device,
                    code=form.cleaned_data.get("token", ""),
                    now=now,
                )
            except invites.WrongCode:
                form.add_error("token", "That code is not right; codes change every 30 seconds.")
            else:
                request.session.pop(self.session_key, None)
                if codes is None:
                    return self._invalid(request)
                return self._done(request, user=user, device=device, codes=codes)
        context = {
            # The theme's colours and title, as on the login page: without them the page's
            # button was white on white.
            **admin.site.each_context(request),
            "validlink": True,
            "form": form,
            "purpose": invite.purpose,
            "qr_src": two_factor.qr_image_src(device) if device else "",
            "secret": two_factor.secret_text(device) if device else "",
        }
        return TemplateResponse(request, self.template_name, context)

    def _invalid(self, request):
        return TemplateResponse(
            request,
            self.template_name,
            {**admin.site.each_context(request), "validlink": False},
            status=404,
        )

    def _done(self, request, *, user, device, codes: list[str]):
        if device is None:
            messages.success(request, "Your password is set: log in with it.")
            return redirect("admin:login")
        # The link, the password and the authenticator's code: the session is logged in.
        auth_login(request, user, backend="django.contrib.auth.backends.ModelBackend")
        otp_login(request, device)
        lifetime = timedelta(seconds=settings.DASHBOARD_SESSION_SECONDS)
        request.session.set_expiry(timezone.now() + lifetime)
        context = {**admin.site.each_context(request), "title": "Recovery codes", "codes": codes}
        return TemplateResponse(request, "admin/two_factor/recovery_codes.html", context)
