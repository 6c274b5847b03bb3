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
            code = f"{country}_{part}_{RAIL_SUFFIX['mobile_money']}"
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
