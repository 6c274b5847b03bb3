import uuid

from django.db import models

from merchants.models import Merchant

AMOUNT = {"max_digits": 20, "decimal_places": 2}


class TransferStatus(models.TextChoices):
    PENDING = "pending"
    COLLECTING = "collecting"
    DISBURSING = "disbursing"
    COMPLETED = "completed"
    FAILED = "failed"


class LegStatus(models.TextChoices):
    """Status of one leg (payin_status / payout_status). `not_started`: the disbursement waits
    for the collection; `cancelled`: it never starts because the collection failed, or will
    never run again because support returned the collected funds to the merchant's wallet."""

    NOT_STARTED = "not_started"
    PENDING = "pending"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


class Transfer(models.Model):
    """A two-leg flow: collect payin_amount from the payer, then disburse payout_amount to the
    recipient. Amounts, fee, rate and routing come from the consumed transfer quote; only a
    relaunch-payout may lower payout_amount or replace the recipient (and its operator)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    merchant = models.ForeignKey(
        Merchant, on_delete=models.PROTECT, related_name="transfers", db_index=False
    )  # a composite index leads with it
    customer = models.ForeignKey(
        "customers.Customer", on_delete=models.PROTECT, related_name="transfers"
    )
    quote = models.OneToOneField("quotes.Quote", on_delete=models.PROTECT, related_name="transfer")
    status = models.CharField(
        max_length=16, choices=TransferStatus.choices, default=TransferStatus.PENDING
    )
    payin_status = models.CharField(
        max_length=16, choices=LegStatus.choices, default=LegStatus.PENDING
    )
    payout_status = models.CharField(
        max_length=16, choices=LegStatus.choices, default=LegStatus.NOT_STARTED
    )

    payin_amount = models.DecimalField(**AMOUNT)
    payin_currency = models.CharField(max_length=3)
    payout_amount = models.DecimalField(
        help_text="What the recipient gets; a relaunch may lower it.", **AMOUNT
    )
    payout_currency = models.CharField(max_length=3)
    quoted_payout_amount = models.DecimalField(
        help_text="The quote's payout amount: a relaunch may not go above it.", **AMOUNT
    )
    total_fee = models.DecimalField(help_text="In payin_currency.", **AMOUNT)
    fx_rate = models.DecimalField(max_digits=20, decimal_places=10)
    corridor_code = models.CharField(max_length=32)
    corridor_type = models.CharField(max_length=16)
    payer_operator_code = models.CharField(max_length=64)
    recipient_operator_code = models.CharField(max_length=64)
    payer_country_code = models.CharField(max_length=2)
    recipient_country_code = models.CharField(max_length=2)
    payer_rail_type = models.CharField(max_length=16)
    recipient_rail_type = models.CharField(max_length=16)
    payer = models.JSONField(default=dict, help_text="Payer party fields (no routing).")
    recipient = models.JSONField(default=dict, help_text="Recipient party fields (no routing).")
    payment_reason_code = models.CharField(max_length=64, blank=True)
    sender_source_of_funds = models.CharField(max_length=100, blank=True)
    sender_occupation = models.CharField(max_length=100, blank=True)
    pricing = models.JSONField(default=dict)

    # The collection leg.
    collection_reference = models.CharField(max_length=64, blank=True)
    collection_connection = models.CharField(
        max_length=40, default="simulator", help_text="The collection leg's provider connection."
    )
    collection_submitted_at = models.DateTimeField(null=True, blank=True)
    collection_completed_at = models.DateTimeField(null=True, blank=True)
    collection_failed_at = models.DateTimeField(null=True, blank=True)
    collection_failure_reason = models.CharField(max_length=64, blank=True)
    # The current disbursement attempt (1 at first, +1 per relaunch).
    disbursement_attempt = models.PositiveIntegerField(default=0)
    disbursement_reference = models.CharField(max_length=64, blank=True)
    leg_poll_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="Due time of the next status poll of the leg in flight (it grows).",
    )
    disbursement_connection = models.CharField(
        max_length=40,
        default="simulator",
        help_text="The disbursement leg's provider connection (a relaunch keeps it).",
    )
    disbursement_submitted_at = models.DateTimeField(null=True, blank=True)
    disbursement_completed_at = models.DateTimeField(null=True, blank=True)
    disbursement_failed_at = models.DateTimeField(null=True, blank=True)
    disbursement_failure_reason = models.CharField(max_length=64, blank=True)
    leg_timeout_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text=(
            "Due time of the leg in flight: not answered by then, the sweep asks the provider "
            "and, without an answer, fails it (a disbursement it cannot ask about waits)."
        ),
    )

    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(status__in=TransferStatus.values), name="transfer_status_valid"
            ),
            models.CheckConstraint(
                condition=models.Q(payin_status__in=LegStatus.values)
                & models.Q(payout_status__in=LegStatus.values),
                name="transfer_leg_status_valid",
            ),
            models.CheckConstraint(
                condition=models.Q(payin_amount__gt=0)
                & models.Q(payout_amount__gt=0)
                & models.Q(total_fee__gte=0)
                & models.Q(payout_amount__lte=models.F("quoted_payout_amount")),
                name="transfer_amounts_valid",
            ),
        ]
        indexes = [
            models.Index(fields=["merchant", "-created_at", "-id"], name="transfer_merchant_page"),
            models.Index(fields=["-created_at", "-id"], name="transfer_recent"),  # support's list
            models.Index(
                fields=["merchant", "status", "-created_at", "-id"],
                name="transfer_merchant_status_page",
            ),
            models.Index(
                fields=["leg_timeout_at"],
                condition=models.Q(status__in=["pending", "collecting", "disbursing"]),
                name="transfer_open_timeout",
            ),
            # the dashboard's search by a pasted provider reference of either leg
            models.Index(
                fields=["collection_reference"],
                condition=~models.Q(collection_reference=""),
                name="transfer_collection_ref",
            ),
            models.Index(
                fields=["disbursement_reference"],
                condition=~models.Q(disbursement_reference=""),
                name="transfer_disbursement_ref",
            ),
        ]

    def __str__(self) -> str:
        return f"transfer {self.id} ({self.status})"

    # Spec names: send_* are the payin side, receive_* the payout side.
    @property
    def send_amount(self):
        return self.payin_amount

    @property
    def send_currency(self) -> str:
        return self.payin_currency

    @property
    def receive_amount(self):
        return self.payout_amount

    @property
    def receive_currency(self) -> str:
        return self.payout_currency


class TransferHistory(models.Model):
    id = models.BigAutoField(primary_key=True)
    transfer = models.ForeignKey(Transfer, on_delete=models.CASCADE, related_name="history")
    status = models.CharField(max_length=16, choices=TransferStatus.choices)
    payin_status = models.CharField(max_length=16, choices=LegStatus.choices)
    payout_status = models.CharField(max_length=16, choices=LegStatus.choices)
    reason = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["created_at", "id"]
        verbose_name_plural = "transfer history"

    def __str__(self) -> str:
        return f"{self.status} {self.reason}".strip()


class TransferDisbursementAttempt(models.Model):
    """One disbursement attempt of a transfer, as it ended: written by transfer_transition in
    the statement of the history row of the move that answered it (completed, failed, a
    provider's completion applied by support) and again, from the same columns, by the
    relaunch that replaces it, which resets them. The attempt in flight is the transfer's own
    disbursement_* columns until then."""

    id = models.BigAutoField(primary_key=True)
    transfer = models.ForeignKey(
        Transfer, on_delete=models.CASCADE, related_name="disbursement_attempts", db_index=False
    )  # the unique constraint leads with it
    attempt = models.PositiveIntegerField()
    provider_reference = models.CharField(max_length=64, blank=True)
    payout_amount = models.DecimalField(**AMOUNT)
    payout_currency = models.CharField(max_length=3)
    recipient_operator_code = models.CharField(max_length=64)
    submitted_at = models.DateTimeField(
        null=True, blank=True, help_text="When its last call to the provider started."
    )
    answered_at = models.DateTimeField(null=True, blank=True)
    outcome = models.CharField(max_length=16, choices=LegStatus.choices)
    failure_reason = models.CharField(max_length=64, blank=True)

    class Meta:
        ordering = ["attempt"]
        constraints = [
            models.UniqueConstraint(
                fields=["transfer", "attempt"], name="transfer_disbursement_attempt_unique"
            ),
            models.CheckConstraint(
                condition=models.Q(outcome__in=[LegStatus.COMPLETED, LegStatus.FAILED]),
                name="transfer_disbursement_attempt_outcome_valid",
            ),
        ]
        indexes = [
            models.Index(  # the dashboard's search by a pasted provider reference
                fields=["provider_reference"],
                condition=~models.Q(provider_reference=""),
                name="transfer_attempt_provider_ref",
            ),
        ]

    def __str__(self) -> str:
        return f"attempt {self.attempt} ({self.outcome})"
