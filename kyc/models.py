import uuid

from django.conf import settings
from django.db import models

from customers.models import Customer, KycStatus


class DocumentType(models.TextChoices):
    NATIONAL_ID = "national_id"
    PASSPORT = "passport"
    DRIVER_LICENSE = "driver_license"
    RESIDENCE_PERMIT = "residence_permit"
    VOTER_CARD = "voter_card"
    PROOF_OF_ADDRESS = "proof_of_address"
    BUSINESS_REGISTRATION = "business_registration"


class DocumentStatus(models.TextChoices):
    UPLOADED = "uploaded"
    FETCHED = "fetched"
    FETCH_FAILED = "fetch_failed"


class ReviewStatus(models.TextChoices):
    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"


class SubmissionOutcome(models.TextChoices):
    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"
    SUPERSEDED = "superseded"


FILE_SIDES = ("front", "back", "selfie")


class KycSubmission(models.Model):
    """One POST /customers/{id}/kyc: the documents reviewed together. Only the customer's
    latest submission decides its kyc_status."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    customer = models.ForeignKey(
        Customer, on_delete=models.PROTECT, related_name="kyc_submissions", db_index=False
    )  # a composite index leads with it
    number = models.PositiveIntegerField(help_text="1 for the customer's first submission.")
    outcome = models.CharField(
        max_length=16, choices=SubmissionOutcome.choices, default=SubmissionOutcome.PENDING
    )
    created_at = models.DateTimeField()
    reviewed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "KYC submission"
        ordering = ["-number"]
        constraints = [
            models.UniqueConstraint(
                fields=["customer", "number"], name="kyc_submission_number_unique"
            ),
            models.CheckConstraint(
                condition=models.Q(outcome__in=SubmissionOutcome.values),
                name="kyc_submission_outcome_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"KYC submission #{self.number} ({self.outcome})"


class KycDocument(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    submission = models.ForeignKey(
        KycSubmission, on_delete=models.PROTECT, related_name="documents"
    )
    customer = models.ForeignKey(Customer, on_delete=models.PROTECT, related_name="kyc_documents")
    position = models.PositiveSmallIntegerField(default=0)
    document_type = models.CharField(max_length=32, choices=DocumentType.choices)
    document_number = models.CharField(max_length=64, blank=True)
    issue_country_code = models.CharField(max_length=2, blank=True)
    issue_date = models.DateField(null=True, blank=True)
    expiry_date = models.DateField(null=True, blank=True)
    front_file_url = models.CharField(max_length=2048, blank=True)
    back_file_url = models.CharField(max_length=2048, blank=True)
    selfie_file_url = models.CharField(max_length=2048, blank=True)
    front_file = models.FileField(max_length=255, blank=True)
    back_file = models.FileField(max_length=255, blank=True)
    selfie_file = models.FileField(max_length=255, blank=True)
    status = models.CharField(
        max_length=16, choices=DocumentStatus.choices, default=DocumentStatus.UPLOADED
    )
    failure_reason = models.CharField(max_length=255, blank=True)
    fetched_at = models.DateTimeField(null=True, blank=True)
    review_status = models.CharField(
        max_length=16, choices=ReviewStatus.choices, default=ReviewStatus.PENDING
    )
    rejection_reason = models.CharField(max_length=255, blank=True)
    reviewed_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField()

    class Meta:
        verbose_name = "KYC document"
        ordering = ["created_at", "position"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(status__in=DocumentStatus.values),
                name="kyc_document_status_valid",
            ),
            models.CheckConstraint(
                condition=models.Q(review_status__in=ReviewStatus.values),
                name="kyc_document_review_status_valid",
            ),
            models.CheckConstraint(
                condition=~models.Q(front_file_url="", back_file_url="", selfie_file_url=""),
                name="kyc_document_has_a_file_url",
            ),
            models.CheckConstraint(
                condition=models.Q(expiry_date__isnull=True)
                | models.Q(issue_date__isnull=True)
                | models.Q(expiry_date__gt=models.F("issue_date")),
                name="kyc_document_expiry_after_issue",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.document_type} {self.id} ({self.status})"

    def file_urls(self) -> dict[str, str]:
        """side -> URL, for the sides the merchant sent."""
        return {
            side: getattr(self, f"{side}_file_url")
            for side in FILE_SIDES
            if getattr(self, f"{side}_file_url")
        }


class KycStatusChange(models.Model):
    """History of a customer's kyc_status: one row per move, written by
    kyc.status.customer_kyc_transition in the same transaction as the move."""

    id = models.BigAutoField(primary_key=True)
    customer = models.ForeignKey(
        Customer, on_delete=models.PROTECT, related_name="kyc_status_changes"
    )
    from_status = models.CharField(max_length=16, choices=KycStatus.choices)
    to_status = models.CharField(max_length=16, choices=KycStatus.choices)
    reason = models.CharField(max_length=500, blank=True)
    submission = models.ForeignKey(
        KycSubmission, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    changed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="+",
        help_text="The support user who made the change by hand; empty for the system.",
    )
    created_at = models.DateTimeField()

    class Meta:
        verbose_name = "KYC status change"
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.from_status} → {self.to_status}"
