import sys

from django.core.management.base import CommandError

from config.ops import OpsCommand
from merchants import services

READ_STDIN = "-"  # as --password: read the password from standard input


class Command(OpsCommand):
    help = "Create a dashboard login: merchant staff (--merchant and --role), --support or --ops."
    stealth_options = ("stdin",)

    def add_command_arguments(self, parser) -> None:
        parser.add_argument("username")
        parser.add_argument(
            "--password", required=True, help="the password, or - to read it from standard input"
        )
        parser.add_argument("--merchant", dest="merchant_id")
        parser.add_argument("--role", choices=["owner", "developer", "viewer"])
        parser.add_argument("--support", action="store_true")
        parser.add_argument("--ops", action="store_true", help="an ops login (a superuser)")

    def run(self, *, username, password, merchant_id, role, support, ops, **options) -> None:
        if password == READ_STDIN:  # kept out of the shell's history and the process list
            password = options.get("stdin", sys.stdin).readline().rstrip("\r\n")
        if ((support or ops) and (merchant_id or role)) or (support and ops):
            raise CommandError("--support and --ops take no --merchant or --role, nor each other.")
        if not (support or ops) and not (merchant_id and role):
            raise CommandError("Give --merchant MERCHANT_ID --role ROLE, --support or --ops.")
        merchant = None
        if merchant_id:
            try:
                merchant = services.merchant_get(merchant_id=merchant_id)
            except (ValueError, services.NotFound) as exc:
                raise CommandError(f"No merchant {merchant_id}.") from exc
        services.staff_user_create(
            username=username,
            password=password,
            merchant=merchant,
            role=role,
            support=support,
            ops=ops,
        )
        kind = "ops" if ops else "support"
        data = {
            "username": username,
            "merchant_id": str(merchant.id) if merchant else None,
            "role": role if merchant else kind,
        }
        where = f"{merchant.name} as {role}" if merchant else f"{kind} staff"
        self.emit(data, f"Dashboard user {username}: {where}. Log in at /admin/.")
