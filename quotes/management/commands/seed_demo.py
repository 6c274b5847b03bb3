import secrets

from django.db import transaction

from core.ops import OpsCommand
from merchants import services
from quotes import catalog

DEMO_MERCHANT_NAME = "Demo Merchant"
DEMO_OWNER_USERNAME = "demo-owner"


class Command(OpsCommand):
    help = "Load the catalog, create the Demo Merchant once, and print a new API key for it."

    def run(self, **_) -> None:
        password = secrets.token_urlsafe(12)
        # All or nothing: a refused demo login leaves no key whose secret was never printed.
        with transaction.atomic():
            merchant = catalog.demo_merchant_seed(name=DEMO_MERCHANT_NAME)
            issued = services.api_key_create_by(merchant=merchant, actor=None, label="seed_demo")
            services.staff_user_create(
                username=DEMO_OWNER_USERNAME, password=password, merchant=merchant, role="owner"
            )
        self.emit(
            {
                "merchant_id": str(merchant.id),
                "api_key": issued.api_key.key,
                "api_secret": issued.secret,
                "dashboard_username": DEMO_OWNER_USERNAME,
                "dashboard_password": password,
            },
            "\n".join(
                [
                    f"Demo merchant: {merchant.id}",
                    f"API key:       {issued.api_key.key}",
                    f"API secret:    {issued.secret}  (shown once)",
                    f"Dashboard:     /admin/  user {DEMO_OWNER_USERNAME}  password {password}",
                ]
            ),
        )
