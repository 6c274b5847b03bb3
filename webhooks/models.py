import uuid

from django.db import models

from merchants.models import Merchant

# The dashboard's test event: recorded for one endpoint (its data id) and delivered to it only.
TEST_EVENT_TYPE = "webhook.test"


class EndpointDisabledReason(models.TextChoices):
    NONE = "", "—"
    FAILING = "failing", "every delivery failed for 5 days"


class WebhookEndpoint(models.Model):
    """Where a merchant's events go: up to MAX_ENDPOINTS_PER_MERCHANT per merchant, each with
    its own URL, signing secret and subscribed event types (empty: every event). The oldest is
    the primary endpoint, the one `set_webhook` sets. The signing secret is stored encrypted
    (core.secrets_at_rest: the signer needs it back, so it cannot be hashed); it is
    `editable=False` so no admin form or page ever renders it, and it is shown only once, when
    it is set or rotated, or on an owner's audited reveal."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    merchant = models.ForeignKey(
        Merchant, on_delete=models.CASCADE, related_name="webhook_endpoints", db_index=False
    )  # endpoint_merchant leads with it
    url = models.URLField(max_length=2048)
    # A Fernet token of the secret (200 characters at most, up to 800 bytes of UTF-8): 1164
    # characters at most.
    signing_secret = models.CharField(max_length=1200, editable=False)
    event_types = models.JSONField(
        default=list,
        blank=True,
        help_text='Event names this endpoint receives, e.g. ["payout.completed"]; empty: all.',
    )
    enabled = models.BooleanField(default=True)
    disabled_reason = models.CharField(
        max_length=32, choices=EndpointDisabledReason.choices, blank=True, default=""
    )
    disabled_at = models.DateTimeField(null=True, blank=True)
    # The last change that could make failing deliveries succeed: created, moved (URL), a new
    # signing secret, switched back on. The failing-endpoint sweep counts only attempts made
    # since; a change of subscription, or a save that changes nothing, leaves it.
    delivery_settings_changed_at = models.DateTimeField()
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        verbose_name = "webhook endpoint"
        ordering = ["merchant", "created_at", "id"]
        indexes = [models.Index(fields=["merchant", "created_at"], name="endpoint_merchant")]

    def __str__(self) -> str:
        return f"{self.merchant}: {self.url}"

    def subscribed_to(self, event_type: str) -> bool:
        return not self.event_types or event_type in self.event_types


class Event(models.Model):
    """A webhook event, written in the same transaction as the state change that
    caused it (transactional outbox). `payload` is the envelope; `body` is that envelope
    serialized once, the exact bytes (UTF-8) sent on every attempt."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    merchant = models.ForeignKey(
        Merchant, on_delete=models.PROTECT, related_name="events", db_index=False
    )  # event_merchant_page leads with it
    event_type = models.CharField(max_length=64)
    data_type = models.CharField(max_length=16)
    data_id = models.UUIDField()
    payload = models.JSONField()
    body = models.TextField(default="", editable=False)
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["merchant", "-created_at", "-id"], name="event_merchant_page"),
            models.Index(fields=["-created_at", "-id"], name="event_recent"),  # support's list
            models.Index(
                fields=["merchant", "event_type", "-created_at", "-id"], name="event_type_page"
            ),
            models.Index(fields=["data_id"], name="event_data_id"),
        ]

    def __str__(self) -> str:
        return f"{self.event_type} {self.data_id}"


class DeliveryStatus(models.TextChoices):
    PENDING = "pending"  # waiting for next_attempt_at
    DELIVERING = "delivering"  # claimed by a worker until next_attempt_at (the lease)
    SUCCEEDED = "succeeded"
    FAILED = "failed"


class Delivery(models.Model):
    """One event to one endpoint. `next_attempt_at` is when the delivery may next be claimed:
    the retry due time while pending, the end of the worker's lease while delivering."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    event = models.ForeignKey(Event, on_delete=models.CASCADE, related_name="deliveries")
    endpoint = models.ForeignKey(
        WebhookEndpoint, on_delete=models.CASCADE, related_name="deliveries"
    )
    status = models.CharField(
        max_length=16, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING
    )
    attempts = models.PositiveSmallIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    dispatched_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True, default="")
    delivered_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        ordering = ["-created_at"]
        verbose_name_plural = "deliveries"
        indexes = [
            models.Index(
                fields=["next_attempt_at"],
                name="delivery_due",
                condition=models.Q(status__in=["pending", "delivering"]),
            ),
            # the dashboard's list, newest first (merchant staff's too: it walks this one
            # and keeps their merchant's events' deliveries)
            models.Index(fields=["-created_at", "-id"], name="delivery_recent"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(status__in=DeliveryStatus.values), name="delivery_status_valid"
            ),
            models.CheckConstraint(
                condition=~models.Q(status__in=["pending", "delivering"])
                | models.Q(next_attempt_at__isnull=False),
                name="delivery_open_has_due_time",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.event} -> {self.endpoint.url} ({self.status})"


class DeliveryAttempt(models.Model):
    """One HTTP request of a delivery, as the receiver answered it."""

    delivery = models.ForeignKey(
        Delivery, on_delete=models.CASCADE, related_name="attempt_log", db_index=False
    )  # a composite index leads with it
    number = models.PositiveSmallIntegerField()
    url = models.URLField(max_length=2048)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    response_status = models.PositiveSmallIntegerField(null=True, blank=True)
    duration_ms = models.PositiveIntegerField(null=True, blank=True)
    error = models.TextField(blank=True, default="")
    response_body = models.TextField(blank=True, default="")

    class Meta:
        ordering = ["delivery", "number"]
        constraints = [
            models.UniqueConstraint(fields=["delivery", "number"], name="attempt_number_unique")
        ]

    def __str__(self) -> str:
        return f"attempt {self.number} of {self.delivery_id}"

    @property
    def succeeded(self) -> bool:
        return self.response_status is not None and 200 <= self.response_status < 300


def _primary_webhook_endpoint(merchant: Merchant) -> WebhookEndpoint | None:
    """`merchant.webhook_endpoint`, as when a merchant had one endpoint: now the primary
    (oldest) of its endpoints, or None."""
    return merchant.webhook_endpoints.order_by("created_at", "id").first()


Merchant.webhook_endpoint = property(_primary_webhook_endpoint)
