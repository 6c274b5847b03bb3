"""Catalog helpers for every app's tests: the real seed, not a fake."""

from merchants import services as merchant_services
from merchants.models import Merchant
from quotes import services as quote_services


def load_catalog() -> None:
    """The 12 operators, 25 corridors, platform fee schedules and FX rates (idempotent)."""
    quote_services.catalog_seed()


def enable_everything(merchant: Merchant) -> None:
    """Seed the catalog and fees if missing and enable every operator and corridor."""
    quote_services.catalog_seed()
    merchant_services.merchant_enable_all_operators(merchant=merchant)
