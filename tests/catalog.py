"""Catalog helpers for every app's tests: the real seed, not a fake."""

from decimal import Decimal

from merchants.models import Merchant
from quotes import catalog
from quotes.models import MerchantOperator, Operator

# Valid quote bodies (a merchant with every operator and corridor), for tests to vary.
PAYIN_QUOTE = {
    "country_code": "CM",
    "operator_code": "CM_MTN_MOMO",
    "rail_type": "mobile_money",
    "send_amount": "10000",
    "send_currency": "XAF",
}
TRANSFER_QUOTE = {
    "corridor_code": "CM-SN-XAF-XOF",
    "payer_operator_code": "CM_MTN_MOMO",
    "recipient_operator_code": "SN_WAVE_MOMO",
    "payin_amount": "10000",
    "payin_currency": "XAF",
    "payout_currency": "XOF",
}


def load_catalog() -> None:
    """The 12 operators, 25 corridors, platform fee schedules and FX rates (idempotent)."""
    catalog.catalog_seed()


def enable_everything(merchant: Merchant) -> None:
    """Seed the catalog and fees if missing and enable every operator and corridor."""
    catalog.catalog_seed()
    catalog.merchant_enable_all_operators(merchant=merchant)


def add_bank_operator(merchant: Merchant, code: str = "SN_CBAO_BANK") -> Operator:
    """A bank_transfer operator as support would add it in the admin (the seed has mobile
    money only), in the country and currency its code names, enabled for `merchant`."""
    country = code[:2]
    operator = Operator.objects.create(
        code=code,
        country_code=country,
        currency="XAF" if country == "CM" else "XOF",
        rail_type="bank_transfer",
        name=code,
        min_amount=Decimal(100),
        max_amount=Decimal(1_000_000),
    )
    MerchantOperator.objects.create(merchant=merchant, operator=operator)
    return operator
