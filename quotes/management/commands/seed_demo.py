import json
import os
import secrets
from pathlib import Path

from django.contrib.auth import get_user_model
from django.db import transaction

from core.ops import OpsCommand
from merchants import services
from quotes import catalog

DEMO_MERCHANT_NAME = "Demo Merchant"
DEMO_OWNER_USERNAME = "demo-owner"


class Command(OpsCommand):
    help = (
        "Load the catalog, create the Demo Merchant once, and print a new API key for it (with"
        " --credentials-file: only if the credentials kept there no longer work)."
    )

    def add_command_arguments(self, parser) -> None:
        parser.add_argument(
            "--credentials-file",
            help="keep the demo credentials in this file (mode 0600); a run that finds them"
            " still working issues none and leaves the owner's password alone (`make run`)",
        )

    def run(self, *, credentials_file=None, **_) -> None:
        path = Path(credentials_file) if credentials_file else None
        password = secrets.token_urlsafe(12)
        # All or nothing: a refused demo login leaves no key whose secret was never printed.
        with transaction.atomic():
            merchant = catalog.demo_merchant_seed(name=DEMO_MERCHANT_NAME)
            kept = _kept_credentials(path, merchant_id=str(merchant.id)) if path else None
            if kept is None:
                issued = services.api_key_create_by(
                    merchant=merchant, actor=None, label="seed_demo"
                )
                services.staff_user_create(
                    username=DEMO_OWNER_USERNAME, password=password, merchant=merchant, role="owner"
                )
        if kept is not None:
            self.emit(
                {"merchant_id": kept["merchant_id"], "api_key": kept["api_key"], "kept": str(path)},
                f"Demo merchant: {merchant.id}\nDemo credentials unchanged (API key"
                f" {kept['api_key']}, its secret, the {DEMO_OWNER_USERNAME} password): {path}\n"
                f"New ones: delete that file, or run `manage.py seed_demo`.",
            )
            return
        credentials = {
            "merchant_id": str(merchant.id),
            "api_key": issued.api_key.key,
            "api_secret": issued.secret,
            "dashboard_username": DEMO_OWNER_USERNAME,
            "dashboard_password": password,
        }
        lines = [
            f"Demo merchant: {merchant.id}",
            f"API key:       {issued.api_key.key}",
            f"API secret:    {issued.secret}  (shown once)",
            f"Dashboard:     /admin/  user {DEMO_OWNER_USERNAME}  password {password}",
        ]
        if path:
            _write_private(path, json.dumps(credentials, indent=2) + "\n")
            lines.append(f"Kept in {path} (readable by you only); later runs keep them.")
        self.emit(credentials, "\n".join(lines))


def _kept_credentials(path: Path, *, merchant_id: str) -> dict | None:
    """The credentials in `path` if its API key still authenticates for the demo merchant and
    its password still logs the demo owner in; else None."""
    try:
        kept = json.loads(path.read_text())
        api_key = services.api_key_authenticate(key=kept["api_key"], secret=kept["api_secret"])
        password = kept["dashboard_password"]
    except (OSError, ValueError, KeyError, TypeError, services.InvalidCredentials):
        return None
    owner = get_user_model().objects.filter(username=DEMO_OWNER_USERNAME).first()
    if str(api_key.merchant_id) != merchant_id or owner is None:
        return None
    return kept if owner.check_password(password) else None


def _write_private(path: Path, text: str) -> None:
    """Write `text` to `path`, readable and writable by its owner only (0600)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(descriptor, 0o600)  # a file that existed keeps its mode otherwise
    with os.fdopen(descriptor, "w") as file:
        file.write(text)
