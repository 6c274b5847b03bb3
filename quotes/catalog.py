"""The seeded catalog, default fee schedules and FX rates (docs/decisions.md): their data,
loading them, and enabling them for a merchant."""

from collections.abc import Iterable
from decimal import Decimal

from django.db import transaction
from django.db.models import Model, QuerySet

from merchants import services as merchant_services
from merchants.models import Merchant
from quotes.models import (
    RAIL_SUFFIX,
    Corridor,
    FeeSchedule,
    FxRate,
    MerchantCorridor,
    MerchantOperator,
    Operator,
    RailType,
)

# country -> (currency, [(operator part, display name)])
COVERAGE: dict[str, tuple[str, list[tuple[str, str]]]] = {
    "CM": ("XAF", [("MTN", "MTN Mobile Money Cameroon"), ("ORANGE", "Orange Money Cameroon")]),
    "SN": (
        "XOF",
        [
            ("ORANGE", "Orange Money Senegal"),
            ("FREE", "Free Money Senegal"),
            ("WAVE", "Wave Senegal"),
        ],
    ),
    "BJ": ("XOF", [("MTN", "MTN MoMo Benin"), ("MOOV", "Moov Money Benin")]),
    "TG": ("XOF", [("TMONEY", "T-Money Togo")]),
    "CI": (
        "XOF",
        [
            ("ORANGE", "Orange Money Côte d'Ivoire"),
            ("MTN", "MTN MoMo Côte d'Ivoire"),
            ("MOOV", "Moov Money Côte d'Ivoire"),
            ("WAVE", "Wave Côte d'Ivoire"),
        ],
    ),
}

# Operator prediction: the network names phonenumbers' carrier data gives each network's numbers
# (Free Senegal is "Yas" since its rebrand, Togocom "Togo Telecom"); ops edit them in the admin.
NETWORK_NAMES: dict[str, list[str]] = {
    "CM_MTN_MOMO": ["MTN Cameroon"],
    "CM_ORANGE_MOMO": ["Orange"],
    "SN_ORANGE_MOMO": ["Orange"],
    "SN_FREE_MOMO": ["Yas", "Free"],
    "BJ_MTN_MOMO": ["MTN"],
    "BJ_MOOV_MOMO": ["Moov"],
    "TG_TMONEY_MOMO": ["Togo Telecom", "Togocom"],
    "CI_ORANGE_MOMO": ["Orange"],
    "CI_MTN_MOMO": ["MTN"],
    "CI_MOOV_MOMO": ["Moov"],
}
# Wallets that work with any network's number: never predicted, offered beside the prediction.
NETWORK_INDEPENDENT = frozenset({"SN_WAVE_MOMO", "CI_WAVE_MOMO"})

OPERATOR_MIN_AMOUNT = Decimal("100")
OPERATOR_MAX_AMOUNT = Decimal("1000000")

# Platform default fee schedules (merchant = null), one per flow.
DEFAULT_FEES: dict[str, dict[str, Decimal | None]] = {
    "payin": {
        "percentage": Decimal("1.5"),
        "fixed_amount": Decimal("0"),
        "minimum_fee": Decimal("50"),
        "maximum_fee": Decimal("15000"),
    },
    "payout": {
        "percentage": Decimal("1"),
        "fixed_amount": Decimal("100"),
        "minimum_fee": Decimal("100"),
        "maximum_fee": Decimal("10000"),
    },
    "transfer": {
        "percentage": Decimal("2"),
        "fixed_amount": Decimal("0"),
        "minimum_fee": Decimal("100"),
        "maximum_fee": Decimal("20000"),
    },
}

# Both currencies are pegged to the euro at the same parity.
DEFAULT_FX_RATES: list[tuple[str, str, Decimal]] = [
    ("XAF", "XOF", Decimal("1")),
    ("XOF", "XAF", Decimal("1")),
]


def operators() -> list[dict]:
    rows = []
    for country, (currency, names) in COVERAGE.items():
        for part, name in names:
            code = f"{country}_{part}_{RAIL_SUFFIX[RailType.MOBILE_MONEY]}"
            rows.append(
                {
                    "code": code,
                    "country_code": country,
                    "currency": currency,
                    "rail_type": "mobile_money",
                    "name": name,
                    "min_amount": OPERATOR_MIN_AMOUNT,
                    "max_amount": OPERATOR_MAX_AMOUNT,
                    "network_names": list(NETWORK_NAMES.get(code, ())),
                    "network_independent": code in NETWORK_INDEPENDENT,
                }
            )
    return rows


def corridors() -> list[dict]:
    rows = []
    for payer, (payer_currency, _) in COVERAGE.items():
        for recipient, (recipient_currency, _) in COVERAGE.items():
            cross_border = payer != recipient
            rows.append(
                {
                    "code": f"{payer}-{recipient}-{payer_currency}-{recipient_currency}",
                    "payer_country": payer,
                    "recipient_country": recipient,
                    "payer_currency": payer_currency,
                    "recipient_currency": recipient_currency,
                    "corridor_type": "cross_border" if cross_border else "domestic",
                    "requires_sender_details": cross_border,
                    "requires_kyc": False,
                }
            )
    return rows


def catalog_seed() -> dict[str, int]:
    """Idempotently load the 12 operators, 25 corridors, the platform fee schedules and FX
    rates. Existing rows are left as the admin edited them; only missing ones are created."""
    created = {"operators": 0, "corridors": 0, "fee_schedules": 0, "fx_rates": 0}
    with transaction.atomic():
        for row in operators():
            _, made = Operator.objects.get_or_create(code=row["code"], defaults=row)
            created["operators"] += made
        for row in corridors():
            _, made = Corridor.objects.get_or_create(code=row["code"], defaults=row)
            created["corridors"] += made
        for flow_type, terms in DEFAULT_FEES.items():
            exists = FeeSchedule.objects.filter(
                merchant=None, flow_type=flow_type, operator=None, corridor=None
            ).exists()
            if not exists:
                FeeSchedule.objects.create(flow_type=flow_type, **terms)
                created["fee_schedules"] += 1
        for source, target, rate in DEFAULT_FX_RATES:
            _, made = FxRate.objects.get_or_create(
                merchant=None,
                source_currency=source,
                target_currency=target,
                defaults={"rate": rate},
            )
            created["fx_rates"] += made
    return created


def merchant_enable_catalog(
    *,
    merchant: Merchant,
    operators: QuerySet[Operator] | None = None,
    corridors: QuerySet[Corridor] | None = None,
) -> None:
    """Enable every catalog operator and corridor for the merchant, or only those given
    (idempotent)."""
    operators = Operator.objects.all() if operators is None else operators
    corridors = Corridor.objects.all() if corridors is None else corridors
    merchant_catalog_enable(merchant=merchant, operators=operators, corridors=corridors)


def merchant_enable_all_operators(*, merchant: Merchant) -> None:
    """Enable every catalog operator and corridor for the merchant (loading the catalog first
    when it is empty, so a fresh database works without seed_demo)."""
    with transaction.atomic():
        if not Operator.objects.exists():
            catalog_seed()
        merchant_enable_catalog(merchant=merchant)


def demo_merchant_seed(*, name: str) -> Merchant:
    """Idempotently load the catalog and create the demo merchant (the oldest of that exact
    name) with everything enabled, once. Only what is missing is set up: an existing demo
    merchant gets the operators and corridors new to the catalog in this run, never one ops
    disabled for it. Runs take turns with each other and with merchant creations
    (merchant_creations_turn, until the caller's commit), so two at once make one demo
    merchant: the second finds the first's."""
    with transaction.atomic():
        merchant_services.merchant_creations_turn()
        operators_before = list(Operator.objects.values_list("pk", flat=True))
        corridors_before = list(Corridor.objects.values_list("pk", flat=True))
        catalog_seed()
        merchant = Merchant.objects.filter(name=name).order_by("created_at").first()
        if merchant is None:
            # Its exact name is how it is found again; a merchant of a name only like it
            # (made by create_merchant) is not the demo merchant.
            merchant = merchant_services.merchant_create(name=name, allow_duplicate_name=True)
            merchant_enable_catalog(merchant=merchant)
        else:
            merchant_enable_catalog(
                merchant=merchant,
                operators=Operator.objects.exclude(pk__in=operators_before),
                corridors=Corridor.objects.exclude(pk__in=corridors_before),
            )
    return merchant


def merchant_catalog_enable(
    *, merchant: Merchant, operators: Iterable[Model], corridors: Iterable[Model]
) -> None:
    """Enable these operators and corridors (quotes' catalog rows) for the merchant, idempotent."""
    with transaction.atomic():
        MerchantOperator.objects.bulk_create(
            [MerchantOperator(merchant=merchant, operator=op) for op in operators],
            ignore_conflicts=True,
        )
        MerchantCorridor.objects.bulk_create(
            [MerchantCorridor(merchant=merchant, corridor=c) for c in corridors],
            ignore_conflicts=True,
        )
