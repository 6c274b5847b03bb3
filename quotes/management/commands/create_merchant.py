from django.core.management.base import CommandError

from core.ops import OpsCommand
from merchants import services
from quotes import catalog


class Command(OpsCommand):
    help = (
        "Create a merchant; optionally enable every catalog operator and corridor, and a key. "
        "A name another merchant has (case and spacing aside) is refused unless "
        "--allow-duplicate-name."
    )

    def add_command_arguments(self, parser) -> None:
        parser.add_argument("name")
        parser.add_argument("--all-operators", action="store_true")
        parser.add_argument("--with-key", action="store_true")
        parser.add_argument(
            "--allow-duplicate-name",
            action="store_true",
            help="create it even though a merchant of that name exists (another business)",
        )

    def run(
        self, *, name: str, all_operators: bool, with_key: bool, allow_duplicate_name: bool, **_
    ) -> None:
        try:
            merchant = services.merchant_create(
                name=name, allow_duplicate_name=allow_duplicate_name
            )
        except services.DuplicateMerchantName as exc:
            raise CommandError(
                f"{exc.message} Nothing was created. If this is another business of the same "
                "name, run again with --allow-duplicate-name."
            ) from exc
        if all_operators:
            catalog.merchant_enable_all_operators(merchant=merchant)
        data = {"merchant_id": str(merchant.id)}
        lines = [f"Merchant {merchant.name}: {merchant.id}"]
        if with_key:
            issued = services.api_key_create_by(
                merchant=merchant, actor=None, label="created by create_merchant"
            )
            data |= {"api_key": issued.api_key.key, "api_secret": issued.secret}
            lines += [
                f"API key:    {issued.api_key.key}",
                f"API secret: {issued.secret}  (shown once)",
            ]
        self.emit(data, "\n".join(lines))
