"""Actions on a record's own page: a button, a confirmation page that says what happens to
the money, a reason, then the service call; the action lands in the record's history (who,
what, when, why). Each confirmation page carries a one-time token, the action's idempotency
key (merchants.idempotency.run_keyed): sent twice (a double click, back and submit again), the
action is done once and the second submit says so.

    @action(description="Mark failed", url_path="mark-failed", permissions=["support"])
    def mark_failed_detail(self, request, object_id):
        return object_actions.confirm_then(self, request, object_id, title=..., ...)

listed in the admin's `actions_detail` (django-unfold draws the buttons). Every confirmation
or action page of the dashboard (a refund, a key's rotation, a statement) is `action_page`."""

import re
import secrets
from collections.abc import Callable

from django import forms
from django.contrib import messages
from django.contrib.admin import ModelAdmin
from django.db import models
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import reverse
from rest_framework.response import Response
from unfold.widgets import UnfoldAdminTextareaWidget

from core.exceptions import DomainError
from core.themed_forms import ThemedForm
from merchants import idempotency

CONFIRMATION_TOKEN = re.compile(r"[A-Za-z0-9_-]{32}")
KEY_PREFIX = "dashboard-action:"  # the key's namespace beside the merchant's API keys


def confirmation_token() -> str:
    """A new one-time token for a confirmation page (CONFIRMATION_TOKEN's shape)."""
    return secrets.token_urlsafe(24)


class ReasonForm(ThemedForm, forms.Form):
    reason = forms.CharField(
        max_length=500,
        widget=UnfoldAdminTextareaWidget(attrs={"rows": 3}),
        help_text="Why: kept in the record's history with your name and the time.",
    )


def action_page(
    request: HttpRequest,
    model_admin: ModelAdmin,
    *,
    title: str,
    consequence: str,
    form: forms.BaseForm | None,
    submit_label: str,
    cancel_url: str | None,
    subject: str = "",
    token: str | None = None,
    danger: bool = False,
    method: str = "post",
    page_id: str = "confirm-action",
) -> TemplateResponse:
    """A confirmation or action page: the title, what happens (`consequence`, text or safe
    HTML), the form's fields in the theme's boxes with their errors, the button and Cancel."""
    context = {
        **model_admin.admin_site.each_context(request),
        "title": title,
        "subject": subject,
        "consequence": consequence,
        "form": form,
        "token": token,
        "submit_label": submit_label,
        "cancel_url": cancel_url,
        "variant": "danger" if danger else "primary",
        "method": method,
        "page_id": page_id,
        "opts": model_admin.model._meta,
    }
    return TemplateResponse(request, "admin/action_page.html", context)


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
    """GET: the confirmation page. POST with a reason: `perform(obj, reason)` once per page
    (its token), whose return is the message shown; a refusal (DomainError) is shown instead
    and changes nothing."""
    obj = model_admin.get_object(request, object_id)  # scoped: another merchant's is a 404
    form = ReasonForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        reason = form.cleaned_data["reason"]
        level, message = _perform_once(
            model_admin, request, obj, title=title, reason=reason, perform=perform
        )
        model_admin.message_user(request, message, level)
        return redirect(change_url(obj))
    return action_page(
        request,
        model_admin,
        title=title,
        subject=f"{model_admin.model._meta.verbose_name.capitalize()} {obj.pk}",
        consequence=consequence(obj),
        form=form,
        token=confirmation_token(),
        submit_label=title,
        cancel_url=change_url(obj),
    )


def _perform_once(
    model_admin: ModelAdmin,
    request: HttpRequest,
    obj: models.Model,
    *,
    title: str,
    reason: str,
    perform: Callable[[models.Model, str], str],
) -> tuple[int, str]:
    """(message level, message) of the confirmation's submit: done now, done already by this
    page's first submit, or refused."""
    token = request.POST.get("token", "")
    if not CONFIRMATION_TOKEN.fullmatch(token):
        return messages.ERROR, "That confirmation page was out of date: nothing was done."
    try:
        response = idempotency.run_keyed(
            merchant=obj.merchant,
            key=KEY_PREFIX + token,
            method="POST",
            path=request.path,
            body={"reason": reason},
            handler=lambda: Response({"message": perform(obj, reason)}),
        )
    except idempotency.RequestInProgress:
        return messages.WARNING, "This is already being done (the page was sent twice)."
    except idempotency.IdempotencyKeyReused:
        return messages.ERROR, "That page was already confirmed with another reason: nothing more."
    except DomainError as error:
        return messages.ERROR, error.message
    if response.data["_meta"]["idempotency_replayed"]:
        return messages.WARNING, f"Already done from this page: {response.data['message']}"
    model_admin.log_change(request, obj, f"{title}. Reason: {reason}")
    return messages.SUCCESS, response.data["message"]
