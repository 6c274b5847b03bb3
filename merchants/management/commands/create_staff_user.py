from django.core.management.base import CommandError

from config.ops import OpsCommand
from merchants import services


class Command(OpsCommand):
    help = "Create a dashboard login: merchant staff (--merchant and --role) or --support."

    def add_command_arguments(self, parser) -> None:
        parser.add_argument("username")
        parser.add_argument("--password", required=True)
        parser.add_argument("--merchant", dest="merchant_id")
        parser.add_argument("--role", choices=["owner", "developer", "viewer"])
        parser.add_argument("--support", action="store_true")

    def run(self, *, username, password, merchant_id, role, support, **_) -> None:
        if support and (merchant_id or role):
            raise CommandError("--support takes no --merchant or --role.")
        if not support and not (merchant_id and role):
            raise CommandError("Give --merchant MERCHANT_ID --role ROLE, or --support.")
        merchant = None
        if merchant_id:
            try:
                merchant = services.merchant_get(merchant_id=merchant_id)
            except (ValueError, services.NotFound) as exc:
                raise CommandError(f"No merchant {merchant_id}.") from exc
        services.staff_user_create(
            username=username, password=password, merchant=merchant, role=role, support=support
        )
        data = {
            "username": username,
            "merchant_id": str(merchant.id) if merchant else None,
            "role": role if merchant else "support",
        }
        where = f"{merchant.name} as {role}" if merchant else "support staff"
        self.emit(data, f"Dashboard user {username}: {where}. Log in at /admin/.")
