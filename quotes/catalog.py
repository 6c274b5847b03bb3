"""The seeded catalog (docs/api.md), default fee schedules and FX rates (docs/decisions.md)."""

from decimal import Decimal

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

RAIL_SUFFIX = {"mobile_money": "MOMO", "bank_transfer": "BANK"}

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
            rows.append(
                {
                    "code": f"{country}_{part}_{RAIL_SUFFIX['mobile_money']}",
                    "country_code": country,
                    "currency": currency,
                    "rail_type": "mobile_money",
                    "name": name,
                    "min_amount": OPERATOR_MIN_AMOUNT,
                    "max_amount": OPERATOR_MAX_AMOUNT,
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
