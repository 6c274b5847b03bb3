"""A completed payin's Refund button: the owner's confirmation page, then the refund created
under the page's one-time token, taken as the refund's idempotency key (the API's own path,
merchants.idempotency.run_keyed): the same confirmation sent twice (a double click, or back
and submit again) creates one refund, and the second submit shows it."""

from decimal import Decimal

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse
from django.shortcuts import redirect
from django.urls import path, reverse
from django.utils.html import format_html
from unfold.widgets import UnfoldAdminDecimalFieldWidget, UnfoldAdminTextInputWidget

from core import display, money
from core.dashboard import html_table
from core.exceptions import DomainError
from merchants import dashboard, idempotency, object_actions
from merchants.models import MembershipRole
from payments import views
from payments.models import Payin
from payments.services.refunds import refundable_remainder

KEY_PREFIX = "dashboard-refund:"  # the key's namespace beside the merchant's API keys


def may_refund(request, payin: Payin) -> bool:
    """Only the payin's merchant's owner refunds it, and only a completed payin."""
    user = request.user
    return (
        payin.status == "completed"
        and dashboard.merchant_of(user) == payin.merchant
        and dashboard.role_of(user) == MembershipRole.OWNER
    )


def refund_url(refund_id) -> str:
    return reverse("admin:payments_refund_change", args=[refund_id])


class RefundForm(forms.Form):
    amount = forms.DecimalField(
        required=False,
        min_value=0,
        decimal_places=2,
        help_text="Leave empty to refund all that remains refundable.",
        widget=UnfoldAdminDecimalFieldWidget,
    )
    reason = forms.CharField(required=False, max_length=255, widget=UnfoldAdminTextInputWidget)


def refund_once(payin: Payin, *, token: str, amount: Decimal | None, reason: str) -> dict:
    """The refund this confirmation's token created, created now or replayed: the API's answer
    (with `_meta.idempotency_replayed`). RequestInProgress while the first submit runs,
    IdempotencyKeyReused when the token was used with another amount or reason."""
    api_path = reverse("refund-create", kwargs={"payin_id": payin.pk})
    body = {"amount": None if amount is None else money.format_amount(amount), "reason": reason}
    response = idempotency.run_keyed(
        merchant=payin.merchant,
        key=KEY_PREFIX + token,
        method="POST",
        path=api_path,
        body=body,
        handler=lambda: views.refund_created(
            merchant=payin.merchant, payin_id=payin.pk, amount=amount, reason=reason
        ),
    )
    return response.data


class PayinRefunds:
    """PayinAdmin's refunds table, its Refund button and the button's confirmation page."""

    @admin.display(description="Refunds")
    @display.computed_once
    def refunds(self, obj) -> str:
        rows = [
            (
                format_html('<a href="{}">{}</a>', refund_url(refund.pk), refund.pk),
                refund.status,
                display.amount(refund.amount, refund.currency),
                display.timestamp(refund.created_at),
            )
            for refund in obj.refunds.order_by("created_at", "id")
        ]
        return html_table(["refund", "status", "amount", "created"], rows)

    @admin.display(description="Refunds")
    @display.computed_once
    def refunds_and_button(self, obj) -> str:
        button = format_html(
            '<p class="mt-2"><a class="bg-primary-600 font-medium inline-flex px-3 py-2'
            ' rounded-default text-white" href="{}">Refund</a></p>',
            reverse("admin:payments_payin_refund", args=[obj.pk]),
        )
        return format_html("{}{}", self.refunds(obj), button)

    def get_urls(self):
        refund = path(
            "<path:object_id>/refund/",
            self.admin_site.admin_view(self.refund_view),
            name="payments_payin_refund",
        )
        return [refund, *super().get_urls()]

    def refund_view(self, request, object_id):
        """The owner's confirmation of a refund: it says what leaves the wallet and carries a
        new one-time token each time it is shown; its submit creates the refund once."""
        payin = self.get_object(request, object_id)
        if payin is None or not self.has_view_permission(request, payin):
            raise PermissionDenied
        if not may_refund(request, payin):
            raise PermissionDenied
        form = RefundForm(request.POST if request.method == "POST" else None)
        if form.is_bound and form.is_valid():
            done = self._refund_submitted(request, payin, form)
            if done is not None:
                return done
        payer = payin.source.get("phone") or payin.source.get("account_number", "")
        paid = display.amount(payin.send_amount, payin.send_currency)
        remainder = display.amount(refundable_remainder(payin), payin.send_currency)
        consequence = format_html(
            '<p class="mb-2">The payer ({}, {}) paid {}; {} can still be refunded.</p>'
            "<p><strong>The amount you refund leaves your wallet's available balance now</strong>"
            " (all {} if you leave the amount empty); the payin's fee is not returned. It comes"
            " back to the wallet if the refund fails.</p>",
            payer,
            payin.operator_code,
            paid,
            remainder,
            remainder,
        )
        return object_actions.action_page(
            request,
            self,
            title="Refund the payer",
            subject=f"Payin {payin.pk}",
            consequence=consequence,
            form=form,
            token=object_actions.confirmation_token(),
            submit_label="Confirm the refund",
            cancel_url=reverse("admin:payments_payin_change", args=[payin.pk]),
            page_id="refund-payin",
        )

    def _refund_submitted(self, request, payin: Payin, form: RefundForm) -> HttpResponse | None:
        """The redirect to the refund the submit created (or its first submit did); None to
        show the page again with what was refused."""
        token = request.POST.get("token", "")
        if not object_actions.CONFIRMATION_TOKEN.fullmatch(token):
            form.add_error(None, "This page is out of date: check the amount and confirm again.")
            return None
        data = form.cleaned_data
        try:
            refund = refund_once(payin, token=token, amount=data["amount"], reason=data["reason"])
        except idempotency.RequestInProgress:
            message = "This refund is already being created (the form was sent twice)."
            self.message_user(request, message, messages.WARNING)
            return redirect(reverse("admin:payments_payin_change", args=[payin.pk]))
        except idempotency.IdempotencyKeyReused:
            message = "This page was already confirmed for another refund: check and confirm again."
            form.add_error(None, message)
            return None
        except DomainError as exc:
            form.add_error("amount", exc.message)
            return None
        shown = display.amount_text(Decimal(refund["amount"]), refund["currency"])
        if refund["_meta"]["idempotency_replayed"]:
            message = f"This refund of {shown} was already created; nothing more leaves the wallet."
            self.message_user(request, message, messages.WARNING)
        else:
            why = data["reason"] or "none given"
            self.log_change(request, payin, f"Refunded {shown} ({refund['id']}). Reason: {why}")
            message = f"Refund of {shown} created; it is pending until the provider pays it."
            self.message_user(request, message)
        return redirect(refund_url(refund["id"]))
