"""A provider connection is a named way to reach an operator API, with its settings and its
credentials (encrypted at rest); each catalog operator routes to one (no row: the simulator)."""

from django.db import models


class ConnectionKind(models.TextChoices):
    SIMULATOR = "simulator"
    MTN_MOMO = "mtn_momo"


# The built-in connection: every operator's route until ops change it. Never a row.
SIMULATOR = "simulator"


class ProviderConnection(models.Model):
    name = models.SlugField(max_length=40, unique=True)
    kind = models.CharField(max_length=16, choices=ConnectionKind.choices)
    base_url = models.URLField(max_length=300)
    target_environment = models.CharField(max_length=64)
    callback_base = models.URLField(max_length=300, help_text="Cowry's public base URL.")
    credentials = models.TextField(help_text="Fernet token of the credentials' JSON.")
    callback_secret = models.TextField(help_text="Fernet token of the callback URL's secret.")
    last_success_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    def __str__(self) -> str:
        return self.name


class OperatorRoute(models.Model):
    """The connection a catalog operator's new legs are submitted through."""

    operator_code = models.CharField(max_length=64, primary_key=True)
    connection = models.ForeignKey(
        ProviderConnection, on_delete=models.PROTECT, related_name="routes"
    )
    updated_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.operator_code} -> {self.connection_id}"


class ProviderError(models.Model):
    """A connection's trouble as ops see it on their home (at most one a minute per connection
    and step, as its log line)."""

    id = models.BigAutoField(primary_key=True)
    # provider_error_recent (connection, -created_at) serves the foreign key's lookups too.
    connection = models.ForeignKey(
        ProviderConnection, on_delete=models.CASCADE, related_name="errors", db_index=False
    )
    step = models.CharField(max_length=32)
    message = models.CharField(max_length=300)
    created_at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["connection", "-created_at"], name="provider_error_recent")]

    def __str__(self) -> str:
        return f"{self.step}: {self.message}"


class ProviderAnswer(models.Model):
    """What the operator last said of one of our requests (by our reference): its status, its
    raw code and its transaction id, kept for support beside the leg it answers."""

    id = models.BigAutoField(primary_key=True)
    connection = models.CharField(max_length=40)
    product = models.CharField(max_length=16)
    reference = models.CharField(max_length=64)
    status = models.CharField(max_length=32)
    raw_code = models.CharField(max_length=64, blank=True)
    financial_transaction_id = models.CharField(max_length=64, blank=True)
    updated_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["reference", "product", "connection"], name="provider_answer_reference"
            )
        ]

    def __str__(self) -> str:
        return f"{self.product} {self.reference}: {self.status} {self.raw_code}".rstrip()
