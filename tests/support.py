"""Test helpers: an API client that speaks as one merchant, a wallet's balance."""

import uuid
from decimal import Decimal
from typing import Any

from rest_framework.test import APIClient

from merchants import services
from merchants.models import Merchant
from payments.models import Wallet


class MerchantClient:
    """Sends requests with a merchant's real credentials; POSTs get a fresh Idempotency-Key
    unless one is given."""

    def __init__(self, merchant: Merchant) -> None:
        self.merchant = merchant
        issued = services.api_key_create(merchant=merchant, label="tests")
        self.api_key = issued.api_key.key
        self.api_secret = issued.secret
        self.client = APIClient()
        self.client.credentials(HTTP_X_API_KEY=self.api_key, HTTP_X_API_SECRET=self.api_secret)

    def get(self, path: str, **params: Any):
        return self.client.get(path, params or None)

    def post(self, path: str, body: Any = None, *, idempotency_key: str | None = "auto", **headers):
        extra = {f"HTTP_{name.upper().replace('-', '_')}": value for name, value in headers.items()}
        if idempotency_key == "auto":
            idempotency_key = str(uuid.uuid4())
        if idempotency_key is not None:
            extra["HTTP_IDEMPOTENCY_KEY"] = idempotency_key
        return self.client.post(path, body, format="json", **extra)


def wallet_balance(*, merchant: Merchant, currency: str) -> tuple[Decimal, Decimal]:
    """(available, reserved) of the merchant in this currency; zero when it has no wallet."""
    wallet = Wallet.objects.filter(merchant=merchant, currency=currency).first()
    if wallet is None:
        return Decimal(0), Decimal(0)
    return wallet.available, wallet.reserved
