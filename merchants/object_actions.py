"""Actions on a record's own page: a button, a confirmation page that says what happens to
the money, a reason, then the service call; the action lands in the record's history (who,
what, when, why).

    @action(description="Mark failed", url_path="mark-failed", permissions=["support"])
    def mark_failed_detail(self, request, object_id):
        return object_actions.confirm_then(self, request, object_id, title=..., ...)

listed in the admin's `actions_detail` (django-unfold draws the buttons)."""

from collections.abc import Callable

from django import forms
from django.contrib import messages
from django.contrib.admin import ModelAdmin
from django.db import models
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import reverse

from config.exceptions import DomainError


class ReasonForm(forms.Form):
    reason = forms.CharField(
        max_length=500,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="Why: kept in the record's history with your name and the time.",
    )


def change_url(obj: models.Model) -> str:
    opts = obj._meta
    return reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[obj.pk])


def confirm_then(
    model_admin: ModelAdmin,
    request: HttpRequest,
    object_id: str,
    *,
    title: str,
    consequence: Callable[[models.Model], str],
    perform: Callable[[models.Model, str], str],
) -> HttpResponse:
    """GET: the confirmation page. POST with a reason: `perform(obj, reason)`, whose return is
    the message shown; a refusal (DomainError) is shown instead and changes nothing."""
    obj = model_admin.get_object(request, object_id)  # scoped: another merchant's is a 404
    form = ReasonForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        reason = form.cleaned_data["reason"]
        try:
            done = perform(obj, reason)
        except DomainError as error:
            model_admin.message_user(request, error.message, messages.ERROR)
        else:
            model_admin.log_change(request, obj, f"{title}. Reason: {reason}")
            model_admin.message_user(request, done, messages.SUCCESS)
        return redirect(change_url(obj))
    context = {
        **model_admin.admin_site.each_context(request),
        "title": title,
        "subtitle": str(obj),
        "object": obj,
        "opts": model_admin.model._meta,
        "consequence": consequence(obj),
        "form": form,
        "cancel_url": change_url(obj),
    }
    return TemplateResponse(request, "admin/confirm_object_action.html", context)
