"""The delivery pages of the dashboard: each delivery with its attempts. An attempt's error is
recorded as the sender wrote it, an exception's text at times; merchant staff read it in plain
words ("Connection refused"), support and ops read both."""

import re

from django.contrib import admin
from django.db.models import BooleanField, Value
from django.utils.html import format_html, format_html_join
from unfold import admin as unfold_admin

from core import display
from core.dashboard import ScopedInlineMixin, known_values_filter
from merchants import dashboard
from merchants.dashboard import ReadOnlyAdmin
from webhooks import selectors
from webhooks.models import Delivery, DeliveryAttempt
from webhooks.services.endpoints import EVENT_TYPES

_TLS = re.compile(r"SSLError|\[SSL")
# What an exception's text says went wrong, in a few words, first match wins.
_CAUSES = (
    ("connection refused", "Connection refused"),
    ("certificate_verify_failed", "TLS error: certificate not trusted"),
    ("failed to resolve", "Host name not found"),
    ("name or service not known", "Host name not found"),
    ("temporary failure in name resolution", "Host name not found"),
    ("connection reset", "Connection reset by the receiver"),
    ("remotedisconnected", "Connection closed without an answer"),
    ("connection aborted", "Connection closed without an answer"),
    ("network is unreachable", "Network unreachable"),
    ("no route to host", "Network unreachable"),
    ("timed out", "Timed out"),
)
# Errors Cowry words itself (webhooks.services), a redirect's Location included: already plain.
_OWN_WORDS = ("HTTP ", "Timed out after ", "Blocked: ", "No result recorded", "Not sent: ")


def plain_error(error: str) -> str:
    """A recorded error in a few plain words: "Could not connect: HTTPConnection(host=...):
    Failed to establish a new connection: [Errno 111] Connection refused" is "Connection
    refused"; "HTTP 500" and "Timed out after 10 s" stay as they are."""
    if not error or error.startswith(_OWN_WORDS):
        return error
    lowered = error.lower()
    cause = next((plain for needle, plain in _CAUSES if needle in lowered), None)
    if cause is None and _TLS.search(error):
        cause = "TLS error"
    return cause or "Could not connect"


def as_recorded(text: str) -> str:
    """A receiver's answer or an error as recorded: verbatim, wrapping to fit its column."""
    return format_html(
        '<code class="text-base-500 text-xs" style="overflow-wrap: anywhere; '
        'white-space: pre-wrap">{}</code>',
        text,
    )


def error_shown(error: str, *, in_full: bool) -> str:
    """An error in plain words; for support and ops, as recorded beneath when it differs."""
    plain = plain_error(error)
    if not in_full or plain == error:
        return plain or "—"
    return format_html("{}<br>{}", plain, as_recorded(error))


def attempts_log(delivery: Delivery) -> str:
    """A delivery's attempts, each on its lines (its number, start, duration and outcome, the
    receiver's stored answer beneath): one column of the event's deliveries at 1400 px."""
    lines = [
        format_html(
            '<div class="py-1">#{} {}, {}: {}{}</div>',
            attempt.number,
            display.timestamp(attempt.started_at),
            _duration(attempt),
            display.wrapped(_outcome(attempt)),
            format_html("<br>{}", as_recorded(attempt.response_body))
            if attempt.response_body
            else "",
        )
        for attempt in delivery.attempt_log.all()
    ]
    return format_html_join("", "{}", ((line,) for line in lines)) or "—"


def _duration(attempt: DeliveryAttempt) -> str:
    return "—" if attempt.duration_ms is None else f"{attempt.duration_ms} ms"


def _outcome(attempt: DeliveryAttempt) -> str:
    """The attempt's error in plain words, else the receiver's status."""
    if attempt.error:
        return plain_error(attempt.error)
    return "—" if attempt.response_status is None else f"HTTP {attempt.response_status}"


def with_errors_in_full(request, queryset):
    """The rows, each knowing whether this user reads its errors as recorded (support, ops)."""
    in_full = dashboard.is_ops(request.user) or dashboard.is_support(request.user)
    return queryset.annotate(errors_in_full=Value(in_full, output_field=BooleanField()))


class DeliveryAttemptInline(ScopedInlineMixin, unfold_admin.TabularInline):
    """A delivery's attempts in five columns that fit beside the sidebar at 1400 px: the URL,
    the error and the receiver's answer wrap; the start and the duration share a column."""

    model = DeliveryAttempt
    extra = 0
    can_delete = False
    hide_title = True  # "attempt 1 of <delivery id>": the number column says it
    fields = ["number", "url_shown", "sent", "error_shown", "answer"]
    readonly_fields = fields

    def get_queryset(self, request):
        return with_errors_in_full(request, super().get_queryset(request))

    @admin.display(description="URL")
    def url_shown(self, obj: DeliveryAttempt) -> str:
        return display.wrapped(obj.url, min_width="10rem")

    @admin.display(description="started, took")
    def sent(self, obj: DeliveryAttempt) -> str:
        return format_html("{}<br>{}", display.timestamp(obj.started_at), _duration(obj))

    @admin.display(description="error")
    def error_shown(self, obj: DeliveryAttempt) -> str:
        return display.wrapped(error_shown(obj.error, in_full=obj.errors_in_full))

    @admin.display(description="answer (first KiB)")
    def answer(self, obj: DeliveryAttempt) -> str:
        if obj.response_status is None:
            return "—"
        body = format_html("<br>{}", as_recorded(obj.response_body)) if obj.response_body else ""
        return format_html("HTTP {}{}", obj.response_status, body)


# Read-only: saving the page would write back the delivery as read, over the sender's progress.
FAILING_DELIVERIES_QUERY = "failing=yes"  # the list of what the homes count as failing


class FailingFilter(admin.SimpleListFilter):
    title = "failing"
    parameter_name = "failing"

    def lookups(self, request, model_admin):
        return [("yes", "Failing (failed, or retried after a failure)")]

    def queryset(self, request, queryset):
        return selectors.failing_deliveries(queryset) if self.value() == "yes" else queryset


@admin.register(Delivery)
class DeliveryAdmin(ReadOnlyAdmin):
    merchant_path = "event__merchant"
    list_display = [
        "id",
        "event",
        "merchant",
        "status",
        "attempts",
        "next_attempt_at",
        "delivered_at",
        "created_at",
    ]
    list_filter = [
        "status",
        FailingFilter,
        "event__merchant",
        ("event__event_type", known_values_filter(lambda: EVENT_TYPES)),
    ]
    search_fields = ["id", "event__id", "event__data_id"]
    fields = [
        "id",
        "event",
        "endpoint",
        "status",
        "attempts",
        "next_attempt_at",
        "dispatched_at",
        "delivered_at",
        "last_error_shown",
        "created_at",
        "updated_at",
    ]
    readonly_fields = fields
    inlines = [DeliveryAttemptInline]

    def get_queryset(self, request):
        queryset = super().get_queryset(request).select_related("event__merchant", "endpoint")
        return with_errors_in_full(request, queryset)

    @admin.display(description="merchant")
    def merchant(self, obj: Delivery):
        return obj.event.merchant

    @admin.display(description="last error")
    def last_error_shown(self, obj: Delivery) -> str:
        return error_shown(obj.last_error, in_full=obj.errors_in_full)
