"""Webhook dashboard: endpoints, events with their deliveries and attempts, re-send and test.

The signing secret is never rendered in a list or form (editable=False). Owners and
developers of the endpoint's merchant can reveal it on explicit request (audited); support
staff never can."""

import json
import logging

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import Exists, OuterRef
from django.http import Http404, HttpResponseRedirect
from django.template.defaultfilters import pluralize
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe
from unfold import admin as unfold_admin
from unfold.decorators import action as unfold_action

from core import display, secret_once, secrets_at_rest
from core.dashboard import ScopedInlineMixin, html_table, known_values_filter
from core.exceptions import DomainError
from core.fields import format_timestamp
from merchants import dashboard, object_actions
from merchants import services as merchant_services
from merchants.dashboard import MerchantScopedAdmin, ReadOnlyAdmin
from merchants.models import AuditAction
from webhooks import selectors
from webhooks.admin_deliveries import (  # and their pages
    attempts_log,
    error_shown,
    with_errors_in_full,
)
from webhooks.models import Delivery, DeliveryStatus, Event, WebhookEndpoint
from webhooks.services.endpoints import (
    EVENT_TYPES,
    endpoint_add,
    endpoint_rotate_secret,
    endpoint_update,
    event_types_validate,
    webhook_url_validate,
)
from webhooks.services.events import endpoint_send_test_event
from webhooks.services.resend import endpoint_recovery_since, event_resend

logger = logging.getLogger("cowry.webhooks")


def events_table(events) -> str:
    """A payin's, payout's or transfer's events (webhooks.selectors.events_about), each linked
    to its page (every attempt and the receiver's answers; re-send), with each delivery's
    endpoint, status and attempt count, linked to the delivery's page."""
    rows = [
        (
            display.timestamp(event.created_at),
            format_html(
                '<a href="{}">{}</a>',
                reverse("admin:webhooks_event_change", args=[event.pk]),
                event.event_type,
            ),
            format_html_join(
                mark_safe("<br>"),
                '<a href="{}">{}</a>: {}, {} attempt(s)',
                (
                    (
                        reverse("admin:webhooks_delivery_change", args=[delivery.pk]),
                        delivery.endpoint.url,
                        delivery.status,
                        delivery.attempts,
                    )
                    for delivery in event.deliveries.all()
                ),
            )
            or "no delivery (no endpoint subscribed)",
        )
        for event in events
    ]
    return html_table(["at", "event", "deliveries"], rows)


class WebhookEndpointForm(forms.ModelForm):
    url = forms.URLField(label="URL", max_length=2048, assume_scheme="https")
    event_types = forms.MultipleChoiceField(
        choices=[(name, name) for name in EVENT_TYPES],
        widget=forms.CheckboxSelectMultiple,
        required=False,
        help_text="None ticked: every event.",
    )

    class Meta:
        model = WebhookEndpoint
        fields = ["merchant", "url", "event_types", "enabled"]

    def clean_url(self) -> str:
        try:
            return webhook_url_validate(self.cleaned_data["url"])
        except DomainError as exc:
            raise forms.ValidationError(exc.message) from exc

    def clean_event_types(self) -> list[str]:
        value = list(self.cleaned_data.get("event_types") or [])
        try:
            return event_types_validate(value)
        except DomainError as exc:
            raise forms.ValidationError(exc.message) from exc


@admin.register(WebhookEndpoint)
class WebhookEndpointAdmin(MerchantScopedAdmin):
    form = WebhookEndpointForm
    list_display = [
        "merchant",
        "url",
        "event_types",
        "enabled",
        "disabled_reason",
        "created_at",
        "updated_at",
    ]
    list_filter = ["enabled", "disabled_reason"]
    search_fields = ["merchant__name", "url"]
    actions = ["send_test_event", "rotate_signing_secret"]
    change_form_template = "admin/webhooks/webhookendpoint/change_form.html"

    def has_add_permission(self, request, *args) -> bool:
        return dashboard.can_change_credentials(request.user)

    def has_change_permission(self, request, obj=None) -> bool:
        return dashboard.can_change_credentials(request.user)

    def has_manage_permission(self, request, obj=None) -> bool:
        return dashboard.can_change_credentials(request.user)

    def get_fields(self, request, obj=None):
        if obj is None:
            fields = ["merchant", "url"] if dashboard.is_ops(request.user) else ["url"]
            return [*fields, "event_types"]
        return [
            "merchant",
            "url",
            "event_types",
            "enabled",
            "disabled_reason",
            "disabled_at",
            "created_at",
            "updated_at",
            "recent_deliveries",
        ]

    def get_form(self, request, obj=None, change=False, **kwargs):
        kwargs["fields"] = [
            f
            for f in self.get_fields(request, obj)
            if f in ("merchant", "url", "event_types", "enabled")
        ]
        return super().get_form(request, obj, change, **kwargs)

    def get_readonly_fields(self, request, obj=None):
        if obj is None:
            return []
        return [
            "merchant",
            "disabled_reason",
            "disabled_at",
            "created_at",
            "updated_at",
            "recent_deliveries",
        ]

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    @admin.display(description="Recent deliveries")
    @display.computed_once
    def recent_deliveries(self, obj: WebhookEndpoint) -> str:
        rows = [
            (
                format_html(
                    '<a href="{}">{}</a>',
                    reverse("admin:webhooks_delivery_change", args=[d.pk]),
                    d.event.event_type,
                ),
                d.status,
                d.attempts,
                display.timestamp(d.created_at),
            )
            for d in obj.deliveries.select_related("event").order_by("-created_at")[:20]
        ]
        return html_table(["event", "status", "attempts", "created"], rows)

    actions_detail = ["send_test_event_detail", "rotate_signing_secret_detail"]

    @unfold_action(description="Send a test event", url_path="send-test", permissions=["manage"])
    def send_test_event_detail(self, request, object_id):
        def perform(endpoint, reason):
            delivery = endpoint_send_test_event(endpoint_id=endpoint.pk, now=timezone.now())
            return f"Test event {delivery.event_id} queued for {endpoint.url}."

        return object_actions.confirm_then(
            self,
            request,
            object_id,
            title="Send a test event",
            consequence=lambda e: f"A signed test event goes to {e.url} now; no money moves.",
            perform=perform,
        )

    @unfold_action(
        description="Rotate the signing secret", url_path="rotate-secret", permissions=["manage"]
    )
    def rotate_signing_secret_detail(self, request, object_id):
        def perform(endpoint, reason):
            secret = endpoint_rotate_secret(endpoint_id=endpoint.pk, now=timezone.now())
            merchant_services.audit_record(
                merchant=endpoint.merchant,
                actor=request.user,
                action=AuditAction.WEBHOOK_SECRET_ROTATED,
                target=endpoint.url,
                detail={"reason": reason},
            )
            self._show_secret_once(request, endpoint, secret)
            return f"{endpoint.url} is signed with its new secret from now on."

        response = object_actions.confirm_then(
            self,
            request,
            object_id,
            title="Rotate the signing secret",
            consequence=lambda e: (
                f"Deliveries to {e.url} are signed with a new secret from now on; your receiver "
                "must switch to it, or it will refuse them. No money moves."
            ),
            perform=perform,
        )
        return self._to_new_secrets(request, response)

    def save_model(self, request, obj, form, change) -> None:
        now = timezone.now()
        if change:
            switched_on = obj.enabled and "enabled" in form.changed_data
            disabled = (obj.disabled_at, obj.disabled_reason)  # as read: enabling clears them
            endpoint_update(
                endpoint_id=obj.pk,
                url=obj.url,
                enabled=obj.enabled,
                event_types=obj.event_types or [],
                now=now,
            )
            if switched_on:
                self._offer_missed_events(request, obj, *disabled)
            merchant_services.audit_record(
                merchant=obj.merchant,
                actor=request.user,
                action=AuditAction.WEBHOOK_UPDATED,
                target=obj.url,
                detail={"enabled": obj.enabled, "event_types": obj.event_types or []},
            )
            return
        merchant = (
            obj.merchant if dashboard.is_ops(request.user) else dashboard.merchant_of(request.user)
        )
        # A merchant has up to five endpoints: adding one never replaces another.
        endpoint, secret = endpoint_add(
            merchant=merchant, url=obj.url, event_types=obj.event_types or [], now=now
        )
        merchant_services.audit_record(
            merchant=merchant,
            actor=request.user,
            action=AuditAction.WEBHOOK_UPDATED,
            target=obj.url,
        )
        obj.pk = endpoint.pk
        obj.merchant = merchant  # the form has no merchant field for merchant staff
        obj.created_at = endpoint.created_at
        obj.updated_at = endpoint.updated_at
        obj.enabled = endpoint.enabled
        self._show_secret_once(request, endpoint, secret)

    def response_add(self, request, obj, post_url_continue=None):
        return self._to_new_secrets(request, super().response_add(request, obj, post_url_continue))

    def _offer_missed_events(
        self, request, endpoint: WebhookEndpoint, disabled_at, disabled_reason: str
    ) -> None:
        """Switched back on: say which call gets it what it missed while off, and from when.
        Not sent from here: the merchant may have caught up from GET /events meanwhile, or
        moved the URL to another system, and chooses the window (docs/decisions.md)."""
        since = "when it was disabled"
        if disabled_at is not None:
            since = format_timestamp(
                endpoint_recovery_since(disabled_at=disabled_at, disabled_reason=disabled_reason)
            )
        messages.info(
            request,
            f"{endpoint.url} is enabled again. It got no delivery of the events recorded while "
            f'it was disabled: POST /events/resend-failed with {{"since": "{since}"}} sends it '
            "each one it missed, and re-sends the deliveries that failed since then, each once.",
        )

    def _show_secret_once(self, request, endpoint: WebhookEndpoint, secret: str) -> None:
        """The new secret, to the merchant's own managers only: ops never see one."""
        if not dashboard.can_manage_credentials(request.user):
            messages.info(
                request,
                f"{endpoint.url} has a new signing secret: the merchant's owners and developers "
                "see it with Reveal.",
            )
            return
        secret_once.hold(request, kind="webhook", object_id=endpoint.pk, secret=secret)
        request._cowry_secret_held = True

    def _to_new_secrets(self, request, response):
        """A secret was just made for this user: its page next (with the messages) instead."""
        if getattr(request, "_cowry_secret_held", False):
            return HttpResponseRedirect(reverse("admin:webhooks_webhookendpoint_new_secrets"))
        return response

    def get_urls(self):
        reveal = path(
            "<uuid:endpoint_id>/reveal-secret/",
            self.admin_site.admin_view(self.reveal_secret_view),
            name="webhooks_webhookendpoint_reveal",
        )
        new_secrets = path(
            "new-secrets/",
            self.admin_site.admin_view(self.new_secrets_view),
            name="webhooks_webhookendpoint_new_secrets",
        )
        return [reveal, new_secrets, *super().get_urls()]

    def new_secrets_view(self, request):
        """The signing secrets this session just made, each shown once (after: Reveal)."""
        if not dashboard.can_manage_credentials(request.user):
            raise PermissionDenied
        held = secret_once.take_each(request, kind="webhook")
        endpoints = self.get_queryset(request).filter(pk__in=list(held)).order_by("url")
        response = TemplateResponse(
            request,
            "admin/webhooks/webhookendpoint/new_secrets.html",
            {
                **self.admin_site.each_context(request),
                "shown": [(endpoint, held[str(endpoint.pk)]) for endpoint in endpoints],
                "opts": self.model._meta,
                "title": "New signing secrets",
            },
        )
        response["Cache-Control"] = "no-store"
        return response

    def render_change_form(self, request, context, *args, **kwargs):
        context["can_reveal_secret"] = dashboard.can_manage_credentials(request.user)
        return super().render_change_form(request, context, *args, **kwargs)

    def reveal_secret_view(self, request, endpoint_id):
        """The merchant's own owners and developers only, on an explicit POST; recorded."""
        endpoint = self.get_queryset(request).filter(pk=endpoint_id).first()
        if endpoint is None:
            raise Http404("Not found.")
        if not dashboard.can_manage_credentials(request.user):
            raise PermissionDenied
        secret = None
        unreadable = False
        if request.method == "POST":
            try:
                secret = selectors.endpoint_signing_secret(endpoint=endpoint)
            except secrets_at_rest.UnreadableSecret:
                unreadable = True
                logger.error(
                    "The signing secret of webhook endpoint %s cannot be decrypted with any key"
                    " of WEBHOOK_SECRETS_KEYS",
                    endpoint.pk,
                )
        if secret is not None:
            merchant_services.audit_record(
                merchant=endpoint.merchant,
                actor=request.user,
                action=AuditAction.WEBHOOK_SECRET_REVEALED,
                target=endpoint.url,
            )
        response = TemplateResponse(
            request,
            "admin/webhooks/webhookendpoint/reveal_secret.html",
            {
                **self.admin_site.each_context(request),
                "endpoint": endpoint,
                "secret": secret,
                "unreadable": unreadable,
                "opts": self.model._meta,
                "title": "Webhook signing secret",
            },
        )
        response["Cache-Control"] = "no-store"
        return response

    @admin.action(description="Send a test event to the selected endpoints", permissions=["manage"])
    def send_test_event(self, request, queryset) -> None:
        for endpoint in queryset:
            try:
                delivery = endpoint_send_test_event(endpoint_id=endpoint.pk, now=timezone.now())
            except DomainError as exc:
                self.message_user(request, f"{endpoint.url}: {exc.message}", messages.ERROR)
            else:
                self.message_user(
                    request, f"Test event {delivery.event_id} queued for {endpoint.url}."
                )

    @admin.action(
        description="Rotate the signing secret of the selected endpoints", permissions=["manage"]
    )
    def rotate_signing_secret(self, request, queryset) -> None:
        for endpoint in queryset:
            secret = endpoint_rotate_secret(endpoint_id=endpoint.pk, now=timezone.now())
            merchant_services.audit_record(
                merchant=endpoint.merchant,
                actor=request.user,
                action=AuditAction.WEBHOOK_SECRET_ROTATED,
                target=endpoint.url,
            )
            self._show_secret_once(request, endpoint, secret)
        return self._to_new_secrets(request, None)


class DeliveryInline(ScopedInlineMixin, unfold_admin.TabularInline):
    """An event's deliveries in four columns that fit beside the sidebar at 1400 px: the URL
    (a link to the delivery's page) and the errors wrap, the status shares a column with the
    attempts' count and the next or delivered time, and each attempt has lines of its own."""

    model = Delivery
    extra = 0
    can_delete = False
    hide_title = True  # "<event> -> <URL> (<status>)": the columns say it
    fields = ["endpoint_url", "state", "last_error_shown", "attempts_log"]
    readonly_fields = fields

    def get_queryset(self, request):
        queryset = super().get_queryset(request).select_related("event", "endpoint")
        return with_errors_in_full(request, queryset.prefetch_related("attempt_log"))

    @admin.display(description="last error")
    def last_error_shown(self, obj: Delivery) -> str:
        return display.wrapped(error_shown(obj.last_error, in_full=obj.errors_in_full))

    @admin.display(description="URL")
    def endpoint_url(self, obj: Delivery) -> str:
        return format_html(
            '<a href="{}">{}</a>',
            reverse("admin:webhooks_delivery_change", args=[obj.pk]),
            display.wrapped(obj.endpoint.url, min_width="10rem"),
        )

    @admin.display(description="status")
    def state(self, obj: Delivery) -> str:
        attempts = f"{obj.attempts} attempt{pluralize(obj.attempts)}"
        if obj.delivered_at is not None:
            when = format_html("<br>delivered {}", display.timestamp(obj.delivered_at))
        elif obj.status in (DeliveryStatus.PENDING, DeliveryStatus.DELIVERING):
            when = format_html("<br>next {}", display.timestamp(obj.next_attempt_at))
        else:
            when = ""
        return format_html("{}, {}{}", obj.get_status_display(), attempts, when)

    @admin.display(description="attempts")
    @display.computed_once
    def attempts_log(self, obj: Delivery):
        return attempts_log(obj)


class EventDeliveryStatusFilter(admin.SimpleListFilter):
    """Events with a delivery in that status, as EXISTS (same parameter as before): Django's
    filter on deliveries__status joined the deliveries, a row per delivery, so the list was
    DISTINCT over every column of the event, its payload and body included, whether the
    filter was used or not."""

    title = "delivery status"
    parameter_name = "deliveries__status"

    def lookups(self, request, model_admin):
        return DeliveryStatus.choices

    def queryset(self, request, queryset):
        if self.value() is None:
            return queryset
        deliveries = Delivery.objects.filter(event=OuterRef("pk"), status=self.value())
        return queryset.filter(Exists(deliveries))


def _resend_audited(event: Event, *, actor, detail: dict) -> None:
    """Re-send the event and record it in the audit log, in one transaction."""
    with transaction.atomic():
        event_resend(event_id=event.pk, now=timezone.now())
        merchant_services.audit_record(
            merchant=event.merchant,
            actor=actor,
            action=AuditAction.EVENT_RESENT,
            target=str(event.pk),
            detail={"event_type": event.event_type, **detail},
        )


@admin.register(Event)
class EventAdmin(ReadOnlyAdmin):  # events are facts; re-sending is an action
    list_display = ["id", "event_type", "merchant", "data_type", "data_id", "created_at"]
    list_filter = [
        "merchant",
        ("event_type", known_values_filter(lambda: EVENT_TYPES)),
        EventDeliveryStatusFilter,
    ]
    search_fields = ["id", "data_id"]
    date_hierarchy = "created_at"
    fields = ["id", "merchant", "event_type", "data_type", "data_id", "created_at", "envelope"]
    readonly_fields = fields
    inlines = [DeliveryInline]
    actions = ["resend_events"]
    actions_detail = ["resend_event_detail"]

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("merchant")

    @admin.display(description="envelope")
    def envelope(self, obj: Event):
        return format_html("<pre>{}</pre>", json.dumps(obj.payload, indent=2))

    def has_resend_permission(self, request, obj=None) -> bool:
        return dashboard.can_change_credentials(request.user) or dashboard.is_support(request.user)

    @unfold_action(description="Re-send this event", url_path="resend", permissions=["resend"])
    def resend_event_detail(self, request, object_id):
        def perform(event, reason):
            _resend_audited(event, actor=request.user, detail={"reason": reason})
            return f"Event {event.pk} queued for delivery."

        return object_actions.confirm_then(
            self,
            request,
            object_id,
            title="Re-send this event",
            consequence=lambda e: (
                f"The {e.event_type} event goes again, same id and body, to every enabled "
                "endpoint subscribed to it; no money moves."
            ),
            perform=perform,
        )

    @admin.action(
        description="Re-send the selected events now (new delivery, same event id)",
        permissions=["resend"],
    )
    def resend_events(self, request, queryset) -> None:
        for event in queryset:
            try:
                _resend_audited(event, actor=request.user, detail={})
            except DomainError as exc:
                self.message_user(request, f"Event {event.pk}: {exc.message}", messages.ERROR)
            else:
                self.message_user(request, f"Event {event.pk} queued for delivery.")
