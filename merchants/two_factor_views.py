"""The dashboard's two-factor pages: set up an authenticator, enter a code after the password."""

from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.utils.http import url_has_allowed_host_and_scheme
from unfold.widgets import UnfoldAdminTextInputWidget

from merchants import two_factor


class CodeForm(forms.Form):
    token = forms.CharField(
        label="Code",
        max_length=16,
        widget=UnfoldAdminTextInputWidget(attrs={"autocomplete": "one-time-code"}),
    )


def setup(request: HttpRequest, *, site) -> HttpResponse:
    """Show a new authenticator's QR code and key; its first code confirms it and shows the
    recovery codes once."""
    user = request.user
    if two_factor.has_second_factor(user):
        if not user.is_verified():  # a password alone must not enrol another authenticator
            return redirect("admin:two_factor_verify")
        messages.info(request, "Two-factor authentication is already on for your login.")
        return redirect("admin:index")
    device = two_factor.pending_device(user)
    form = CodeForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        codes = two_factor.confirm(request, device=device, token=form.cleaned_data["token"])
        if codes is not None:
            context = {**site.each_context(request), "title": "Recovery codes", "codes": codes}
            return TemplateResponse(request, "admin/two_factor/recovery_codes.html", context)
        form.add_error("token", "That code is not right; codes change every 30 seconds.")
    context = {
        **site.each_context(request),
        "title": "Set up two-factor authentication",
        "form": form,
        "qr_src": two_factor.qr_image_src(device),
        "secret": two_factor.secret_text(device),
        "required": two_factor.is_required(user),
    }
    return TemplateResponse(request, "admin/two_factor/setup.html", context)


def verify(request: HttpRequest, *, site) -> HttpResponse:
    """The second step of a login: a code from the authenticator or a recovery code."""
    form = CodeForm(request.POST or None)
    target = request.GET.get("next") or request.POST.get("next") or ""
    # On https, an absolute http:// URL to this host would send the session cookie in clear.
    if not url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        target = ""
    if request.method == "POST" and form.is_valid():
        if two_factor.verify(request, token=form.cleaned_data["token"]):
            return redirect(target or "admin:index")
        form.add_error("token", "That code is not right.")
    context = {
        **site.each_context(request),
        "title": "Two-factor authentication",
        "form": form,
        "next": target,
    }
    return TemplateResponse(request, "admin/two_factor/verify.html", context)
