import uuid

from django.db import models

from merchants.models import Merchant


class CustomerType(models.TextChoices):
    INDIVIDUAL = "individual"
    RETAIL = "retail"
    BUSINESS = "business"


class IdType(models.TextChoices):
    NATIONAL_ID = "national_id"
    PASSPORT = "passport"
    DRIVER_LICENSE = "driver_license"


class KycStatus(models.TextChoices):
    NOT_STARTED = "not_started"
    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"


class CustomerStatus(models.TextChoices):
    ACTIVE = "active"
    BLOCKED = "blocked"


class Customer(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    merchant = models.ForeignKey(
        Merchant, on_delete=models.PROTECT, related_name="customers", db_index=False
    )  # a composite index leads with it
    external_ref = models.CharField(max_length=128, null=True, blank=True)  # noqa: DJ001
    customer_type = models.CharField(
        max_length=16, choices=CustomerType.choices, default=CustomerType.INDIVIDUAL
    )
    first_name = models.CharField(max_length=100, blank=True)
    last_name = models.CharField(max_length=100, blank=True)
    business_name = models.CharField(max_length=200, blank=True)
    id_number = models.CharField(max_length=64, blank=True)
    id_type = models.CharField(max_length=16, choices=IdType.choices, blank=True)
    email = models.EmailField(max_length=254, blank=True)
    phone = models.CharField(max_length=16, blank=True)
    country_code = models.CharField(max_length=2, blank=True)
    nationality_code = models.CharField(max_length=2, blank=True)
    date_of_birth = models.DateField(null=True, blank=True)
    address_line1 = models.CharField(max_length=255, blank=True)
    city = models.CharField(max_length=100, blank=True)
    occupation = models.CharField(max_length=100, blank=True)
    source_of_funds = models.CharField(max_length=100, blank=True)
    kyc_status = models.CharField(
        "KYC status", max_length=16, choices=KycStatus.choices, default=KycStatus.NOT_STARTED
    )
    status = models.CharField(
        max_length=16, choices=CustomerStatus.choices, default=CustomerStatus.ACTIVE
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["merchant", "external_ref"],
                condition=models.Q(external_ref__isnull=False),
                name="customer_external_ref_unique_per_merchant",
            ),
            models.CheckConstraint(
                condition=models.Q(kyc_status__in=KycStatus.values),
                name="customer_kyc_status_valid",
            ),
            models.CheckConstraint(
                condition=models.Q(customer_type__in=CustomerType.values),
                name="customer_type_valid",
            ),
        ]
        indexes = [
            models.Index(fields=["merchant", "-created_at", "-id"], name="customer_merchant_page"),
            models.Index(fields=["-created_at", "-id"], name="customer_recent"),  # support's list
            models.Index(
                fields=["merchant", "status", "-created_at", "-id"], name="customer_status_page"
            ),
        ]

    def __str__(self) -> str:
        name = self.business_name or f"{self.first_name} {self.last_name}".strip()
        return name or str(self.id)
