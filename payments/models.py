import uuid
from datetime import datetime

from django.db import models
from django.utils.functional import cached_property

from merchants.models import Merchant

AMOUNT = {"max_digits": 20, "decimal_places": 2}


class Wallet(models.Model):
    """The merchant's balances in one currency. Both columns mirror the sum of the lines of the
    merchant's `merchant_available` / `merchant_reserved` ledger accounts and are only ever
    changed by payments.ledger.journals.post_journal, under this row's lock."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    merchant = models.ForeignKey(
        Merchant, on_delete=models.PROTECT, related_name="wallets", db_index=False
    )  # a composite index leads with it
    currency = models.CharField(max_length=3)
    available = models.DecimalField(default=0, **AMOUNT)
    reserved = models.DecimalField(default=0, **AMOUNT)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["merchant", "currency"]
        constraints = [
            models.UniqueConstraint(
                fields=["merchant", "currency"], name="wallet_one_per_merchant_currency"
            ),
            models.CheckConstraint(
                condition=models.Q(available__gte=0), name="wallet_available_not_negative"
            ),
            models.CheckConstraint(
                condition=models.Q(reserved__gte=0), name="wallet_reserved_not_negative"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.merchant} {self.currency}"


class LedgerAccount(models.Model):
    """One account of the double-entry ledger, scoped to a merchant and a currency.
    `code` is one of the codes documented in payments/ledger.py."""

    id = models.BigAutoField(primary_key=True)
    merchant = models.ForeignKey(
        Merchant, on_delete=models.PROTECT, related_name="ledger_accounts", db_index=False
    )  # a composite index leads with it
    currency = models.CharField(max_length=3)
    code = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["merchant", "currency", "code"]
        constraints = [
            models.UniqueConstraint(
                fields=["merchant", "currency", "code"], name="ledger_account_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.code} ({self.currency})"


class Journal(models.Model):
    """A balanced set of ledger lines caused by one resource. (resource_type, resource_id, kind)
    is unique, so a retried task can never post the same movement twice."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    merchant = models.ForeignKey(
        Merchant, on_delete=models.PROTECT, related_name="journals", db_index=False
    )  # journal_merchant_recent leads with it
    currency = models.CharField(max_length=3)
    kind = models.CharField(max_length=64)
    resource_type = models.CharField(max_length=32)
    resource_id = models.UUIDField()
    memo = models.CharField(max_length=255, blank=True)
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["resource_type", "resource_id", "kind"],
                name="journal_once_per_resource_kind",
            )
        ]
        indexes = [
            models.Index(fields=["merchant", "-created_at"], name="journal_merchant_recent"),
            models.Index(fields=["-created_at", "-id"], name="journal_recent"),  # support's list
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.resource_type} {self.resource_id}"


class JournalLine(models.Model):
    """Signed amount: positive credits the account (what Cowry owes grows), negative debits it.
    The lines of one journal sum to zero."""

    id = models.BigAutoField(primary_key=True)
    journal = models.ForeignKey(Journal, on_delete=models.PROTECT, related_name="lines")
    account = models.ForeignKey(LedgerAccount, on_delete=models.PROTECT, related_name="lines")
    amount = models.DecimalField(**AMOUNT)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.CheckConstraint(
                condition=~models.Q(amount=0), name="journal_line_amount_not_zero"
            )
        ]

    def __str__(self) -> str:
        return f"{self.account.code} {self.amount}"


class PayinStatus(models.TextChoices):
    CREATED = "created"
    PENDING = "pending"
    COMPLETED = "completed"
    FAILED = "failed"


class PayoutStatus(models.TextChoices):
    PENDING = "pending"
    COMPLETED = "completed"
    FAILED = "failed"


class _ProviderLeg(models.Model):
    """What payins, payouts and refunds share: the operator's leg, its provider call and times."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    country_code = models.CharField(max_length=2)
    rail_type = models.CharField(max_length=16)
    operator_code = models.CharField(max_length=64)
    wallet_impact = models.JSONField(default=dict)
    provider_reference = models.CharField(max_length=64, blank=True)
    provider_connection = models.CharField(
        max_length=40,
        default="simulator",
        help_text="The provider connection the leg goes through (chosen when it is created).",
    )
    submitted_at = models.DateTimeField(null=True, blank=True)
    provider_poll_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="Due time of the next status poll after one without an answer (it grows).",
    )
    provider_timeout_at = models.DateTimeField(
        help_text=(
            "Due time: still not final then, the sweep asks the provider and, without an "
            "answer, fails it with provider_timeout (a disbursement it cannot ask about waits)."
        )
    )
    completed_at = models.DateTimeField(null=True, blank=True)
    failed_at = models.DateTimeField(null=True, blank=True)
    failure_reason = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        abstract = True

    @cached_property
    def history_entries(self) -> list:
        """The status history, oldest first: prefetched by the selectors, or set by the
        service that just wrote it, so a response never reads it back."""
        return list(self.history.all())


class _Payment(_ProviderLeg):
    """What payins and payouts share beside the provider leg: the quote's locked amounts."""

    send_amount = models.DecimalField(**AMOUNT)
    send_currency = models.CharField(max_length=3)
    receive_amount = models.DecimalField(**AMOUNT)
    receive_currency = models.CharField(max_length=3)
    total_fee = models.DecimalField(**AMOUNT)
    pricing = models.JSONField(default=dict)

    class Meta:
        abstract = True


class Payin(_Payment):
    merchant = models.ForeignKey(
        Merchant, on_delete=models.PROTECT, related_name="payins", db_index=False
    )  # payin_merchant_page leads with it
    customer = models.ForeignKey(
        "customers.Customer", on_delete=models.PROTECT, related_name="payins"
    )
    quote = models.OneToOneField("quotes.Quote", on_delete=models.PROTECT, related_name="payin")
    status = models.CharField(
        max_length=16, choices=PayinStatus.choices, default=PayinStatus.CREATED
    )
    source = models.JSONField(default=dict, help_text="The payer: phone, or bank account fields.")

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(status__in=PayinStatus.values), name="payin_status_valid"
            ),
            models.CheckConstraint(
                condition=models.Q(send_amount__gt=0)
                & models.Q(receive_amount__gt=0)
                & models.Q(total_fee__gte=0),
                name="payin_amounts_valid",
            ),
        ]
        indexes = [
            models.Index(fields=["merchant", "-created_at", "-id"], name="payin_merchant_page"),
            # support's list of every merchant's payins (dashboard), newest first
            models.Index(fields=["-created_at", "-id"], name="payin_recent"),
            models.Index(
                fields=["merchant", "status", "-created_at", "-id"], name="payin_status_page"
            ),
            models.Index(
                fields=["provider_timeout_at"],
                condition=models.Q(status__in=["created", "pending"]),
                name="payin_open_timeout",
            ),
            models.Index(  # payments waiting for their submission (sweeps)
                fields=["created_at"],
                condition=models.Q(status="created"),
                name="payin_awaiting_submission",
            ),
            models.Index(  # the dashboard's search by a pasted provider reference
                fields=["provider_reference"],
                condition=~models.Q(provider_reference=""),
                name="payin_provider_reference",
            ),
        ]

    def __str__(self) -> str:
        return f"payin {self.id} ({self.status})"


class PayinHistory(models.Model):
    id = models.BigAutoField(primary_key=True)
    payin = models.ForeignKey(Payin, on_delete=models.CASCADE, related_name="history")
    status = models.CharField(max_length=16, choices=PayinStatus.choices)
    reason = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["created_at", "id"]
        verbose_name_plural = "payin history"

    def __str__(self) -> str:
        return f"{self.status} {self.reason}".strip()


class Payout(_Payment):
    merchant = models.ForeignKey(
        Merchant, on_delete=models.PROTECT, related_name="payouts", db_index=False
    )  # payout_merchant_page leads with it
    customer = models.ForeignKey(
        "customers.Customer", on_delete=models.PROTECT, related_name="payouts"
    )
    quote = models.OneToOneField("quotes.Quote", on_delete=models.PROTECT, related_name="payout")
    status = models.CharField(
        max_length=16, choices=PayoutStatus.choices, default=PayoutStatus.PENDING
    )
    debit_amount = models.DecimalField(
        help_text="send_amount + total_fee: reserved at creation, settled or released at the end.",
        **AMOUNT,
    )
    recipient = models.JSONField(default=dict)
    payment_reason_code = models.CharField(max_length=64, blank=True)
    payment_reason_text = models.CharField(max_length=255, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(status__in=PayoutStatus.values), name="payout_status_valid"
            ),
            models.CheckConstraint(
                condition=models.Q(send_amount__gt=0)
                & models.Q(receive_amount__gt=0)
                & models.Q(total_fee__gte=0)
                & models.Q(debit_amount=models.F("send_amount") + models.F("total_fee")),
                name="payout_amounts_valid",
            ),
        ]
        indexes = [
            models.Index(fields=["merchant", "-created_at", "-id"], name="payout_merchant_page"),
            models.Index(fields=["-created_at", "-id"], name="payout_recent"),  # support's list
            models.Index(
                fields=["merchant", "status", "-created_at", "-id"], name="payout_status_page"
            ),
            models.Index(
                fields=["provider_timeout_at"],
                condition=models.Q(status="pending"),
                name="payout_open_timeout",
            ),
            models.Index(  # payments waiting for their submission (sweeps)
                fields=["created_at"],
                condition=models.Q(status="pending", submitted_at__isnull=True),
                name="payout_awaiting_submission",
            ),
            models.Index(  # the dashboard's search by a pasted provider reference
                fields=["provider_reference"],
                condition=~models.Q(provider_reference=""),
                name="payout_provider_reference",
            ),
        ]

    def __str__(self) -> str:
        return f"payout {self.id} ({self.status})"


class PayoutHistory(models.Model):
    id = models.BigAutoField(primary_key=True)
    payout = models.ForeignKey(Payout, on_delete=models.CASCADE, related_name="history")
    status = models.CharField(max_length=16, choices=PayoutStatus.choices)
    reason = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["created_at", "id"]
        verbose_name_plural = "payout history"

    def __str__(self) -> str:
        return f"{self.status} {self.reason}".strip()


class ProviderDiscrepancy(models.Model):
    """A provider answer that contradicts a state we already made final (e.g. "completed" for
    a payout failed by the timeout sweep). Nothing is changed automatically: money may have
    moved without a journal, so support reconciles it by hand and marks it resolved (a failed
    payin, or a transfer's failed collection, the provider collected: ops credit it with
    `credit_wallet --discrepancy`; a failed payout, or the disbursement of a transfer whose
    collected funds were returned, the provider paid: ops take it back with `debit_wallet
    --discrepancy`; either resolves it)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    merchant = models.ForeignKey(Merchant, on_delete=models.PROTECT, related_name="+")
    resource_type = models.CharField(max_length=32)
    resource_id = models.UUIDField()
    reference = models.CharField(max_length=100)
    provider_reference = models.CharField(max_length=64, blank=True)
    provider_outcome = models.CharField(max_length=16)
    provider_reason = models.CharField(max_length=100, blank=True)
    our_status = models.CharField(max_length=32)
    received_at = models.DateTimeField()
    resolved_at = models.DateTimeField(null=True, blank=True)
    resolved_by = models.CharField(max_length=150, blank=True)

    class Meta:
        ordering = ["-received_at"]
        verbose_name_plural = "provider discrepancies"
        constraints = [
            models.UniqueConstraint(
                fields=["resource_type", "reference", "provider_outcome"],
                name="provider_discrepancy_once_per_answer",
            )
        ]

    def __str__(self) -> str:
        return f"{self.resource_type} {self.resource_id}: provider {self.provider_outcome}"

    def mark_resolved(self, *, by: str, at: datetime) -> None:
        """Record who reconciled it and when (the caller holds its row lock)."""
        self.resolved_at, self.resolved_by = at, by
        self.save(update_fields=["resolved_at", "resolved_by"])


class RefundStatus(models.TextChoices):
    PENDING = "pending"
    COMPLETED = "completed"
    FAILED = "failed"


class Refund(_ProviderLeg):
    """Money returned to the payer of a completed payin: `amount` is reserved from the wallet at
    creation, paid to the payin's source as a disbursement, released if it fails."""

    merchant = models.ForeignKey(
        Merchant, on_delete=models.PROTECT, related_name="refunds", db_index=False
    )  # refund_merchant_page leads with it
    payin = models.ForeignKey(Payin, on_delete=models.PROTECT, related_name="refunds")
    customer = models.ForeignKey(
        "customers.Customer", on_delete=models.PROTECT, related_name="refunds"
    )
    status = models.CharField(
        max_length=16, choices=RefundStatus.choices, default=RefundStatus.PENDING
    )
    amount = models.DecimalField(**AMOUNT)
    currency = models.CharField(max_length=3)
    reason = models.CharField(max_length=255, blank=True)
    recipient = models.JSONField(default=dict, help_text="The payin's payer: phone or bank fields.")

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(status__in=RefundStatus.values), name="refund_status_valid"
            ),
            models.CheckConstraint(condition=models.Q(amount__gt=0), name="refund_amount_valid"),
        ]
        indexes = [
            models.Index(fields=["merchant", "-created_at", "-id"], name="refund_merchant_page"),
            models.Index(fields=["-created_at", "-id"], name="refund_recent"),  # support's list
            models.Index(
                fields=["merchant", "status", "-created_at", "-id"], name="refund_status_page"
            ),
            models.Index(
                fields=["provider_timeout_at"],
                condition=models.Q(status="pending"),
                name="refund_open_timeout",
            ),
            models.Index(  # refunds waiting for their submission (sweeps)
                fields=["created_at"],
                condition=models.Q(status="pending", submitted_at__isnull=True),
                name="refund_awaiting_submission",
            ),
        ]

    def __str__(self) -> str:
        return f"refund {self.id} ({self.status})"


class RefundHistory(models.Model):
    id = models.BigAutoField(primary_key=True)
    refund = models.ForeignKey(Refund, on_delete=models.CASCADE, related_name="history")
    status = models.CharField(max_length=16, choices=RefundStatus.choices)
    reason = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["created_at", "id"]
        verbose_name_plural = "refund history"

    def __str__(self) -> str:
        return f"{self.status} {self.reason}".strip()
