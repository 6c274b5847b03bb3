import uuid
from datetime import datetime

from django.contrib.postgres.fields import ArrayField
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models.functions import Concat
from django.utils import timezone

from core.money import CURRENCIES, CURRENCY_COUNTRIES, format_amount

CURRENCY_CHOICES = [(c, c) for c in CURRENCIES]
AMOUNT = {"max_digits": 20, "decimal_places": 2}


def _currency_of_country(*, country: str, currency: str) -> models.Q:
    """The row's `currency` field is the money of its `country` field."""
    return models.Q.create(
        [
            models.Q(**{currency: code, f"{country}__in": countries})
            for code, countries in CURRENCY_COUNTRIES.items()
        ],
        connector=models.Q.OR,
    )


class RailType(models.TextChoices):
    MOBILE_MONEY = "mobile_money"
    BANK_TRANSFER = "bank_transfer"


# The last part of an operator's code names its rail.
RAIL_SUFFIX = {RailType.MOBILE_MONEY: "MOMO", RailType.BANK_TRANSFER: "BANK"}
# <COUNTRY>_<OPERATOR>_<RAIL>, e.g. CM_MTN_MOMO; the constraint also ties COUNTRY and RAIL to
# the operator's fields.
OPERATOR_CODE_PATTERN = rf"^[A-Z]{{2}}_[A-Z0-9]+(_[A-Z0-9]+)*_({'|'.join(RAIL_SUFFIX.values())})$"


class CorridorType(models.TextChoices):
    DOMESTIC = "domestic"
    CROSS_BORDER = "cross_border"


class FlowType(models.TextChoices):
    PAYIN = "payin"
    PAYOUT = "payout"
    TRANSFER = "transfer"


class QuoteStatus(models.TextChoices):
    ACTIVE = "active"
    EXPIRED = "expired"
    CONSUMED = "consumed"


class OperatorStatus(models.TextChoices):
    """How the operator works right now, set by support staff: `delayed` still quotes (answers
    are slow), `closed` refuses new quotes (400 operator_closed)."""

    OPERATIONAL = "operational"
    DELAYED = "delayed"
    CLOSED = "closed"


class Operator(models.Model):
    """A provider route: <COUNTRY>_<OPERATOR>_<RAIL>, e.g. CM_MTN_MOMO."""

    code = models.CharField(max_length=64, unique=True)
    country_code = models.CharField(max_length=2)
    currency = models.CharField(max_length=3, choices=CURRENCY_CHOICES)
    rail_type = models.CharField(max_length=16, choices=RailType.choices)
    name = models.CharField(max_length=100)
    min_amount = models.DecimalField(**AMOUNT)
    max_amount = models.DecimalField(**AMOUNT)
    active = models.BooleanField(default=True)
    status = models.CharField(
        max_length=16,
        choices=OperatorStatus.choices,
        default=OperatorStatus.OPERATIONAL,
        help_text="Set by support: delayed still quotes; closed refuses new quotes.",
    )
    network_names = ArrayField(
        models.CharField(max_length=64),
        default=list,
        blank=True,
        help_text=(
            "Operator prediction: the network names the phone number library reports for this "
            "operator's numbers, comma-separated (case is ignored), e.g. MTN Cameroon."
        ),
    )
    network_independent = models.BooleanField(
        default=False,
        help_text=(
            "A wallet that works with any network's number (e.g. Wave): never predicted, "
            "offered beside the prediction for its country."
        ),
    )

    class Meta:
        ordering = ["code"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(network_independent=False) | models.Q(network_names=[]),
                name="operator_network_independent_has_no_network",
                violation_error_message="A wallet usable with any network lists no network names.",
            ),
            models.CheckConstraint(
                condition=models.Q(status__in=OperatorStatus.values),
                name="operator_status_valid",
            ),
            models.CheckConstraint(
                condition=models.Q(min_amount__gte=0)
                & models.Q(max_amount__gte=models.F("min_amount")),
                name="operator_limits_valid",
            ),
            models.CheckConstraint(
                condition=models.Q(rail_type__in=RailType.values), name="operator_rail_valid"
            ),
            models.CheckConstraint(
                condition=models.Q(code__regex=OPERATOR_CODE_PATTERN)
                & models.Q(code__startswith=Concat("country_code", models.Value("_")))
                & models.Q.create(
                    [
                        models.Q(rail_type=rail, code__endswith=f"_{suffix}")
                        for rail, suffix in RAIL_SUFFIX.items()
                    ],
                    connector=models.Q.OR,
                ),
                name="operator_code_names_country_and_rail",
                violation_error_message=(
                    "The code must be <COUNTRY>_<OPERATOR>_<RAIL> in capitals: its country's"
                    " code first, MOMO last for mobile money, BANK for a bank transfer."
                ),
            ),
            models.CheckConstraint(
                condition=_currency_of_country(country="country_code", currency="currency"),
                name="operator_currency_of_its_country",
                violation_error_message=(
                    "The currency must be the country's: XAF in the CEMAC, XOF in the UEMOA."
                ),
            ),
        ]

    def __str__(self) -> str:
        return self.code


class Corridor(models.Model):
    """A transfer route, code <payer_country>-<recipient_country>-<payer_cur>-<recipient_cur>."""

    code = models.CharField(max_length=32, unique=True)
    payer_country = models.CharField(max_length=2)
    recipient_country = models.CharField(max_length=2)
    payer_currency = models.CharField(max_length=3, choices=CURRENCY_CHOICES)
    recipient_currency = models.CharField(max_length=3, choices=CURRENCY_CHOICES)
    corridor_type = models.CharField(max_length=16, choices=CorridorType.choices)
    requires_sender_details = models.BooleanField(default=False)
    requires_kyc = models.BooleanField("requires KYC", default=False)
    active = models.BooleanField(default=True)

    class Meta:
        ordering = ["code"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(corridor_type__in=CorridorType.values),
                name="corridor_type_valid",
            ),
            models.CheckConstraint(
                condition=models.Q(
                    code=Concat(
                        "payer_country",
                        models.Value("-"),
                        "recipient_country",
                        models.Value("-"),
                        "payer_currency",
                        models.Value("-"),
                        "recipient_currency",
                        output_field=models.CharField(),
                    )
                ),
                name="corridor_code_names_route",
                violation_error_message=(
                    "The code must be <payer_country>-<recipient_country>-<payer_currency>-"
                    "<recipient_currency>, e.g. CM-SN-XAF-XOF."
                ),
            ),
            models.CheckConstraint(
                condition=models.Q(
                    corridor_type=CorridorType.DOMESTIC, payer_country=models.F("recipient_country")
                )
                | (
                    models.Q(corridor_type=CorridorType.CROSS_BORDER)
                    & ~models.Q(payer_country=models.F("recipient_country"))
                ),
                name="corridor_type_matches_countries",
                violation_error_message=(
                    "A corridor within one country is domestic; between two, cross-border."
                ),
            ),
            models.CheckConstraint(
                condition=_currency_of_country(country="payer_country", currency="payer_currency")
                & _currency_of_country(country="recipient_country", currency="recipient_currency"),
                name="corridor_currencies_of_its_countries",
                violation_error_message=(
                    "Each currency must be its country's: XAF in the CEMAC, XOF in the UEMOA."
                ),
            ),
        ]

    def __str__(self) -> str:
        return self.code


class FeeSchedule(models.Model):
    """fee = percentage% x amount + fixed, clamped to [minimum_fee, maximum_fee], rounded up.

    merchant null = the platform default. operator or corridor narrow the schedule; the most
    specific active schedule wins (merchant over platform, operator/corridor over flow-wide).
    Fixed, minimum and maximum are in units of the amount's currency (XAF and XOF are at par).
    """

    merchant = models.ForeignKey(
        "merchants.Merchant",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="fee_schedules",
        help_text="Empty: the platform default for every merchant.",
    )
    flow_type = models.CharField(max_length=16, choices=FlowType.choices)
    operator = models.ForeignKey(
        Operator, on_delete=models.CASCADE, null=True, blank=True, related_name="fee_schedules"
    )
    corridor = models.ForeignKey(
        Corridor, on_delete=models.CASCADE, null=True, blank=True, related_name="fee_schedules"
    )
    percentage = models.DecimalField(
        max_digits=7, decimal_places=4, default=0, help_text="In percent: 1.5 means 1.5%."
    )
    fixed_amount = models.DecimalField(**AMOUNT, default=0)
    minimum_fee = models.DecimalField(**AMOUNT, default=0)
    maximum_fee = models.DecimalField(**AMOUNT, null=True, blank=True)
    active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["merchant__name", "flow_type", "id"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(percentage__gte=0) & models.Q(percentage__lt=100),
                name="fee_percentage_valid",
            ),
            models.CheckConstraint(
                condition=models.Q(fixed_amount__gte=0) & models.Q(minimum_fee__gte=0),
                name="fee_amounts_non_negative",
            ),
            models.CheckConstraint(
                condition=models.Q(maximum_fee__isnull=True)
                | models.Q(maximum_fee__gte=models.F("minimum_fee")),
                name="fee_maximum_above_minimum",
            ),
            models.CheckConstraint(
                condition=models.Q(operator__isnull=True) | models.Q(corridor__isnull=True),
                name="fee_operator_or_corridor",
            ),
            models.CheckConstraint(
                condition=models.Q(flow_type__in=FlowType.values), name="fee_flow_type_valid"
            ),
        ]

    def __str__(self) -> str:
        scope = self.operator or self.corridor or "all routes"
        owner = self.merchant or "platform"
        return f"{owner} {self.flow_type} {scope}"

    def clean(self) -> None:
        """A transfer is priced by its corridor, a payin or payout by its operator: a schedule
        narrowed the other way would never apply (the flow-wide one would be charged)."""
        super().clean()
        if self.flow_type == FlowType.TRANSFER and self.operator_id is not None:
            raise ValidationError({"operator": "A transfer's fee is narrowed by corridor only."})
        if self.flow_type != FlowType.TRANSFER and self.corridor_id is not None:
            raise ValidationError(
                {"corridor": "A payin's or payout's fee is narrowed by operator only."}
            )


class FxRate(models.Model):
    """target = source x rate x (1 - margin_percent/100). merchant null = the platform rate;
    a merchant row overrides it (typically the same rate with a margin)."""

    merchant = models.ForeignKey(
        "merchants.Merchant",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="fx_rates",
        db_index=False,  # fx_rate_unique_per_merchant leads with it
        help_text="Empty: the platform rate for every merchant.",
    )
    source_currency = models.CharField(max_length=3, choices=CURRENCY_CHOICES)
    target_currency = models.CharField(max_length=3, choices=CURRENCY_CHOICES)
    rate = models.DecimalField(max_digits=20, decimal_places=10)
    margin_percent = models.DecimalField(max_digits=7, decimal_places=4, default=0)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "FX rate"
        ordering = ["source_currency", "target_currency", "merchant__name"]
        constraints = [
            models.UniqueConstraint(
                fields=["merchant", "source_currency", "target_currency"],
                name="fx_rate_unique_per_merchant",
            ),
            models.UniqueConstraint(
                fields=["source_currency", "target_currency"],
                condition=models.Q(merchant__isnull=True),
                name="fx_rate_unique_platform",
            ),
            models.CheckConstraint(condition=models.Q(rate__gt=0), name="fx_rate_positive"),
            models.CheckConstraint(
                condition=models.Q(margin_percent__gte=0) & models.Q(margin_percent__lt=100),
                name="fx_margin_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.source_currency}->{self.target_currency} {format_amount(self.rate)}"


class Quote(models.Model):
    """Everything a payment needs, locked for QUOTE_TTL_SECONDS: amounts, fee, rate, routing."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    merchant = models.ForeignKey(
        "merchants.Merchant", on_delete=models.PROTECT, related_name="quotes", db_index=False
    )  # quote_merchant_page leads with it
    customer = models.ForeignKey(
        "customers.Customer",
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="quotes",
    )
    flow_type = models.CharField(max_length=16, choices=FlowType.choices)
    status = models.CharField(
        max_length=16, choices=QuoteStatus.choices, default=QuoteStatus.ACTIVE
    )
    expires_at = models.DateTimeField()
    send_amount = models.DecimalField(**AMOUNT)
    send_currency = models.CharField(max_length=3, choices=CURRENCY_CHOICES)
    receive_amount = models.DecimalField(**AMOUNT)
    receive_currency = models.CharField(max_length=3, choices=CURRENCY_CHOICES)
    country_code = models.CharField(max_length=2, blank=True)
    operator_code = models.CharField(max_length=64, blank=True)
    rail_type = models.CharField(max_length=16, choices=RailType.choices, blank=True)
    corridor_code = models.CharField(max_length=32, blank=True)
    corridor_type = models.CharField(max_length=16, choices=CorridorType.choices, blank=True)
    payer_operator_code = models.CharField(max_length=64, blank=True)
    recipient_operator_code = models.CharField(max_length=64, blank=True)
    total_fee = models.DecimalField(**AMOUNT)
    fx_rate = models.DecimalField(max_digits=20, decimal_places=10, null=True, blank=True)
    wallet_impact = models.JSONField(default=dict)
    pricing = models.JSONField(default=dict)
    consumed_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(status__in=QuoteStatus.values), name="quote_status_valid"
            ),
            models.CheckConstraint(
                condition=models.Q(flow_type__in=FlowType.values), name="quote_flow_type_valid"
            ),
            models.CheckConstraint(
                condition=models.Q(send_amount__gt=0)
                & models.Q(receive_amount__gt=0)
                & models.Q(total_fee__gte=0),
                name="quote_amounts_valid",
            ),
            models.CheckConstraint(
                condition=models.Q(status=QuoteStatus.CONSUMED, consumed_at__isnull=False)
                | (~models.Q(status=QuoteStatus.CONSUMED) & models.Q(consumed_at__isnull=True)),
                name="quote_consumed_at_iff_consumed",
            ),
        ]
        indexes = [
            models.Index(fields=["merchant", "-created_at", "-id"], name="quote_merchant_page"),
            models.Index(
                fields=["merchant", "status", "-created_at", "-id"], name="quote_status_page"
            ),
            models.Index(
                fields=["expires_at"],
                condition=models.Q(status=QuoteStatus.ACTIVE),
                name="quote_active_expiry",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.flow_type} quote {self.id}"

    def effective_status(self, now: datetime) -> str:
        """An active quote past expires_at is expired, whether or not the sweep has run."""
        if self.status == QuoteStatus.ACTIVE and self.expires_at < now:
            return QuoteStatus.EXPIRED
        return self.status

    @property
    def current_status(self) -> str:
        return self.effective_status(timezone.now())


class MerchantOperator(models.Model):
    """An operator the merchant may use for payins, payouts and transfer legs. Its table keeps
    the name it had in the merchants app, which owned it before migrations ran in app order."""

    merchant = models.ForeignKey(
        "merchants.Merchant",
        on_delete=models.CASCADE,
        related_name="operator_links",
        db_index=False,
    )  # a composite index leads with it
    operator = models.ForeignKey(Operator, on_delete=models.CASCADE, related_name="merchant_links")
    enabled_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "merchants_merchantoperator"
        verbose_name = "enabled operator"
        constraints = [
            models.UniqueConstraint(fields=["merchant", "operator"], name="merchant_operator_once")
        ]

    def __str__(self) -> str:
        return f"{self.merchant} · {self.operator}"


class MerchantCorridor(models.Model):
    """A transfer corridor the merchant may quote and use (table named as MerchantOperator's)."""

    merchant = models.ForeignKey(
        "merchants.Merchant",
        on_delete=models.CASCADE,
        related_name="corridor_links",
        db_index=False,
    )  # a composite index leads with it
    corridor = models.ForeignKey(Corridor, on_delete=models.CASCADE, related_name="merchant_links")
    enabled_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "merchants_merchantcorridor"
        verbose_name = "enabled corridor"
        constraints = [
            models.UniqueConstraint(fields=["merchant", "corridor"], name="merchant_corridor_once")
        ]

    def __str__(self) -> str:
        return f"{self.merchant} · {self.corridor}"
